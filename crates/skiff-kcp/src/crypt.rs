//! kcp-go's packet protection: a 16-byte random nonce and a CRC-32 (IEEE, LE) of everything after
//! it, then the *whole* datagram run through the block cipher (spec/kcp.md §2, §3).
//!
//! Block ciphers run in full-block CFB from a fixed IV restarted for every datagram; the random
//! nonce as the first plaintext block is what makes equal payloads encrypt differently.

use std::sync::{Arc, Mutex};

#[cfg(target_arch = "x86_64")]
use skiff_crypto::aes_cfb::{AesCfb, LANES};
use skiff_crypto::kcp::{CfbCipher, CfbKind, salsa20_xor};
use skiff_crypto::kdf::pbkdf2_hmac_sha1 as pbkdf2_sha1;

use crate::{Crypt, KcpError};

pub(crate) const NONCE_SIZE: usize = 16;
pub(crate) const CRC_SIZE: usize = 4;
/// Bytes in front of the FEC header / KCP segments when a cipher is configured.
pub(crate) const CRYPT_HEADER_SIZE: usize = NONCE_SIZE + CRC_SIZE;

/// The fixed CFB IV of kcp-go (64-bit block ciphers use its first 8 bytes).
const CFB_IV: [u8; 16] = [
    0xa7, 0x73, 0x4f, 0x9c, 0x12, 0xac, 0x1b, 0x01, 0xa4, 0x15, 0xf2, 0xc1, 0xfc, 0x78, 0xe6, 0x6b,
];
const KEY_SALT: &[u8] = b"kcp-go";
const KEY_ITERATIONS: u32 = 4096;
const XOR_SALT: &[u8] = b"sH3CIVoF#rWLtJo6";
const XOR_ITERATIONS: u32 = 32;
/// kcp-go's XOR table is as long as the largest MTU it allows.
const XOR_TABLE_LEN: usize = 1500;

/// kcptun's key schedule: PBKDF2-HMAC-SHA1(key, "kcp-go", 4096) → 32 bytes.
///
/// 4096 SHA-1 iterations cost about a millisecond, and a server calls this for every unknown
/// peer through [`crate::peek_conv`], so the last few results are kept.
pub fn derive_key(key: &str) -> [u8; 32] {
    static CACHE: Mutex<Vec<(String, [u8; 32])>> = Mutex::new(Vec::new());
    const CACHE_LEN: usize = 8;
    if let Ok(cache) = CACHE.lock()
        && let Some((_, pass)) = cache.iter().find(|(k, _)| k == key)
    {
        return *pass;
    }
    let mut pass = [0u8; 32];
    pbkdf2_sha1(key.as_bytes(), KEY_SALT, KEY_ITERATIONS, &mut pass);
    if let Ok(mut cache) = CACHE.lock() {
        if cache.len() >= CACHE_LEN {
            cache.remove(0);
        }
        cache.push((key.to_string(), pass));
    }
    pass
}

/// One configured packet cipher.
pub(crate) enum Cipher {
    None,
    /// Boxed: key schedules run from 100 bytes (TEA) to 4 KiB (Blowfish).
    Block(Box<BlockKeys>),
    Salsa20 {
        key: [u8; 32],
    },
    Xor {
        table: Box<[u8; XOR_TABLE_LEN]>,
    },
}

/// A block cipher in kcp-go's CFB; for AES also the batched AES-instruction encryption where
/// the CPU has it, for [`Cipher::encrypt_many`] (see `skiff_crypto::aes_cfb` for why and by
/// how much).
pub(crate) struct BlockKeys {
    cfb: CfbCipher,
    #[cfg(target_arch = "x86_64")]
    fast: Option<AesCfb>,
}

/// Ciphers recently built, shared: building one costs PBKDF2 runs (4096 iterations for the key,
/// 75 blocks × 32 for the XOR table) that a server would otherwise pay for every datagram of
/// an unknown peer handed to [`crate::peek_conv`].
static CIPHERS: Mutex<Vec<(Crypt, String, Arc<Cipher>)>> = Mutex::new(Vec::new());
const CIPHER_CACHE_LEN: usize = 8;

