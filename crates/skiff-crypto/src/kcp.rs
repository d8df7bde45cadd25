//! kcp-go's packet ciphers (kcptun's `--crypt`): block ciphers in full-block CFB restarted from
//! a fixed IV for every datagram, and Salsa20 keyed per datagram by its first 8 bytes.
//!
//! Every cipher and the CFB mode are RustCrypto's; only the glue kcp-go needs is here: TEA
//! with its 16 rounds (no maintained crate has TEA), and XTEA's big-endian words (the `xtea`
//! crate reads little-endian ones). AES datagrams can also go through the batched CFB of
//! [`crate::aes_cfb`] where the CPU has the AES instructions.

use aes::{Aes128, Aes192, Aes256};
use cfb_mode::cipher::array::Array;
use cfb_mode::cipher::consts::{U1, U8};
use cfb_mode::cipher::{
    Block, BlockCipherEncBackend, BlockCipherEncClosure, BlockCipherEncrypt, BlockSizeUser, InOut,
    InnerIvInit, KeyInit, KeyIvInit, ParBlocksSizeUser, StreamCipher,
};
use cfb_mode::{Decryptor, Encryptor};

use crate::aead::InvalidKeyLength;

/// The block ciphers kcptun offers in CFB mode, each with the key length kcptun gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CfbKind {
    /// AES-128, -192 or -256 by key length.
    Aes,
    /// Blowfish, any key of 4..=56 bytes (kcptun: all 32 derived bytes).
    Blowfish,
    /// Twofish, 16, 24 or 32 bytes (kcptun: 32).
    Twofish,
    /// SM4, 16 bytes.
    Sm4,
    /// CAST-128 (RFC 2144), 16 bytes.
    Cast5,
    /// Triple DES in EDE3 order, 24 bytes (three 8-byte DES keys).
    TripleDes,
    /// TEA with kcp-go's 16 rounds, 16 bytes of big-endian words.
    Tea16,
    /// XTEA, 16 bytes of big-endian words.
    Xtea,
}

/// One keyed block cipher ready for full-block CFB. Blowfish's and Twofish's key-dependent
/// S-boxes take 4 KiB each, so those two are boxed.
pub enum CfbCipher {
    Aes128(Aes128),
    Aes192(Aes192),
    Aes256(Aes256),
    Blowfish(Box<blowfish::Blowfish>),
    Twofish(Box<twofish::Twofish>),
    Sm4(sm4::Sm4),
    Cast5(cast5::Cast5),
    TripleDes(des::TdesEde3),
    Tea16(Tea<8>),
    Xtea(XteaBe),
}

impl std::fmt::Debug for CfbCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key schedule.
        f.debug_struct("CfbCipher")
            .field("block_len", &self.block_len())
            .finish_non_exhaustive()
    }
}

/// Runs `$body` with `$c` bound to the keyed cipher, whatever its type.
macro_rules! with_cipher {
    ($self:expr, $c:ident => $body:expr) => {
        match $self {
            CfbCipher::Aes128($c) => $body,
            CfbCipher::Aes192($c) => $body,
            CfbCipher::Aes256($c) => $body,
            CfbCipher::Blowfish(b) => {
                let $c = &**b;
                $body
            }
            CfbCipher::Twofish(b) => {
                let $c = &**b;
                $body
            }
            CfbCipher::Sm4($c) => $body,
            CfbCipher::Cast5($c) => $body,
            CfbCipher::TripleDes($c) => $body,
            CfbCipher::Tea16($c) => $body,
            CfbCipher::Xtea($c) => $body,
        }
    };
}

