//! Fallbacks: a connection that is not a valid request for a known user is handed, with every
//! byte already read, to another server (usually a web server), so a prober sees an ordinary
//! website. Selection follows Xray (spec/vless.md §6): by TLS SNI (`name`), then negotiated
//! ALPN, then the HTTP request path. One mechanism, shared by every protocol that falls back.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use skiff_config::{FallbackDest, FallbackPlan};
use skiff_core::{BoxStream, RelayCounters, RelayPolicy, relay};
use skiff_proto::proxy_protocol;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixStream};

use crate::stack::LayerSession;

/// Picks the fallback for a connection, or None when no entry applies.
/// `first` is the first bytes the client sent (for the path).
pub fn select<'a>(
    fallbacks: &'a [FallbackPlan],
    session: &LayerSession,
    first: &[u8],
) -> Option<&'a FallbackPlan> {
    if fallbacks.is_empty() {
        return None;
    }
    let key = |v: &Option<String>| v.as_deref().unwrap_or("").to_ascii_lowercase();
    let sni = session.sni.clone().unwrap_or_default();
    let alpn = session.alpn.clone().unwrap_or_default();

    // 1. name: exact SNI, else the longest configured name inside the SNI, else "".
    let names: Vec<String> = fallbacks.iter().map(|f| key(&f.name)).collect();
    let name = if names.contains(&sni) {
        sni.clone()
    } else if !sni.is_empty() {
        names
            .iter()
            .filter(|n| !n.is_empty() && sni.contains(n.as_str()))
            .max_by_key(|n| n.len())
            .cloned()
            .unwrap_or_default()
    } else {
        String::new()
    };
    // Entries visible under a name: its own, then inherited from name "".
    let under = |alpn_key: &str, path_key: &str| {
        [name.as_str(), ""].into_iter().find_map(|n| {
            fallbacks.iter().find(|f| {
                key(&f.name) == n
                    && key(&f.alpn) == alpn_key
                    && f.path.as_deref().unwrap_or("") == path_key
            })
        })
    };
    let has_alpn = |a: &str| {
        fallbacks
            .iter()
            .any(|f| key(&f.alpn) == a && (key(&f.name) == name || key(&f.name).is_empty()))
    };
    // 2. alpn: the negotiated one if configured, else "".
    let alpn = if has_alpn(&alpn) { alpn } else { String::new() };
    // 3. path: only looked at when paths distinguish entries.
    let path = request_path(first).unwrap_or_default();
    under(&alpn, &path)
        .or_else(|| under(&alpn, ""))
        .or_else(|| under("", &path))
        .or_else(|| under("", ""))
}

/// The HTTP request path in the first bytes (`GET /path?x HTTP/1.1`), as Xray reads it: a `/`
/// at index 4..=8 after a space, up to `?` or space, within the first 64 bytes.
pub fn request_path(first: &[u8]) -> Option<String> {
    if first.len() < 18 || first.get(4) == Some(&b'*') {
        return None;
    }
    let start =
        (4..=8).find(|&i| first.get(i) == Some(&b'/') && first.get(i - 1) == Some(&b' '))?;
    let window = &first[start..first.len().min(64)];
    let mut end = 0;
    for &b in window {
        match b {
            b'?' | b' ' => break,
            b'\r' | b'\n' => return None,
            _ => end += 1,
        }
    }
    std::str::from_utf8(&window[..end]).ok().map(str::to_string)
}

/// Connects to the fallback's destination (a few quick retries, as Xray does), sends the PROXY
/// header if asked, then relays the client's stream (which replays what was already read).
pub async fn serve(
    client: BoxStream,
    fallback: &FallbackPlan,
    source: SocketAddr,
    local: SocketAddr,
    policy: &RelayPolicy,
    counters: &RelayCounters,
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
    if fallback.xver > 0 {
        let mut header = Vec::with_capacity(64);
        proxy_protocol::encode_xver(fallback.xver, Some((source, local)), &mut header);
        server.write_all(&header).await?;
    }
    relay(client, server, policy, counters).await;
    Ok(())
}

async fn dial(dest: &FallbackDest) -> io::Result<BoxStream> {
    Ok(match dest {
        FallbackDest::Port(port) => Box::new(TcpStream::connect(("127.0.0.1", *port)).await?),
        FallbackDest::Addr(host, port) => {
            Box::new(TcpStream::connect((host.as_str(), *port)).await?)
        }
        FallbackDest::Unix(path) => Box::new(UnixStream::connect(path).await?),
        FallbackDest::AbstractUnix(name) => Box::new(abstract_unix(name)?),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fb(name: &str, alpn: &str, path: &str, port: u16) -> FallbackPlan {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        FallbackPlan {
            name: opt(name),
            alpn: opt(alpn),
            path: opt(path),
            dest: FallbackDest::Port(port),
            xver: 0,
        }
    }

    fn session(sni: &str, alpn: &str) -> LayerSession {
        LayerSession {
            sni: (!sni.is_empty()).then(|| sni.to_string()),
            alpn: (!alpn.is_empty()).then(|| alpn.to_string()),
        }
    }

    fn port(f: Option<&FallbackPlan>) -> Option<u16> {
        f.map(|f| match f.dest {
            FallbackDest::Port(p) => p,
            _ => 0,
        })
    }

    #[test]
    fn paths_are_read_like_xray() {
        assert_eq!(
            request_path(b"GET /ws?ed=2048 HTTP/1.1\r\nHost: a\r\n").as_deref(),
            Some("/ws")
        );
        assert_eq!(
            request_path(b"POST /api/v1 HTTP/1.1\r\nHost: a\r\n").as_deref(),
            Some("/api/v1")
        );
        assert_eq!(request_path(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), None);
        assert_eq!(request_path(b"short"), None);
        assert_eq!(
            request_path(&[
                0x16, 3, 1, 0, 0x20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
            ]),
            None
        );
    }

    #[test]
    fn selection_by_name_alpn_and_path() {
        let table = [
            fb("", "", "", 80),
            fb("", "", "/ws", 1001),
            fb("", "h2", "", 81),
            fb("blog.example.com", "", "", 2000),
        ];
        let get = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n";
        let ws = b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n";
        assert_eq!(port(select(&table, &session("", ""), get)), Some(80));
        assert_eq!(port(select(&table, &session("", ""), ws)), Some(1001));
        assert_eq!(port(select(&table, &session("", "h2"), get)), Some(81));
        assert_eq!(
            port(select(&table, &session("blog.example.com", ""), get)),
            Some(2000)
        );
        // The longest configured name inside the SNI wins; unknown names use "".
        assert_eq!(
            port(select(&table, &session("www.blog.example.com", ""), get)),
            Some(2000)
        );
        assert_eq!(
            port(select(&table, &session("other.test", ""), get)),
            Some(80)
        );
        // A name inherits the default name's paths.
        assert_eq!(
            port(select(&table, &session("blog.example.com", ""), ws)),
            Some(1001)
        );
        assert!(select(&[], &session("", ""), get).is_none());
    }
}
