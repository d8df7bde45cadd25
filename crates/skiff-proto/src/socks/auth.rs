//! Checking RFC 1929 credentials without leaking, through timing, how much of a guess was right.

/// Compares two byte strings in time that depends on their length only, not on where they
/// first differ. Lengths are not secret here (a guess's length is the attacker's own choice).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keep the optimiser from turning the fold into an early-exit comparison.
    std::hint::black_box(diff) == 0
}

/// Finds the account matching `username` and `password`. Every account is checked, whatever
/// matched earlier, so the time taken does not say which account (if any) was close.
pub fn authenticate<'a>(
    accounts: &'a [(String, String)],
    username: &[u8],
    password: &[u8],
) -> Option<&'a str> {
    let mut found = None;
    for (user, pass) in accounts {
        // `&`, not `&&`: always compare both.
        let ok = constant_time_eq(user.as_bytes(), username)
            & constant_time_eq(pass.as_bytes(), password);
        if ok && found.is_none() {
            found = Some(user.as_str());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_bytes() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secrets"));
        assert!(!constant_time_eq(b"a", b""));
    }

    #[test]
    fn finds_the_matching_account() {
        let accounts = vec![
            ("alice".to_owned(), "pw1".to_owned()),
            ("bob".to_owned(), "pw2".to_owned()),
        ];
        assert_eq!(authenticate(&accounts, b"bob", b"pw2"), Some("bob"));
        assert_eq!(authenticate(&accounts, b"alice", b"pw1"), Some("alice"));
        assert_eq!(authenticate(&accounts, b"alice", b"pw2"), None);
        assert_eq!(authenticate(&accounts, b"carol", b"pw1"), None);
        assert_eq!(authenticate(&[], b"", b""), None);
    }
}
