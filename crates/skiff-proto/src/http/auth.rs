//! Basic proxy authentication (RFC 7617 over RFC 9110 §11.7.2): decoding the
//! `Proxy-Authorization` field and checking it against the configured accounts.

/// Decodes the credentials of a `Basic` Proxy-Authorization value into `(user, pass)`.
/// Anything else (other schemes, bad base64, no colon, non-UTF-8) is `None`, which the
/// server answers with 407 like missing credentials.
pub fn parse_basic(value: &[u8]) -> Option<(String, String)> {
    let value = super::headers::trim_ows(value);
    let (scheme, rest) = split_once(value, b' ')?;
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let decoded = base64_decode(super::headers::trim_ows(rest))?;
    // RFC 7617 §2: the user-id cannot contain a colon, so the first one separates.
    let (user, pass) = split_once(&decoded, b':')?;
    Some((
        String::from_utf8(user.to_vec()).ok()?,
        String::from_utf8(pass.to_vec()).ok()?,
    ))
}

fn split_once(bytes: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|&b| b == sep)?;
    Some((&bytes[..at], &bytes[at + 1..]))
}

/// Standard-alphabet base64 (RFC 4648 §4). Padding is optional, since some clients omit it;
/// whitespace and the URL-safe alphabet are rejected. Written here to avoid a dependency
/// for a few bytes of credentials.
pub fn base64_decode(input: &[u8]) -> Option<Vec<u8>> {
    let unpadded = match input {
        [rest @ .., b'=', b'='] => rest,
        [rest @ .., b'='] => rest,
        _ => input,
    };
    // With padding, the total must be a whole number of quads (`& 3`: the remainder by 4,
    // spelled so that it builds on the workspace's minimum Rust, 1.85).
    if unpadded.len() != input.len() && input.len() & 3 != 0 {
        return None;
    }
    // A single leftover sextet cannot encode a byte.
    if unpadded.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(unpadded.len() / 4 * 3 + 2);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for &c in unpadded {
        acc = (acc << 6) | u32::from(sextet(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Leftover bits must be zero, or two encodings would decode to the same bytes.
    if acc != 0 {
        return None;
    }
    Some(out)
}

fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Compares without an early exit, so the time taken does not reveal how long a prefix of
/// a secret the client guessed right. It depends only on the length of `given` (which the
/// client already knows), not on where the first difference is.
pub fn ct_eq(given: &[u8], secret: &[u8]) -> bool {
    let mut diff = given.len() ^ secret.len();
    for (i, &g) in given.iter().enumerate() {
        let s = secret.get(i).copied().unwrap_or(0);
        diff |= usize::from(g ^ s);
    }
    std::hint::black_box(diff) == 0
}

/// Checks `given` against every account (without stopping at the first match, for the same
/// reason as [`ct_eq`]) and returns the matching user name.
///
/// `Ok(None)` means no accounts are configured: the proxy is open. `Err(())` means the
/// client must be challenged with 407.
#[allow(clippy::result_unit_err)]
pub fn authenticate(
    accounts: &[(String, String)],
    given: Option<&(String, String)>,
) -> Result<Option<String>, ()> {
    if accounts.is_empty() {
        return Ok(None);
    }
    let (user, pass) = given.ok_or(())?;
    let mut found = None;
    for (u, p) in accounts {
        let user_ok = ct_eq(user.as_bytes(), u.as_bytes());
        let pass_ok = ct_eq(pass.as_bytes(), p.as_bytes());
        if user_ok & pass_ok && found.is_none() {
            found = Some(u.clone());
        }
    }
    found.map(Some).ok_or(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_vectors() {
        // RFC 4648 §10 test vectors, padded and unpadded.
        let cases: &[(&str, &str)] = &[
            ("", ""),
            ("Zg==", "f"),
            ("Zm8=", "fo"),
            ("Zm9v", "foo"),
            ("Zm9vYg==", "foob"),
            ("Zm9vYmE=", "fooba"),
            ("Zm9vYmFy", "foobar"),
            ("Zg", "f"),
            ("Zm8", "fo"),
        ];
        for (enc, dec) in cases {
            assert_eq!(
                base64_decode(enc.as_bytes()).as_deref(),
                Some(dec.as_bytes()),
                "{enc}"
            );
        }
        for bad in [
            "Z", "Zg=", "Zh==", "Zm9v!", "Zm 9v", "====", "Zg==Zg==", "-_",
        ] {
            assert_eq!(base64_decode(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn basic_credentials() {
        // "user:pa:ss"
        assert_eq!(
            parse_basic(b"Basic dXNlcjpwYTpzcw=="),
            Some(("user".into(), "pa:ss".into()))
        );
        assert_eq!(
            parse_basic(b"basic   Og=="),
            Some((String::new(), String::new()))
        );
        assert_eq!(parse_basic(b"Bearer dXNlcjpwYXNz"), None);
        assert_eq!(parse_basic(b"Basic dXNlcg=="), None); // "user", no colon
        assert_eq!(parse_basic(b"Basic"), None);
        assert_eq!(parse_basic(b"Basic /w=="), None); // 0xff is not UTF-8
    }

    #[test]
    fn constant_time_and_accounts() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"ab", b"abc"));
        assert!(!ct_eq(b"abc\0", b"abc"));
        assert!(ct_eq(b"", b""));

        let accounts = vec![
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ];
        assert_eq!(authenticate(&[], None), Ok(None));
        assert_eq!(authenticate(&accounts, None), Err(()));
        assert_eq!(
            authenticate(&accounts, Some(&("b".into(), "2".into()))),
            Ok(Some("b".into()))
        );
        assert_eq!(
            authenticate(&accounts, Some(&("a".into(), "2".into()))),
            Err(())
        );
    }
}
