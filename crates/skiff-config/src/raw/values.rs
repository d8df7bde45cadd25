//! Xray's loosely typed values: ports given as a number or a string list, and lists that may be
//! written as a single string. Hand-written visitors give clear messages ("expected a port
//! number or a string such as \"1000-2000\"") where an untagged enum would only say "did not
//! match any variant".

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use skiff_core::{Networks, PortRange};

/// A port field: `1080`, `"1080"`, `"1000-2000"` or `"53,443,1000-2000"`. Kept as written;
/// range checks happen in the build step so they can name the exact problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSpec {
    Number(i64),
    Text(String),
}

impl PortSpec {
    /// The ranges this spec names. `allow_zero`: routing rules may say `0-65535`, listeners
    /// may not listen on port 0.
    pub fn ranges(&self, allow_zero: bool) -> Result<Vec<PortRange>, String> {
        let ranges = match self {
            PortSpec::Number(n) => {
                let port =
                    u16::try_from(*n).map_err(|_| format!("port {n} is out of range (1-65535)"))?;
                vec![PortRange::single(port)]
            }
            PortSpec::Text(text) => {
                let trimmed = text.trim();
                if trimmed.is_empty() {
                    return Err("the port is empty".into());
                }
                if trimmed.starts_with("env:") {
                    return Err(format!(
                        "ports from environment variables (`{trimmed}`) are not supported by this version of skiff yet"
                    ));
                }
                let mut ranges = Vec::new();
                for part in trimmed.split(',') {
                    if part.trim().is_empty() {
                        return Err(format!("`{text}` has an empty entry"));
                    }
                    ranges.push(PortRange::parse(part)?);
                }
                ranges
            }
        };
        if !allow_zero && ranges.iter().any(|r| r.first == 0) {
            return Err("port 0 cannot be listened on (ports are 1-65535)".into());
        }
        Ok(ranges)
    }
}

impl<'de> Deserialize<'de> for PortSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PortVisitor;
        impl Visitor<'_> for PortVisitor {
            type Value = PortSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a port number or a string such as \"1000-2000\" or \"53,443\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PortSpec, E> {
                Ok(PortSpec::Number(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PortSpec, E> {
                Ok(PortSpec::Number(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PortSpec, E> {
                Ok(PortSpec::Text(v.to_owned()))
            }
        }
        deserializer.deserialize_any(PortVisitor)
    }
}

/// Xray's `StringList`: `"a"` or `["a", "b"]`. `was_list` says which, so diagnostics about one
/// entry can point at `domain[3]` or at `domain` itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StringList {
    pub items: Vec<String>,
    pub was_list: bool,
}

impl<'de> Deserialize<'de> for StringList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor;
        impl<'de> Visitor<'de> for ListVisitor {
            type Value = StringList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StringList, E> {
                Ok(StringList {
                    items: vec![v.to_owned()],
                    was_list: false,
                })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StringList, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    items.push(item);
                }
                Ok(StringList {
                    items,
                    was_list: true,
                })
            }
        }
        deserializer.deserialize_any(ListVisitor)
    }
}

impl StringList {
    /// Parses a network list (`"tcp,udp"` or `["tcp", "udp"]`).
    pub fn networks(&self) -> Result<Networks, String> {
        Networks::parse(&self.items.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> PortSpec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn port_syntaxes() {
        let r = |first, last| PortRange { first, last };
        assert_eq!(spec("1080").ranges(false).unwrap(), vec![r(1080, 1080)]);
        assert_eq!(spec("\"1080\"").ranges(false).unwrap(), vec![r(1080, 1080)]);
        assert_eq!(
            spec("\"1000-2000\"").ranges(false).unwrap(),
            vec![r(1000, 2000)]
        );
        assert_eq!(
            spec("\"53, 443,1000-2000\"").ranges(false).unwrap(),
            vec![r(53, 53), r(443, 443), r(1000, 2000)]
        );
        assert_eq!(spec("\"0-65535\"").ranges(true).unwrap(), vec![r(0, 65535)]);
        assert!(spec("\"0-65535\"").ranges(false).is_err());
        assert!(spec("0").ranges(false).is_err());
        assert!(spec("-1").ranges(true).is_err());
        assert!(spec("70000").ranges(true).is_err());
        assert!(spec("\"2000-1000\"").ranges(true).is_err());
        assert!(spec("\"53,,54\"").ranges(true).is_err());
        assert!(spec("\"\"").ranges(true).is_err());
        assert!(
            spec("\"env:PORT\"")
                .ranges(true)
                .unwrap_err()
                .contains("not supported")
        );
        assert!(serde_json::from_str::<PortSpec>("1.5").is_err());
        assert!(serde_json::from_str::<PortSpec>("true").is_err());
    }

    #[test]
    fn string_lists() {
        let one: StringList = serde_json::from_str("\"a\"").unwrap();
        assert_eq!(
            one,
            StringList {
                items: vec!["a".into()],
                was_list: false
            }
        );
        let many: StringList = serde_json::from_str("[\"tcp\", \"udp\"]").unwrap();
        assert!(many.was_list);
        assert_eq!(
            many.networks().unwrap(),
            Networks {
                tcp: true,
                udp: true
            }
        );
        assert!(serde_json::from_str::<StringList>("[1]").is_err());
    }
}
