//! IP matching whose cost does not grow with the number of CIDRs: blocks become sorted,
//! merged ranges per family, and a lookup is one binary search.

use std::net::IpAddr;

/// A set of addresses as disjoint, sorted, non-adjacent inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpSet {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

fn merge<T: Ord + Copy>(mut ranges: Vec<(T, T)>, next: impl Fn(T) -> Option<T>) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (first, last) in ranges {
        if let Some(prev) = out.last_mut()
            && next(prev.1).is_none_or(|n| first <= n)
        {
            prev.1 = prev.1.max(last);
            continue;
        }
        out.push((first, last));
    }
    out.shrink_to_fit();
    out
}

fn find<T: Ord + Copy>(ranges: &[(T, T)], x: T) -> bool {
    let i = ranges.partition_point(|r| r.0 <= x);
    i > 0 && ranges[i - 1].1 >= x
}

/// IPv4-mapped IPv6 addresses count as IPv4 (as Xray's netipx conversion does).
fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl IpSet {
    /// Prefixes longer than the family allows are clamped to it.
    pub fn new(cidrs: impl IntoIterator<Item = (IpAddr, u8)>) -> IpSet {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for (addr, prefix) in cidrs {
            match unmap(addr) {
                IpAddr::V4(a) => {
                    let host = u32::MAX.checked_shr(u32::from(prefix.min(32))).unwrap_or(0);
                    let first = u32::from(a) & !host;
                    v4.push((first, first | host));
                }
                IpAddr::V6(a) => {
                    let host = u128::MAX
                        .checked_shr(u32::from(prefix.min(128)))
                        .unwrap_or(0);
                    let first = u128::from(a) & !host;
                    v6.push((first, first | host));
                }
            }
        }
        IpSet {
            v4: merge(v4, |x: u32| x.checked_add(1)),
            v6: merge(v6, |x: u128| x.checked_add(1)),
        }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match unmap(ip) {
            IpAddr::V4(a) => find(&self.v4, u32::from(a)),
            IpAddr::V6(a) => find(&self.v6, u128::from(a)),
        }
    }

    /// Whether the set has any range of `ip`'s family.
    fn has_family_of(&self, ip: IpAddr) -> bool {
        match unmap(ip) {
            IpAddr::V4(_) => !self.v4.is_empty(),
            IpAddr::V6(_) => !self.v6.is_empty(),
        }
    }

    /// Number of merged ranges (v4, v6).
    pub fn ranges(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }
}

/// A rule's `ip` condition as Xray evaluates it: the plain entries (CIDRs and geoip lists)
/// form one set that matches addresses inside it; each group of negated entries (`!CIDR`s,
/// and `geoip:!CODE`s) forms a set that matches addresses of its family outside it. Any
/// match is a match. A negated set with no range of an address's family never matches it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpMatcher {
    pub plain: IpSet,
    pub negated: Vec<IpSet>,
}

impl IpMatcher {
    pub fn matches(&self, ip: IpAddr) -> bool {
        self.plain.contains(ip)
            || self
                .negated
                .iter()
                .any(|n| n.has_family_of(ip) && !n.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cidrs: &[(&str, u8)]) -> IpSet {
        IpSet::new(cidrs.iter().map(|(a, p)| (a.parse().unwrap(), *p)))
    }

    #[test]
    fn ranges_merge_and_lookup() {
        let s = set(&[
            ("10.0.0.0", 8),
            ("10.1.0.0", 16),
            ("11.0.0.0", 8),
            ("192.168.1.7", 32),
            ("fc00::", 7),
            ("255.255.255.255", 32),
        ]);
        assert_eq!(s.ranges(), (3, 1));
        for ip in [
            "10.0.0.0",
            "11.255.255.255",
            "192.168.1.7",
            "255.255.255.255",
            "fdff::1",
        ] {
            assert!(s.contains(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "9.255.255.255",
            "12.0.0.0",
            "192.168.1.8",
            "fe00::",
            "::ffff:9.0.0.1",
        ] {
            assert!(!s.contains(ip.parse().unwrap()), "{ip}");
        }
        assert!(s.contains("::ffff:10.2.3.4".parse().unwrap()));
        assert!(set(&[("0.0.0.0", 0)]).contains("1.2.3.4".parse().unwrap()));
        assert!(set(&[("::", 0)]).contains("::1".parse().unwrap()));
    }

    #[test]
    fn negated_sets_as_xray() {
        let m = IpMatcher {
            plain: set(&[("1.1.1.1", 32)]),
            negated: vec![set(&[("10.0.0.0", 8)])],
        };
        assert!(m.matches("1.1.1.1".parse().unwrap()));
        assert!(m.matches("8.8.8.8".parse().unwrap()));
        assert!(!m.matches("10.1.1.1".parse().unwrap()));
        // No IPv6 range in the negated set: IPv6 never matches it.
        assert!(!m.matches("2001:db8::1".parse().unwrap()));
    }
}