impl Cipher {
    pub(crate) fn shared(crypt: Crypt, key: &str) -> Result<Arc<Cipher>, KcpError> {
        if let Ok(cache) = CIPHERS.lock()
            && let Some((_, _, c)) = cache.iter().find(|(cr, k, _)| *cr == crypt && k == key)
        {
            return Ok(Arc::clone(c));
        }
        let cipher = Arc::new(Cipher::new(crypt, key)?);
        if let Ok(mut cache) = CIPHERS.lock() {
            if cache.len() >= CIPHER_CACHE_LEN {
                cache.remove(0);
            }
            cache.push((crypt, key.to_string(), Arc::clone(&cipher)));
        }
        Ok(cipher)
    }

    pub(crate) fn new(crypt: Crypt, key: &str) -> Result<Cipher, KcpError> {
        let pass = derive_key(key);
        // kcptun's choice of cipher and of how many derived bytes it keys with.
        let (kind, key_bytes) = match crypt {
            Crypt::None => return Ok(Cipher::None),
            Crypt::Salsa20 => return Ok(Cipher::Salsa20 { key: pass }),
            Crypt::Xor => {
                let mut table = Box::new([0u8; XOR_TABLE_LEN]);
                pbkdf2_sha1(&pass, XOR_SALT, XOR_ITERATIONS, &mut table[..]);
                return Ok(Cipher::Xor { table });
            }
            Crypt::Aes => (CfbKind::Aes, &pass[..]),
            Crypt::Aes128 => (CfbKind::Aes, &pass[..16]),
            Crypt::Aes192 => (CfbKind::Aes, &pass[..24]),
            Crypt::Blowfish => (CfbKind::Blowfish, &pass[..]),
            Crypt::Twofish => (CfbKind::Twofish, &pass[..]),
            Crypt::Sm4 => (CfbKind::Sm4, &pass[..16]),
            Crypt::Cast5 => (CfbKind::Cast5, &pass[..16]),
            Crypt::TripleDes => (CfbKind::TripleDes, &pass[..24]),
            Crypt::Tea => (CfbKind::Tea16, &pass[..16]),
            Crypt::Xtea => (CfbKind::Xtea, &pass[..16]),
        };
        let cfb = CfbCipher::new(kind, key_bytes)
            .map_err(|_| KcpError::InvalidConfig("cipher key rejected"))?;
        Ok(Cipher::Block(Box::new(BlockKeys {
            cfb,
            #[cfg(target_arch = "x86_64")]
            fast: (kind == CfbKind::Aes)
                .then(|| AesCfb::new(key_bytes, CFB_IV))
                .flatten(),
        })))
    }

    /// Encrypts a whole datagram in place. false if the backend refused (never expected).
    pub(crate) fn encrypt(&self, buf: &mut [u8]) -> bool {
        match self {
            Cipher::None => {}
            Cipher::Block(keys) => keys.cfb.encrypt(&CFB_IV, buf),
            Cipher::Salsa20 { key } => salsa20_xor(key, buf),
            Cipher::Xor { table } => xor_table(table, buf),
        }
        true
    }

    /// Decrypts a whole datagram in place. false if the backend refused (never expected).
    pub(crate) fn decrypt(&self, buf: &mut [u8]) -> bool {
        match self {
            Cipher::None => {}
            Cipher::Block(keys) => keys.cfb.decrypt(&CFB_IV, buf),
            Cipher::Salsa20 { key } => salsa20_xor(key, buf),
            Cipher::Xor { table } => xor_table(table, buf),
        }
        true
    }

