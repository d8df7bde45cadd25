//! User ids as VLESS and VMess carry them (a UUID): parsing the configured id strings and
//! comparing received ids.
//!
//! A configured id is either a UUID string (32–36 characters: 32 hex digits with optional
//! dashes between the 8-4-4-4-12 groups) or, as Xray allows, any other string of 1..=30 bytes,
//! which is mapped to a UUID (vless.md §2.1):
//! `u = SHA1(16 zero bytes || utf8(s))[0..16]`, then version 5 and RFC 4122 variant bits.

use std::fmt;
use std::str::FromStr;

use sha1::{Digest, Sha1};

/// The longest non-UUID string Xray maps to a UUID.
pub const MAX_MAPPED_ID_LEN: usize = 30;

/// Why a run-time change to an inbound's users (Xray's API) was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserChangeError {
    /// A user with this email is already there.
    Exists,
    /// No user has this email.
    NotFound,
}

impl std::fmt::Display for UserChangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UserChangeError::Exists => "already exists",
            UserChangeError::NotFound => "not found",
        })
    }
}

impl std::error::Error for UserChangeError {}

/// Whether a user's email is `email`: emails name users case-insensitively, as in Xray.
pub fn email_is(user_email: Option<&str>, email: &str) -> bool {
    user_email.is_some_and(|e| e.eq_ignore_ascii_case(email))
}

/// Whether `email` is taken by one of `emails`; no email is never taken.
pub fn email_taken<'a>(
    mut emails: impl Iterator<Item = Option<&'a str>>,
    email: Option<&str>,
) -> bool {
    email.is_some_and(|wanted| emails.any(|e| email_is(e, wanted)))
}

/// Why a user id string was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserIdError {
    /// The id string is empty.
    Empty,
    /// 31 bytes, or more than 36: neither a UUID nor short enough to be mapped.
    BadLength(usize),
    /// 32–36 bytes but not a UUID (a non-hex digit or a misplaced dash).
    BadUuid,
}

impl fmt::Display for UserIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserIdError::Empty => f.write_str("user id is empty"),
            UserIdError::BadLength(n) => write!(
                f,
                "user id of {n} bytes is neither a UUID (32-36 chars) nor a string of 1..={MAX_MAPPED_ID_LEN} bytes"
            ),
            UserIdError::BadUuid => f.write_str("user id is not a valid UUID"),
        }
    }
}

impl std::error::Error for UserIdError {}

/// A 16-byte VLESS user id (RFC 4122 byte order, i.e. the order of the hex string).
///
/// Equality is constant-time over the 16 bytes.
#[derive(Clone, Copy)]
pub struct UserId([u8; 16]);

impl UserId {
    /// Wraps raw id bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> UserId {
        UserId(bytes)
    }

    /// The raw id bytes, as they appear on the wire.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Parses a configured id: a UUID string, or Xray's mapping for other short strings.
    pub fn parse(text: &str) -> Result<UserId, UserIdError> {
        let len = text.len();
        match len {
            0 => Err(UserIdError::Empty),
            1..=MAX_MAPPED_ID_LEN => Ok(UserId(map_string(text.as_bytes()))),
            32..=36 => parse_uuid(text.as_bytes())
                .map(UserId)
                .ok_or(UserIdError::BadUuid),
            _ => Err(UserIdError::BadLength(len)),
        }
    }

    /// Constant-time comparison with raw id bytes: no early exit on the first difference.
    pub fn ct_eq(&self, other: &[u8; 16]) -> bool {
        ct_eq_mask(&self.0, other) == 1
    }
}

/// 1 when equal, 0 otherwise, computed without data-dependent branches.
fn ct_eq_mask(a: &[u8; 16], b: &[u8; 16]) -> u8 {
    let mut diff = 0u8;
    for i in 0..16 {
        diff |= a[i] ^ b[i];
    }
    let diff = std::hint::black_box(diff);
    // diff == 0 <=> (diff - 1) underflows into bit 8.
    (((u16::from(diff)).wrapping_sub(1) >> 8) & 1) as u8
}

/// Looks an id up among the configured users. Every user is compared, in constant time,
/// whether or not an earlier one matched (no early exit); the first match is returned.
pub fn find_user<'a>(users: &'a [UserId], id: &[u8; 16]) -> Option<&'a UserId> {
    let mut found = 0usize;
    let mut any = 0usize;
    for (index, user) in users.iter().enumerate() {
        let eq = usize::from(ct_eq_mask(&user.0, id));
        // Take this index only if it matches and nothing matched before.
        let take = (eq & !any).wrapping_neg();
        found = (index & take) | (found & !take);
        any |= eq;
    }
    if std::hint::black_box(any) == 1 {
        users.get(found)
    } else {
        None
    }
}

