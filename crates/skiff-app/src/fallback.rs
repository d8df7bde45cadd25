//! Fallbacks, the app's half: dial the destination `skiff_proto::fallback::select` chose,
//! relay the connection (which replays every byte already read) there, and refuse a loop
//! back through our own listeners.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skiff_core::tcp_tuning::TcpTuning;
use skiff_core::{BoxStream, RelayCounters, RelayPolicy, relay};
use skiff_proto::fallback::{Destination, Fallback};
use skiff_proto::proxy_protocol;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixStream};

use skiff_core::LayerSession;

/// The fallback connections this instance has open to TCP listeners, by their local address
/// (which a listener of ours sees as the peer), each with the inbounds it already passed
/// through. A fallback that points back at one of our own listeners, directly or through
/// other inbounds, would otherwise turn one probe into connections until the descriptors run
/// out: a connection that arrives through our own fallback chain and would fall back from an
/// inbound already on that chain is closed instead.
#[derive(Default)]
pub struct FallbackChains {
    open: Mutex<HashMap<SocketAddr, Arc<[usize]>>>,
}

/// An open fallback connection's entry in [`FallbackChains`]; removed on drop.
pub struct ChainEntry<'a> {
    chains: &'a FallbackChains,
    local: SocketAddr,
}

impl Drop for ChainEntry<'_> {
    fn drop(&mut self) {
        self.chains.lock().remove(&self.local);
    }
}

impl FallbackChains {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Arc<[usize]>>> {
        // The map stays consistent whatever a panicking holder did: no invariant spans calls.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The inbounds (by [`inbound_id`]) a connection from `peer` already passed through as a
    /// fallback of ours: empty for any connection we did not dial ourselves.
    pub fn chain_of(&self, peer: SocketAddr) -> Arc<[usize]> {
        self.lock()
            .get(&peer)
            .cloned()
            .unwrap_or_else(|| Arc::new([]))
    }

    /// Records the fallback connection dialed from `local`, having passed through `chain`.
    pub fn enter(&self, local: SocketAddr, chain: Arc<[usize]>) -> ChainEntry<'_> {
        self.lock().insert(local, chain);
        ChainEntry {
            chains: self,
            local,
        }
    }
}

/// An inbound's identity on a fallback chain (its handler's address: unique while it lives).
pub fn inbound_id<T>(inbound: &T) -> usize {
    std::ptr::from_ref(inbound) as usize
}

/// Picks the fallback for a connection by its TLS session and first bytes, or None when no
/// entry applies (see [`skiff_proto::fallback::select`]).
pub fn select<'a>(
    fallbacks: &'a [Fallback],
    session: &LayerSession,
    first: &[u8],
) -> Option<&'a Fallback> {
    skiff_proto::fallback::select(
        fallbacks,
        session.sni.as_deref(),
        session.alpn.as_deref(),
        first,
    )
}

/// Connects to the fallback's destination (a few quick retries, as Xray does), sends the PROXY
/// header if asked, then relays the client's stream (which replays what was already read).
/// The dialed connection is recorded in `chains` with `chain` (the inbounds it has passed
/// through, this one last) while it lasts.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    client: BoxStream,
    fallback: &Fallback,
    source: SocketAddr,
    local: SocketAddr,
    policy: &RelayPolicy,
    counters: &RelayCounters,
    chains: &FallbackChains,
    chain: Arc<[usize]>,
) -> io::Result<()> {
    let mut delay = Duration::from_millis(100);
    let mut server = None;
    for _ in 0..5 {
        match dial(&fallback.dest).await {
            Ok(s) => {
                server = Some(s);
                break;
            }
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
    let mut server = match server {
        Some(s) => s,
        None => dial(&fallback.dest).await?,
    };
    let _entry = server
        .raw_tcp()
        .and_then(|tcp| tcp.local_addr().ok())
        .map(|dialed_from| chains.enter(dialed_from, chain));
    if fallback.xver > 0 {
        let mut header = Vec::with_capacity(64);
        proxy_protocol::encode_xver(fallback.xver, Some((source, local)), &mut header);
        server.write_all(&header).await?;
    }
    relay(client, server, policy, counters).await;
    Ok(())
}

pub(crate) async fn dial(dest: &Destination) -> io::Result<BoxStream> {
    let tuned = |stream: TcpStream| -> io::Result<BoxStream> {
        TcpTuning::default().apply(&stream)?;
        Ok(Box::new(stream))
    };
    Ok(match dest {
        Destination::Port(port) => tuned(TcpStream::connect(("127.0.0.1", *port)).await?)?,
        Destination::Addr(host, port) => tuned(TcpStream::connect((host.as_str(), *port)).await?)?,
        Destination::Unix(path) => Box::new(UnixStream::connect(path).await?),
        Destination::AbstractUnix(name) => Box::new(abstract_unix(name)?),
    })
}

/// Xray's forms: `@name` is the abstract socket "name"; `@@name` is the same name padded with
/// NULs to the full sun_path length, as HAProxy and some others bind it.
#[cfg(target_os = "linux")]
fn abstract_unix(text: &str) -> io::Result<UnixStream> {
    use std::os::linux::net::SocketAddrExt;
    const SUN_PATH_AFTER_NUL: usize = 107;
    let name: Vec<u8> = match text.strip_prefix("@@") {
        Some(rest) => {
            let mut padded = rest.as_bytes().to_vec();
            padded.resize(SUN_PATH_AFTER_NUL.max(padded.len()), 0);
            padded
        }
        None => text.strip_prefix('@').unwrap_or(text).as_bytes().to_vec(),
    };
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name)?;
    let std_stream = std::os::unix::net::UnixStream::connect_addr(&addr)?;
    std_stream.set_nonblocking(true)?;
    UnixStream::from_std(std_stream)
}

#[cfg(not(target_os = "linux"))]
fn abstract_unix(_name: &str) -> io::Result<UnixStream> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract unix sockets need Linux",
    ))
}