    /// Fills nonce and CRC of a datagram whose bytes from [`CRYPT_HEADER_SIZE`] on are final,
    /// then encrypts it. The buffer must be at least `CRYPT_HEADER_SIZE` long.
    pub(crate) fn seal(&self, nonce: &mut NonceSource, buf: &mut [u8]) -> bool {
        Cipher::prepare(nonce, buf) && self.encrypt(buf)
    }

    /// The first half of [`Cipher::seal`]: nonce and CRC only, for [`Cipher::encrypt_many`].
    pub(crate) fn prepare(nonce: &mut NonceSource, buf: &mut [u8]) -> bool {
        let Some((header, body)) = buf.split_at_mut_checked(CRYPT_HEADER_SIZE) else {
            return false;
        };
        let (nonce_bytes, crc_bytes) = header.split_at_mut(NONCE_SIZE);
        nonce.fill(nonce_bytes);
        crc_bytes.copy_from_slice(&crc32fast::hash(body).to_le_bytes());
        true
    }

    /// Encrypts prepared datagrams in place, several at a time where the cipher gains from
    /// it (AES: independent CFB chains interleaved). A datagram the backend refused is
    /// emptied, and its sender drops it.
    pub(crate) fn encrypt_many<'a>(&self, datagrams: impl Iterator<Item = &'a mut Vec<u8>>) {
        #[cfg(target_arch = "x86_64")]
        if let Cipher::Block(keys) = self
            && let Some(fast) = &keys.fast
        {
            let mut lanes: [&mut [u8]; LANES] = Default::default();
            let mut n = 0;
            for d in datagrams {
                lanes[n] = d.as_mut_slice();
                n += 1;
                if n == lanes.len() {
                    fast.encrypt(&mut lanes);
                    n = 0;
                }
            }
            fast.encrypt(&mut lanes[..n]);
            return;
        }
        for d in datagrams {
            if !self.encrypt(d) {
                d.clear();
            }
        }
    }

    /// Decrypts in place and checks the CRC; the authenticated-by-checksum body on success.
    pub(crate) fn open<'a>(&self, buf: &'a mut [u8]) -> Option<&'a mut [u8]> {
        if buf.len() < CRYPT_HEADER_SIZE || !self.decrypt(buf) {
            return None;
        }
        let (header, body) = buf.split_at_mut(CRYPT_HEADER_SIZE);
        let stored = u32::from_le_bytes([header[16], header[17], header[18], header[19]]);
        (crc32fast::hash(body) == stored).then_some(body)
    }
}

fn xor_table(table: &[u8; XOR_TABLE_LEN], buf: &mut [u8]) {
    for (b, t) in buf.iter_mut().zip(table.iter()) {
        *b ^= t;
    }
}

/// Random nonces, drawn from [`skiff_crypto::random::fill`] a batch at a time.
pub(crate) struct NonceSource {
    buf: [u8; 256],
    pos: usize,
}

impl NonceSource {
    pub(crate) fn new() -> NonceSource {
        NonceSource {
            buf: [0; 256],
            pos: 256,
        }
    }