fn map_string(text: &[u8]) -> [u8; 16] {
    let mut hasher = Sha1::new();
    hasher.update([0u8; 16]);
    hasher.update(text);
    let digest = hasher.finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id[6] = (id[6] & 0x0f) | 0x50;
    id[8] = (id[8] & 0x3f) | 0x80;
    id
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// 8-4-4-4-12 hex digit groups; a single dash is allowed before each group but the first.
fn parse_uuid(text: &[u8]) -> Option<[u8; 16]> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut out = [0u8; 16];
    let mut pos = 0;
    let mut byte = 0;
    for (index, group) in GROUPS.iter().enumerate() {
        if index > 0 && text.get(pos) == Some(&b'-') {
            pos += 1;
        }
        let digits = text.get(pos..pos + group)?;
        for pair in digits.chunks_exact(2) {
            out[byte] = (hex_value(pair[0])? << 4) | hex_value(pair[1])?;
            byte += 1;
        }
        pos += group;
    }
    (pos == text.len()).then_some(out)
}

impl FromStr for UserId {
    type Err = UserIdError;

    fn from_str(text: &str) -> Result<UserId, UserIdError> {
        UserId::parse(text)
    }
}

impl PartialEq for UserId {
    fn eq(&self, other: &UserId) -> bool {
        self.ct_eq(&other.0)
    }
}

impl Eq for UserId {}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UserId({self})")
    }
}

impl From<[u8; 16]> for UserId {
    fn from(bytes: [u8; 16]) -> UserId {
        UserId(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
    const UUID_BYTES: [u8; 16] = [
        0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08,
        0x11,
    ];

    #[test]
    fn parses_dashed_and_plain_uuids() {
        assert_eq!(UserId::parse(UUID).unwrap().as_bytes(), &UUID_BYTES);
        let plain = UUID.replace('-', "");
        assert_eq!(UserId::parse(&plain).unwrap().as_bytes(), &UUID_BYTES);
        let upper = UUID.to_uppercase();
        assert_eq!(UserId::parse(&upper).unwrap().as_bytes(), &UUID_BYTES);
        // Some dashes only.
        assert_eq!(
            UserId::parse("b831381d63244d53-ad4f-8cda48b30811")
                .unwrap()
                .as_bytes(),
            &UUID_BYTES
        );
        assert_eq!(UserId::parse(UUID).unwrap().to_string(), UUID);
    }

    #[test]
    fn maps_short_strings_like_xray() {
        // vless.md §2.1, verified with `xray uuid -i example`.
        assert_eq!(
            UserId::parse("example").unwrap().to_string(),
            "feb54431-301b-52bb-a6dd-e1e93e81bb9e"
        );
        let id = UserId::parse("x").unwrap();
        assert_eq!(id.as_bytes()[6] >> 4, 5);
        assert_eq!(id.as_bytes()[8] >> 6, 0b10);
        assert!(UserId::parse(&"a".repeat(30)).is_ok());
    }

    #[test]
    fn rejects_bad_ids() {
        assert_eq!(UserId::parse(""), Err(UserIdError::Empty));
        assert_eq!(
            UserId::parse(&"a".repeat(31)),
            Err(UserIdError::BadLength(31))
        );
        assert_eq!(
            UserId::parse(&"a".repeat(37)),
            Err(UserIdError::BadLength(37))
        );
        // 32..=36 characters must be a UUID: they are not mapped.
        assert_eq!(UserId::parse(&"z".repeat(32)), Err(UserIdError::BadUuid));
        assert_eq!(
            UserId::parse("b831381d-6324-4d53-ad4f-8cda48b3081"),
            Err(UserIdError::BadUuid)
        );
        // Dash in the wrong place, double dash, trailing junk.
        assert_eq!(
            UserId::parse("b831381-d6324-4d53-ad4f-8cda48b30811"),
            Err(UserIdError::BadUuid)
        );
        assert_eq!(
            UserId::parse("b831381d--63244d53ad4f8cda48b30811"),
            Err(UserIdError::BadUuid)
        );
        assert_eq!(
            UserId::parse("b831381d63244d53ad4f8cda48b30811-"),
            Err(UserIdError::BadUuid)
        );
        assert_eq!(
            UserId::parse("+831381d63244d53ad4f8cda48b30811"),
            Err(UserIdError::BadUuid)
        );
    }

    #[test]
    fn constant_time_lookup_finds_first_match() {
        let a = UserId::from_bytes([1; 16]);
        let b = UserId::from_bytes(UUID_BYTES);
        let c = UserId::from_bytes([3; 16]);
        let users = [a, b, c, b];
        let found = find_user(&users, &UUID_BYTES).unwrap();
        assert!(std::ptr::eq(found, &users[1]));
        assert!(std::ptr::eq(
            find_user(&users, &[3; 16]).unwrap(),
            &users[2]
        ));
        assert!(std::ptr::eq(
            find_user(&users, &[1; 16]).unwrap(),
            &users[0]
        ));
        assert!(find_user(&users, &[9; 16]).is_none());
        assert!(find_user(&[], &[9; 16]).is_none());
        let mut near = UUID_BYTES;
        near[15] ^= 1;
        assert!(find_user(&users, &near).is_none());
        assert!(a == UserId::from_bytes([1; 16]));
        assert!(a != b);
    }
}
