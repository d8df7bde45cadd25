//! The `hosts` table: static answers and aliases, consulted before any server.

use std::net::IpAddr;

use crate::config::{HostEntry, HostValue};

/// How many aliases a name may go through (a → b → c ...) before the chain is cut; Xray
/// stops at the same depth, which also ends alias loops.
pub const MAX_ALIAS_DEPTH: usize = 5;

#[derive(Debug, Default)]
pub struct Hosts {
    entries: Vec<HostEntry>,
}

impl Hosts {
    pub fn new(entries: Vec<HostEntry>) -> Hosts {
        Hosts { entries }
    }

    /// What the table says about `name` (lowercase, no trailing dot): every matching entry's
    /// addresses, in order, or the alias when the first match is one; None when no key
    /// matches.
    pub fn lookup(&self, name: &str) -> Option<HostValue> {
        let mut matched = self.entries.iter().filter(|e| e.matcher.matches(name));
        let first = matched.next()?;
        let mut ips: Vec<IpAddr> = match &first.value {
            HostValue::Alias(alias) => return Some(HostValue::Alias(alias.clone())),
            HostValue::Ips(ips) => ips.clone(),
        };
        for entry in matched {
            if let HostValue::Ips(more) = &entry.value {
                ips.extend(
                    more.iter()
                        .filter(|ip| !ips.contains(ip))
                        .collect::<Vec<_>>(),
                );
            }
        }
        Some(HostValue::Ips(ips))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_geodata::{Domain, DomainKind, DomainSet};
    use std::sync::Arc;

    fn entry(kind: DomainKind, key: &str, value: HostValue) -> HostEntry {
        HostEntry {
            key: key.into(),
            matcher: Arc::new(
                DomainSet::new([Domain {
                    kind,
                    value: key.into(),
                }])
                .unwrap(),
            ),
            value,
        }
    }

    #[test]
    fn entries_combine_and_aliases_win_when_first() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let hosts = Hosts::new(vec![
            entry(
                DomainKind::Full,
                "a.test",
                HostValue::Ips(vec![ip("10.0.0.1")]),
            ),
            entry(
                DomainKind::Suffix,
                "test",
                HostValue::Ips(vec![ip("10.0.0.2"), ip("10.0.0.1")]),
            ),
            entry(
                DomainKind::Plain,
                "alias",
                HostValue::Alias("a.test".into()),
            ),
        ]);
        assert_eq!(
            hosts.lookup("a.test"),
            Some(HostValue::Ips(vec![ip("10.0.0.1"), ip("10.0.0.2")]))
        );
        assert_eq!(
            hosts.lookup("b.test"),
            Some(HostValue::Ips(vec![ip("10.0.0.2"), ip("10.0.0.1")]))
        );
        assert_eq!(
            hosts.lookup("my-alias.example"),
            Some(HostValue::Alias("a.test".into()))
        );
        assert_eq!(hosts.lookup("example.org"), None);
    }
}
