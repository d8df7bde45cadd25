//! udp2raw in Skiff. The codec and the tunnel ends are `skiff-udp2raw`'s; its raw-socket loops
//! are blocking, so each runs on a thread of its own.
//!
//! - inbound (server): `io::server` on the inbound's address and port, every conversation to
//!   the fixed `settings.target` (like `udp2raw -s -l … -r …`); stopped on shutdown.
//! - outbound (client): at start (and again on first use if that failed), `io::client`
//!   listening on a loopback port; every routed UDP session is a loopback socket to it, that
//!   is one conversation in the tunnel. The destination is not sent: the server's target
//!   decides, as with udp2raw.
//!
//! The tunnel's IP family is the server address's (the inbound's `listen`, the outbound's
//! `address`): IPv4 or IPv6, as udp2raw's. An inbound listening on `::` serves IPv6 clients
//! only, one on `0.0.0.0` IPv4 clients only.
//!
//! `autoRule` installs the firewall rules (`skiff_udp2raw::io::rules`) for as long as the end
//! runs; a crashed run's rules are removed by the next start.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket as StdUdpSocket};
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};

use skiff_config::plan_udp2raw::{Udp2rawInbound, Udp2rawOutbound, Udp2rawTuning};
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Metadata, Outbound, PacketConn};
use skiff_udp2raw::io::raw::Family;
use skiff_udp2raw::io::rules::{DEFAULT_STATE_DIR, Flow, Rules};
use skiff_udp2raw::io::{self as u2r, Config, Handle};
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;
use tokio::sync::{OnceCell, watch};
use tracing::{info, warn};

fn config(t: &Udp2rawTuning, listen: SocketAddr, remote: SocketAddr) -> Config {
    let mut c = Config::new(
        skiff_udp2raw::cli_password(&t.key),
        t.raw_mode,
        listen,
        remote,
    );
    c.cipher = t.cipher;
    c.auth = t.auth;
    c.seq_mode = t.seq_mode;
    c.fix_gro = t.fix_gro;
    c
}

/// The server's raw address: `address` an IPv4 or IPv6 address (brackets allowed; the config
/// has already refused names), as `udp2raw -c -r 1.2.3.4:port` / `-r [::1]:port`.
fn server_addr(address: &str, port: u16) -> io::Result<SocketAddr> {
    let a = address.trim();
    let a = a
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .unwrap_or(a);
    let ip: IpAddr = a.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("udp2raw server `{address}` is not an IPv4 or IPv6 address"),
        )
    })?;
    // An IPv4-mapped address (`::ffff:a.b.c.d`) is the IPv4 server it stands for.
    Ok(SocketAddr::new(ip.to_canonical(), port))
}

/// The inbound's plan, kept until its listener is bound.
#[derive(Debug)]
pub struct Udp2rawServer {
    pub plan: Udp2rawInbound,
}

/// Runs the server on `socket`'s address until `shutdown`. The UDP socket itself is only
/// held: it keeps the port reserved (and, in `udp` raw mode, the kernel from answering with
/// port-unreachables); the tunnel reads raw packets.
pub async fn serve(
    tag: Arc<str>,
    socket: Arc<tokio::net::UdpSocket>,
    server: Arc<Udp2rawServer>,
    shutdown: watch::Receiver<bool>,
) {
    let target = match tokio::net::lookup_host((
        server.plan.target_host.as_str(),
        server.plan.target_port,
    ))
    .await
    .ok()
    .and_then(|mut a| a.next())
    {
        Some(t) => t,
        None => {
            warn!(inbound = %tag, target = %server.plan.target_host, "udp2raw: target does not resolve");
            return;
        }
    };
    serve_to(tag, socket, server.plan.tuning.clone(), target, shutdown).await
}

/// The server on `socket`'s address, every conversation to `target`, until `shutdown`: the
/// `udp2raw` inbound's, and the one under an inbound's transport (`udp2rawSettings`, its
/// target the transport's loopback listener).
pub async fn serve_to(
    tag: Arc<str>,
    socket: Arc<tokio::net::UdpSocket>,
    tuning: Udp2rawTuning,
    target: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    // An IPv4-mapped address (`::ffff:a.b.c.d`) is the IPv4 tunnel it stands for.
    let listen = match socket.local_addr() {
        Ok(a) => SocketAddr::new(a.ip().to_canonical(), a.port()),
        Err(e) => {
            warn!(inbound = %tag, error = %e, "udp2raw: no listen address");
            return;
        }
    };
    let cfg = config(&tuning, listen, target);
    let handle = Handle::default();
    let h2 = handle.clone();
    let tag2 = tag.clone();
    let task = tokio::task::spawn_blocking(move || {
        let _rules = if tuning.auto_rule {
            match Rules::install(
                tuning.raw_mode,
                Flow::Server { listen },
                Path::new(DEFAULT_STATE_DIR),
            ) {
                Ok(r) => {
                    info!(inbound = %tag2, chain = r.chain(), "udp2raw firewall rules added");
                    Some(r)
                }
                Err(e) => {
                    warn!(inbound = %tag2, error = %e, "udp2raw");
                    return;
                }
            }
        } else {
            None
        };
        if let Err(e) = u2r::server::run(&cfg, &h2) {
            warn!(inbound = %tag2, error = %e, "udp2raw server stopped");
        }
    });
    tokio::pin!(task);
    tokio::select! {
        _ = shutdown.changed() => {
            handle.stop();
            let _ = task.await;
        }
        _ = &mut task => {}
    }
    drop(socket);
}

