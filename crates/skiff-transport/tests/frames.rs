//! Frame codec and decoder: RFC 6455 §5.7 vectors, split feeding, rule violations, properties.

use proptest::prelude::*;
use skiff_transport::ws::frame::close_payload;
use skiff_transport::ws::{
    Event, FrameDecoder, Opcode, Role, WsError, apply_mask, encode_frame, encode_header,
};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    Message { text: bool, data: Vec<u8> },
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, String),
}

/// Collects decoded output; message payload pieces are merged until `fin`.
#[derive(Default)]
struct Sink {
    out: Vec<Out>,
    partial: Vec<u8>,
}

impl Sink {
    fn feed(&mut self, dec: &mut FrameDecoder, chunk: &[u8]) -> Result<(), WsError> {
        let mut buf = chunk.to_vec();
        let mut pos = 0;
        while pos < buf.len() {
            let d = dec.decode(&mut buf[pos..])?;
            assert!(d.consumed > 0);
            pos += d.consumed;
            match d.event {
                None => {}
                Some(Event::Data { payload, text, fin }) => {
                    self.partial.extend_from_slice(payload);
                    if fin {
                        let data = std::mem::take(&mut self.partial);
                        self.out.push(Out::Message { text, data });
                    }
                }
                Some(Event::Ping(p)) => self.out.push(Out::Ping(p.to_vec())),
                Some(Event::Pong(p)) => self.out.push(Out::Pong(p.to_vec())),
                Some(Event::Close { code, reason }) => {
                    self.out.push(Out::Close(code, reason.to_owned()))
                }
            }
        }
        Ok(())
    }
}

fn decode_all(role: Role, bytes: &[u8]) -> Result<Vec<Out>, WsError> {
    let mut dec = FrameDecoder::new(role, 1 << 20);
    let mut sink = Sink::default();
    sink.feed(&mut dec, bytes)?;
    Ok(sink.out)
}

fn decode_split(role: Role, bytes: &[u8], at: &[usize]) -> Result<Vec<Out>, WsError> {
    let mut dec = FrameDecoder::new(role, 1 << 20);
    let mut sink = Sink::default();
    let mut prev = 0;
    for &cut in at.iter().chain(std::iter::once(&bytes.len())) {
        sink.feed(&mut dec, &bytes[prev..cut])?;
        prev = cut;
    }
    Ok(sink.out)
}

fn msg(text: bool, data: &[u8]) -> Out {
    Out::Message {
        text,
        data: data.to_vec(),
    }
}

const HELLO_UNMASKED: [u8; 7] = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
const HELLO_MASKED: [u8; 11] = [
    0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
];
const HEL_LO: [u8; 10] = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f, 0x00];
const PING_HELLO: [u8; 7] = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
const PONG_HELLO_MASKED: [u8; 11] = [
    0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
];

#[test]
fn rfc6455_5_7_single_frames() {
    assert_eq!(
        decode_all(Role::Client, &HELLO_UNMASKED).unwrap(),
        [msg(true, b"Hello")]
    );
    assert_eq!(
        decode_all(Role::Server, &HELLO_MASKED).unwrap(),
        [msg(true, b"Hello")]
    );
}

#[test]
fn rfc6455_5_7_fragmented_and_control() {
    // The RFC's fragmented text has no trailing byte; we drop our padding byte 0x00 here.
    assert_eq!(
        decode_all(Role::Client, &HEL_LO[..9]).unwrap(),
        [msg(true, b"Hello")]
    );
    assert_eq!(
        decode_all(Role::Client, &PING_HELLO).unwrap(),
        [Out::Ping(b"Hello".to_vec())]
    );
    assert_eq!(
        decode_all(Role::Server, &PONG_HELLO_MASKED).unwrap(),
        [Out::Pong(b"Hello".to_vec())]
    );
}

