//! Key derivation from the `-k` password, as udp2raw does it.
//!
//! - `normal`: MD5(password ‖ "key1"), 16 bytes. The only key of every mode except
//!   `hmac_sha1`, the same in both directions.
//! - A 32-byte master: PBKDF2-HMAC-SHA256(password, salt = MD5("udp2raw_salt1") (16 bytes),
//!   10 000 iterations). From it, HKDF-SHA256-Expand (no extract step: the master is the PRK)
//!   with the info strings `"cipher_key server-->client"`, `"cipher_key client-->server"`,
//!   `"hmac_key server-->client"`, `"hmac_key client-->server"` (64 bytes each) and `"gro"`
//!   (256 bytes). The server encrypts with the server→client keys and decrypts with the
//!   client→server ones; the client the other way round. udp2raw derives these always, even
//!   when only the `hmac_sha1` mode uses them for the payload: the AES-CFB first block and the
//!   `--fix-gro` length prefix use the direction keys in every mode.

use hmac::{Hmac, KeyInit, Mac};
use md5::Digest as _;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Which end of the tunnel: it picks which direction key encrypts and which decrypts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// `udp2raw -c`.
    Client,
    /// `udp2raw -s`.
    Server,
}

impl Role {
    /// The other end.
    pub fn peer(self) -> Role {
        match self {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        }
    }
}

/// The password udp2raw uses when `-k` is not given.
pub const DEFAULT_PASSWORD: &[u8] = b"secret key";

/// The password udp2raw actually uses for `-k ARG`: it reads the argument with `sscanf("%s")`,
/// so only the first whitespace-delimited word counts (`-k "my pass"` is the password `my`),
/// and an argument with no word leaves the default, "secret key".
pub fn cli_password(arg: &[u8]) -> &[u8] {
    // C's isspace: space, \t, \n, \v, \f, \r.
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = arg.iter().position(|b| !is_space(b));
    match start {
        None => DEFAULT_PASSWORD,
        Some(start) => {
            let rest = &arg[start..];
            let end = rest.iter().position(is_space).unwrap_or(rest.len());
            &rest[..end]
        }
    }
}

/// PBKDF2 iteration count udp2raw uses.
pub const PBKDF2_ITERATIONS: u32 = 10_000;

/// Every key udp2raw derives, seen from one end.
#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    /// MD5(password ‖ "key1").
    pub normal: [u8; 16],
    /// Cipher key for what this end sends (udp2raw uses its first 16 bytes).
    pub cipher_encrypt: [u8; 64],
    /// Cipher key for what this end receives.
    pub cipher_decrypt: [u8; 64],
    /// HMAC key for what this end sends (udp2raw uses its first 20 bytes).
    pub hmac_encrypt: [u8; 64],
    /// HMAC key for what this end receives.
    pub hmac_decrypt: [u8; 64],
    /// XOR mask of the `--fix-gro` length prefix under `--cipher-mode xor` (2 bytes used).
    pub gro_xor: [u8; 256],
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys { .. }")
    }
}

impl Keys {
    /// Derives the keys of `role` from `password` (the bytes of `-k`, default "secret key").
    /// Costs 10 000 HMAC-SHA256 rounds: derive once per configuration.
    pub fn derive(password: &[u8], role: Role) -> Keys {
        let mut normal = [0u8; 16];
        let mut h = md5::Md5::new();
        h.update(password);
        h.update(b"key1");
        normal.copy_from_slice(&h.finalize());

        let salt: [u8; 16] = md5::Md5::digest(b"udp2raw_salt1").into();
        let master = pbkdf2_sha256_32(password, &salt, PBKDF2_ITERATIONS);

        let (to_client, to_server) = (b"server-->client", b"client-->server");
        let (enc_dir, dec_dir): (&[u8], &[u8]) = match role {
            Role::Server => (to_client, to_server),
            Role::Client => (to_server, to_client),
        };
        let mut keys = Keys {
            normal,
            cipher_encrypt: [0; 64],
            cipher_decrypt: [0; 64],
            hmac_encrypt: [0; 64],
            hmac_decrypt: [0; 64],
            gro_xor: [0; 256],
        };
        hkdf_expand(
            &master,
            &[b"cipher_key ", enc_dir],
            &mut keys.cipher_encrypt,
        );
        hkdf_expand(
            &master,
            &[b"cipher_key ", dec_dir],
            &mut keys.cipher_decrypt,
        );
        hkdf_expand(&master, &[b"hmac_key ", enc_dir], &mut keys.hmac_encrypt);
        hkdf_expand(&master, &[b"hmac_key ", dec_dir], &mut keys.hmac_decrypt);
        hkdf_expand(&master, &[b"gro"], &mut keys.gro_xor);
        keys
    }
}

