//! A running Skiff: binds every inbound's listeners, accepts connections under a cap, and
//! shuts down gracefully (stop accepting, let live connections finish within a grace period).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use skiff_config::{InboundPlan, Plan};
use skiff_core::{BoxStream, Network, Stats};
use skiff_proto::shadowsocks;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::access_log::AccessLog;
use crate::dispatch;
use crate::inbound::{InboundHandler, InboundKind};
use crate::outbounds;
use crate::routed_packets::RoutedPacketConnector;
use crate::router::Router;
use crate::shared::Shared;
use crate::udp;

/// Most TCP connections served at once; beyond it new connections are closed on accept.
pub const MAX_CONNECTIONS: usize = 65_536;

/// Listen backlog: a burst of thousands of connects must not be refused by the kernel.
const BACKLOG: i32 = 4096;

/// One bound listener, for `skiff run` to print and for tests to dial.
#[derive(Clone, Debug)]
pub struct BoundListener {
    pub tag: String,
    pub protocol: &'static str,
    pub network: Network,
    pub address: SocketAddr,
}

pub struct Running {
    pub(crate) shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    /// Fired when the grace period is over: relays still running reset both their ends.
    cut: watch::Sender<bool>,
    permits: Arc<Semaphore>,
    pub(crate) listeners: Vec<BoundListener>,
    pub(crate) tasks: Vec<JoinHandle<()>>,
    /// Starts inbounds after `start` too (a reload).
    pub(crate) binder: Binder,
    pub(crate) registry: Arc<crate::handlers::Registry>,
    /// What the running instance was started or last reloaded from, for the next reload to
    /// compare against.
    pub(crate) applied: crate::reload::Applied,
}

/// What binding and serving an inbound's listeners needs: kept by [`Running`] so that a
/// reload starts new inbounds exactly as `start` did.
pub(crate) struct Binder {
    shared: Arc<Shared>,
    permits: Arc<Semaphore>,
    accepted: Arc<AtomicU64>,
    shutdown: watch::Receiver<bool>,
}

/// An inbound whose listeners are bound and served.
pub(crate) struct StartedInbound {
    pub handler: Arc<InboundHandler>,
    pub listeners: Vec<BoundListener>,
    pub tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Builds every handler from `plan` and binds every listener. Fails (binding nothing) if
    /// any listener cannot be bound, naming it.
    pub async fn start(plan: &Plan) -> io::Result<Running> {
        let stats = Stats::new();
        let resolver = match &plan.dns {
            None => None,
            Some(dns) => {
                let built = skiff_dns::Resolver::new(dns.clone(), &skiff_dns::TlsRoots::default())
                    .map_err(|e| {
                        io::Error::new(io::ErrorKind::InvalidInput, format!("dns: {e}"))
                    })?;
                Some(Arc::new(built) as Arc<dyn skiff_core::Resolve>)
            }
        };
        let mut outbounds = outbounds::build(
            &plan.outbounds,
            &stats,
            &plan.policy.system,
            resolver.as_ref(),
        )
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut tags: Vec<&str> = plan.outbounds.iter().map(|o| o.tag.as_str()).collect();
        // The API's tag routes like an outbound's (after the real ones, so the default
        // route stays the first outbound).
        let api_tag = plan.api.as_ref().and_then(|a| a.tag.as_deref());
        let api_routed = api_tag.map(|tag| {
            let (handler, connections) = crate::api::outbound(tag);
            outbounds.push(handler);
            tags.push(tag);
            connections
        });
        let router = Router::new(&plan.routing, &tags);
        let (cut, cut_signal) = watch::channel(false);
        let removed_outbounds = outbounds.iter().map(|_| Default::default()).collect();
        let shared = Arc::new(Shared {
            outbounds,
            removed_outbounds,
            no_outbound: outbounds::OutboundHandler::none(),
            router,
            policy: plan.policy.clone(),
            stats,
            access: AccessLog::open(&plan.log.access)?,
            cut: cut_signal,
            fallback_chains: Default::default(),
            resolver,
        });
        let (shutdown, _) = watch::channel(false);
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let accepted = Arc::new(AtomicU64::new(0));
        let mut listeners = Vec::new();
        let mut tasks = Vec::new();
        // The plan's outbounds are the first ones of `shared.outbounds`, in order.
        let registry = Arc::new(crate::handlers::Registry::new(
            shared.clone(),
            plan.outbounds
                .iter()
                .map(|o| {
                    (
                        o.tag.clone(),
                        crate::handlers::xray_config_type(&o.protocol),
                    )
                })
                .collect(),
        ));
        if let Some(api) = &plan.api {
            tasks.extend(crate::api::start(api, &shared, registry.clone(), api_routed).await?);
        }
        if let Some(metrics) = &plan.metrics {
            let source = crate::metrics::Source {
                stats: shared.stats.clone(),
                permits: permits.clone(),
                max_connections: MAX_CONNECTIONS,
                accepted: accepted.clone(),
                cmdline: std::env::args().collect(),
            };
            tasks.push(crate::metrics::start(metrics, source, shutdown.subscribe()).await?);
        }
        let binder = Binder {
            shared: shared.clone(),
            permits: permits.clone(),
            accepted: accepted.clone(),
            shutdown: shutdown.subscribe(),
        };
        for inbound_plan in &plan.inbounds {
            let inbound = Arc::new(
                InboundHandler::build(inbound_plan, &shared.stats, &plan.policy.system)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            );
            let started = binder.start_inbound(inbound_plan, inbound).await?;
            let listener_tasks = started.tasks.iter().map(JoinHandle::abort_handle).collect();
            registry.add_inbound(inbound_plan, started.handler, listener_tasks);
            listeners.extend(started.listeners);
            tasks.extend(started.tasks);
        }
        tasks.push(tokio::spawn(crate::memory::trim_after_bursts(
            accepted.clone(),
            permits.clone(),
            MAX_CONNECTIONS,
            shutdown.subscribe(),
        )));
        for l in &listeners {
            info!(inbound = %l.tag, protocol = l.protocol, "listening on {}/{}", l.address, l.network);
        }
        // Building the plan read geodata files and decoded lists that are freed by now; the
        // heap keeps their pages unless asked, and on a router those are megabytes.
        crate::memory::trim();
        Ok(Running {
            shared,
            shutdown,
            cut,
            permits,
            listeners,
            tasks,
            binder,
            registry,
            applied: crate::reload::Applied::of(plan),
        })
    }