    pub(crate) fn fill(&mut self, out: &mut [u8]) {
        if self.pos + out.len() > self.buf.len() {
            skiff_crypto::random::fill(&mut self.buf);
            self.pos = 0;
        }
        let end = (self.pos + out.len()).min(self.buf.len());
        let take = end - self.pos;
        out[..take].copy_from_slice(&self.buf[self.pos..end]);
        self.pos = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn key_derivation_matches_spec() {
        assert_eq!(
            derive_key("it's a secrect").to_vec(),
            hex("25d7d7bd51050742d8d791f2b653c6c8b2366b7e25a124cf7a2e12eaf4ffa444")
        );
        assert_eq!(
            derive_key("test").to_vec(),
            hex("fc0327c66699e5622be3b108e336991375ba429750939d57003dc89d9fed8859")
        );
    }

    #[test]
    fn xor_table_matches_spec() {
        let Ok(Cipher::Xor { table }) = Cipher::new(Crypt::Xor, "test") else {
            panic!("xor cipher");
        };
        assert_eq!(
            table[..32].to_vec(),
            hex("ab86cd9bea0b76fcd56f363040c5aab5ccea1bba64fc691d068d560ea38f3579")
        );
    }

    #[test]
    fn live_aes_datagram_decrypts() {
        let wire = hex(
            "3f1c38973ea7a1d853e131a143e61244d028ccab86d0a4b4b4c475b8b1806611ab155a453b7af2b9a6288e6a0c5bf9e2e3a33eb8a8b1883af46cdda7827e3cdc1f",
        );
        let plain = hex(
            "762b6d1e61f5554c867672284991f738 d070559e 01000000f1002700 0e5a8842 51 00 0002 bf040000 01000000 00000000 0d000000 010205000300000068656c6c6f",
        );
        let c = Cipher::new(Crypt::Aes, "test").unwrap();
        let mut buf = wire.clone();
        assert!(c.decrypt(&mut buf));
        assert_eq!(buf, plain);
        assert!(c.encrypt(&mut buf));
        assert_eq!(buf, wire);
        let mut buf = wire.clone();
        assert_eq!(
            c.open(&mut buf).map(|b| b.to_vec()),
            Some(plain[20..].to_vec())
        );
    }

    #[test]
    fn live_salsa20_datagram_decrypts() {
        let wire = hex(
            "146a0aecccbca51b5b53c9c24d22d625d1d1686d41f2208b3267465f8c4af9243e9880f319216cf3a2ba5176c5d207c1fa1cdf1fb8c3d874a04c89107926aa1f00",
        );
        let c = Cipher::new(Crypt::Salsa20, "test").unwrap();
        let mut buf = wire.clone();
        assert!(c.decrypt(&mut buf));
        assert_eq!(
            buf[..32].to_vec(),
            hex("146a0aecccbca51b a93bcd885cab9342 949aea4c 01000000f1002700 323491b6")
        );
        assert_eq!(&buf[buf.len() - 5..], b"hello");
        let mut again = wire.clone();
        assert!(c.open(&mut again).is_some(), "CRC must verify");
    }

    /// The batched AES path of `encrypt_many` writes what the crate's CFB writes one by one.
    #[test]
    fn encrypt_many_matches_encrypt() {
        for crypt in [Crypt::Aes, Crypt::Aes128, Crypt::Aes192, Crypt::Blowfish] {
            let c = Cipher::new(crypt, "k").unwrap();
            let plain: Vec<Vec<u8>> = (0..7usize)
                .map(|n| (0..20 + n * 97).map(|i| (i * n) as u8).collect())
                .collect();
            let mut batch = plain.clone();
            c.encrypt_many(batch.iter_mut());
            for (p, b) in plain.iter().zip(&batch) {
                let mut one = p.clone();
                assert!(c.encrypt(&mut one));
                assert_eq!(&one, b, "{crypt:?}");
            }
        }
    }

    #[test]
    fn every_cipher_round_trips_and_checks_crc() {
        for crypt in [
            Crypt::None,
            Crypt::Aes,
            Crypt::Aes128,
            Crypt::Aes192,
            Crypt::Salsa20,
            Crypt::Xor,
            Crypt::Tea,
            Crypt::Xtea,
            Crypt::Blowfish,
            Crypt::Twofish,
            Crypt::Sm4,
            Crypt::Cast5,
            Crypt::TripleDes,
        ] {
            let c = Cipher::new(crypt, "k").unwrap();
            let mut nonce = NonceSource::new();
            for len in [20usize, 21, 27, 28, 64, 100, 1350] {
                let body: Vec<u8> = (0..len - 20).map(|i| i as u8).collect();
                let mut buf = vec![0u8; 20];
                buf.extend_from_slice(&body);
                assert!(c.seal(&mut nonce, &mut buf));
                let opened = c.open(&mut buf).map(|b| b.to_vec());
                assert_eq!(opened, Some(body.clone()), "{crypt:?} len {len}");
            }
        }
    }
}
