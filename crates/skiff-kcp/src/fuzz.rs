//! Entry points for the cargo-fuzz targets `kcp_datagram` and `mkcp_packet`, and for the
//! `gf_mul` benchmark (not part of the API).

use crate::crypt::{CRYPT_HEADER_SIZE, Cipher, NonceSource};
use crate::{Crypt, KcpConfig, KcpSession, peek_conv};

const CRYPTS: [Crypt; 13] = [
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

/// Entry point for the cargo-fuzz target `mkcp_packet`. `data[0]`: low 3 bits pick the
/// header, 0x08 a seed, 0x10 congestion control, 0x20 a local close halfway. The rest is a
/// list of `len u16 LE | mode | body` records; mode bit 0: the body goes in as segments
/// framed by a valid header and seal (so segment parsing and the ARQ are reached), clear: as
/// a raw datagram; bit 1: the body is also written as application data; bits 2..: ms passed.
pub fn fuzz_mkcp_packets(data: &[u8]) {
    use crate::mkcp::{HeaderKind, MkcpConfig, MkcpSession, PacketFormat, first_segment};
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let header =
        HeaderKind::parse(HeaderKind::NAMES[usize::from(sel & 7) % 6]).unwrap_or(HeaderKind::None);
    let config = MkcpConfig {
        header,
        seed: (sel & 0x08 != 0).then(|| "fuzz".to_string()),
        congestion: sel & 0x10 != 0,
        ..MkcpConfig::default()
    };
    let format = PacketFormat::new(header, config.seed.as_deref());
    let mut peer = format.writer(0);
    let mut session: Option<MkcpSession> = None;
    let mut now = 0u32;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    for round in 0..64 {
        let Some(len) = rest
            .get(..2)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
        else {
            break;
        };
        let Some(&mode) = rest.get(2) else {
            break;
        };
        let body = rest.get(3..3 + len).unwrap_or(&rest[3..]);
        rest = &rest[(3 + body.len()).min(rest.len())..];
        let mut datagram = Vec::new();
        if mode & 1 != 0 {
            peer.write(body, &mut datagram);
        } else {
            datagram.extend_from_slice(body);
        }
        now = now.wrapping_add(u32::from(mode >> 2) * 8);
        let Some(plain) = format.open(&mut datagram) else {
            continue;
        };
        let first = first_segment(plain, config.receiving_window());
        let s = session.get_or_insert_with(|| {
            let conv = first.map_or(0, |(conv, _)| conv);
            MkcpSession::new(conv, &config, format.writer(1), now)
        });
        s.input(plain, now);
        if mode & 2 != 0 {
            let _ = s.send(body);
        }
        if sel & 0x20 != 0 && round == 8 {
            s.close(now);
        }
        s.update(now);
        while s.poll_datagram(&mut out) {}
        while s.recv(&mut buf) > 0 {}
        let _ = (
            s.next_update_ms(now),
            s.readable(),
            s.read_finished(),
            s.writable(),
            s.unacked(),
            s.is_terminated(),
        );
    }
}

/// The FEC's GF(2^8) multiply-accumulate `dst[i] ^= c·src[i]`, for the `gf_mul` benchmark.
pub struct GfMulAdd(crate::gf::MulTable);

impl GfMulAdd {
    pub fn new(c: u8) -> GfMulAdd {
        GfMulAdd(crate::gf::MulTable::new(c))
    }

    pub fn mul_add(&self, dst: &mut [u8], src: &[u8]) {
        crate::gf::mul_add(&self.0, dst, src);
    }
}