impl CfbCipher {
    pub fn new(kind: CfbKind, key: &[u8]) -> Result<CfbCipher, InvalidKeyLength> {
        fn init<C: KeyInit>(key: &[u8]) -> Result<C, InvalidKeyLength> {
            C::new_from_slice(key).map_err(|_| InvalidKeyLength)
        }
        Ok(match kind {
            CfbKind::Aes => match key.len() {
                16 => CfbCipher::Aes128(init(key)?),
                24 => CfbCipher::Aes192(init(key)?),
                _ => CfbCipher::Aes256(init(key)?),
            },
            CfbKind::Blowfish => CfbCipher::Blowfish(Box::new(init(key)?)),
            CfbKind::Twofish => CfbCipher::Twofish(Box::new(init(key)?)),
            CfbKind::Sm4 => CfbCipher::Sm4(init(key)?),
            CfbKind::Cast5 => CfbCipher::Cast5(init(key)?),
            CfbKind::TripleDes => CfbCipher::TripleDes(init(key)?),
            CfbKind::Tea16 => CfbCipher::Tea16(Tea::new(key)?),
            CfbKind::Xtea => CfbCipher::Xtea(XteaBe::new(key)?),
        })
    }

    /// 16 for AES, Twofish and SM4; 8 for the others.
    pub fn block_len(&self) -> usize {
        with_cipher!(self, c => block_len_of(c))
    }

    /// CFB-encrypts `buf` in place from `iv` (its first [`CfbCipher::block_len`] bytes); a
    /// trailing partial block takes the first bytes of a whole keystream block.
    pub fn encrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
        with_cipher!(self, c => cfb_encrypt(c, iv, buf))
    }

    /// The inverse of [`CfbCipher::encrypt`].
    pub fn decrypt(&self, iv: &[u8; 16], buf: &mut [u8]) {
        with_cipher!(self, c => cfb_decrypt(c, iv, buf))
    }
}

fn block_len_of<C: BlockSizeUser>(_: &C) -> usize {
    C::block_size()
}

fn iv_for<C: BlockSizeUser>(iv: &[u8; 16]) -> Block<C> {
    Array::try_from(&iv[..C::block_size()]).expect("block sizes are 8 or 16")
}

fn cfb_encrypt<C: BlockCipherEncrypt>(cipher: &C, iv: &[u8; 16], buf: &mut [u8]) {
    Encryptor::<&C>::inner_iv_init(cipher, &iv_for::<C>(iv)).encrypt(buf);
}

fn cfb_decrypt<C: BlockCipherEncrypt>(cipher: &C, iv: &[u8; 16], buf: &mut [u8]) {
    Decryptor::<&C>::inner_iv_init(cipher, &iv_for::<C>(iv)).decrypt(buf);
}

/// kcp-go's Salsa20: the 8-byte nonce is `buf[..8]` and stays in clear, the rest is XORed with
/// Salsa20/20's keystream from block 0. Shorter buffers are left alone, as kcp-go does.
pub fn salsa20_xor(key: &[u8; 32], buf: &mut [u8]) {
    let Some((nonce, body)) = buf.split_at_mut_checked(8) else {
        return;
    };
    let nonce: &[u8; 8] = (&*nonce).try_into().expect("8 bytes");
    salsa20::Salsa20::new(key.into(), nonce.into()).apply_keystream(body);
}

/// TEA with `CYCLES` cycles (two Feistel rounds each) on big-endian words, as Go's
/// `x/crypto/tea` computes it; kcp-go asks for 16 rounds, `Tea<8>`.
///
/// Hand-written because no maintained crate implements TEA (RustCrypto has XTEA only). It is
/// checked against published TEA vectors (full 32 cycles) and, in kcp's 8-cycle form, against
/// kcptun itself in the interop tests.
pub struct Tea<const CYCLES: u32> {
    key: [u32; 4],
}

const TEA_DELTA: u32 = 0x9e37_79b9;

impl<const CYCLES: u32> Tea<CYCLES> {
    pub fn new(key: &[u8]) -> Result<Self, InvalidKeyLength> {
        let key: &[u8; 16] = key.try_into().map_err(|_| InvalidKeyLength)?;
        Ok(Tea { key: be_words(key) })
    }

    fn encrypt(&self, b: &mut [u8; 8]) {
        let k = &self.key;
        let mut v0 = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let mut v1 = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let mut sum = 0u32;
        for _ in 0..CYCLES {
            sum = sum.wrapping_add(TEA_DELTA);
            v0 = v0.wrapping_add(
                (v1 << 4).wrapping_add(k[0]) ^ v1.wrapping_add(sum) ^ (v1 >> 5).wrapping_add(k[1]),
            );
            v1 = v1.wrapping_add(
                (v0 << 4).wrapping_add(k[2]) ^ v0.wrapping_add(sum) ^ (v0 >> 5).wrapping_add(k[3]),
            );
        }
        b[..4].copy_from_slice(&v0.to_be_bytes());
        b[4..].copy_from_slice(&v1.to_be_bytes());
    }
}