/// Fails, with a plain message, when this process may not open raw sockets (root or
/// CAP_NET_RAW) for a tunnel whose server address is `server`.
pub fn check_raw_sockets(server: IpAddr) -> io::Result<()> {
    drop(u2r::RawSocket::open(Family::of(server.to_canonical()))?);
    Ok(())
}

/// A running client tunnel: UDP in on a loopback socket, raw packets to `server`. Dropping
/// it stops the thread and waits for it (one poll interval), so that its firewall rules are
/// gone before the process exits.
pub struct ClientTunnel {
    server: SocketAddr,
    handle: Handle,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for ClientTunnel {
    fn drop(&mut self) {
        self.handle.stop();
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
    }
}

impl ClientTunnel {
    /// Installs the rules (`autoRule`), checks the raw sockets, then runs the client on `udp`
    /// (already bound) on a thread of its own.
    pub async fn start(
        tuning: &Udp2rawTuning,
        server: SocketAddr,
        udp: StdUdpSocket,
    ) -> io::Result<ClientTunnel> {
        let server = SocketAddr::new(server.ip().to_canonical(), server.port());
        let cfg = config(tuning, udp.local_addr()?, server);
        let handle = Handle::default();
        let h2 = handle.clone();
        // Rules first, so that a missing privilege fails the start, not a thread.
        let rules = if tuning.auto_rule {
            let raw_mode = tuning.raw_mode;
            Some(
                tokio::task::spawn_blocking(move || {
                    Rules::install(
                        raw_mode,
                        Flow::Client { server },
                        Path::new(DEFAULT_STATE_DIR),
                    )
                })
                .await
                .map_err(io::Error::other)??,
            )
        } else {
            None
        };
        // Fails here, plainly, without root or CAP_NET_RAW.
        check_raw_sockets(server.ip())?;
        let thread = std::thread::Builder::new()
            .name("udp2raw-client".into())
            .spawn(move || {
                let _rules = rules;
                if let Err(e) = u2r::client::run_on(&cfg, &h2, udp) {
                    warn!(error = %e, "udp2raw client stopped");
                }
            })?;
        Ok(ClientTunnel {
            server,
            handle,
            thread: std::sync::Mutex::new(Some(thread)),
        })
    }
}

/// The outbound: a client tunnel started on first use.
pub struct Udp2rawClient {
    plan: Udp2rawOutbound,
    running: OnceCell<Arc<Running>>,
}

struct Running {
    local: SocketAddr,
    server: Address,
    _tunnel: ClientTunnel,
}

impl Udp2rawClient {
    pub fn new(plan: Udp2rawOutbound) -> Udp2rawClient {
        Udp2rawClient {
            plan,
            running: OnceCell::new(),
        }
    }

    /// Starts the tunnel now, in the background, as `udp2raw -c` connects at start: the fake
    /// TCP and udp2raw handshakes take a few round trips, and a flow's first datagrams would
    /// otherwise be lost waiting for them (0.6 s of a flow on a 200 ms path). A failure is
    /// logged here and met again, plainly, by the first session.
    pub fn connect_early(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.clone();
        runtime.spawn(async move {
            if let Err(e) = client.running().await {
                warn!(server = %client.plan.address, error = %e, "udp2raw outbound could not start");
            }
        });
    }

    async fn running(&self) -> io::Result<Arc<Running>> {
        self.running
            .get_or_try_init(|| async {
                let server = server_addr(&self.plan.address, self.plan.port)?;
                let udp = StdUdpSocket::bind(("127.0.0.1", 0))?;
                let local = udp.local_addr()?;
                let tunnel = ClientTunnel::start(&self.plan.tuning, server, udp).await?;
                Ok(Arc::new(Running {
                    local,
                    server: Address::Ip(tunnel.server),
                    _tunnel: tunnel,
                }))
            })
            .await
            .cloned()
    }
}

impl Outbound for Udp2rawClient {
    fn connect<'a>(
        &'a self,
        _meta: &'a Metadata,
        _destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "udp2raw carries UDP only",
            ))
        })
    }

    fn bind<'a>(&'a self, _meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            let running = self.running().await?;
            let socket = UdpSocket::bind(("127.0.0.1", 0)).await?;
            // The tunnel thread hands each session its datagrams in bursts (a KCP window's).
            let std_socket = socket.into_std()?;
            u2r::raw::size_udp(&std_socket);
            let socket = UdpSocket::from_std(std_socket)?;
            socket.connect(running.local).await?;
            Ok(Box::new(Conversation { socket, running }) as BoxPacketConn)
        })
    }
}

/// One routed UDP session: one conversation in the tunnel.
struct Conversation {
    socket: UdpSocket,
    running: Arc<Running>,
}

impl PacketConn for Conversation {
    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        match self.socket.poll_recv(cx, buf) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(self.running.server.clone())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn send_to<'a>(
        &'a self,
        payload: &'a [u8],
        _destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            self.socket.send(payload).await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::server_addr;

    #[test]
    fn server_address_of_either_family() {
        assert_eq!(
            server_addr("10.0.0.1", 4096).unwrap(),
            "10.0.0.1:4096".parse().unwrap()
        );
        assert_eq!(
            server_addr("fd00::1", 4096).unwrap(),
            "[fd00::1]:4096".parse().unwrap()
        );
        assert_eq!(server_addr("[::1]", 7).unwrap(), "[::1]:7".parse().unwrap());
        assert_eq!(
            server_addr("::ffff:10.0.0.1", 9).unwrap(),
            "10.0.0.1:9".parse().unwrap()
        );
        let e = server_addr("example.com", 1).unwrap_err().to_string();
        assert!(e.contains("IPv4 or IPv6"), "{e}");
    }
}
