//! Entry point for the cargo-fuzz target `kcp_datagram` (not part of the API).

use crate::crypt::{CRYPT_HEADER_SIZE, Cipher, NonceSource};
use crate::{Crypt, KcpConfig, KcpSession, peek_conv};

const CRYPTS: [Crypt; 11] = [
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
];

/// `data[0]`: low nibble picks the crypt, 0x10 turns FEC off, 0x20 turns ack-no-delay on; the rest is a list of `len u16 LE | mode | body`
/// records. Mode bit 0 set: the body is sealed with a valid nonce, CRC and cipher first (so
/// the fuzzer reaches FEC and KCP parsing); clear: the body goes in raw. The session's conv
/// is taken from the first datagram, as a server would.
pub fn fuzz_datagrams(data: &[u8]) {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let mut cfg = KcpConfig::kcptun_default(false);
    cfg.crypt = CRYPTS[usize::from(sel & 0x0f) % CRYPTS.len()];
    cfg.key = "fuzz".to_string();
    if sel & 0x10 != 0 {
        cfg.data_shards = 0;
    }
    if sel & 0x20 != 0 {
        cfg.ack_nodelay = true;
    }
    let Ok(cipher) = Cipher::shared(cfg.crypt, &cfg.key) else {
        return;
    };
    let mut nonce = NonceSource::new();
    let mut session: Option<KcpSession> = None;
    let mut now = 0u32;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    for _ in 0..64 {
        let Some(len) = rest
            .get(..2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
        else {
            break;
        };
        let Some(&mode) = rest.get(2) else {
            break;
        };
        let body = rest.get(3..3 + len).unwrap_or(&rest[3..]);
        rest = &rest[(3 + body.len()).min(rest.len())..];
        let mut datagram = Vec::with_capacity(CRYPT_HEADER_SIZE + body.len());
        if mode & 1 != 0 {
            datagram.resize(CRYPT_HEADER_SIZE, 0);
            datagram.extend_from_slice(body);
            cipher.seal(&mut nonce, &mut datagram);
        } else {
            datagram.extend_from_slice(body);
        }
        let conv = peek_conv(&cfg, &datagram);
        if session.is_none() {
            session = KcpSession::new(conv.unwrap_or(0), &cfg).ok();
        }
        let Some(s) = session.as_mut() else {
            return;
        };
        now = now.wrapping_add(u32::from(mode >> 1) * 4);
        s.handle_datagram(&datagram, now);
        if mode & 2 != 0 {
            let _ = s.send(body);
        }
        s.update(now);
        while s.poll_datagram(&mut out) {}
        while s.recv(&mut buf) > 0 {}
        let _ = (s.next_update_ms(now), s.wait_snd(), s.is_dead(), s.stats());
    }
}
