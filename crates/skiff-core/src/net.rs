//! Small network vocabulary shared by config, routing and listeners: CIDR blocks, port ranges
//! and the tcp/udp network set.

use std::fmt;
use std::net::IpAddr;

/// An IP prefix such as `10.0.0.0/8` or `::1/128`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    /// Parses `ip` or `ip/prefix`; the prefix must fit the address family.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let (ip_text, prefix_text) = match text.split_once('/') {
            Some((ip, prefix)) => (ip, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = ip_text
            .trim()
            .parse()
            .map_err(|_| format!("`{text}` is not an IP address or CIDR block"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix_text {
            None => max,
            Some(p) => match p.trim().parse::<u8>() {
                Ok(p) if p <= max => p,
                _ => return Err(format!("`{text}`: the prefix length must be 0..={max}")),
            },
        };
        Ok(Cidr { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4-mapped IPv6 address matches IPv4 blocks, as a dual-stack socket reports them.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// An inclusive port range; a single port is `first == last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub fn single(port: u16) -> PortRange {
        PortRange {
            first: port,
            last: port,
        }
    }

    pub fn contains(&self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }

    /// Parses `80` or `1000-2000`.
    pub fn parse(text: &str) -> Result<PortRange, String> {
        let text = text.trim();
        let port = |t: &str| {
            t.trim()
                .parse::<u16>()
                .map_err(|_| format!("`{text}` is not a port (1-65535) or range `a-b`"))
        };
        let range = match text.split_once('-') {
            Some((a, b)) => PortRange {
                first: port(a)?,
                last: port(b)?,
            },
            None => PortRange::single(port(text)?),
        };
        if range.first > range.last {
            return Err(format!("port range `{text}` is reversed"));
        }
        Ok(range)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// Transport-level network of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Network {
    Tcp,
    Udp,
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Network::Tcp => "tcp",
            Network::Udp => "udp",
        })
    }
}

/// A set of networks, as in `"network": "tcp,udp"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Networks {
    pub tcp: bool,
    pub udp: bool,
}

impl Networks {
    pub const TCP: Networks = Networks {
        tcp: true,
        udp: false,
    };

    pub fn contains(&self, network: Network) -> bool {
        match network {
            Network::Tcp => self.tcp,
            Network::Udp => self.udp,
        }
    }

    /// Parses Xray's `"tcp"`, `"udp"`, `"tcp,udp"` (spaces allowed).
    pub fn parse(text: &str) -> Result<Networks, String> {
        let mut set = Networks::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "tcp" => set.tcp = true,
                "udp" => set.udp = true,
                other => return Err(format!("unknown network `{other}` (expected tcp, udp)")),
            }
        }
        if !set.tcp && !set.udp {
            return Err("the network list is empty".into());
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_matching() {
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(c.contains("10.2.3.4".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.0.0.1".parse().unwrap()));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("1.2.3.4".parse().unwrap())
        );
        assert!(
            Cidr::parse("::/0")
                .unwrap()
                .contains("::1".parse().unwrap())
        );
        assert!(Cidr::parse("1.2.3.4/33").is_err());
        assert!(Cidr::parse("1.2.3/8").is_err());
        assert!(
            Cidr::parse("fd00::/8")
                .unwrap()
                .contains("fd12::1".parse().unwrap())
        );
    }

    #[test]
    fn ports_and_networks() {
        assert_eq!(
            PortRange::parse("1000-2000").unwrap(),
            PortRange {
                first: 1000,
                last: 2000
            }
        );
        assert!(PortRange::parse("2000-1000").is_err());
        assert!(PortRange::parse("70000").is_err());
        assert_eq!(
            Networks::parse("tcp, udp").unwrap(),
            Networks {
                tcp: true,
                udp: true
            }
        );
        assert!(Networks::parse("sctp").is_err());
    }
}
