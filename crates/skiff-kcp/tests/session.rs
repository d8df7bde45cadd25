//! Session-level tests: the spec's live datagrams, a lossy in-memory link, robustness.

use proptest::prelude::*;
use skiff_kcp::{Crypt, KcpConfig, KcpSession, peek_conv};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

const ALL_CRYPTS: [Crypt; 11] = [
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

fn config(client: bool, crypt: Crypt, key: &str) -> KcpConfig {
    let mut c = KcpConfig::kcptun_default(client);
    c.crypt = crypt;
    c.key = key.to_string();
    c
}

/// spec §2.1: the live `--crypt none` datagram carrying smux PSH "hello" (KCP sn 1).
const LIVE_NONE_PSH: &str = "3dfdfff2ff340a5317d6ccadc14cf895 8ba0c059 01000000 f100 2700
    a9419b9a 51 00 0002 96040000 01000000 00000000 0d000000 01 02 0500 03000000 68656c6c6f";
const LIVE_CONV: u32 = 0x9a9b_41a9;

/// The session's first datagram as the spec describes it (smux SYN, KCP sn 0), with our own
/// nonce and checksum.
fn live_syn_datagram() -> Vec<u8> {
    let mut body = hex(
        "00000000 f100 2200 a9419b9a 51 00 0002 90040000 00000000 00000000 08000000 01 00 0000 03000000",
    );
    let crc = crc32(&body);
    let mut d = vec![0x11; 16];
    d.extend_from_slice(&crc.to_le_bytes());
    d.append(&mut body);
    d
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn live_none_datagram_is_accepted_and_decoded() {
    let cfg = config(false, Crypt::None, "k");
    let live = hex(LIVE_NONE_PSH);
    assert_eq!(peek_conv(&cfg, &live), Some(LIVE_CONV));
    let mut s = KcpSession::new(LIVE_CONV, &cfg).unwrap();
    s.handle_datagram(&live, 1000);
    assert_eq!(s.stats().dropped, 0);
    let mut buf = [0u8; 64];
    assert_eq!(s.recv(&mut buf), 0, "sn 1 waits for sn 0");
    s.handle_datagram(&live_syn_datagram(), 1001);
    assert_eq!(s.stats().dropped, 0);
    let n = s.recv(&mut buf);
    assert_eq!(
        &buf[..n],
        &hex("01 00 0000 03000000 01 02 0500 03000000 68656c6c6f")[..]
    );

    // Both segments are acked: one datagram with FEC header, two ACKs (sn 0 is below
    // rcv_nxt but is the last of its flush, sn 1 …), decodable by our own peer config.
    s.update(1002);
    let mut out = Vec::new();
    let mut acks = Vec::new();
    while s.poll_datagram(&mut out) {
        assert_eq!(peek_conv(&cfg, &out), Some(LIVE_CONV));
        assert_eq!(&out[24..26], &[0xf1, 0]);
        acks.extend_from_slice(&out[28..]);
    }
    let seg = |i: usize| &acks[i * 24..i * 24 + 24];
    assert!(!acks.is_empty() && acks.len() % 24 == 0);
    let last = seg(acks.len() / 24 - 1);
    assert_eq!(last[4], 82, "ACK");
    assert_eq!(&last[16..20], &2u32.to_le_bytes(), "una = 2");
}

#[test]
fn live_aes_datagram_is_accepted() {
    let cfg = config(false, Crypt::Aes, "test");
    let wire = hex(
        "3f1c38973ea7a1d853e131a143e61244d028ccab86d0a4b4b4c475b8b1806611ab155a453b7af2b9a6288e6a0c5bf9e2e3a33eb8a8b1883af46cdda7827e3cdc1f",
    );
    assert_eq!(peek_conv(&cfg, &wire), Some(0x4288_5a0e));
    let mut s = KcpSession::new(0x4288_5a0e, &cfg).unwrap();
    s.handle_datagram(&wire, 5);
    assert_eq!(s.stats().dropped, 0);
    // A wrong key fails the CRC: dropped, not an error.
    let other = config(false, Crypt::Aes, "nope");
    assert_eq!(peek_conv(&other, &wire), None);
    let mut s = KcpSession::new(0x4288_5a0e, &other).unwrap();
    s.handle_datagram(&wire, 5);
    assert_eq!(s.stats().dropped, 1);
}

#[test]
fn live_salsa20_datagram_is_accepted() {
    let cfg = config(false, Crypt::Salsa20, "test");
    let wire = hex(
        "146a0aecccbca51b5b53c9c24d22d625d1d1686d41f2208b3267465f8c4af9243e9880f319216cf3a2ba5176c5d207c1fa1cdf1fb8c3d874a04c89107926aa1f00",
    );
    assert_eq!(peek_conv(&cfg, &wire), Some(0xb691_3432));
}

#[test]
fn kcptun_defaults_and_modes() {
    let c = KcpConfig::kcptun_default(true);
    assert_eq!((c.snd_wnd, c.rcv_wnd, c.mtu), (128, 512, 1350));
    assert_eq!((c.data_shards, c.parity_shards), (10, 3));
    assert_eq!(c.crypt, Crypt::Aes);
    assert_eq!(c.key, "it's a secrect");
    assert_eq!(
        (c.nodelay, c.interval_ms, c.resend, c.no_congestion),
        (false, 30, 2, true)
    );
    let s = KcpConfig::kcptun_default(false);
    assert_eq!((s.snd_wnd, s.rcv_wnd), (1024, 1024));
    let mut m = c.clone();
    m.apply_mode("fast3").unwrap();
    assert_eq!((m.nodelay, m.interval_ms), (true, 10));
    m.apply_mode("normal").unwrap();
    assert_eq!((m.nodelay, m.interval_ms), (false, 40));
    let before = m.clone();
    m.apply_mode("manual").unwrap();
    assert_eq!(m, before);
    assert!(m.apply_mode("turbo").is_err());
    assert_eq!(Crypt::parse("aes-192").unwrap(), Crypt::Aes192);
    assert_eq!(Crypt::parse("sm4").unwrap(), Crypt::Sm4);
    assert_eq!(Crypt::parse("cast5").unwrap(), Crypt::Cast5);
    assert_eq!(Crypt::parse("3des").unwrap(), Crypt::TripleDes);
    let err = Crypt::parse("rot13").unwrap_err();
    assert!(err.to_string().contains("rot13"));
}

#[test]
fn bad_configs_are_errors() {
    let mut c = KcpConfig::kcptun_default(true);
    c.mtu = 40;
    assert!(KcpSession::new(1, &c).is_err());
    c.mtu = 1501;
    assert!(KcpSession::new(1, &c).is_err());
    let mut c = KcpConfig::kcptun_default(true);
    c.data_shards = 200;
    c.parity_shards = 100;
    assert!(KcpSession::new(1, &c).is_err());
}

/// Deterministic xorshift for the simulated link.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A one-way link: 10 % loss, 5–25 ms delay (so some reordering), seeded.
struct Link {
    rng: Rng,
    in_flight: Vec<(u32, Vec<u8>)>,
}

impl Link {
    fn carry(&mut self, from: &mut KcpSession, now: u32) {
        let mut d = Vec::new();
        while from.poll_datagram(&mut d) {
            if self.rng.next().is_multiple_of(10) {
                continue;
            }
            let at = now.wrapping_add(5 + (self.rng.next() % 21) as u32);
            self.in_flight.push((at, std::mem::take(&mut d)));
        }
    }

    fn deliver(&mut self, to: &mut KcpSession, now: u32) {
        let mut i = 0;
        while i < self.in_flight.len() {
            if now.wrapping_sub(self.in_flight[i].0) as i32 >= 0 {
                let (_, d) = self.in_flight.swap_remove(i);
                to.handle_datagram(&d, now);
            } else {
                i += 1;
            }
        }
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed);
    (0..len).map(|_| r.next() as u8).collect()
}

fn run_lossy_transfer(crypt: Crypt, up_len: usize, down_len: usize) -> (KcpSession, KcpSession) {
    run_lossy_transfer_with(crypt, up_len, down_len, 0, |_| {})
}

/// Both directions at once over seeded 10 % loss; `start` is the first clock value (to test
/// wrap-around) and `tweak` adjusts both sides' configs.
fn run_lossy_transfer_with(
    crypt: Crypt,
    up_len: usize,
    down_len: usize,
    start: u32,
    tweak: fn(&mut KcpConfig),
) -> (KcpSession, KcpSession) {
    let (mut ccfg, mut scfg) = (config(true, crypt, "e2e"), config(false, crypt, "e2e"));
    tweak(&mut ccfg);
    tweak(&mut scfg);
    let mut client = KcpSession::new(0x1234_5678, &ccfg).unwrap();
    let mut server = KcpSession::new(0x1234_5678, &scfg).unwrap();
    let up = pattern(up_len, 1);
    let down = pattern(down_len, 2);
    let (mut up_sent, mut down_sent) = (0, 0);
    let mut up_got = Vec::with_capacity(up_len);
    let mut down_got = Vec::with_capacity(down_len);
    let mut c2s = Link {
        rng: Rng(0x9e37_79b9_7f4a_7c15),
        in_flight: Vec::new(),
    };
    let mut s2c = Link {
        rng: Rng(0xdead_beef_cafe_f00d),
        in_flight: Vec::new(),
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut now = start;
    // Simulated milliseconds; 20 simulated minutes is far beyond what 1 MiB needs.
    for _ in 0..1_200_000 {
        if up_sent < up.len() {
            up_sent += client.send(&up[up_sent..]);
        }
        if down_sent < down.len() {
            down_sent += server.send(&down[down_sent..]);
        }
        client.update(now);
        server.update(now);
        c2s.carry(&mut client, now);
        s2c.carry(&mut server, now);
        c2s.deliver(&mut server, now);
        s2c.deliver(&mut client, now);
        loop {
            let n = server.recv(&mut buf);
            if n == 0 {
                break;
            }
            up_got.extend_from_slice(&buf[..n]);
        }
        loop {
            let n = client.recv(&mut buf);
            if n == 0 {
                break;
            }
            down_got.extend_from_slice(&buf[..n]);
        }
        if up_got.len() == up.len()
            && down_got.len() == down.len()
            && client.wait_snd() == 0
            && server.wait_snd() == 0
        {
            break;
        }
        assert!(!client.is_dead() && !server.is_dead());
        // Jump to the next timer (at least 1 ms so the link moves).
        let wait = |s: &KcpSession| s.next_update_ms(now).wrapping_sub(now) as i32;
        let step = wait(&client).min(wait(&server)).clamp(1, 5);
        now = now.wrapping_add(step as u32);
    }
    assert_eq!(up_got.len(), up.len(), "upload incomplete");
    assert!(up_got == up, "upload corrupted");
    assert_eq!(down_got.len(), down.len(), "download incomplete");
    assert!(down_got == down, "download corrupted");
    (client, server)
}

#[test]
fn one_mib_over_a_lossy_link_arrives_intact() {
    let (client, server) = run_lossy_transfer(Crypt::Aes, 1 << 20, 256 << 10);
    let (c, s) = (client.stats(), server.stats());
    assert!(
        c.retransmits + s.retransmits > 0,
        "10 % loss must cause retransmits"
    );
    assert!(
        s.fec_recovered > 0,
        "FEC must rebuild some lost packets: {s:?}"
    );
    assert_eq!(c.dropped + s.dropped, 0);
    assert_eq!(c.dropped_out + s.dropped_out, 0);
}

#[test]
fn congestion_control_nodelay_and_a_wrapping_clock() {
    // manual-mode style: congestion window on, nodelay, fast3 interval, ack-no-delay, and a
    // clock that wraps past u32::MAX a few seconds in.
    let (client, server) =
        run_lossy_transfer_with(Crypt::Salsa20, 512 << 10, 64 << 10, u32::MAX - 3000, |c| {
            c.no_congestion = false;
            c.nodelay = true;
            c.interval_ms = 10;
            c.ack_nodelay = true;
        });
    assert!(client.stats().retransmits > 0);
    assert_eq!(server.stats().dropped, 0);
}

#[test]
fn kcptun_manual_mode_defaults_deliver() {
    // kcptun --mode manual without further flags: nodelay 0, interval 50, resend 0, nc 0 —
    // congestion window on and no fast resend (early retransmit shrinks cwnd as in kcp-go).
    run_lossy_transfer_with(Crypt::Aes128, 256 << 10, 32 << 10, 5, |c| {
        c.nodelay = false;
        c.interval_ms = 50;
        c.resend = 0;
        c.no_congestion = false;
    });
}

#[test]
fn no_fec_and_small_windows_still_deliver() {
    let (_, server) = run_lossy_transfer_with(Crypt::Xtea, 256 << 10, 32 << 10, 77, |c| {
        c.data_shards = 0;
        c.parity_shards = 0;
        c.snd_wnd = 8;
        c.rcv_wnd = 8;
        c.mtu = 576;
        c.resend = 0;
    });
    assert_eq!(server.stats().fec_recovered, 0);
}

#[test]
fn every_crypt_carries_data() {
    for crypt in ALL_CRYPTS {
        run_lossy_transfer(crypt, 64 << 10, 16 << 10);
    }
}

#[test]
fn without_fec_the_layout_has_no_fec_header_and_still_works() {
    let mut cfg = config(true, Crypt::None, "k");
    cfg.data_shards = 0;
    let mut a = KcpSession::new(9, &cfg).unwrap();
    let mut b = KcpSession::new(9, &cfg).unwrap();
    assert_eq!(a.send(b"hello"), 5);
    a.update(0);
    let mut d = Vec::new();
    assert!(a.poll_datagram(&mut d));
    assert_eq!(d.len(), 20 + 24 + 5);
    assert_eq!(d[24], 81);
    b.handle_datagram(&d, 1);
    let mut buf = [0u8; 8];
    assert_eq!(b.recv(&mut buf), 5);
    assert_eq!(&buf[..5], b"hello");
}

#[test]
fn send_is_bounded_by_the_window() {
    let cfg = config(true, Crypt::None, "k");
    let mut a = KcpSession::new(9, &cfg).unwrap();
    let big = vec![7u8; 4 << 20];
    let taken = a.send(&big);
    assert!(taken > 0 && taken < big.len());
    // Library default remote window (32) until the peer speaks.
    assert!(a.wait_snd() <= 32);
    assert_eq!(a.send(&big), 0);
    a.update(0);
    assert_eq!(a.send(&big), 0, "in flight still counts");
}

#[test]
fn lost_peer_makes_the_link_dead() {
    let cfg = config(true, Crypt::None, "k");
    let mut a = KcpSession::new(9, &cfg).unwrap();
    a.send(b"x");
    let mut now = 0;
    let mut d = Vec::new();
    for _ in 0..100_000 {
        a.update(now);
        while a.poll_datagram(&mut d) {}
        if a.is_dead() {
            break;
        }
        now = a.next_update_ms(now).max(now + 1);
    }
    assert!(a.is_dead());
    assert!(a.stats().retransmits >= 19);
}

proptest! {
    #[test]
    fn arbitrary_datagrams_never_panic(
        crypt_idx in 0usize..ALL_CRYPTS.len(),
        datagrams in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1600), 1..20),
    ) {
        let cfg = config(false, ALL_CRYPTS[crypt_idx], "fuzz");
        let mut s = KcpSession::new(1, &cfg).unwrap();
        for (i, d) in datagrams.iter().enumerate() {
            let _ = peek_conv(&cfg, d);
            s.handle_datagram(d, i as u32 * 7);
            s.update(i as u32 * 7);
            let mut out = Vec::new();
            while s.poll_datagram(&mut out) {}
            let mut buf = [0u8; 2048];
            let _ = s.recv(&mut buf);
        }
    }

    #[test]
    fn valid_crypt_with_forged_kcp_never_panics(
        bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..30),
    ) {
        // Correct header and checksum (crypt none), arbitrary FEC/KCP contents, our conv.
        let cfg = config(false, Crypt::None, "fuzz");
        let mut s = KcpSession::new(1, &cfg).unwrap();
        for (i, b) in bodies.iter().enumerate() {
            let mut body = b.clone();
            if body.len() >= 12 && i % 2 == 0 {
                body[8..12].copy_from_slice(&1u32.to_le_bytes());
                body[4] = 0xf1 + (i % 3 == 0) as u8;
                body[5] = 0;
            }
            let mut d = vec![0u8; 16];
            d.extend_from_slice(&crc32(&body).to_le_bytes());
            d.extend_from_slice(&body);
            s.handle_datagram(&d, i as u32);
            s.update(i as u32);
            let mut out = Vec::new();
            while s.poll_datagram(&mut out) {}
            let mut buf = [0u8; 2048];
            let _ = s.recv(&mut buf);
        }
    }
}
