//! Fallbacks as Xray's VLESS and Trojan servers choose them (spec/vless.md §6): a connection
//! that is not a valid request for a known user goes, with every byte already read, to
//! another server (usually a web server), so a prober sees an ordinary website. This module
//! is the choice, by TLS SNI (`name`), then negotiated ALPN, then the HTTP request path;
//! dialling the chosen destination and relaying is the app's.

use std::path::PathBuf;

/// One `fallbacks` entry. Selectors (`name` = SNI, `alpn`, `path`) are None when empty ("any").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    pub name: Option<String>,
    pub alpn: Option<String>,
    /// Starts with "/".
    pub path: Option<String>,
    pub dest: Destination,
    /// `xver`: PROXY protocol version sent to `dest`, 0 (none), 1 or 2.
    pub xver: u8,
}

/// Where a fallback connection goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// A bare port: 127.0.0.1:port.
    Port(u16),
    /// A host (IPv6 without brackets) and port.
    Addr(String, u16),
    /// A Unix socket path.
    Unix(PathBuf),
    /// An abstract Unix socket, kept as written: "@name", or "@@name" (Xray pads this form
    /// with zero bytes to the full sockaddr length, for HAProxy compatibility).
    AbstractUnix(String),
}

/// Picks the fallback for a connection, or None when no entry applies.
/// `sni` and `alpn` are the client's TLS server name and the negotiated ALPN protocol;
/// `first` is the first bytes the client sent (for the path).
///
/// Gives what Xray's lookup gives on its `name → alpn → path` table after the start-up
/// inheritance (spec/vless.md §6.1, §6.2; proxy/vless/inbound/inbound.go `New` and `Process`):
/// under a name, an alpn first inherits that name's own alpn "" paths and only then the default
/// name's; so a name-specific default beats an alpn-specific entry of the default name.
pub fn select<'a>(
    fallbacks: &'a [Fallback],
    sni: Option<&str>,
    alpn: Option<&str>,
    first: &[u8],
) -> Option<&'a Fallback> {
    if fallbacks.is_empty() {
        return None;
    }
    let key = |v: &Option<String>| v.as_deref().unwrap_or("").to_ascii_lowercase();
    let sni = sni.unwrap_or("").to_ascii_lowercase();
    let alpn = alpn.unwrap_or("").to_ascii_lowercase();
    let own = |name: &str, alpn: &str, path: &str| {
        fallbacks.iter().find(|f| {
            key(&f.name) == name && key(&f.alpn) == alpn && f.path.as_deref().unwrap_or("") == path
        })
    };
    let has_name = |name: &str| fallbacks.iter().any(|f| key(&f.name) == name);
    let has_own_alpn = |name: &str, alpn: &str| {
        fallbacks
            .iter()
            .any(|f| key(&f.name) == name && key(&f.alpn) == alpn)
    };

    // 1. name: exact SNI, else the longest configured name inside the SNI, else "".
    let mut name = sni.clone();
    if !name.is_empty() && !has_name(&name) {
        name = fallbacks
            .iter()
            .map(|f| key(&f.name))
            .filter(|n| !n.is_empty() && sni.contains(n.as_str()))
            .max_by_key(String::len)
            .unwrap_or_default();
    }
    if !has_name(&name) {
        name = String::new();
        if !has_name("") {
            return None;
        }
    }
    // 2. alpn: keys under a name are its own plus (for a non-default name) the default name's.
    let alpn_exists = |a: &str| has_own_alpn(&name, a) || (!name.is_empty() && has_own_alpn("", a));
    let alpn = if alpn_exists(&alpn) {
        alpn
    } else {
        String::new()
    };
    if !alpn_exists(&alpn) {
        return None;
    }
    // The completed table's entry (name, alpn, path).
    let entry = |path: &str| {
        own(&name, &alpn, path)
            .or_else(|| (!alpn.is_empty()).then(|| own(&name, "", path)).flatten())
            .or_else(|| {
                if name.is_empty() || !has_own_alpn("", &alpn) {
                    return None;
                }
                own("", &alpn, path)
                    .or_else(|| (!alpn.is_empty()).then(|| own("", "", path)).flatten())
            })
    };
    // 3. path: a configured path is never empty, so trying it first and then "" is Xray's
    // "look at the path only when the table has paths here".
    request_path(first)
        .and_then(|path| entry(&path))
        .or_else(|| entry(""))
}

