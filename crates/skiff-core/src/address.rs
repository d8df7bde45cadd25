//! Where a connection wants to go: an IP socket address or a domain name with a port.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// A destination as a client names it. Domains stay unresolved until an outbound decides
/// how to resolve them (freedom's domainStrategy), so routing can match on the name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Address {
    Ip(SocketAddr),
    Domain(String, u16),
}

impl Address {
    pub fn port(&self) -> u16 {
        match self {
            Address::Ip(sa) => sa.port(),
            Address::Domain(_, port) => *port,
        }
    }

    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Address::Ip(sa) => Some(sa.ip()),
            Address::Domain(..) => None,
        }
    }

    pub fn domain(&self) -> Option<&str> {
        match self {
            Address::Ip(_) => None,
            Address::Domain(name, _) => Some(name),
        }
    }

    pub fn with_port(&self, port: u16) -> Address {
        match self {
            Address::Ip(sa) => Address::Ip(SocketAddr::new(sa.ip(), port)),
            Address::Domain(name, _) => Address::Domain(name.clone(), port),
        }
    }

    /// Parses a host (IP literal, bracketed IPv6 or domain) and a port into an address.
    /// A domain that is really an IP literal becomes an IP address.
    pub fn from_host(host: &str, port: u16) -> Address {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        match bare.parse::<IpAddr>() {
            Ok(ip) => Address::Ip(SocketAddr::new(ip, port)),
            Err(_) => Address::Domain(bare.to_owned(), port),
        }
    }

    /// Parses `host:port`, `[v6]:port` or a bare `v6` literal with port.
    pub fn parse_host_port(text: &str) -> Option<Address> {
        if let Ok(sa) = text.parse::<SocketAddr>() {
            return Some(Address::Ip(sa));
        }
        let (host, port) = text.rsplit_once(':')?;
        let port: u16 = port.parse().ok()?;
        if host.is_empty() || host.contains(':') {
            return None;
        }
        Some(Address::from_host(host, port))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Ip(sa) => write!(f, "{sa}"),
            Address::Domain(name, port) => write!(f, "{name}:{port}"),
        }
    }
}

impl From<SocketAddr> for Address {
    fn from(sa: SocketAddr) -> Self {
        Address::Ip(sa)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_and_ports() {
        assert_eq!(
            Address::parse_host_port("example.com:443"),
            Some(Address::Domain("example.com".into(), 443))
        );
        assert_eq!(
            Address::parse_host_port("[::1]:80"),
            Some(Address::Ip("[::1]:80".parse().unwrap()))
        );
        assert_eq!(
            Address::parse_host_port("127.0.0.1:8"),
            Some(Address::Ip("127.0.0.1:8".parse().unwrap()))
        );
        assert_eq!(Address::parse_host_port("nope"), None);
        assert_eq!(Address::parse_host_port("a:b:1"), None);
        assert_eq!(
            Address::from_host("[::1]", 5).ip(),
            Some("::1".parse().unwrap())
        );
    }
}
