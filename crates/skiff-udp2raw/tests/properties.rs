//! Property tests over every cipher mode × auth mode: what one end encrypts the other
//! decrypts; tampered, truncated or arbitrary bytes are an error (never a panic, never a
//! different plaintext); the outer header parsers survive anything.

use std::net::IpAddr;
use std::sync::OnceLock;

use proptest::prelude::*;
use skiff_udp2raw::headers::{self, IcmpEcho, IpHeader, RawMode, TcpHeader};
use skiff_udp2raw::{
    AuthMode, CipherMode, Codec, Keys, MAX_DATA_LEN, Packet, ReplayWindow, Role, SaferKind, gro,
};

fn keys() -> &'static (Keys, Keys) {
    static K: OnceLock<(Keys, Keys)> = OnceLock::new();
    K.get_or_init(|| {
        (
            Keys::derive(b"prop", Role::Client),
            Keys::derive(b"prop", Role::Server),
        )
    })
}

/// (client, server) codecs of a mode pair.
fn pair(cipher: CipherMode, auth: AuthMode) -> (Codec, Codec) {
    let (c, s) = keys();
    (
        Codec::from_keys(c, Role::Client, cipher, auth),
        Codec::from_keys(s, Role::Server, cipher, auth),
    )
}

/// Every cipher mode × auth mode: each property runs all 25 on every generated input.
fn all_modes() -> impl Iterator<Item = (CipherMode, AuthMode)> {
    CipherMode::ALL
        .into_iter()
        .flat_map(|c| AuthMode::ALL.into_iter().map(move |a| (c, a)))
}