/// The HTTP request path in the first bytes (`GET /path?x HTTP/1.1`), as Xray reads it: a `/`
/// at index 4..=8 after a space, up to `?` or space, which must come within the first 64
/// bytes (else no path).
pub fn request_path(first: &[u8]) -> Option<String> {
    if first.len() < 18 || first.get(4) == Some(&b'*') {
        return None;
    }
    let start =
        (4..=8).find(|&i| first.get(i) == Some(&b'/') && first.get(i - 1) == Some(&b' '))?;
    let window = &first[start..first.len().min(64)];
    let end = window
        .iter()
        .position(|&b| matches!(b, b'?' | b' ' | b'\r' | b'\n'))?;
    if matches!(window[end], b'\r' | b'\n') {
        return None;
    }
    std::str::from_utf8(&window[..end]).ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fb(name: &str, alpn: &str, path: &str, port: u16) -> Fallback {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Fallback {
            name: opt(name),
            alpn: opt(alpn),
            path: opt(path),
            dest: Destination::Port(port),
            xver: 0,
        }
    }

    /// The TLS session's name and ALPN, None when empty.
    fn session<'a>(sni: &'a str, alpn: &'a str) -> (Option<&'a str>, Option<&'a str>) {
        (
            (!sni.is_empty()).then_some(sni),
            (!alpn.is_empty()).then_some(alpn),
        )
    }

    fn select<'a>(
        fallbacks: &'a [Fallback],
        (sni, alpn): (Option<&str>, Option<&str>),
        first: &[u8],
    ) -> Option<&'a Fallback> {
        super::select(fallbacks, sni, alpn, first)
    }

    fn port(f: Option<&Fallback>) -> Option<u16> {
        f.map(|f| match f.dest {
            Destination::Port(p) => p,
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
        assert_eq!(port(select(&table, session("", ""), get)), Some(80));
        assert_eq!(port(select(&table, session("", ""), ws)), Some(1001));
        assert_eq!(port(select(&table, session("", "h2"), get)), Some(81));
        assert_eq!(
            port(select(&table, session("blog.example.com", ""), get)),
            Some(2000)
        );
        // The longest configured name inside the SNI wins; unknown names use "".
        assert_eq!(
            port(select(&table, session("www.blog.example.com", ""), get)),
            Some(2000)
        );
        assert_eq!(
            port(select(&table, session("other.test", ""), get)),
            Some(80)
        );
        // A name inherits the default name's paths.
        assert_eq!(
            port(select(&table, session("blog.example.com", ""), ws)),
            Some(1001)
        );
        assert!(select(&[], session("", ""), get).is_none());
        // Paths need their end (`?` or space) inside the first 64 bytes.
        let long = format!("GET /ws{} HTTP/1.1\r\n", "x".repeat(60));
        assert_eq!(request_path(long.as_bytes()), None);
    }

    #[test]
    fn a_name_default_beats_an_alpn_entry_of_the_default_name() {
        let table = [
            fb("", "", "", 80),
            fb("b.example", "", "", 2000),
            fb("", "http/1.1", "", 81),
        ];
        let get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(
            port(select(&table, session("b.example", "http/1.1"), get)),
            Some(2000)
        );
        assert_eq!(
            port(select(&table, session("a.example", "http/1.1"), get)),
            Some(81)
        );
    }

    /// Xray's table, built and searched literally as proxy/vless/inbound/inbound.go does.
    fn xray_select(fallbacks: &[Fallback], sni: &str, alpn: &str, first: &[u8]) -> Option<u16> {
        use std::collections::BTreeMap;
        type Table = BTreeMap<String, BTreeMap<String, BTreeMap<String, u16>>>;
        let s = |v: &Option<String>| v.clone().unwrap_or_default();
        let mut t: Table = BTreeMap::new();
        for f in fallbacks {
            t.entry(s(&f.name))
                .or_default()
                .entry(s(&f.alpn))
                .or_default()
                .insert(s(&f.path), port(Some(f)).unwrap());
        }
        if let Some(default) = t.get("").cloned() {
            for (name, apfb) in t.iter_mut() {
                if !name.is_empty() {
                    for alpn in default.keys() {
                        apfb.entry(alpn.clone()).or_default();
                    }
                }
            }
        }
        for apfb in t.values_mut() {
            if let Some(base) = apfb.get("").cloned() {
                for (alpn, pfb) in apfb.iter_mut() {
                    if !alpn.is_empty() {
                        for (path, dest) in &base {
                            pfb.entry(path.clone()).or_insert(*dest);
                        }
                    }
                }
            }
        }
        if let Some(default) = t.get("").cloned() {
            for (name, apfb) in t.iter_mut() {
                if !name.is_empty() {
                    for (alpn, pfb) in &default {
                        for (path, dest) in pfb {
                            apfb.get_mut(alpn)
                                .unwrap()
                                .entry(path.clone())
                                .or_insert(*dest);
                        }
                    }
                }
            }
        }
        let mut name = sni.to_string();
        if (t.len() > 1 || !t.contains_key("")) && !name.is_empty() && !t.contains_key(&name) {
            name = t
                .keys()
                .filter(|n| !n.is_empty() && sni.contains(n.as_str()))
                .max_by_key(|n| n.len())
                .cloned()
                .unwrap_or_default();
        }
        if !t.contains_key(&name) {
            name = String::new();
        }
        let apfb = t.get(&name)?;
        let alpn = if apfb.contains_key(alpn) { alpn } else { "" };
        let pfb = apfb.get(alpn)?;
        let mut path = String::new();
        if (pfb.len() > 1 || !pfb.contains_key(""))
            && let Some(p) = request_path(first)
            && pfb.contains_key(&p)
        {
            path = p;
        }
        pfb.get(&path).copied()
    }

    #[test]
    fn selection_agrees_with_xray_on_random_tables() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n) as usize
        };
        let names = ["", "", "a.example", "b.example", "example"];
        let alpns = ["", "", "h2", "http/1.1"];
        let paths = ["", "", "/ws", "/grpc"];
        let snis = [
            "",
            "a.example",
            "b.example",
            "www.b.example",
            "c.example",
            "other.test",
        ];
        let firsts: [&[u8]; 4] = [
            b"GET /ws HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /grpc?x=1 HTTP/1.1\r\nHost: x\r\n",
            b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        ];
        for round in 0..3000 {
            let mut table: Vec<Fallback> = Vec::new();
            for _ in 0..1 + next(6) {
                let candidate = fb(
                    names[next(names.len() as u64)],
                    alpns[next(alpns.len() as u64)],
                    paths[next(paths.len() as u64)],
                    1000 + table.len() as u16,
                );
                // The config builder refuses duplicates of (name, alpn, path).
                if !table.iter().any(|f| {
                    (&f.name, &f.alpn, &f.path)
                        == (&candidate.name, &candidate.alpn, &candidate.path)
                }) {
                    table.push(candidate);
                }
            }
            for sni in snis {
                for alpn in ["", "h2", "http/1.1", "h3"] {
                    for first in firsts {
                        assert_eq!(
                            port(select(&table, session(sni, alpn), first)),
                            xray_select(&table, sni, alpn, first),
                            "round {round}: table {table:?}, sni {sni:?}, alpn {alpn:?}, first {:?}",
                            String::from_utf8_lossy(first)
                        );
                    }
                }
            }
        }
    }
}
