//! kcp-go's AES-256-CFB on kcptun-sized datagrams: the batched AES-instruction path of
//! `skiff_crypto::aes_cfb` against RustCrypto's `aes` + `cfb-mode` (what kcp uses without it)
//! and aws-lc's CFB128. Encryption of four datagrams (a sender's batch), and decryption of one
//! (crates only: the hand-written eight-wide decryption lost to the `aes` crate and is gone).
//!
//! `cargo bench -p skiff-crypto --bench aes_cfb`; figures in `skiff_crypto::aes_cfb`'s comment.

use aws_lc_rs::cipher::{
    AES_256, DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext, UnboundCipherKey,
};
use aws_lc_rs::iv::FixedLength;
use divan::{Bencher, black_box};
use skiff_crypto::aes_cfb::{AesCfb, LANES};
use skiff_crypto::kcp::{CfbCipher, CfbKind};

/// kcptun's default MTU.
const DATAGRAM: usize = 1350;
const KEY: [u8; 32] = [0x42; 32];
const IV: [u8; 16] = [7; 16];

fn main() {
    divan::main();
}

fn datagrams() -> Vec<Vec<u8>> {
    (0..LANES)
        .map(|j| (0..DATAGRAM).map(|i| (i * 7 + j) as u8).collect())
        .collect()
}

mod encrypt_4 {
    use super::*;

    #[divan::bench(bytes_count = DATAGRAM * LANES)]
    fn skiff_batched(b: Bencher) {
        let Some(fast) = AesCfb::new(&KEY, IV) else {
            return;
        };
        let mut d = datagrams();
        b.bench_local(|| {
            let mut lanes: Vec<&mut [u8]> = d.iter_mut().map(|x| x.as_mut_slice()).collect();
            fast.encrypt(black_box(&mut lanes));
        });
    }

    #[divan::bench(bytes_count = DATAGRAM * LANES)]
    fn aes_cfb_mode_crates(b: Bencher) {
        let c = CfbCipher::new(CfbKind::Aes, &KEY).unwrap();
        let mut d = datagrams();
        b.bench_local(|| {
            for x in &mut d {
                c.encrypt(&IV, black_box(x));
            }
        });
    }

    #[divan::bench(bytes_count = DATAGRAM * LANES)]
    fn aws_lc(b: Bencher) {
        let k = EncryptingKey::cfb128(UnboundCipherKey::new(&AES_256, &KEY).unwrap()).unwrap();
        let mut d = datagrams();
        b.bench_local(|| {
            for x in &mut d {
                let ctx = EncryptionContext::Iv128(FixedLength::from(IV));
                k.less_safe_encrypt(black_box(x), ctx).unwrap();
            }
        });
    }
}

mod decrypt_1 {
    use super::*;

    #[divan::bench(bytes_count = DATAGRAM)]
    fn aes_cfb_mode_crates(b: Bencher) {
        let c = CfbCipher::new(CfbKind::Aes, &KEY).unwrap();
        let mut d = datagrams().remove(0);
        b.bench_local(|| c.decrypt(&IV, black_box(&mut d)));
    }

    #[divan::bench(bytes_count = DATAGRAM)]
    fn aws_lc(b: Bencher) {
        let k = DecryptingKey::cfb128(UnboundCipherKey::new(&AES_256, &KEY).unwrap()).unwrap();
        let mut d = datagrams().remove(0);
        b.bench_local(|| {
            let ctx = DecryptionContext::Iv128(FixedLength::from(IV));
            k.decrypt(black_box(&mut d), ctx).unwrap();
        });
    }
}