fn be_words(key: &[u8; 16]) -> [u32; 4] {
    std::array::from_fn(|i| {
        u32::from_be_bytes([key[4 * i], key[4 * i + 1], key[4 * i + 2], key[4 * i + 3]])
    })
}

impl<const CYCLES: u32> BlockSizeUser for Tea<CYCLES> {
    type BlockSize = U8;
}

impl<const CYCLES: u32> ParBlocksSizeUser for Tea<CYCLES> {
    type ParBlocksSize = U1;
}

impl<const CYCLES: u32> BlockCipherEncrypt for Tea<CYCLES> {
    fn encrypt_with_backend(&self, f: impl BlockCipherEncClosure<BlockSize = U8>) {
        f.call(self)
    }
}

impl<const CYCLES: u32> BlockCipherEncBackend for Tea<CYCLES> {
    fn encrypt_block(&self, mut block: InOut<'_, '_, Block<Self>>) {
        let mut b: [u8; 8] = (*block.get_in()).into();
        self.encrypt(&mut b);
        *block.get_out() = b.into();
    }
}

/// RustCrypto's XTEA on big-endian words (Go's `x/crypto/xtea`, hence kcp-go's): the crate
/// reads key and block as little-endian words, so each word is byte-swapped on the way in and
/// out.
pub struct XteaBe(xtea::Xtea);

impl XteaBe {
    pub fn new(key: &[u8]) -> Result<Self, InvalidKeyLength> {
        let key: &[u8; 16] = key.try_into().map_err(|_| InvalidKeyLength)?;
        let mut swapped = *key;
        swap_words(&mut swapped);
        Ok(XteaBe(xtea::Xtea::new(&swapped.into())))
    }
}

fn swap_words(bytes: &mut [u8]) {
    for w in bytes.chunks_exact_mut(4) {
        w.reverse();
    }
}

impl BlockSizeUser for XteaBe {
    type BlockSize = U8;
}

impl ParBlocksSizeUser for XteaBe {
    type ParBlocksSize = U1;
}

impl BlockCipherEncrypt for XteaBe {
    fn encrypt_with_backend(&self, f: impl BlockCipherEncClosure<BlockSize = U8>) {
        f.call(self)
    }
}

