//! The crypto layer of one end: plaintext ↔ the bytes after the outer TCP/UDP/ICMP header.
//!
//! - every auth mode but `hmac_sha1` (MAC-then-encrypt): `cipher(normal key, plain ‖ tag(plain))`
//! - `hmac_sha1` (encrypt-then-MAC): `c = cipher(cipher_key[..16], plain)`, then
//!   `c ‖ HMAC-SHA1(hmac_key[..20], c)`
//!
//! Both directions refuse inputs longer than [`MAX_DATA_LEN`] (udp2raw's `max_data_len`).

use crate::auth::AuthMode;
use crate::cipher::{CipherKey, CipherMode};
use crate::key::{Keys, Role};
use crate::{Error, MAX_DATA_LEN};

/// One end's crypto: encrypts what it sends, decrypts what it receives.
#[derive(Clone, Debug)]
pub struct Codec {
    role: Role,
    cipher: CipherMode,
    auth: AuthMode,
    send: CipherKey,
    recv: CipherKey,
    hmac_send: [u8; 20],
    hmac_recv: [u8; 20],
    gro_xor: [u8; 2],
}

fn first16(k: &[u8; 64]) -> [u8; 16] {
    k[..16].try_into().expect("64 >= 16")
}

fn first20(k: &[u8; 64]) -> [u8; 20] {
    k[..20].try_into().expect("64 >= 20")
}

impl Codec {
    /// The codec of `role` for `password` (derives the keys: 10 000 PBKDF2 rounds).
    pub fn new(password: &[u8], role: Role, cipher: CipherMode, auth: AuthMode) -> Codec {
        Codec::from_keys(&Keys::derive(password, role), role, cipher, auth)
    }

    /// The codec of `role` from already derived keys (`keys` must be `role`'s).
    pub fn from_keys(keys: &Keys, role: Role, cipher: CipherMode, auth: AuthMode) -> Codec {
        let (send_payload, recv_payload) = if auth == AuthMode::HmacSha1 {
            (first16(&keys.cipher_encrypt), first16(&keys.cipher_decrypt))
        } else {
            (keys.normal, keys.normal)
        };
        Codec {
            role,
            cipher,
            auth,
            send: CipherKey::new(cipher, &send_payload, &first16(&keys.cipher_encrypt)),
            recv: CipherKey::new(cipher, &recv_payload, &first16(&keys.cipher_decrypt)),
            hmac_send: first20(&keys.hmac_encrypt),
            hmac_recv: first20(&keys.hmac_decrypt),
            gro_xor: [keys.gro_xor[0], keys.gro_xor[1]],
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn cipher_mode(&self) -> CipherMode {
        self.cipher
    }

    pub fn auth_mode(&self) -> AuthMode {
        self.auth
    }

    /// The most bytes [`Codec::encrypt`] adds.
    pub fn max_overhead(&self) -> usize {
        self.auth.tag_len() + self.cipher.max_overhead()
    }

    /// The longest plaintext whose ciphertext the peer accepts. udp2raw itself encrypts up to
    /// [`MAX_DATA_LEN`] bytes of plaintext but refuses to decrypt more than [`MAX_DATA_LEN`]
    /// bytes, so a plaintext longer than this is sent and then dropped by the receiver.
    pub fn max_plaintext(&self) -> usize {
        MAX_DATA_LEN - self.max_overhead()
    }

    /// Encrypts and authenticates a plaintext this end sends (udp2raw's `my_encrypt`). Like
    /// udp2raw it accepts up to [`MAX_DATA_LEN`] bytes; see [`Codec::max_plaintext`] for what
    /// the peer will take.
    pub fn encrypt(&self, plain: &[u8]) -> Result<Vec<u8>, Error> {
        if plain.len() > MAX_DATA_LEN {
            return Err(Error::TooLong {
                what: "plaintext",
                len: plain.len(),
                max: MAX_DATA_LEN,
            });
        }
        if self.auth == AuthMode::HmacSha1 {
            let mut c = self.send.encrypt(plain)?;
            self.auth.append_tag(&mut c, &self.hmac_send);
            Ok(c)
        } else {
            let mut p = Vec::with_capacity(plain.len() + self.auth.tag_len());
            p.extend_from_slice(plain);
            self.auth.append_tag(&mut p, &[]);
            self.send.encrypt(&p)
        }
    }

    /// Checks and decrypts what the peer sent (udp2raw's `my_decrypt`).
    pub fn decrypt(&self, wire: &[u8]) -> Result<Vec<u8>, Error> {
        if wire.len() > MAX_DATA_LEN {
            return Err(Error::TooLong {
                what: "ciphertext",
                len: wire.len(),
                max: MAX_DATA_LEN,
            });
        }
        if self.auth == AuthMode::HmacSha1 {
            let c = self.auth.verify(wire, &self.hmac_recv)?;
            self.recv.decrypt(c)
        } else {
            let mut p = self.recv.decrypt(wire)?;
            let n = self.auth.verify(&p, &[])?.len();
            p.truncate(n);
            Ok(p)
        }
    }

    /// `--fix-gro`: hides the 2-byte length prefix of an encrypted packet this end sends
    /// (XOR mode: with the first two `gro` key bytes; CBC: the first 16 bytes of the frame,
    /// prefix included, go through AES-ECB with the send `cipher_key`; other modes: as is).
    pub(crate) fn gro_hide(&self, frame: &mut [u8]) {
        match self.cipher {
            CipherMode::Xor => {
                for (b, k) in frame.iter_mut().zip(self.gro_xor) {
                    *b ^= k;
                }
            }
            CipherMode::Aes128Cbc if frame.len() >= 16 => self.send.ecb_encrypt(&mut frame[..16]),
            _ => {}
        }
    }

    /// The receive side of [`Codec::gro_hide`], in place on the frame's first bytes.
    pub(crate) fn gro_reveal(&self, frame: &mut [u8]) {
        match self.cipher {
            CipherMode::Xor => {
                for (b, k) in frame.iter_mut().zip(self.gro_xor) {
                    *b ^= k;
                }
            }
            CipherMode::Aes128Cbc if frame.len() >= 16 => self.recv.ecb_decrypt(&mut frame[..16]),
            _ => {}
        }
    }
}
