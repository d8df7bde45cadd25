//! What a `dns` section becomes once validated: plain data the resolver is built from.
//! skiff-config produces it (with file:line:column errors); nothing here reads JSON.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use skiff_core::Family;
use skiff_geodata::{DomainSet, IpMatcher};

/// Xray's per-server default (`timeoutMs` 4000).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(4);

#[derive(Clone, Debug, Default)]
pub struct DnsConfig {
    /// In the config's order; every matching entry contributes (as Xray's static hosts).
    pub hosts: Vec<HostEntry>,
    pub servers: Vec<ServerConfig>,
    /// `queryStrategy`: the families any lookup may ask for.
    pub query_strategy: QueryStrategy,
    pub disable_cache: bool,
    pub disable_fallback: bool,
    pub disable_fallback_if_match: bool,
    /// EDNS Client Subnet sent by servers that set none of their own.
    pub client_ip: Option<IpAddr>,
    /// Accepted for the log and access log; queries are not routed through outbounds.
    pub tag: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryStrategy(pub Option<Family>);

impl QueryStrategy {
    /// Narrows `wanted` to what this strategy allows; `None` when nothing is left.
    pub fn narrow(self, wanted: Family) -> Option<Family> {
        match (self.0, wanted) {
            (None | Some(Family::Any), w) => Some(w),
            (Some(s), Family::Any) => Some(s),
            (Some(s), w) if s == w => Some(w),
            _ => None,
        }
    }

