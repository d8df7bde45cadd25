//! Method names and keys (shadowsocks.md §1, §2.1): which AEAD, how long keys and salts are,
//! and how a configured password becomes key bytes.

use std::fmt;

use skiff_crypto::AeadKind;

/// The methods Skiff speaks: AEAD-2017 and 2022.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
    XChaCha20Poly1305,
    Blake3Aes128Gcm,
    Blake3Aes256Gcm,
    Blake3ChaCha20Poly1305,
}

/// AEAD-2017 chunks carry at most this much payload (the top two length bits are zero).
pub const MAX_PAYLOAD_2017: usize = 0x3FFF;
/// 2022 chunks carry at most this much.
pub const MAX_PAYLOAD_2022: usize = 0xFFFF;

/// Stream ciphers of the original protocol: refused by name, with the reason.
const LEGACY: &[&str] = &[
    "table",
    "rc4",
    "rc4-md5",
    "rc4-md5-6",
    "salsa20",
    "chacha20",
    "chacha20-ietf",
    "xchacha20",
    "bf-cfb",
    "cast5-cfb",
    "des-cfb",
    "idea-cfb",
    "rc2-cfb",
    "seed-cfb",
];

/// Why a method name was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MethodError {
    /// A stream cipher of the original protocol (no integrity, replayable).
    Insecure(String),
    /// `none` / `plain`: no encryption, which Xray no longer offers either.
    Plain(String),
    /// Any other name.
    Unknown(String),
}