    pub fn listeners(&self) -> &[BoundListener] {
        &self.listeners
    }

    /// The first listener of inbound `tag` on `network`.
    pub fn address_of(&self, tag: &str, network: Network) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|l| l.tag == tag && l.network == network)
            .map(|l| l.address)
    }

    /// Live counters (readable while connections are open).
    pub fn stats(&self) -> &Arc<Stats> {
        &self.shared.stats
    }

    /// TCP connections being served right now.
    pub fn live_connections(&self) -> usize {
        MAX_CONNECTIONS - self.permits.available_permits()
    }

    /// Stops accepting, then waits up to `grace` for live connections to finish. Returns how
    /// many were still open when the grace period ended: their relays are cut, which resets
    /// both ends (RST, and no TLS close_notify), so no peer takes a cut transfer for a
    /// complete one; connections still in their handshake are dropped with the runtime.
    pub async fn shutdown(mut self, grace: Duration) -> usize {
        let _ = self.shutdown.send(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
        let deadline = skiff_core::relay::deadline_after(grace);
        let live = loop {
            let live = self.live_connections();
            if live == 0 || tokio::time::Instant::now() >= deadline {
                break live;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if live > 0 {
            let _ = self.cut.send(true);
            // Let the cut relays drop their sockets (with the reset) before the runtime goes.
            for _ in 0..20 {
                if self.live_connections() == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        live
    }
}

impl Binder {
    /// Binds every listener of `plan` and serves it with `inbound`. Binds nothing if any
    /// listener cannot be bound: the ones already bound are closed and the error names the
    /// one that failed.
    pub(crate) async fn start_inbound(
        &self,
        plan: &InboundPlan,
        inbound: Arc<InboundHandler>,
    ) -> io::Result<StartedInbound> {
        let mut listeners = Vec::new();
        let mut tasks = Vec::new();
        match self
            .bind_all(plan, &inbound, &mut listeners, &mut tasks)
            .await
        {
            Ok(()) => Ok(StartedInbound {
                handler: inbound,
                listeners,
                tasks,
            }),
            Err(e) => {
                for task in tasks {
                    task.abort();
                }
                Err(e)
            }
        }
    }

    async fn bind_all(
        &self,
        plan: &InboundPlan,
        inbound: &Arc<InboundHandler>,
        listeners: &mut Vec<BoundListener>,
        tasks: &mut Vec<JoinHandle<()>>,
    ) -> io::Result<()> {
        for range in &plan.ports {
            for port in range.first..=range.last {
                let addr = SocketAddr::new(plan.listen, port);
                if inbound.tcp {
                    let listener =
                        bind_tcp(addr).map_err(|e| name_error(&inbound.tag, "tcp", addr, e))?;
                    let local = listener.local_addr()?;
                    listeners.push(BoundListener {
                        tag: inbound.tag.to_string(),
                        protocol: inbound.protocol_name(),
                        network: Network::Tcp,
                        address: local,
                    });
                    tasks.push(tokio::spawn(accept_loop(
                        listener,
                        self.shared.clone(),
                        inbound.clone(),
                        self.permits.clone(),
                        self.accepted.clone(),
                        self.shutdown.clone(),
                    )));
                }
                if let Some(config) = inbound.layers.mkcp() {
                    let socket = UdpSocket::bind(addr)
                        .await
                        .map_err(|e| name_error(&inbound.tag, "udp", addr, e))?;
                    let local = socket.local_addr()?;
                    listeners.push(BoundListener {
                        tag: inbound.tag.to_string(),
                        protocol: inbound.protocol_name(),
                        network: Network::Udp,
                        address: local,
                    });
                    tasks.push(tokio::spawn(serve_mkcp(
                        self.shared.clone(),
                        inbound.clone(),
                        Arc::new(socket),
                        config.clone(),
                        self.permits.clone(),
                        self.accepted.clone(),
                        self.shutdown.clone(),
                    )));
                }
                if let Some(params) = inbound.layers.kcptun() {
                    let socket = UdpSocket::bind(addr)
                        .await
                        .map_err(|e| name_error(&inbound.tag, "udp", addr, e))?;
                    let local = socket.local_addr()?;
                    listeners.push(BoundListener {
                        tag: inbound.tag.to_string(),
                        protocol: inbound.protocol_name(),
                        network: Network::Udp,
                        address: local,
                    });
                    tasks.push(tokio::spawn(serve_kcptun_transport(
                        self.shared.clone(),
                        inbound.clone(),
                        Arc::new(socket),
                        params.clone(),
                        self.permits.clone(),
                        self.accepted.clone(),
                        self.shutdown.clone(),
                    )));
                }
                if inbound.udp_listener {
                    // An inbound listening on port 0 for both networks shares one port.
                    let udp_addr = listeners
                        .last()
                        .filter(|l| inbound.tcp && port == 0 && l.tag == *inbound.tag)
                        .map(|l| l.address)
                        .unwrap_or(addr);
                    let socket = UdpSocket::bind(udp_addr)
                        .await
                        .map_err(|e| name_error(&inbound.tag, "udp", udp_addr, e))?;
                    let local = socket.local_addr()?;
                    listeners.push(BoundListener {
                        tag: inbound.tag.to_string(),
                        protocol: inbound.protocol_name(),
                        network: Network::Udp,
                        address: local,
                    });
                    let socket = Arc::new(socket);
                    match &inbound.kind {
                        InboundKind::Tunnel(tunnel) => {
                            let Some(destination) = tunnel.destination.clone() else {
                                return Err(io::Error::new(
                                    io::ErrorKind::InvalidInput,
                                    format!("inbound `{}`: UDP needs a fixed address", inbound.tag),
                                ));
                            };
                            tasks.push(tokio::spawn(udp::serve_tunnel(
                                self.shared.clone(),
                                inbound.clone(),
                                socket,
                                destination,
                                self.shutdown.clone(),
                            )));
                        }
                        InboundKind::Udpspeeder(server) => {
                            let connector = RoutedPacketConnector {
                                shared: self.shared.clone(),
                                inbound: inbound.clone(),
                            };
                            tasks.push(tokio::spawn(skiff_proto::udpspeeder::server::serve(
                                inbound.tag.clone(),
                                socket,
                                server.clone(),
                                Arc::new(connector),
                                self.shutdown.clone(),
                            )));
                        }
                        InboundKind::Shadowsocks(server) => {
                            let connector = RoutedPacketConnector {
                                shared: self.shared.clone(),
                                inbound: inbound.clone(),
                            };
                            tasks.push(tokio::spawn(shadowsocks::udp_server::serve(
                                inbound.tag.clone(),
                                socket,
                                server.clone(),
                                Arc::new(connector),
                                udp::MAX_UDP_SESSIONS,
                                self.shutdown.clone(),
                            )));
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }
}

fn name_error(tag: &str, network: &str, addr: SocketAddr, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("inbound `{tag}`: cannot listen on {addr}/{network}: {e}"),
    )
}

fn bind_tcp(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        // `::` serves IPv4 too, as Go's listeners (and so Xray's) do.
        socket.set_only_v6(false)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    TcpListener::from_std(socket.into())
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    permits: Arc<Semaphore>,
    accepted: Arc<AtomicU64>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let next = tokio::select! {
            _ = shutdown.changed() => return,
            r = listener.accept() => r,
        };
        match next {
            Ok((stream, source)) => {
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    debug!(inbound = %inbound.tag, %source, "connection cap reached; closing");
                    continue;
                };
                accepted.fetch_add(1, Ordering::Relaxed);
                let _ = inbound.tcp_tuning.apply(&stream);
                let local = stream.local_addr().unwrap_or(source);
                let shared = shared.clone();
                let inbound = inbound.clone();
                tokio::spawn(async move {
                    dispatch::serve_tcp(shared, inbound, stream, source, local).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                warn!(inbound = %inbound.tag, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Admits connections that arrive over a UDP transport (mKCP, the kcptun network): each
/// one is counted against the connection cap and goes through the inbound's layers and
/// protocol like a TCP connection.
struct TransportAdmission {
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    permits: Arc<Semaphore>,
    accepted: Arc<AtomicU64>,
    /// The listening socket's address, reported as the connection's local end.
    local: SocketAddr,
}

impl TransportAdmission {
    fn new(
        shared: Arc<Shared>,
        inbound: Arc<InboundHandler>,
        socket: &UdpSocket,
        permits: Arc<Semaphore>,
        accepted: Arc<AtomicU64>,
    ) -> TransportAdmission {
        let local = socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        TransportAdmission {
            shared,
            inbound,
            permits,
            accepted,
            local,
        }
    }

    fn admit(&self, stream: BoxStream, source: SocketAddr) {
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            debug!(inbound = %self.inbound.tag, %source, "connection cap reached; closing");
            return;
        };
        self.accepted.fetch_add(1, Ordering::Relaxed);
        let shared = self.shared.clone();
        let inbound = self.inbound.clone();
        let local = self.local;
        tokio::spawn(async move {
            dispatch::serve_transport(shared, inbound, stream, source, local).await;
            drop(permit);
        });
    }
}

/// An inbound over mKCP: every mKCP connection on `socket` is admitted like a TCP one.
async fn serve_mkcp(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    socket: Arc<UdpSocket>,
    config: skiff_kcp::mkcp::MkcpConfig,
    permits: Arc<Semaphore>,
    accepted: Arc<AtomicU64>,
    shutdown: watch::Receiver<bool>,
) {
    let admission = TransportAdmission::new(shared, inbound, &socket, permits, accepted);
    let on_conn = Arc::new(
        move |stream: skiff_transport::mkcp::stream::MkcpStream, source: SocketAddr| {
            admission.admit(Box::new(stream), source);
        },
    );
    skiff_transport::mkcp::listener::serve(socket, config, on_conn, shutdown).await;
}

/// An inbound over the kcptun transport (the kcptun protocol's inbound included): every smux
/// stream of the KCP sessions on `socket` is admitted like a TCP connection.
async fn serve_kcptun_transport(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    socket: Arc<UdpSocket>,
    params: skiff_transport::kcp::TunnelParams,
    permits: Arc<Semaphore>,
    accepted: Arc<AtomicU64>,
    shutdown: watch::Receiver<bool>,
) {
    let admission = TransportAdmission::new(shared, inbound, &socket, permits, accepted);
    let on_stream = Arc::new(
        move |stream: skiff_transport::kcp::stream::KcpStream, source: SocketAddr| {
            admission.admit(Box::new(stream), source);
        },
    );
    skiff_transport::kcp::server::serve(socket, params, on_stream, shutdown).await;
}
