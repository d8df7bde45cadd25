//! The client side: a [`Dialer`] over the lower one (TCP, then TLS with ALPN "h2") that keeps
//! one HTTP/2 connection per server, as Xray does, and opens one gRPC call per dial.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use h2::client::SendRequest;
use http::{Method, Request};
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata};
use tokio::sync::Mutex;

use super::keepalive::{Keepalive, run_pings};
use super::stream::GrpcStream;
use super::{Windows, h2_io_error};

/// What a client sends, from `grpcSettings` (and the TLS server name).
#[derive(Clone, Debug)]
pub struct GrpcClientOptions {
    /// The path of every call (`/service/Tun`, `/service/TunMulti`, or a custom path).
    pub path: String,
    pub multi_mode: bool,
    /// `:authority` (`authority`, else the TLS server name); None: a server's domain, or
    /// its address as `ip:port`, as Xray's gRPC-go client sends them.
    pub authority: Option<String>,
    /// None: no User-Agent (Xray's "golang").
    pub user_agent: Option<String>,
    pub windows: Windows,
    pub keepalive: Option<Keepalive>,
    pub permit_without_stream: bool,
}

/// One kept connection: its request handle and whether its driver still runs.
struct Connection {
    sender: SendRequest<Bytes>,
    alive: Arc<AtomicBool>,
    /// Cloned into every call; the keepalive counts open calls by it.
    calls: Arc<()>,
    /// What the calls hold in unfinished messages (see `stream::CONNECTION_HELD_LIMIT`).
    held: Arc<AtomicUsize>,
}

pub struct GrpcDialer {
    lower: Arc<dyn Dialer>,
    options: GrpcClientOptions,
    connections: Mutex<HashMap<Address, Connection>>,
}

impl GrpcDialer {
    pub fn new(lower: Arc<dyn Dialer>, options: GrpcClientOptions) -> Self {
        GrpcDialer {
            lower,
            options,
            connections: Mutex::new(HashMap::new()),
        }
    }

    /// A sender ready for a new call on the kept connection to `server`, or on a new one.
    async fn sender(
        &self,
        server: &Address,
        meta: &Metadata,
    ) -> io::Result<(SendRequest<Bytes>, Arc<()>, Arc<AtomicUsize>)> {
        let mut connections = self.connections.lock().await;
        if let Some(kept) = connections.get(server)
            && kept.alive.load(Ordering::Acquire)
            && let Ok(ready) = kept.sender.clone().ready().await
        {
            return Ok((ready, kept.calls.clone(), kept.held.clone()));
        }
        connections.remove(server);
        let stream = self.lower.dial(server, meta).await?;
        let mut builder = h2::client::Builder::new();
        builder
            .enable_push(false)
            .initial_window_size(self.options.windows.stream)
            .initial_connection_window_size(self.options.windows.connection);
        let (sender, mut connection) = builder.handshake(stream).await.map_err(h2_io_error)?;
        let alive = Arc::new(AtomicBool::new(true));
        let calls = Arc::new(());
        let held = Arc::new(AtomicUsize::new(0));
        let pings = run_pings(
            connection.ping_pong(),
            self.options.keepalive,
            (!self.options.permit_without_stream).then(|| calls.clone()),
        );
        // The connection's driver: ends when the server closes it, a keepalive fails, or
        // every call and this dialer's handle are gone.
        let flag = alive.clone();
        tokio::spawn(async move {
            tokio::select! {
                end = &mut connection => if let Err(e) = end {
                    tracing::debug!(error = %e, "gRPC connection ended");
                },
                e = pings => tracing::debug!(error = %e, "gRPC connection closed by keepalive"),
            }
            flag.store(false, Ordering::Release);
        });
        let ready = sender.ready().await.map_err(h2_io_error)?;
        connections.insert(
            server.clone(),
            Connection {
                sender: ready.clone(),
                alive,
                calls: calls.clone(),
                held: held.clone(),
            },
        );
        Ok((ready, calls, held))
    }

    fn request(&self, server: &Address) -> io::Result<Request<()>> {
        let authority = match (&self.options.authority, server) {
            (Some(authority), _) => authority.clone(),
            (None, Address::Domain(name, _)) => name.clone(),
            (None, Address::Ip(address)) => address.to_string(),
        };
        // gRPC-go says "http" whatever runs below it: Xray does TLS in its own dialer.
        let uri = http::Uri::builder()
            .scheme("http")
            .authority(authority.as_str())
            .path_and_query(self.options.path.as_str())
            .build()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header(http::header::TE, "trailers");
        if let Some(agent) = &self.options.user_agent {
            request = request.header(http::header::USER_AGENT, agent.as_str());
        }
        request
            .body(())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    }
}

impl Dialer for GrpcDialer {
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let request = self.request(server)?;
            let (mut sender, calls, held) = self.sender(server, meta).await?;
            let (response, send) = sender.send_request(request, false).map_err(h2_io_error)?;
            Ok(Box::new(GrpcStream::client(
                response,
                send,
                self.options.multi_mode,
                calls,
                held,
            )) as BoxStream)
        })
    }

    fn bind_via<'a>(
        &'a self,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
        self.lower.bind_via(meta)
    }

    fn is_chained(&self) -> bool {
        self.lower.is_chained()
    }
}
