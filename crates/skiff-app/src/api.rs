//! Starts Xray's gRPC API (skiff-api) over the running instance: on `api.listen`, and/or
//! behind the outbound tag `api.tag` that routing rules send an inbound's connections to
//! (Xray's older form: a dokodemo-door inbound tagged for the API).

use std::io;
use std::sync::Arc;

use skiff_api::server::{ApiConnections, ApiContext, ApiDoor, ApiRouter};
use skiff_config::ApiPlan;
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Metadata, Outbound, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::outbounds::OutboundHandler;
use crate::shared::Shared;

/// The outbound handler behind the API's tag (Xray's older form), and the connections
/// that reach the API through it, for [`start`].
pub fn outbound(tag: &str) -> (OutboundHandler, ApiConnections) {
    let (door, connections) = skiff_api::server::door();
    let handler = OutboundHandler {
        tag: Arc::from(tag),
        handler: Arc::new(ApiOutbound(door)),
        // Xray counts no traffic for the API.
        uplink: Arc::default(),
        downlink: Arc::default(),
    };
    (handler, connections)
}

/// Binds the API's listener (failing start when it cannot) and starts its server there and
/// on `routed` (the connections routing sends to its tag), until `shutdown` turns true: a
/// stopping instance waits for its tasks, and an API left serving kept `skiff run` from
/// ever exiting on SIGTERM.
pub async fn start(
    plan: &ApiPlan,
    shared: &Arc<Shared>,
    handlers: Arc<crate::handlers::Registry>,
    routed: Option<ApiConnections>,
    shutdown: watch::Receiver<bool>,
) -> io::Result<Vec<JoinHandle<()>>> {
    let router = {
        let routing = Arc::new(crate::routing_api::RoutingApi::new(shared.clone()));
        let shared = shared.clone();
        let context = ApiContext {
            stats: shared.stats.clone(),
            restart_logger: Arc::new(move || {
                shared.access.reopen().map_err(|e| e.to_string())?;
                if let Some(reopen) = crate::access_log::ERROR_LOG_REOPEN.get() {
                    reopen().map_err(|e| e.to_string())?;
                }
                Ok(())
            }),
            handlers,
            routing,
        };
        ApiRouter::new(context, &plan.services)
    };
    let mut tasks = Vec::new();
    if let Some(addr) = plan.listen {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("api: cannot listen on {addr}: {e}")))?;
        info!(
            "API listening on {} ({})",
            listener.local_addr()?,
            plan.services.join(", ")
        );
        let router = router.clone();
        let mut shutdown = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            tokio::select! {
                served = skiff_api::server::serve_tcp(router, listener) => {
                    if let Err(e) = served {
                        warn!("API server stopped: {e}");
                    }
                }
                _ = shutdown.wait_for(|stop| *stop) => {}
            }
        }));
    }
    if let Some(connections) = routed {
        let mut shutdown = shutdown;
        tasks.push(tokio::spawn(async move {
            tokio::select! {
                served = skiff_api::server::serve_door(router, connections) => {
                    if let Err(e) = served {
                        warn!("API server stopped: {e}");
                    }
                }
                _ = shutdown.wait_for(|stop| *stop) => {}
            }
        }));
    }
    Ok(tasks)
}

/// Connections routed to the API's tag are served by the API, in process.
struct ApiOutbound(ApiDoor);

impl Outbound for ApiOutbound {
    fn connect<'a>(
        &'a self,
        _meta: &'a Metadata,
        _destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let pipe = self
                .0
                .open()
                .await
                .ok_or_else(|| io::Error::other("the API has stopped"))?;
            Ok(Box::new(ApiPipe(pipe)) as BoxStream)
        })
    }

    fn bind<'a>(&'a self, _meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the API takes no UDP",
            ))
        })
    }
}

/// The app's end of an in-process API connection.
struct ApiPipe(DuplexStream);

impl ProxyStream for ApiPipe {}

impl AsyncRead for ApiPipe {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for ApiPipe {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, data)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
