//! The udp2raw receive path on any bytes, under every cipher × auth mode: `data[0]` picks the
//! modes, the role and whether to go through the `--fix-gro` splitter; the rest is decrypted,
//! parsed as an inner packet and as an outer IP packet of each raw mode. Then the same bytes
//! (as a plaintext) go through encrypt → decrypt by the peer, which must give them back when
//! the ciphertext fits udp2raw's 1800-byte limit.
#![no_main]
use std::sync::OnceLock;

use skiff_udp2raw::headers::{RawMode, parse_packet};
use skiff_udp2raw::{AuthMode, CipherMode, Codec, Keys, MAX_DATA_LEN, Packet, ReplayWindow, Role, gro};

fn keys() -> &'static (Keys, Keys) {
    static K: OnceLock<(Keys, Keys)> = OnceLock::new();
    K.get_or_init(|| (Keys::derive(b"fuzz", Role::Client), Keys::derive(b"fuzz", Role::Server)))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let cipher = CipherMode::ALL[usize::from(sel) % CipherMode::ALL.len()];
    let auth = AuthMode::ALL[usize::from(sel / 5) % AuthMode::ALL.len()];
    let (ck, sk) = keys();
    let client = Codec::from_keys(ck, Role::Client, cipher, auth);
    let server = Codec::from_keys(sk, Role::Server, cipher, auth);
    let (sender, receiver) = if sel & 0x40 != 0 { (&server, &client) } else { (&client, &server) };

    let mut window = ReplayWindow::new(auth.anti_replay());
    let mut decode = |wire: &[u8]| {
        if let Ok(plain) = receiver.decrypt(wire) {
            if let Ok(Packet::Safer { seq, .. }) = Packet::parse(&plain) {
                let _ = window.check(seq);
            }
        }
    };
    if sel & 0x80 != 0 {
        let mut buf = rest.to_vec();
        for r in gro::split_frames(receiver, &mut buf) {
            decode(&buf[r]);
        }
    } else {
        decode(rest);
    }
    for mode in RawMode::ALL {
        if let Ok((_, t)) = parse_packet(mode, rest) {
            decode(t.payload());
        }
    }

    if rest.len() >= cipher.min_input() && rest.len() <= MAX_DATA_LEN {
        let wire = sender.encrypt(rest).expect("a plaintext of allowed length encrypts");
        if wire.len() <= MAX_DATA_LEN {
            assert_eq!(receiver.decrypt(&wire).expect("the peer decrypts it"), rest);
        } else {
            // As udp2raw: up to 1800 bytes of plaintext are sent, but a receiver refuses more
            // than 1800 bytes of ciphertext, so the last tag and padding bytes do not fit.
            assert!(rest.len() > sender.max_plaintext());
            assert!(receiver.decrypt(&wire).is_err());
        }
    }
});
