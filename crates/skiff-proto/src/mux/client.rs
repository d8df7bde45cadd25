//! An outbound's `mux` setting: connections routed to it become sub-connections of shared
//! Mux.Cool connections to its server, as Xray's outbound handler does
//! (app/proxyman/outbound/handler.go): TCP through one pool (`concurrency` sub-connections
//! per connection), UDP through another (`xudpConcurrency`) or the TCP one, UDP to port 443
//! per `xudpProxyUDP443`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use skiff_core::datagram::{BoxDatagramRecv, BoxDatagramSend};
use skiff_core::udp_links::{self, LinkOpener};
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Metadata, Outbound};
use tokio::sync::Mutex;

use super::session::{Limits, MUX_COOL_DOMAIN, MUX_COOL_PORT, MuxClient};

/// Sub-connections one connection carries over its life before the pool opens another, as
/// Xray's `MaxConnection`.
const LIFETIME_SESSIONS: usize = 128;
/// A client connection left without sub-connections closes after this (Xray checks every
/// 16 s).
const CLIENT_IDLE: Duration = Duration::from_secs(16);

/// `xudpProxyUDP443`: what happens to UDP to port 443 when mux is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Udp443 {
    /// Refused (Xray's default), so QUIC falls back to TCP.
    Reject,
    /// Carried over mux like other UDP.
    Allow,
    /// Sent without mux, by the protocol itself.
    Skip,
}

/// The built `mux` object: how many sub-connections per connection, None where Xray leaves
/// that traffic off mux.
#[derive(Clone, Copy, Debug)]
pub struct MuxSettings {
    /// TCP: None when `concurrency` is negative (mux off for TCP).
    pub tcp: Option<usize>,
    /// UDP: `Some(Some(n))` its own pool (`xudpConcurrency` > 0), `Some(None)` through the
    /// TCP pool (0), None off mux (negative).
    pub udp: Option<Option<usize>>,
    pub udp443: Udp443,
}

impl MuxSettings {
    /// From the config's numbers, as Xray reads them (0 means the default).
    pub fn from_config(concurrency: i32, xudp_concurrency: i32, udp443: Udp443) -> MuxSettings {
        let tcp = match concurrency {
            c if c < 0 => None,
            0 => Some(8),
            c => Some(c as usize),
        };
        let udp = match xudp_concurrency {
            c if c < 0 => None,
            0 => Some(None),
            c => Some(Some(c as usize)),
        };
        MuxSettings { tcp, udp, udp443 }
    }
}

/// A pool of client connections to one server.
struct Pool {
    inner: Arc<dyn Outbound>,
    concurrency: usize,
    conns: Mutex<Vec<Arc<MuxClient>>>,
}

impl Pool {
    fn new(inner: Arc<dyn Outbound>, concurrency: usize) -> Arc<Pool> {
        Arc::new(Pool {
            inner,
            concurrency: concurrency.max(1),
            conns: Mutex::new(Vec::new()),
        })
    }

    /// A connection with room for one more sub-connection, opening one when none has.
    async fn with_room(&self, meta: &Metadata) -> io::Result<Arc<MuxClient>> {
        let mut conns = self.conns.lock().await;
        conns.retain(|c| !c.is_closed());
        if let Some(c) = conns
            .iter()
            .find(|c| !c.is_full(self.concurrency, LIFETIME_SESSIONS))
        {
            return Ok(c.clone());
        }
        let target = Address::Domain(MUX_COOL_DOMAIN.into(), MUX_COOL_PORT);
        let stream = self.inner.connect(meta, &target).await?;
        let limits = Limits {
            max_sessions: self.concurrency,
            idle: CLIENT_IDLE,
            ..Limits::default()
        };
        let (client, run) = MuxClient::start(stream, limits);
        tokio::spawn(async move {
            if let Err(e) = run.await {
                tracing::debug!(error = %e, "Mux client connection ended");
            }
        });
        conns.push(client.clone());
        Ok(client)
    }
}

/// An outbound with `mux` enabled: `inner` is the protocol's outbound.
pub struct MuxOutbound {
    inner: Arc<dyn Outbound>,
    tcp: Option<Arc<Pool>>,
    /// None: UDP goes through `inner` without mux.
    udp: Option<Arc<Pool>>,
    udp443: Udp443,
}

impl MuxOutbound {
    pub fn new(inner: Arc<dyn Outbound>, settings: MuxSettings) -> MuxOutbound {
        let tcp = settings.tcp.map(|n| Pool::new(inner.clone(), n));
        let udp = match settings.udp {
            None => None,
            Some(Some(n)) => Some(Pool::new(inner.clone(), n)),
            Some(None) => tcp.clone(),
        };
        MuxOutbound {
            inner,
            tcp,
            udp,
            udp443: settings.udp443,
        }
    }
}

impl Outbound for MuxOutbound {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let Some(pool) = &self.tcp else {
                return self.inner.connect(meta, destination).await;
            };
            // A connection may end between the pick and the open: one more try.
            let mut last = None;
            for _ in 0..2 {
                let client = pool.with_room(meta).await?;
                match client.open_stream(destination).await {
                    Ok(stream) => return Ok(Box::new(stream) as BoxStream),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::other("Mux: no connection")))
        })
    }

    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            let Some(pool) = &self.udp else {
                return self.inner.bind(meta).await;
            };
            let opener = Arc::new(MuxLinks {
                pool: pool.clone(),
                udp443: self.udp443,
                meta: meta.clone(),
                server: Address::Domain(MUX_COOL_DOMAIN.into(), MUX_COOL_PORT),
            });
            Ok(udp_links::packet_conn(opener))
        })
    }
}

/// Opens one UDP sub-connection per destination of a packet conversation.
struct MuxLinks {
    pool: Arc<Pool>,
    udp443: Udp443,
    meta: Metadata,
    server: Address,
}

impl LinkOpener for MuxLinks {
    fn open<'a>(
        &'a self,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<(BoxDatagramRecv, BoxDatagramSend)>> {
        Box::pin(async move {
            if destination.port() == 443 {
                match self.udp443 {
                    Udp443::Reject => {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            "XUDP rejected UDP/443 traffic (xudpProxyUDP443)",
                        ));
                    }
                    // Xray sends such a conversation without mux; Skiff's conversations pick
                    // links per destination, and this one goes over mux too.
                    Udp443::Skip | Udp443::Allow => {}
                }
            }
            let client = self.pool.with_room(&self.meta).await?;
            let (recv, send) = client.open_datagrams(destination).await?;
            Ok((
                Box::new(recv) as BoxDatagramRecv,
                Box::new(send) as BoxDatagramSend,
            ))
        })
    }

    fn server(&self) -> &Address {
        &self.server
    }

    fn protocol(&self) -> &'static str {
        "Mux"
    }
}