impl fmt::Display for MethodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MethodError::Insecure(name) => write!(
                f,
                "method `{name}` is a stream cipher without integrity protection: insecure and unsupported (use aes-128-gcm, chacha20-ietf-poly1305 or a 2022-blake3-* method)"
            ),
            MethodError::Plain(name) => write!(
                f,
                "method `{name}` (no encryption) is unsupported, as in current Xray"
            ),
            MethodError::Unknown(name) => write!(
                f,
                "unknown method `{name}` (expected one of {})",
                Method::ALL
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl std::error::Error for MethodError {}

impl Method {
    pub const ALL: [Method; 7] = [
        Method::Aes128Gcm,
        Method::Aes256Gcm,
        Method::ChaCha20Poly1305,
        Method::XChaCha20Poly1305,
        Method::Blake3Aes128Gcm,
        Method::Blake3Aes256Gcm,
        Method::Blake3ChaCha20Poly1305,
    ];

    /// Parses a method name case-insensitively, with Xray's aliases.
    pub fn from_name(name: &str) -> Result<Method, MethodError> {
        let lower = name.trim().to_ascii_lowercase();
        Ok(match lower.as_str() {
            "aes-128-gcm" | "aead_aes_128_gcm" => Method::Aes128Gcm,
            "aes-256-gcm" | "aead_aes_256_gcm" => Method::Aes256Gcm,
            "chacha20-ietf-poly1305" | "chacha20-poly1305" | "aead_chacha20_poly1305" => {
                Method::ChaCha20Poly1305
            }
            "xchacha20-ietf-poly1305" | "xchacha20-poly1305" | "aead_xchacha20_poly1305" => {
                Method::XChaCha20Poly1305
            }
            "2022-blake3-aes-128-gcm" => Method::Blake3Aes128Gcm,
            "2022-blake3-aes-256-gcm" => Method::Blake3Aes256Gcm,
            "2022-blake3-chacha20-poly1305" => Method::Blake3ChaCha20Poly1305,
            "none" | "plain" | "dummy" => return Err(MethodError::Plain(name.to_owned())),
            n if LEGACY.contains(&n)
                || ["-cfb", "-cfb1", "-cfb8", "-cfb128", "-ctr", "-ofb", "-cbc"]
                    .iter()
                    .any(|suffix| n.ends_with(suffix)) =>
            {
                return Err(MethodError::Insecure(name.to_owned()));
            }
            _ => return Err(MethodError::Unknown(name.to_owned())),
        })
    }

    /// The canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Aes128Gcm => "aes-128-gcm",
            Method::Aes256Gcm => "aes-256-gcm",
            Method::ChaCha20Poly1305 => "chacha20-ietf-poly1305",
            Method::XChaCha20Poly1305 => "xchacha20-ietf-poly1305",
            Method::Blake3Aes128Gcm => "2022-blake3-aes-128-gcm",
            Method::Blake3Aes256Gcm => "2022-blake3-aes-256-gcm",
            Method::Blake3ChaCha20Poly1305 => "2022-blake3-chacha20-poly1305",
        }
    }

    /// The AEAD of TCP chunks (and of AEAD-2017 / 2022-AES UDP bodies).
    pub fn aead(self) -> AeadKind {
        match self {
            Method::Aes128Gcm | Method::Blake3Aes128Gcm => AeadKind::Aes128Gcm,
            Method::Aes256Gcm | Method::Blake3Aes256Gcm => AeadKind::Aes256Gcm,
            Method::ChaCha20Poly1305 | Method::Blake3ChaCha20Poly1305 => AeadKind::ChaCha20Poly1305,
            Method::XChaCha20Poly1305 => AeadKind::XChaCha20Poly1305,
        }
    }

    pub fn key_len(self) -> usize {
        self.aead().key_len()
    }

    /// Salts are as long as keys, for every method.
    pub fn salt_len(self) -> usize {
        self.key_len()
    }

    pub fn is_2022(self) -> bool {
        matches!(
            self,
            Method::Blake3Aes128Gcm | Method::Blake3Aes256Gcm | Method::Blake3ChaCha20Poly1305
        )
    }

    /// 2022 AES methods: identity headers (SIP023) and the AES-ECB UDP header.
    pub fn is_2022_aes(self) -> bool {
        matches!(self, Method::Blake3Aes128Gcm | Method::Blake3Aes256Gcm)
    }

    /// The most payload one chunk carries.
    pub fn max_payload(self) -> usize {
        if self.is_2022() {
            MAX_PAYLOAD_2022
        } else {
            MAX_PAYLOAD_2017
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a password could not become a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    Empty,
    /// 2022 keys are base64 of exactly the key length.
    NotBase64,
    WrongLength {
        got: usize,
        want: usize,
    },
    /// Identity keys (`iPSK:uPSK`) are for 2022 AES methods only.
    IdentityNotSupported,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Empty => f.write_str("the password is empty"),
            KeyError::NotBase64 => f.write_str(
                "2022 methods take a base64 key (e.g. from `openssl rand -base64 16`), not a password",
            ),
            KeyError::WrongLength { got, want } => write!(
                f,
                "the base64 key decodes to {got} bytes; this method needs exactly {want}"
            ),
            KeyError::IdentityNotSupported => f.write_str(
                "`iPSK:uPSK` key lists (identity headers) work with 2022-blake3-aes-* methods only",
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// The key of a password: EVP_BytesToKey for AEAD-2017, base64 of exactly the key length for
/// 2022 (shadowsocks.md §1.1, §2.1).
pub fn key_from_password(method: Method, password: &str) -> Result<Vec<u8>, KeyError> {
    if password.is_empty() {
        return Err(KeyError::Empty);
    }
    if !method.is_2022() {
        return Ok(skiff_crypto::kdf::evp_bytes_to_key(
            password.as_bytes(),
            method.key_len(),
        ));
    }
    let key = base64_decode(password.trim()).ok_or(KeyError::NotBase64)?;
    if key.len() != method.key_len() {
        return Err(KeyError::WrongLength {
            got: key.len(),
            want: method.key_len(),
        });
    }
    Ok(key)
}

/// A 2022 client's key list `iPSK0:…:uPSK` (SIP023): the identity keys, then the user key.
/// Any other method takes the whole password as one.
pub fn client_keys(method: Method, password: &str) -> Result<(Vec<Vec<u8>>, Vec<u8>), KeyError> {
    if !method.is_2022() || !password.contains(':') {
        return Ok((Vec::new(), key_from_password(method, password)?));
    }
    if !method.is_2022_aes() {
        return Err(KeyError::IdentityNotSupported);
    }
    let mut keys = password
        .split(':')
        .map(|part| key_from_password(method, part))
        .collect::<Result<Vec<_>, _>>()?;
    let user = keys.pop().ok_or(KeyError::Empty)?;
    Ok((keys, user))
}

/// Standard base64, padding optional; None for anything else.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let body = text.trim_end_matches('=');
    if text.len() - body.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for c in body.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // 6 leftover bits cannot come from whole bytes.
    (bits < 6).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_aliases_and_refusals() {
        assert_eq!(Method::from_name("AES-128-GCM"), Ok(Method::Aes128Gcm));
        assert_eq!(
            Method::from_name("chacha20-poly1305"),
            Ok(Method::ChaCha20Poly1305)
        );
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.name()), Ok(m));
        }
        for legacy in [
            "aes-256-cfb",
            "rc4-md5",
            "chacha20",
            "aes-128-ctr",
            "bf-cfb",
        ] {
            let e = Method::from_name(legacy).unwrap_err();
            assert!(matches!(e, MethodError::Insecure(_)), "{legacy}");
            assert!(e.to_string().contains("insecure and unsupported"));
        }
        assert!(matches!(
            Method::from_name("none"),
            Err(MethodError::Plain(_))
        ));
        assert!(matches!(
            Method::from_name("aes-192-gcm"),
            Err(MethodError::Unknown(_))
        ));
    }

    #[test]
    fn keys_from_passwords() {
        assert_eq!(
            key_from_password(Method::Aes128Gcm, "test").unwrap(),
            skiff_crypto::kdf::evp_bytes_to_key(b"test", 16)
        );
        let psk: Vec<u8> = (0..16).collect();
        assert_eq!(
            key_from_password(Method::Blake3Aes128Gcm, "AAECAwQFBgcICQoLDA0ODw==").unwrap(),
            psk
        );
        assert_eq!(
            key_from_password(Method::Blake3Aes256Gcm, "AAECAwQFBgcICQoLDA0ODw=="),
            Err(KeyError::WrongLength { got: 16, want: 32 })
        );
        assert_eq!(
            key_from_password(Method::Blake3Aes128Gcm, "not base64!"),
            Err(KeyError::NotBase64)
        );
        assert_eq!(
            key_from_password(Method::Aes128Gcm, ""),
            Err(KeyError::Empty)
        );
        let (ids, user) = client_keys(
            Method::Blake3Aes128Gcm,
            "AAECAwQFBgcICQoLDA0ODw==:EBESExQVFhcYGRobHB0eHw==",
        )
        .unwrap();
        assert_eq!(ids, vec![psk]);
        assert_eq!(user, (16..32).collect::<Vec<u8>>());
        assert_eq!(
            client_keys(
                Method::Blake3ChaCha20Poly1305,
                "AAECAwQFBgcICQoLDA0ODwABAgMEBQYHCAkKCwwNDg8=:AAECAwQFBgcICQoLDA0ODwABAgMEBQYHCAkKCwwNDg8="
            ),
            Err(KeyError::IdentityNotSupported)
        );
    }

    #[test]
    fn base64_edge_cases() {
        assert_eq!(base64_decode(""), Some(vec![]));
        assert_eq!(base64_decode("Zg=="), Some(b"f".to_vec()));
        assert_eq!(base64_decode("Zg"), Some(b"f".to_vec()));
        assert_eq!(base64_decode("Zm9v"), Some(b"foo".to_vec()));
        assert_eq!(base64_decode("Z"), None);
        assert_eq!(base64_decode("Zg==="), None);
        assert_eq!(base64_decode("Z m"), None);
    }
}
