//! Xray's loosely typed values: ports given as a number or a string list, and lists that may be
//! written as a single string. Hand-written visitors give clear messages ("expected a port
//! number or a string such as \"1000-2000\"") where an untagged enum would only say "did not
//! match any variant".

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use skiff_core::{Networks, PortRange};

/// An integer field, kept at any size. Xray's fields are fixed-width (uint32 seconds, uint16
/// ports…), and a value too large for one must reach the build step, which knows the field and
/// says its range ("expected a port number 1–65535"); decoding into `i64` would fail first with
/// only "expected an integer". Fractional numbers are still refused here, as in Xray.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Int {
    /// Every integer serde_json holds exactly (the i64 and u64 ranges).
    Exact(i128),
    /// An integer literal beyond the u64 range, which serde_json can only hold as a float
    /// (so only approximately): out of range for every field.
    Huge(f64),
}

impl Int {
    /// The value as `T` (`u16`, `u32`, …) when it fits.
    pub fn get<T: TryFrom<i128>>(self) -> Option<T> {
        match self {
            Int::Exact(v) => T::try_from(v).ok(),
            Int::Huge(_) => None,
        }
    }

    /// The value when it lies in `min..=max`.
    pub fn within(self, min: i64, max: i64) -> Option<i64> {
        self.get::<i64>().filter(|v| (min..=max).contains(v))
    }

    pub fn is_negative(self) -> bool {
        match self {
            Int::Exact(v) => v < 0,
            Int::Huge(f) => f < 0.0,
        }
    }

    pub fn is_zero(self) -> bool {
        self == Int::Exact(0)
    }

    /// serde_json holds an integer literal as a float only when it does not fit in i64/u64,
    /// so only floats that large are taken as integers (too big for any field); `1.5` or
    /// `10.0` stay type errors.
    fn from_float(v: f64) -> Option<Int> {
        const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
        (v.is_finite() && v.abs() >= TWO_POW_63).then_some(Int::Huge(v))
    }
}

impl From<i64> for Int {
    fn from(v: i64) -> Int {
        Int::Exact(i128::from(v))
    }
}

/// As written within the i64 and u64 ranges; beyond, in exponent form (`1e20`), since only
/// an approximation of the digits is known.
impl fmt::Display for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Int::Exact(v) => write!(f, "{v}"),
            Int::Huge(v) => write!(f, "{v:e}"),
        }
    }
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntVisitor;
        impl Visitor<'_> for IntVisitor {
            type Value = Int;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Int, E> {
                Ok(Int::from(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int, E> {
                Ok(Int::Exact(i128::from(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Int, E> {
                Int::from_float(v)
                    .ok_or_else(|| de::Error::invalid_type(de::Unexpected::Float(v), &self))
            }
        }
        deserializer.deserialize_any(IntVisitor)
    }
}

/// "`value` is out of range, expected `expected`": the one wording for integer fields, so a
/// user always sees the range the field takes.
pub fn out_of_range(value: impl fmt::Display, expected: &str) -> String {
    format!("{value} is out of range, expected {expected}")
}

/// What a port field takes, for [`out_of_range`].
pub const PORT_NUMBER: &str = "a port number 1–65535";

/// What a user level takes (uint32 in Xray), for [`out_of_range`].
pub const LEVEL: &str = "a level 0–4294967295";

/// A port field: `1080`, `"1080"`, `"1000-2000"` or `"53,443,1000-2000"`. Kept as written;
/// range checks happen in the build step so they can name the exact problem.
#[derive(Clone, Debug, PartialEq)]
pub enum PortSpec {
    Number(Int),
    Text(String),
}

impl PortSpec {
    /// The ranges this spec names. `allow_zero`: routing rules may say `0-65535`, listeners
    /// may not listen on port 0.
    pub fn ranges(&self, allow_zero: bool) -> Result<Vec<PortRange>, String> {
        let ranges = match self {
            PortSpec::Number(n) => {
                let port = n.get::<u16>().ok_or_else(|| out_of_range(n, PORT_NUMBER))?;
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
                Ok(PortSpec::Number(Int::Exact(i128::from(v))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PortSpec, E> {
                Ok(PortSpec::Number(Int::from(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<PortSpec, E> {
                Int::from_float(v)
                    .map(PortSpec::Number)
                    .ok_or_else(|| de::Error::invalid_type(de::Unexpected::Float(v), &self))
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
    fn integers_of_any_size() {
        let int = |json: &str| serde_json::from_str::<Int>(json);
        assert_eq!(int("-3").unwrap(), Int::from(-3));
        assert_eq!(
            int("18446744073709551615").unwrap(),
            Int::Exact(i128::from(u64::MAX))
        );
        assert_eq!(int("1e20").unwrap(), Int::Huge(1e20));
        assert_eq!(int("99999999999999999999").unwrap().to_string(), "1e20");
        assert_eq!(int("4294967296").unwrap().get::<u32>(), None);
        assert_eq!(int("4294967295").unwrap().get::<u32>(), Some(u32::MAX));
        assert_eq!(int("1e20").unwrap().get::<u64>(), None);
        assert!(int("-1e300").unwrap().is_negative());
        for bad in ["1.5", "10.0", "\"1\"", "true", "null"] {
            assert!(int(bad).is_err(), "{bad}");
        }
        assert_eq!(
            spec("1e20").ranges(true).unwrap_err(),
            "1e20 is out of range, expected a port number 1–65535"
        );
        assert!(serde_json::from_str::<PortSpec>("8080.5").is_err());
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