/// PBKDF2-HMAC-SHA256 (RFC 8018) of one output block (32 bytes), all udp2raw asks for.
pub fn pbkdf2_sha256_32(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let keyed = HmacSha256::new_from_slice(password).expect("HMAC takes any key length");
    let mut mac = keyed.clone();
    mac.update(salt);
    mac.update(&1u32.to_be_bytes());
    let mut u: [u8; 32] = mac.finalize().into_bytes().into();
    let mut out = u;
    for _ in 1..iterations {
        let mut mac = keyed.clone();
        mac.update(&u);
        u = mac.finalize().into_bytes().into();
        for (o, b) in out.iter_mut().zip(u) {
            *o ^= b;
        }
    }
    out
}

/// HKDF-SHA256-Expand (RFC 5869 §2.3) with `prk` as the pseudo-random key and the
/// concatenation of `info` parts; fills `out` (at most 255 × 32 bytes, as the RFC allows).
pub fn hkdf_expand(prk: &[u8], info: &[&[u8]], out: &mut [u8]) {
    let keyed = HmacSha256::new_from_slice(prk).expect("HMAC takes any key length");
    let mut t: [u8; 32] = [0; 32];
    for (i, chunk) in out.chunks_mut(32).enumerate().take(255) {
        let mut mac = keyed.clone();
        if i > 0 {
            mac.update(&t);
        }
        for part in info {
            mac.update(part);
        }
        mac.update(&[(i + 1) as u8]);
        t = mac.finalize().into_bytes().into();
        chunk.copy_from_slice(&t[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5869 test case 1's expand step (PRK and info given there).
    #[test]
    fn hkdf_expand_rfc5869_case_1() {
        let prk = hex("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5");
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let mut okm = [0u8; 42];
        hkdf_expand(&prk, &[&info], &mut okm);
        assert_eq!(
            okm.to_vec(),
            hex(
                "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
            )
        );
    }

    /// RFC 7914 §11's PBKDF2-HMAC-SHA256 vector ("passwd", "salt", 1 iteration), first block.
    #[test]
    fn pbkdf2_rfc7914_vector() {
        let out = pbkdf2_sha256_32(b"passwd", b"salt", 1);
        assert_eq!(
            out.to_vec(),
            hex("55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc")
        );
    }

    #[test]
    fn cli_password_is_the_first_word() {
        assert_eq!(cli_password(b"secret key"), b"secret");
        assert_eq!(cli_password(b"  pw\tx"), b"pw");
        assert_eq!(cli_password(b" \n"), DEFAULT_PASSWORD);
        assert_eq!(cli_password(b"abc"), b"abc");
    }

    #[test]
    fn directions_mirror() {
        let s = Keys::derive(b"secret key", Role::Server);
        let c = Keys::derive(b"secret key", Role::Client);
        assert_eq!(s.normal, c.normal);
        assert_eq!(s.cipher_encrypt, c.cipher_decrypt);
        assert_eq!(s.cipher_decrypt, c.cipher_encrypt);
        assert_eq!(s.hmac_encrypt, c.hmac_decrypt);
        assert_eq!(s.hmac_decrypt, c.hmac_encrypt);
        assert_ne!(s.cipher_encrypt, s.cipher_decrypt);
        assert_eq!(s.gro_xor, c.gro_xor);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