    /// Xray's spellings (case-insensitive, `_`/`-` separators); an unknown one is an error
    /// here, where Xray silently takes UseIP.
    pub fn parse(text: &str) -> Result<QueryStrategy, String> {
        let key: String = text
            .chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect();
        let family = match key.as_str() {
            "" | "useip" | "usesys" | "usesystem" => Family::Any,
            "useip4" | "useipv4" => Family::V4,
            "useip6" | "useipv6" => Family::V6,
            _ => {
                return Err(format!(
                    "unknown queryStrategy `{text}` (expected UseIP, UseIPv4 or UseIPv6)"
                ));
            }
        };
        Ok(QueryStrategy(Some(family)))
    }
}

#[derive(Clone, Debug)]
pub struct HostEntry {
    /// The key as written, for logs.
    pub key: String,
    pub matcher: Arc<DomainSet>,
    pub value: HostValue,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostValue {
    Ips(Vec<IpAddr>),
    /// Resolve this name instead (Xray's "proxied domain").
    Alias(String),
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub endpoint: Endpoint,
    /// `domains`: names this server is asked first for.
    pub domains: Option<Arc<DomainSet>>,
    pub expect_ips: Option<IpFilter>,
    pub unexpected_ips: Option<IpFilter>,
    pub skip_fallback: bool,
    pub query_strategy: QueryStrategy,
    pub client_ip: Option<IpAddr>,
    pub timeout: Duration,
    /// This server's answers are not cached (its own `disableCache`, or the section's).
    pub disable_cache: bool,
    /// `finalQuery`: no server after this one is asked.
    pub final_query: bool,
}

/// `expectIPs` / `unexpectedIPs`. `prefer` is Xray's `"*"` entry: filter when something is
/// left, keep the answer as it is otherwise.
#[derive(Clone, Debug)]
pub struct IpFilter {
    pub set: Arc<IpMatcher>,
    pub prefer: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    Name(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The system resolver (`localhost`).
    System,
    Udp(Host, u16),
    Tcp(Host, u16),
    /// DNS over TLS (RFC 7858).
    Tls(Host, u16),
    /// DNS over HTTPS (RFC 8484): host, port and the request path (with query, if any).
    Https(Host, u16, String),
}

impl Endpoint {
    /// Parses a server `address` as Xray users write it. `port` (0 = unset) applies where the
    /// address carries none.
    pub fn parse(address: &str, port: u16) -> Result<Endpoint, String> {
        let address = address.trim();
        if address.eq_ignore_ascii_case("localhost") {
            return Ok(Endpoint::System);
        }
        let (scheme, rest) = match address.split_once("://") {
            Some((s, r)) => (s.to_ascii_lowercase(), r),
            None => (String::new(), address),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let default_port = match scheme.as_str() {
            "" | "udp" | "udp+local" | "tcp" | "tcp+local" => 53,
            "tls" | "tls+local" => 853,
            "https" | "https+local" => 443,
            "h2c" | "h2c+local" | "quic+local" => {
                return Err(format!(
                    "`{scheme}://` name servers are not supported by this version of skiff yet"
                ));
            }
            "fakedns" => {
                return Err("fakedns is not supported by this version of skiff yet".into());
            }
            other => return Err(format!("unknown name server scheme `{other}://`")),
        };
        if scheme.is_empty() && address.eq_ignore_ascii_case("fakedns") {
            return Err("fakedns is not supported by this version of skiff yet".into());
        }
        let (host, explicit_port) = split_host_port(authority)?;
        let port = explicit_port
            .or((port != 0).then_some(port))
            .unwrap_or(default_port);
        Ok(match scheme.as_str() {
            "" | "udp" | "udp+local" => no_path(Endpoint::Udp(host, port), path)?,
            "tcp" | "tcp+local" => no_path(Endpoint::Tcp(host, port), path)?,
            "tls" | "tls+local" => no_path(Endpoint::Tls(host, port), path)?,
            _ => {
                let path = if path.is_empty() { "/dns-query" } else { path };
                Endpoint::Https(host, port, path.to_owned())
            }
        })
    }
}

fn no_path(endpoint: Endpoint, path: &str) -> Result<Endpoint, String> {
    if path.is_empty() || path == "/" {
        Ok(endpoint)
    } else {
        Err(format!(
            "a path (`{path}`) only makes sense for https:// servers"
        ))
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port` or a bare IPv6 address.
fn split_host_port(authority: &str) -> Result<(Host, Option<u16>), String> {
    if authority.is_empty() {
        return Err("empty name server address".into());
    }
    if let Ok(ip) = authority.parse::<IpAddr>() {
        return Ok((Host::Ip(ip), None));
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("unclosed `[` in `{authority}`"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("unexpected `{after}` after `]` in `{authority}`")),
        };
        (inside, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err(format!("invalid port `{p}` in `{authority}`")),
            Ok(p) => Some(p),
        },
    };
    let host = match host.parse::<IpAddr>() {
        Ok(ip) => Host::Ip(ip),
        Err(_) if valid_name(host) => Host::Name(host.to_ascii_lowercase()),
        Err(_) => return Err(format!("invalid name server host `{host}`")),
    };
    Ok((host, port))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Host {
        Host::Ip(s.parse().unwrap())
    }

    #[test]
    fn addresses_as_xray_users_write_them() {
        let cases = [
            ("8.8.8.8", 0, Endpoint::Udp(ip("8.8.8.8"), 53)),
            ("8.8.8.8", 5353, Endpoint::Udp(ip("8.8.8.8"), 5353)),
            ("udp://1.1.1.1:54", 0, Endpoint::Udp(ip("1.1.1.1"), 54)),
            ("2001:db8::1", 0, Endpoint::Udp(ip("2001:db8::1"), 53)),
            (
                "tcp://[2001:db8::1]:5300",
                0,
                Endpoint::Tcp(ip("2001:db8::1"), 5300),
            ),
            ("tcp+local://9.9.9.9", 0, Endpoint::Tcp(ip("9.9.9.9"), 53)),
            (
                "tls://dns.example",
                0,
                Endpoint::Tls(Host::Name("dns.example".into()), 853),
            ),
            (
                "https://dns.google/dns-query",
                0,
                Endpoint::Https(Host::Name("dns.google".into()), 443, "/dns-query".into()),
            ),
            (
                "https+local://1.1.1.1:8443/q?x=1",
                0,
                Endpoint::Https(ip("1.1.1.1"), 8443, "/q?x=1".into()),
            ),
            ("LocalHost", 0, Endpoint::System),
        ];
        for (text, port, want) in cases {
            assert_eq!(Endpoint::parse(text, port), Ok(want), "{text}");
        }
        for bad in [
            "",
            "ftp://x",
            "quic+local://1.1.1.1",
            "fakedns",
            "1.1.1.1:0",
            "tcp://a b",
            "udp://1.1.1.1/x",
        ] {
            assert!(Endpoint::parse(bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn query_strategies_narrow() {
        let v4 = QueryStrategy::parse("UseIPv4").unwrap();
        assert_eq!(v4.narrow(Family::Any), Some(Family::V4));
        assert_eq!(v4.narrow(Family::V6), None);
        assert_eq!(
            QueryStrategy::parse("use_ip").unwrap().narrow(Family::V6),
            Some(Family::V6)
        );
        assert_eq!(
            QueryStrategy::default().narrow(Family::Any),
            Some(Family::Any)
        );
        assert!(QueryStrategy::parse("UseIPv5").is_err());
    }
}