fn plaintext() -> impl Strategy<Value = Vec<u8>> {
    // CFB needs 16 bytes; udp2raw's packets are always at least 17.
    proptest::collection::vec(any::<u8>(), 16..=MAX_DATA_LEN - 40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_both_directions(plain in plaintext()) {
        for (cipher, auth) in all_modes() {
            let (client, server) = pair(cipher, auth);
            let wire = client.encrypt(&plain).unwrap();
            prop_assert!(wire.len() <= plain.len() + client.max_overhead());
            prop_assert_eq!(server.decrypt(&wire).unwrap(), plain.clone());
            let wire = server.encrypt(&plain).unwrap();
            prop_assert_eq!(client.decrypt(&wire).unwrap(), plain.clone());
        }
    }

    #[test]
    fn tampering_is_an_error_or_changes_nothing_silently(
        plain in plaintext(),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        for (cipher, auth) in all_modes() {
            let (client, server) = pair(cipher, auth);
            let mut wire = client.encrypt(&plain).unwrap();
            let i = at.index(wire.len());
            wire[i] ^= flip;
            match server.decrypt(&wire) {
                Err(_) => {}
                // Only possible where the checksum does not cover the byte: CBC's padding filler,
                // or no auth at all.
                Ok(p) => prop_assert!(
                    auth == AuthMode::None || p == plain,
                    "{:?}/{:?}: a flipped byte {} decrypted to other data", cipher, auth, i
                ),
            }
            // A keyed mode must refuse any flip.
            if auth == AuthMode::HmacSha1 {
                prop_assert!(server.decrypt(&wire).is_err());
            }
        }
    }

    #[test]
    fn truncation_is_an_error(plain in plaintext(), cut in 1usize..64) {
        for (cipher, auth) in all_modes() {
            if auth == AuthMode::None {
                continue;
            }
            let (client, server) = pair(cipher, auth);
            let wire = client.encrypt(&plain).unwrap();
            let cut = cut.min(wire.len());
            let short = &wire[..wire.len() - cut];
            if let Ok(p) = server.decrypt(short) {
                // CBC may lose only padding bytes it never checked... but then the tag moved:
                // a match here would be a forgery.
                prop_assert!(false, "{:?}/{:?}: truncated by {} decrypted to {} bytes", cipher, auth, cut, p.len());
            }
        }
    }

    #[test]
    fn garbage_never_panics(junk in proptest::collection::vec(any::<u8>(), 0..2100)) {
        for (cipher, auth) in all_modes() {
            let (client, server) = pair(cipher, auth);
            for codec in [&client, &server] {
                if let Ok(p) = codec.decrypt(&junk) {
                    let _ = Packet::parse(&p);
                }
            }
            let _ = Packet::parse(&junk);
            let mut buf = junk.clone();
            for r in gro::split_frames(&server, &mut buf) {
                prop_assert!(r.end <= buf.len());
            }
            for mode in RawMode::ALL {
                let _ = headers::parse_packet(mode, &junk);
            }
        }
    }

    #[test]
    fn oversized_is_refused(extra in 1usize..100) {
        for (cipher, auth) in all_modes() {
            let (client, server) = pair(cipher, auth);
            let big = vec![0u8; MAX_DATA_LEN + extra];
            prop_assert!(client.encrypt(&big).is_err());
            prop_assert!(server.decrypt(&big).is_err());
        }
    }

    #[test]
    fn the_peer_takes_up_to_max_plaintext(fill in any::<u8>()) {
        for (cipher, auth) in all_modes() {
            let (client, server) = pair(cipher, auth);
            let n = client.max_plaintext();
            let plain = vec![fill; n];
            prop_assert_eq!(server.decrypt(&client.encrypt(&plain).unwrap()).unwrap(), plain);
            // One byte more still encrypts (udp2raw does), but may no longer be accepted.
            if n < MAX_DATA_LEN {
                let over = vec![fill; n + 1];
                let wire = client.encrypt(&over).unwrap();
                prop_assert_eq!(server.decrypt(&wire).is_ok(), wire.len() <= MAX_DATA_LEN);
            }
        }
    }

    #[test]
    fn inner_packets_round_trip(
        ids in any::<(u32, u32, u64, u8, u32)>(),
        body in proptest::collection::vec(any::<u8>(), 0..1500),
        heartbeat in any::<bool>(),
    ) {
        let (sender_id, receiver_id, seq, roller, conv) = ids;
        let kind = if heartbeat { SaferKind::Heartbeat(&body) } else { SaferKind::Data { conv, payload: &body } };
        let p = Packet::Safer { sender_id, receiver_id, seq, roller, kind };
        let v = p.to_vec();
        prop_assert_eq!(Packet::parse(&v).unwrap(), p);
        let b = Packet::Bare { nonce: [roller; 16], payload: &body };
        let v = b.to_vec();
        prop_assert_eq!(Packet::parse(&v).unwrap(), b);
    }

    #[test]
    fn gro_frames_round_trip(plains in proptest::collection::vec(plaintext(), 1..4)) {
        for (cipher, auth) in all_modes() {
            let (client, server) = pair(cipher, auth);
            let mut buf = Vec::new();
            for p in &plains {
                gro::push_frame(&client, &client.encrypt(p).unwrap(), &mut buf).unwrap();
            }
            let ranges = gro::split_frames(&server, &mut buf);
            prop_assert_eq!(ranges.len(), plains.len());
            for (r, p) in ranges.into_iter().zip(&plains) {
                prop_assert_eq!(&server.decrypt(&buf[r]).unwrap(), p);
            }
        }
    }

    #[test]
    fn headers_round_trip(
        v6 in any::<bool>(),
        a in any::<[u8; 16]>(),
        b in any::<[u8; 16]>(),
        h in any::<(u16, u16, u32, u32, bool, bool, u16, u32, u32)>(),
        payload in proptest::collection::vec(any::<u8>(), 0..1500),
    ) {
        let (src, dst) = if v6 {
            (IpAddr::from(a), IpAddr::from(b))
        } else {
            (IpAddr::from([a[0], a[1], a[2], a[3]]), IpAddr::from([b[0], b[1], b[2], b[3]]))
        };
        let (sp, dp, seq, ack_seq, syn, ack, window, ts, ecr) = h;
        let tcp = TcpHeader { src_port: sp, dst_port: dp, seq, ack_seq, syn, ack, psh: false, rst: false, window, timestamps: Some((ts, ecr)) };
        let icmp_proto = if v6 { headers::IPPROTO_ICMPV6 } else { headers::IPPROTO_ICMP };
        for mode in RawMode::ALL {
            let mut t = Vec::new();
            let proto = match mode {
                RawMode::FakeTcp => { headers::build_tcp(src, dst, &tcp, &payload, &mut t).unwrap(); headers::IPPROTO_TCP }
                RawMode::Udp => { headers::build_udp(src, dst, sp, dp, &payload, &mut t).unwrap(); headers::IPPROTO_UDP }
                RawMode::Icmp => {
                    headers::build_icmp(src, dst, &IcmpEcho { request: syn, id: sp, seq: dp, payload: &payload }, &mut t).unwrap();
                    icmp_proto
                }
            };
            let mut pkt = Vec::new();
            headers::build_ip(&IpHeader { src, dst, protocol: proto, ttl: 64, id: sp }, &t, &mut pkt).unwrap();
            let (ip, parsed) = headers::parse_packet(mode, &pkt).unwrap();
            prop_assert_eq!(ip.src, src);
            prop_assert_eq!(ip.dst, dst);
            prop_assert_eq!(parsed.payload(), &payload[..]);
            if let headers::Transport::Tcp(s) = parsed {
                prop_assert!(s.checksum_ok);
                prop_assert_eq!(s.header, tcp);
            }
            // One flipped bit in the IPv4 header is caught by its checksum.
            if !v6 {
                let mut bad = pkt.clone();
                bad[8] ^= 1;
                prop_assert!(headers::parse_packet(mode, &bad).is_err());
            }
        }
    }

    #[test]
    fn replay_window_accepts_each_number_once(seqs in proptest::collection::vec(1u64..10_000, 1..300)) {
        let mut w = ReplayWindow::default();
        let mut seen = std::collections::HashSet::new();
        for s in seqs {
            let fresh = seen.insert(s);
            if !fresh {
                prop_assert!(w.check(s).is_err());
            } else {
                let _ = w.check(s);
            }
        }
    }
}
