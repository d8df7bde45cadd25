//! Datagrams captured from speederv2 (commit 17694ec) as client with `--disable-obscure` and no
//! key, sending "alpha-1", "bravo-22", "charlie-333" on one conversation. They pin UDPspeeder's
//! Reed–Solomon matrix (which is not kcp-go's), its headers, the blob layout and the CRC.

use skiff_udpfec::rs::RsCode;
use skiff_udpfec::{CookOptions, FecParams, FecSession};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Conversation ids speederv2 drew in the two captures.
const CONV: u32 = 0x3bd3_4546;
const CONV_MODE0: u32 = 0xe828_00b4;
const PAYLOADS: [&[u8]; 3] = [b"alpha-1", b"bravo-22", b"charlie-333"];

/// `-f 3:2 --mode 1 --timeout 1000`: three data shards sent as they came, then two parity.
const MODE1: [&str; 5] = [
    "29673e2401000000000b3bd34546616c7068612d310a095e67",
    "29673e2401000001000c3bd34546627261766f2d32326847a245",
    "29673e2401000002000f3bd34546636861726c69652d33333301616c98",
    "29673e2401030203002b3bd3454675849ec43fa8cc63aaaaaad18ce3ba",
    "29673e240103020400eb3bd345460906a677d00e9f225e5e5e87023fa8",
];

/// `-f 3:2 --mode 0 --timeout 20`: one blob, cut into 2 shards (speederv2 picked x = 2), and
/// 2 parity shards.
const MODE0: [&str; 4] = [
    "04cd48ee0002020000000003000be82800b4616c7068612d31000ce82800b46288bc0659",
    "04cd48ee000202017261766f2d3232000fe82800b4636861726c69652d333333ac99ddca",
    "04cd48ee00020202e4c2ecdb5a7941781e0cf3b4e57e73b5b7d8c6ef2266a7c061c7b2c1",
    "04cd48ee00020203d599c5aeb4efa7883cd958c14744450020ad85e63ccc923bea161afa",
];

fn plain() -> CookOptions {
    CookOptions {
        disable_obscure: true,
        ..CookOptions::default()
    }
}

/// Strips the CRC and the 8-byte header.
fn shard(datagram: &[u8]) -> Vec<u8> {
    datagram[8..datagram.len() - 4].to_vec()
}

#[test]
fn mode1_parity_matches_speederv2() {
    let data: Vec<Vec<u8>> = MODE1[..3]
        .iter()
        .map(|d| {
            let mut s = shard(&hex(d));
            s.resize(2 + 4 + 11, 0); // padded to the longest shard, as the encoder does
            s
        })
        .collect();
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let code = RsCode::new(3, 5);
    for (i, captured) in MODE1[3..].iter().enumerate() {
        let mut parity = vec![0u8; data[0].len()];
        code.encode_parity(&refs, 3 + i, &mut parity);
        assert_eq!(parity, shard(&hex(captured)), "parity shard {}", 3 + i);
    }
}

#[test]
fn mode0_parity_matches_speederv2() {
    let data: Vec<Vec<u8>> = MODE0[..2].iter().map(|d| shard(&hex(d))).collect();
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let code = RsCode::new(2, 4);
    for (i, captured) in MODE0[2..].iter().enumerate() {
        let mut parity = vec![0u8; data[0].len()];
        code.encode_parity(&refs, 2 + i, &mut parity);
        assert_eq!(parity, shard(&hex(captured)), "parity shard {}", 2 + i);
    }
}

/// Decodes the captured datagrams with some lost and checks the payloads come back.
fn decode(datagrams: &[&str], keep: &[usize]) -> Vec<(u32, Vec<u8>)> {
    let mut session = FecSession::new(FecParams::default(), plain(), 64);
    let mut out = Vec::new();
    for &i in keep {
        let mut d = hex(datagrams[i]);
        session.receive(&mut d, &mut out).unwrap();
    }
    out
}

#[test]
fn decodes_speederv2_mode1_with_two_data_shards_lost() {
    let mut got = decode(&MODE1, &[1, 3, 4]);
    got.sort_by_key(|a| a.1.len());
    let want: Vec<(u32, Vec<u8>)> = PAYLOADS.iter().map(|p| (CONV, p.to_vec())).collect();
    assert_eq!(got, want);
}

#[test]
fn decodes_speederv2_mode0_from_parity_alone() {
    let got = decode(&MODE0, &[2, 3]);
    let want: Vec<(u32, Vec<u8>)> = PAYLOADS.iter().map(|p| (CONV_MODE0, p.to_vec())).collect();
    assert_eq!(got, want);
}

#[test]
fn our_encoder_reproduces_speederv2_mode0_shards() {
    let mut params = FecParams::default();
    params.set_fec("3:2").unwrap();
    let mut encoder = skiff_udpfec::FecEncoder::new(params);
    let now = std::time::Instant::now();
    let mut out = Vec::new();
    for p in PAYLOADS {
        let mut inner = CONV_MODE0.to_be_bytes().to_vec();
        inner.extend_from_slice(p);
        encoder.push(&inner, now, &mut out).unwrap();
    }
    encoder.flush(&mut out);
    assert_eq!(out.len(), 4);
    for (ours, theirs) in out.iter().zip(MODE0) {
        // Everything but the random group sequence number is identical.
        assert_eq!(&ours[4..], &hex(theirs)[4..hex(theirs).len() - 4]);
    }
}
