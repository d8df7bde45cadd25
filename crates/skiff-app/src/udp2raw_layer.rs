//! `streamSettings.udp2rawSettings` (Skiff's own key): udp2raw under a UDP transport (mKCP,
//! kcptun) or under udpspeeder, in the same process.
//!
//! - outbound: a loopback UDP socket is bound when the outbound is built, and the transport
//!   sends to it instead of the server. The udp2raw client is started on that socket, its raw
//!   side to the server (resolved, once per outbound: an outbound has one server): at start
//!   for the udpspeeder and kcptun protocols, which know their server then, else on the first
//!   dial. A failure (no privilege, rules) fails that dial and the next one tries again.
//! - inbound (see `instance::start_inbound`): the transport's listener is bound on
//!   127.0.0.1:0 and a udp2raw server ([`crate::udp2raw::serve_to`]) listens raw on the
//!   inbound's address and port, every conversation to that listener.
//!
//! Rules installed with `autoRule` live as long as the tunnel, as the udp2raw protocol's.

use std::io;
use std::net::{SocketAddr, UdpSocket as StdUdpSocket};
use std::sync::Arc;

use skiff_config::plan_udp2raw::Udp2rawTuning;
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata, Outbound};
use tokio::sync::OnceCell;
use tracing::{info, warn};

use crate::udp2raw::ClientTunnel;

/// An outbound's client tunnel, started on first use.
pub struct ClientLayer {
    tuning: Udp2rawTuning,
    /// Where the transport sends: the tunnel's UDP side, bound now so the address is known.
    udp: StdUdpSocket,
    local: SocketAddr,
    tunnel: OnceCell<ClientTunnel>,
}

impl ClientLayer {
    pub fn new(tuning: Udp2rawTuning) -> io::Result<Arc<ClientLayer>> {
        let udp = StdUdpSocket::bind(("127.0.0.1", 0))?;
        skiff_udp2raw::io::raw::size_udp(&udp);
        let local = udp.local_addr()?;
        Ok(Arc::new(ClientLayer {
            tuning,
            udp,
            local,
            tunnel: OnceCell::new(),
        }))
    }

    /// The address the transport sends to instead of the server.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// Starts the tunnel to `server` now, in the background, as `udp2raw -c` connects at
    /// start and the `udp2raw` outbound does ([`crate::udp2raw::Udp2rawClient::connect_early`]):
    /// the fake TCP and udp2raw handshakes take a few round trips, during which a udpspeeder
    /// flow's datagrams were lost (3 % of a 20 s run at 5 000 datagrams a second on a 200 ms
    /// path). A failure is logged here and met again by the first dial.
    pub fn connect_early(self: &Arc<Self>, server: Address) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let layer = self.clone();
        runtime.spawn(async move {
            // `start` logs its own failure.
            let _ = layer.start(&server).await;
        });
    }

    /// Starts the tunnel to `server` unless it runs already (to the first server given).
    pub async fn start(&self, server: &Address) -> io::Result<()> {
        self.tunnel
            .get_or_try_init(|| async {
                let addr = skiff_transport::tcp::resolve_first(server).await?;
                let tunnel = ClientTunnel::start(&self.tuning, addr, self.udp.try_clone()?)
                    .await
                    .inspect_err(|e| warn!(%server, error = %e, "udp2rawSettings: tunnel"))?;
                info!(%server, local = %self.local, "udp2rawSettings: tunnel started");
                Ok(tunnel)
            })
            .await
            .map(|_| ())
    }
}

/// A transport's dialer (mKCP, kcptun) whose datagrams go through the layer.
pub struct LayerDialer {
    pub layer: Arc<ClientLayer>,
    pub inner: Arc<dyn Dialer>,
}

impl Dialer for LayerDialer {
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            self.layer.start(server).await?;
            self.inner
                .dial(&Address::Ip(self.layer.local()), meta)
                .await
        })
    }

    fn bind_via<'a>(
        &'a self,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
        self.inner.bind_via(meta)
    }
}

/// An outbound speaking UDP to the layer's loopback port (udpspeeder), the tunnel started
/// on its first use.
pub struct LayerOutbound {
    pub layer: Arc<ClientLayer>,
    /// The real server: where the tunnel's raw packets go.
    pub server: Address,
    pub inner: Arc<dyn Outbound>,
}

impl Outbound for LayerOutbound {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            self.layer.start(&self.server).await?;
            self.inner.connect(meta, destination).await
        })
    }

    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            self.layer.start(&self.server).await?;
            self.inner.bind(meta).await
        })
    }
}
