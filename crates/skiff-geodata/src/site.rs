//! Decoding one `GeoSite` entry into the domains a rule uses, filtered by attributes.

use crate::wire::{self, Fields, WireError};

/// `Domain.Type` in v2ray's `common.proto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DomainKind {
    /// 0 (`Plain`, Xray's `Substr`): the value occurs anywhere in the name (`keyword:`).
    Plain,
    /// 1: a regular expression searched in the name (`regexp:`).
    Regex,
    /// 2 (`Domain`, v2ray's `RootDomain`): the name or any subdomain of it (`domain:`).
    Suffix,
    /// 3: exactly the name (`full:`).
    Full,
}

/// One domain condition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Domain {
    pub kind: DomainKind,
    pub value: String,
}

/// The domains of one `GeoSite` entry body that carry every attribute in `attrs` (Xray's
/// `geosite:CODE@a@b`: all of them; attribute keys compared exactly, Xray lower-cases the
/// config's). Xray has no negated form (`@!attr`), so neither does this.
pub fn decode_site(entry: &[u8], attrs: &[&str]) -> Result<Vec<Domain>, WireError> {
    let mut out = Vec::new();
    for field in Fields::new(entry) {
        if let (2, value) = field? {
            let msg = wire::bytes(value, "domain")?;
            if let Some(d) = decode_domain(msg, attrs)? {
                out.push(d);
            }
        }
    }
    Ok(out)
}

fn decode_domain(msg: &[u8], attrs: &[&str]) -> Result<Option<Domain>, WireError> {
    let mut kind = DomainKind::Plain;
    let mut value = "";
    let mut have = vec![false; attrs.len()];
    for field in Fields::new(msg) {
        match field? {
            (1, v) => {
                kind = match wire::number(v, "domain type")? {
                    0 => DomainKind::Plain,
                    1 => DomainKind::Regex,
                    2 => DomainKind::Suffix,
                    3 => DomainKind::Full,
                    _ => return Err(WireError::BadValue("domain type")),
                }
            }
            (2, v) => value = wire::text(v, "domain value")?,
            (3, v) => {
                let key = attribute_key(wire::bytes(v, "domain attribute")?)?;
                for (h, a) in have.iter_mut().zip(attrs) {
                    *h |= key == a.as_bytes();
                }
            }
            _ => {}
        }
    }
    Ok(have.iter().all(|h| *h).then(|| Domain {
        kind,
        value: value.to_owned(),
    }))
}

fn attribute_key(msg: &[u8]) -> Result<&[u8], WireError> {
    let mut key: &[u8] = b"";
    for field in Fields::new(msg) {
        if let (1, v) = field? {
            key = wire::bytes(v, "attribute key")?;
        }
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{self, domain};

    #[test]
    fn kinds_values_and_attribute_filter() {
        let entry = encode::site_entry(
            "X",
            &[
                domain(DomainKind::Plain, "ads", &[]),
                domain(DomainKind::Regex, "^a\\d\\.", &["ads"]),
                domain(DomainKind::Suffix, "example.com", &["ads", "cn"]),
                domain(DomainKind::Full, "www.example.org", &["cn"]),
            ],
        );
        let all = decode_site(&entry, &[]).unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(
            all[2],
            Domain {
                kind: DomainKind::Suffix,
                value: "example.com".into()
            }
        );
        assert_eq!(all[3].kind, DomainKind::Full);
        let values = |attrs: &[&str]| -> Vec<String> {
            decode_site(&entry, attrs)
                .unwrap()
                .into_iter()
                .map(|d| d.value)
                .collect()
        };
        assert_eq!(values(&["ads"]), ["^a\\d\\.", "example.com"]);
        assert_eq!(values(&["ads", "cn"]), ["example.com"]);
        assert_eq!(values(&["none"]), Vec::<String>::new());
    }

    #[test]
    fn bad_domains_are_errors() {
        // type 9
        let e = [0x12, 5, 0x08, 9, 0x12, 1, b'a'];
        assert_eq!(
            decode_site(&e, &[]),
            Err(WireError::BadValue("domain type"))
        );
        // value not UTF-8
        let e = [0x12, 3, 0x12, 1, 0xff];
        assert_eq!(
            decode_site(&e, &[]),
            Err(WireError::BadValue("domain value"))
        );
    }
}