#[test]
fn rfc6455_5_7_256_and_64k_binary() {
    for len in [256usize, 65536] {
        let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        let mut wire = if len == 256 {
            vec![0x82, 0x7E, 0x01, 0x00]
        } else {
            vec![0x82, 0x7F, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00]
        };
        let mut encoded = Vec::new();
        encode_header(true, Opcode::Binary, len as u64, None, &mut encoded);
        assert_eq!(encoded, wire);
        wire.extend_from_slice(&payload);
        assert_eq!(
            decode_all(Role::Client, &wire).unwrap(),
            [msg(false, &payload)]
        );
    }
}

/// A stream mixing everything, decoded at every single split point and at every pair of
/// split points, must give the same output.
#[test]
fn every_split_point() {
    let key = [0x37, 0xfa, 0x21, 0x3d];
    let mut wire = Vec::new();
    encode_frame(false, Opcode::Binary, b"frag-one-", Some(key), &mut wire);
    encode_frame(true, Opcode::Ping, b"pp", Some([1, 2, 3, 4]), &mut wire);
    encode_frame(false, Opcode::Continuation, b"", Some(key), &mut wire);
    encode_frame(
        true,
        Opcode::Continuation,
        b"two",
        Some([9, 8, 7, 6]),
        &mut wire,
    );
    let big: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    encode_frame(true, Opcode::Binary, &big, Some(key), &mut wire);
    encode_frame(true, Opcode::Text, b"", Some(key), &mut wire);
    encode_frame(true, Opcode::Pong, b"", Some(key), &mut wire);
    encode_frame(
        true,
        Opcode::Close,
        &close_payload(1000, "bye"),
        Some(key),
        &mut wire,
    );
    let want = vec![
        Out::Ping(b"pp".to_vec()),
        msg(false, b"frag-one-two"),
        msg(false, &big),
        msg(true, b""),
        Out::Pong(vec![]),
        Out::Close(Some(1000), "bye".into()),
    ];
    assert_eq!(decode_all(Role::Server, &wire).unwrap(), want);
    for i in 0..=wire.len() {
        assert_eq!(
            decode_split(Role::Server, &wire, &[i]).unwrap(),
            want,
            "split {i}"
        );
    }
    for i in (0..=wire.len()).step_by(3) {
        for j in i..=wire.len() {
            assert_eq!(decode_split(Role::Server, &wire, &[i, j]).unwrap(), want);
        }
    }
    // Byte by byte.
    let cuts: Vec<usize> = (1..wire.len()).collect();
    assert_eq!(decode_split(Role::Server, &wire, &cuts).unwrap(), want);
}

#[test]
fn masking_rules_per_role() {
    assert_eq!(
        decode_all(Role::Server, &HELLO_UNMASKED),
        Err(WsError::Unmasked)
    );
    assert_eq!(
        decode_all(Role::Client, &HELLO_MASKED),
        Err(WsError::Masked)
    );
}

#[test]
fn sequencing_rules() {
    assert_eq!(
        decode_all(Role::Client, &[0x80, 0x00]),
        Err(WsError::UnexpectedContinuation)
    );
    assert_eq!(
        decode_all(Role::Client, &[0x01, 0x00, 0x82, 0x00]),
        Err(WsError::ExpectedContinuation)
    );
    // Control frames may interleave with a fragmented message.
    assert_eq!(
        decode_all(
            Role::Client,
            &[0x02, 0x01, b'a', 0x89, 0x00, 0x80, 0x01, b'b']
        )
        .unwrap(),
        [Out::Ping(vec![]), msg(false, b"ab")]
    );
}

#[test]
fn close_frames() {
    assert_eq!(
        decode_all(Role::Client, &[0x88, 0x00]).unwrap(),
        [Out::Close(None, String::new())]
    );
    assert_eq!(
        decode_all(Role::Client, &[0x88, 0x01, 0x03]),
        Err(WsError::InvalidCloseCode)
    );
    // 1005 and 999 may not be sent.
    assert_eq!(
        decode_all(Role::Client, &[0x88, 0x02, 0x03, 0xED]),
        Err(WsError::InvalidCloseCode)
    );
    assert_eq!(
        decode_all(Role::Client, &[0x88, 0x02, 0x03, 0xE7]),
        Err(WsError::InvalidCloseCode)
    );
    assert_eq!(
        decode_all(Role::Client, &[0x88, 0x03, 0x03, 0xE8, 0xFF]),
        Err(WsError::InvalidCloseReason)
    );
    assert_eq!(
        decode_all(Role::Client, &[0x88, 0x02, 0x0F, 0xA0]).unwrap(),
        [Out::Close(Some(4000), String::new())]
    );
    assert_eq!(
        decode_all(Role::Client, &[0x88, 0x00, 0x82, 0x00]),
        Err(WsError::AfterClose)
    );
}