impl BlockCipherEncBackend for XteaBe {
    fn encrypt_block(&self, mut block: InOut<'_, '_, Block<Self>>) {
        let mut b = *block.get_in();
        swap_words(&mut b);
        BlockCipherEncrypt::encrypt_block(&self.0, &mut b);
        swap_words(&mut b);
        *block.get_out() = b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;
    use proptest::prelude::*;

    fn block8(c: &impl BlockCipherEncrypt<BlockSize = U8>, plain: &str) -> Vec<u8> {
        let mut b: Block<XteaBe> = Array::try_from(hex(plain).as_slice()).unwrap();
        c.encrypt_block(&mut b);
        b.to_vec()
    }

    /// The usual TEA vectors (32 cycles, big-endian words; as in Bouncy Castle's TEA tests).
    #[test]
    fn tea_matches_published_vectors() {
        let zero = Tea::<32>::new(&[0; 16]).unwrap();
        assert_eq!(block8(&zero, "0000000000000000"), hex("41ea3a0a94baa940"));
        assert_eq!(block8(&zero, "0102030405060708"), hex("6a2f9cf3fccf3c55"));
        let k = Tea::<32>::new(&hex("0123456712345678234567893456789a")).unwrap();
        assert_eq!(block8(&k, "0000000000000000"), hex("34e943b0900f5dcb"));
        assert_eq!(block8(&k, "0102030405060708"), hex("773dc179878a81c0"));
    }

    /// XTEA on big-endian words, as Go and Bouncy Castle compute it.
    #[test]
    fn xtea_be_matches_published_vectors() {
        let zero = XteaBe::new(&[0; 16]).unwrap();
        assert_eq!(block8(&zero, "0000000000000000"), hex("dee9d4d8f7131ed9"));
        assert_eq!(block8(&zero, "0102030405060708"), hex("065c1b8975c6a816"));
        let k = XteaBe::new(&hex("0123456712345678234567893456789a")).unwrap();
        assert_eq!(block8(&k, "0000000000000000"), hex("1ff9a0261ac64264"));
        assert_eq!(block8(&k, "0102030405060708"), hex("8c67155b2ef91ead"));
    }

    /// Salsa20/20 "Set 1, vector 0" (ECRYPT): key 80 00.., IV zero; first 16 keystream bytes.
    #[test]
    fn salsa20_matches_published_vector() {
        let mut key = [0u8; 32];
        key[0] = 0x80;
        let mut buf = [0u8; 8 + 16];
        salsa20_xor(&key, &mut buf);
        assert_eq!(buf[..8], [0; 8]);
        assert_eq!(buf[8..].to_vec(), hex("e3be8fdd8beca2e3ea8ef9475b29a6e7"));
    }

    #[test]
    fn key_lengths_are_checked() {
        assert!(CfbCipher::new(CfbKind::Sm4, &[0; 32]).is_err());
        assert!(CfbCipher::new(CfbKind::TripleDes, &[0; 16]).is_err());
        assert!(CfbCipher::new(CfbKind::Cast5, &[0; 16]).is_ok());
        assert!(CfbCipher::new(CfbKind::Aes, &[0; 20]).is_err());
        assert_eq!(
            CfbCipher::new(CfbKind::Twofish, &[0; 32])
                .unwrap()
                .block_len(),
            16
        );
        assert_eq!(
            CfbCipher::new(CfbKind::Blowfish, &[0; 32])
                .unwrap()
                .block_len(),
            8
        );
    }

    /// NIST SP 800-38A F.3.13, CFB128-AES128.Encrypt, first two blocks.
    #[test]
    fn aes_cfb_matches_sp800_38a() {
        let key = hex("2b7e151628aed2a6abf7158809cf4f3c");
        let iv: [u8; 16] = hex("000102030405060708090a0b0c0d0e0f").try_into().unwrap();
        let c = CfbCipher::new(CfbKind::Aes, &key).unwrap();
        let mut buf = hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51");
        c.encrypt(&iv, &mut buf);
        assert_eq!(
            buf,
            hex("3b3fd92eb72dad20333449f8e83cfb4ac8a64537a0b3a93fcde3cdad9f1ce58b")
        );
        c.decrypt(&iv, &mut buf);
        assert_eq!(buf[..4], [0x6b, 0xc1, 0xbe, 0xe2]);
    }

    proptest! {
        /// Every cipher round-trips whole and partial blocks, and a partial last block is
        /// the prefix of what the whole block would encrypt to (kcp-go's truncated keystream).
        #[test]
        fn every_kind_round_trips(
            kind in prop::sample::select(vec![
                CfbKind::Aes, CfbKind::Blowfish, CfbKind::Twofish, CfbKind::Sm4,
                CfbKind::Cast5, CfbKind::TripleDes, CfbKind::Tea16, CfbKind::Xtea,
            ]),
            key in prop::collection::vec(any::<u8>(), 32),
            iv in any::<[u8; 16]>(),
            data in prop::collection::vec(any::<u8>(), 0..100),
        ) {
            let key_len = match kind {
                CfbKind::Sm4 | CfbKind::Cast5 | CfbKind::Tea16 | CfbKind::Xtea => 16,
                CfbKind::TripleDes => 24,
                _ => 32,
            };
            let c = CfbCipher::new(kind, &key[..key_len]).unwrap();
            let mut buf = data.clone();
            c.encrypt(&iv, &mut buf);
            let mut padded = data.clone();
            padded.resize(data.len().next_multiple_of(c.block_len()), 0);
            c.encrypt(&iv, &mut padded);
            prop_assert_eq!(&padded[..data.len()], &buf[..]);
            c.decrypt(&iv, &mut buf);
            prop_assert_eq!(buf, data);
        }
    }
}
