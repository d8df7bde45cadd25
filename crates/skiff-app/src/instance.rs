//! A running Skiff: binds every inbound's listeners, accepts connections under a cap, and
//! shuts down gracefully (stop accepting, let live connections finish within a grace period).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use skiff_config::Plan;
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
use crate::shared::{Outbounds, Shared};
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
    /// The inbounds and outbounds as the API sees them; a reload starts and stops inbounds
    /// through it too.
    pub(crate) registry: Arc<crate::handlers::Registry>,
    /// What the instance was started or last reloaded from, for the next reload to compare.
    pub(crate) applied: crate::reload::Applied,
}

impl Running {
    /// Builds every handler from `plan` and binds every listener. Fails (binding nothing) if
    /// any listener cannot be bound, naming it.
    pub async fn start(plan: &Plan) -> io::Result<Running> {
        // Beside the rest of the start, on a thread of its own that ends with it (not the
        // runtime's blocking pool, whose threads linger): see `warm_up`.
        let _ = std::thread::Builder::new()
            .name("skiff-warm-up".into())
            .spawn(skiff_crypto::random::warm_up);
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
        // The plan's outbounds are the first ones, in order, listed by Xray's config type;
        // the API's tag comes after them, unlisted.
        let listed = plan
            .outbounds
            .iter()
            .map(|o| Some(crate::handlers::xray_config_type(&o.protocol)))
            .chain(std::iter::repeat(None));
        let shared = Arc::new(Shared {
            outbounds: Outbounds::new(outbounds.into_iter().zip(listed).collect()),
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
        let context = ListenerContext {
            shared: shared.clone(),
            permits: permits.clone(),
            accepted: accepted.clone(),
            shutdown: shutdown.subscribe(),
        };
        let registry = Arc::new(crate::handlers::Registry::new(context.clone()));
        if let Some(api) = &plan.api {
            tasks.extend(
                crate::api::start(
                    api,
                    &shared,
                    registry.clone(),
                    api_routed,
                    shutdown.subscribe(),
                )
                .await?,
            );
        }
        if let Some(metrics) = &plan.metrics {
            let source = crate::metrics::Source {
                stats: shared.stats.clone(),
                permits: permits.clone(),
                max_connections: MAX_CONNECTIONS,
                accepted: accepted.clone(),
                cmdline: std::env::args().collect(),
                traffic: Default::default(),
            };
            tasks.push(crate::metrics::start(metrics, source, shutdown.subscribe()).await?);
        }
        for inbound_plan in &plan.inbounds {
            let inbound = Arc::new(
                InboundHandler::build(inbound_plan, &shared.stats, &plan.policy.system)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            );
            let (bound, inbound_tasks) = start_inbound(&context, inbound_plan, &inbound)?;
            let listener_tasks = inbound_tasks.iter().map(JoinHandle::abort_handle).collect();
            listeners.extend(bound);
            tasks.extend(inbound_tasks);
            registry.add_inbound(inbound_plan, inbound, listener_tasks);
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
        // The code that did all that will not run again: its pages leave our RSS.
        let released = crate::code_pages::release_startup_pages();
        debug!(kib = released, "start-up code and read-only data unmapped");
        Ok(Running {
            shared,
            shutdown,
            cut,
            permits,
            listeners,
            tasks,
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

/// What starting an inbound's listeners needs: the instance's shared state, its connection
/// cap and its shutdown signal. The registry keeps one for AddInbound.
#[derive(Clone)]
pub(crate) struct ListenerContext {
    pub shared: Arc<Shared>,
    pub permits: Arc<Semaphore>,
    pub accepted: Arc<AtomicU64>,
    pub shutdown: watch::Receiver<bool>,
}

/// A socket bound for an inbound, before anything serves it.
enum Bound {
    Tcp(TcpListener),
    Mkcp(UdpSocket, skiff_kcp::mkcp::MkcpConfig),
    Kcptun(UdpSocket, skiff_transport::kcp::TunnelParams),
    Udp(UdpSocket),
    /// `udp2rawSettings`: a udp2raw server raw on this socket's address (the socket only
    /// reserves the port), every conversation to the transport's loopback listener.
    Udp2raw(
        UdpSocket,
        skiff_config::plan_udp2raw::Udp2rawTuning,
        SocketAddr,
    ),
}

/// Binds every listener of `inbound` (each port of each range, each network it serves),
/// then serves them. All or nothing: when one cannot be bound, the ones bound already are
/// closed and nothing was started.
pub(crate) fn start_inbound(
    context: &ListenerContext,
    plan: &skiff_config::InboundPlan,
    inbound: &Arc<InboundHandler>,
) -> io::Result<(Vec<BoundListener>, Vec<JoinHandle<()>>)> {
    let listener = |network, address| BoundListener {
        tag: inbound.tag.to_string(),
        protocol: inbound.protocol_name(),
        network,
        address,
    };
    let tunnel_udp = match &inbound.kind {
        InboundKind::Tunnel(tunnel) if inbound.udp_listener => {
            let Some(destination) = tunnel.destination.clone() else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("inbound `{}`: UDP needs a fixed address", inbound.tag),
                ));
            };
            Some(destination)
        }
        _ => None,
    };
    let mut bound = Vec::new();
    let mut listeners = Vec::new();
    if plan.stream.udp2raw.is_some() {
        crate::udp2raw::check_raw_sockets(plan.listen).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("inbound `{}`: udp2rawSettings: {e}", inbound.tag),
            )
        })?;
    }
    // The socket a UDP transport listens on: `addr` itself, or under udp2rawSettings a
    // loopback port that a udp2raw server on `addr` forwards to.
    let transport_udp = |addr: SocketAddr,
                         listeners: &mut Vec<BoundListener>,
                         bound: &mut Vec<Bound>|
     -> io::Result<UdpSocket> {
        let socket = bind_udp(addr).map_err(|e| name_error(&inbound.tag, "udp", addr, e))?;
        listeners.push(listener(Network::Udp, socket.local_addr()?));
        let Some(tuning) = &plan.stream.udp2raw else {
            return Ok(socket);
        };
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let inner = bind_udp(loopback).map_err(|e| name_error(&inbound.tag, "udp", loopback, e))?;
        bound.push(Bound::Udp2raw(socket, tuning.clone(), inner.local_addr()?));
        Ok(inner)
    };
    for range in &plan.ports {
        for port in range.first..=range.last {
            let addr = SocketAddr::new(plan.listen, port);
            if inbound.tcp {
                let socket =
                    bind_tcp(addr).map_err(|e| name_error(&inbound.tag, "tcp", addr, e))?;
                listeners.push(listener(Network::Tcp, socket.local_addr()?));
                bound.push(Bound::Tcp(socket));
            }
            if let Some(config) = inbound.layers.mkcp() {
                let socket = transport_udp(addr, &mut listeners, &mut bound)?;
                bound.push(Bound::Mkcp(socket, config.clone()));
            }
            if let Some(params) = inbound.layers.kcptun() {
                let socket = transport_udp(addr, &mut listeners, &mut bound)?;
                bound.push(Bound::Kcptun(socket, params.clone()));
            }
            if inbound.udp_listener {
                // An inbound listening on port 0 for both networks shares one port.
                let udp_addr = listeners
                    .last()
                    .filter(|l| inbound.tcp && port == 0 && l.network == Network::Tcp)
                    .map(|l| l.address)
                    .unwrap_or(addr);
                let socket = transport_udp(udp_addr, &mut listeners, &mut bound)?;
                bound.push(Bound::Udp(socket));
            }
        }
    }
    let ListenerContext {
        shared,
        permits,
        accepted,
        shutdown,
    } = context;
    let tasks = bound
        .into_iter()
        .filter_map(|b| -> Option<JoinHandle<()>> {
            let (shared, inbound) = (shared.clone(), inbound.clone());
            let (permits, accepted, shutdown) =
                (permits.clone(), accepted.clone(), shutdown.clone());
            Some(match b {
                Bound::Tcp(listener) => tokio::spawn(accept_loop(
                    listener, shared, inbound, permits, accepted, shutdown,
                )),
                Bound::Mkcp(socket, config) => tokio::spawn(serve_mkcp(
                    shared,
                    inbound,
                    Arc::new(socket),
                    config,
                    permits,
                    accepted,
                    shutdown,
                )),
                Bound::Kcptun(socket, params) => tokio::spawn(serve_kcptun_transport(
                    shared,
                    inbound,
                    Arc::new(socket),
                    params,
                    permits,
                    accepted,
                    shutdown,
                )),
                Bound::Udp2raw(socket, tuning, target) => tokio::spawn(crate::udp2raw::serve_to(
                    inbound.tag.clone(),
                    Arc::new(socket),
                    tuning,
                    target,
                    shutdown,
                )),
                Bound::Udp(socket) => {
                    let socket = Arc::new(socket);
                    match &inbound.kind {
                        InboundKind::Tunnel(_) => tokio::spawn(udp::serve_tunnel(
                            shared,
                            inbound.clone(),
                            socket,
                            tunnel_udp.clone()?,
                            shutdown,
                        )),
                        InboundKind::Udpspeeder(server) => {
                            let connector = RoutedPacketConnector {
                                shared,
                                inbound: inbound.clone(),
                            };
                            tokio::spawn(skiff_proto::udpspeeder::server::serve(
                                inbound.tag.clone(),
                                socket,
                                server.clone(),
                                Arc::new(connector),
                                shutdown,
                            ))
                        }
                        InboundKind::Udp2raw(server) => tokio::spawn(crate::udp2raw::serve(
                            inbound.tag.clone(),
                            socket,
                            server.clone(),
                            shutdown,
                        )),
                        InboundKind::Shadowsocks(server) => {
                            let connector = RoutedPacketConnector {
                                shared,
                                inbound: inbound.clone(),
                            };
                            tokio::spawn(shadowsocks::udp_server::serve(
                                inbound.tag.clone(),
                                socket,
                                server.clone(),
                                Arc::new(connector),
                                udp::MAX_UDP_SESSIONS,
                                shutdown,
                            ))
                        }
                        _ => return None,
                    }
                }
            })
        })
        .collect();
    Ok((listeners, tasks))
}

/// A UDP inbound's socket, sized for bursts: one socket takes every client's datagrams, and
/// a KCP window or a VPN's burst overflows the kernel's default (~208 KiB) long before the
/// loop that reads it is scheduled. net.core.rmem_max/wmem_max cap the size asked for.
fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    const BUFFER: usize = 4 << 20;
    let socket = std::net::UdpSocket::bind(addr)?;
    let sock = socket2::SockRef::from(&socket);
    let _ = sock.set_recv_buffer_size(BUFFER);
    let _ = sock.set_send_buffer_size(BUFFER);
    socket.set_nonblocking(true)?;
    UdpSocket::from_std(socket)
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
