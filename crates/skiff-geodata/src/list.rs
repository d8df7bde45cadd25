//! Finding entries in a `GeoSiteList` / `GeoIPList` by code without decoding the others.
//! Both lists are `repeated Entry entry = 1` and both entries start with `string code = 1`,
//! so one scan serves both.

use std::fmt;

use crate::wire::{self, Fields, Value, WireError};

/// Why a code could not be loaded from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GeoError {
    /// The file is not a valid list (or an entry inside it is not).
    Corrupt(WireError),
    /// No entry has this code.
    NoCode(String),
    /// An entry's content is valid protobuf but not usable (a bad regex, a 5-byte IP).
    BadEntry { code: String, reason: String },
}

impl fmt::Display for GeoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GeoError::Corrupt(e) => write!(f, "not a valid geodata file: {e}"),
            GeoError::NoCode(code) => write!(f, "no list with code `{code}`"),
            GeoError::BadEntry { code, reason } => write!(f, "list `{code}`: {reason}"),
        }
    }
}

impl std::error::Error for GeoError {}

impl From<WireError> for GeoError {
    fn from(e: WireError) -> Self {
        GeoError::Corrupt(e)
    }
}

/// The code of one entry: its field 1 (the first field in files written by any protobuf
/// encoder, but other fields before it are skipped, not trusted away).
fn entry_code(entry: &[u8]) -> Result<&[u8], WireError> {
    for field in Fields::new(entry) {
        if let (1, value) = field? {
            return wire::bytes(value, "entry code");
        }
    }
    Ok(b"")
}

/// For each of `codes`, the body of the first entry whose code equals it ignoring ASCII case
/// (Xray upper-cases the config's code; the files hold upper-case codes). Scans the list
/// once; stops early when every code is found. A corrupt region before the last wanted entry
/// is an error; one after it is not looked at.
pub fn find_entries<'a>(file: &'a [u8], codes: &[&str]) -> Result<Vec<&'a [u8]>, GeoError> {
    let mut found: Vec<Option<&'a [u8]>> = vec![None; codes.len()];
    let mut missing = codes.len();
    let mut fields = Fields::new(file);
    while missing > 0 {
        let Some(field) = fields.next() else { break };
        let (number, value) = field?;
        let Value::Bytes(entry) = value else {
            return Err(WireError::BadValue("list entry").into());
        };
        if number != 1 {
            continue;
        }
        let code = entry_code(entry)?;
        for (slot, want) in found.iter_mut().zip(codes) {
            if slot.is_none() && code.eq_ignore_ascii_case(want.as_bytes()) {
                *slot = Some(entry);
                missing -= 1;
            }
        }
    }
    found
        .into_iter()
        .zip(codes)
        .map(|(e, code)| e.ok_or_else(|| GeoError::NoCode((*code).to_owned())))
        .collect()
}

/// Every code in the file, in order (for `skiff` diagnostics and tests).
pub fn codes(file: &[u8]) -> Result<Vec<String>, GeoError> {
    let mut out = Vec::new();
    for field in Fields::new(file) {
        if let (1, Value::Bytes(entry)) = field? {
            out.push(String::from_utf8_lossy(entry_code(entry)?).into_owned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;

    #[test]
    fn finds_codes_case_insensitively_first_wins() {
        let file = encode::list(&[
            encode::site_entry("CN", &[]),
            encode::site_entry("GOOGLE", &[]),
            encode::site_entry("cn", &[encode::domain(crate::DomainKind::Full, "x", &[])]),
        ]);
        let got = find_entries(&file, &["google", "Cn"]).unwrap();
        assert_eq!(got[0], encode::site_entry("GOOGLE", &[]).as_slice());
        assert_eq!(got[1], encode::site_entry("CN", &[]).as_slice());
        assert_eq!(
            find_entries(&file, &["nope"]),
            Err(GeoError::NoCode("nope".into()))
        );
        assert_eq!(codes(&file).unwrap(), ["CN", "GOOGLE", "cn"]);
    }

    #[test]
    fn corrupt_before_the_code_is_an_error() {
        let mut file = encode::list(&[encode::site_entry("A", &[])]);
        let good = file.len();
        file.extend_from_slice(&[0x0a, 0x7f, 1, 2]); // claims 127 bytes, has 2
        file.extend(encode::list(&[encode::site_entry("B", &[])]));
        assert!(matches!(
            find_entries(&file, &["b"]),
            Err(GeoError::Corrupt(WireError::Truncated))
        ));
        // Found before the damage: fine.
        assert!(find_entries(&file, &["a"]).is_ok());
        assert!(find_entries(&file[..good - 1], &["a"]).is_err());
        // A top-level field that is not length-delimited.
        assert!(find_entries(&[0x08, 0x01], &["a"]).is_err());
    }
}