#[test]
fn payload_cap() {
    let mut dec = FrameDecoder::new(Role::Client, 100);
    let mut wire = [0x82, 0x65];
    assert_eq!(
        dec.decode(&mut wire),
        Err(WsError::TooLarge { len: 101, max: 100 })
    );
    assert_eq!(WsError::TooLarge { len: 1, max: 0 }.close_code(), 1009);
}

#[test]
fn data_is_streamed_before_frame_end() {
    let mut dec = FrameDecoder::new(Role::Client, 1 << 20);
    let mut wire = vec![0x82, 0x7E, 0x01, 0x00, b'x', b'y'];
    let d = dec.decode(&mut wire).unwrap();
    assert_eq!(d.consumed, 6);
    assert_eq!(
        d.event,
        Some(Event::Data {
            payload: b"xy",
            text: false,
            fin: false
        })
    );
    let mut more = [b'z'; 254];
    let d = dec.decode(&mut more).unwrap();
    assert_eq!(d.consumed, 254);
    assert!(matches!(d.event, Some(Event::Data { fin: true, .. })));
}

fn opcode_strategy() -> impl Strategy<Value = Opcode> {
    prop_oneof![Just(Opcode::Binary), Just(Opcode::Text)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        skiff_transport::fuzz::fuzz_ws(&data);
    }

    #[test]
    fn frame_like_bytes_never_panic(
        head in proptest::collection::vec(prop_oneof![Just(0x82u8), Just(0x89), Just(0x88), Just(0x80), Just(0x7E), Just(0xFE), Just(0xFF), any::<u8>()], 0..32),
        tail in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut data = head;
        data.extend(tail);
        skiff_transport::fuzz::fuzz_ws(&data);
    }

    #[test]
    fn encode_decode_identity(
        frames in proptest::collection::vec(
            (opcode_strategy(), proptest::collection::vec(any::<u8>(), 0..2000), any::<[u8; 4]>()),
            1..6),
        masked in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut wire = Vec::new();
        let mut want = Vec::new();
        for (op, payload, key) in &frames {
            encode_frame(true, *op, payload, masked.then_some(*key), &mut wire);
            want.push(msg(*op == Opcode::Text, payload));
        }
        let role = if masked { Role::Server } else { Role::Client };
        prop_assert_eq!(decode_all(role, &wire).unwrap(), want.clone());
        let at = cut.index(wire.len() + 1);
        prop_assert_eq!(decode_split(role, &wire, &[at]).unwrap(), want);
    }

    #[test]
    fn header_identity_any_length(len in any::<u64>().prop_map(|l| l >> 1), fin in any::<bool>(), key in proptest::option::of(any::<[u8; 4]>())) {
        let mut wire = Vec::new();
        encode_header(fin, Opcode::Binary, len, key, &mut wire);
        let (h, n) = skiff_transport::ws::parse_header(&wire, u64::MAX).unwrap().complete().unwrap();
        prop_assert_eq!(n, wire.len());
        prop_assert_eq!(h.header_len(), wire.len());
        prop_assert_eq!((h.fin, h.opcode, h.mask, h.payload_len), (fin, Opcode::Binary, key, len));
    }

    #[test]
    fn mask_matches_reference(data in proptest::collection::vec(any::<u8>(), 0..300), key in any::<[u8; 4]>(), offset in 0usize..1000, start in 0usize..8) {
        let start = start.min(data.len());
        let mut a = data.clone();
        let mut b = data;
        apply_mask(&mut a[start..], key, offset);
        skiff_transport::ws::mask::apply_mask_reference(&mut b[start..], key, offset);
        prop_assert_eq!(a, b);
    }
}
