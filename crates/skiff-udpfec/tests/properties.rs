//! Property tests: any packets through encoder → (loss of up to y shards per group) → decoder
//! come back intact; the cook layer round-trips under any key; garbage never panics and never
//! yields a packet that was not sent.

use std::collections::HashMap;
use std::time::Instant;

use proptest::prelude::*;
use skiff_udpfec::header::ShardHeader;
use skiff_udpfec::{CookOptions, FecDecoder, FecEncoder, FecParams, FecSession};

fn params(mode: u32, x: usize, y: usize) -> FecParams {
    let mut p = FecParams::default();
    p.set_mode(mode).unwrap();
    p.set_fec(&format!("{x}:{y}")).unwrap();
    p.set_queue_len(50).unwrap();
    p
}

/// Encodes `packets` (closing the last group by timeout) and returns the FEC packets.
fn encode(p: FecParams, packets: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut encoder = FecEncoder::new(p);
    let now = Instant::now();
    let mut out = Vec::new();
    for packet in packets {
        encoder.push(packet, now, &mut out).unwrap();
    }
    encoder.flush(&mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_packet_survives_up_to_y_losses_per_group(
        mode in 0u32..2,
        x in 1usize..12,
        y in 0usize..6,
        packets in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..60),
        loss_seed in any::<u64>(),
    ) {
        let fec = encode(params(mode, x, y), &packets);
        // Group the shards, then drop up to y of each group chosen by the seed.
        let mut groups: HashMap<u32, Vec<&Vec<u8>>> = HashMap::new();
        for packet in &fec {
            let (header, _) = ShardHeader::parse(packet).unwrap();
            groups.entry(header.seq).or_default().push(packet);
        }
        let mut decoder = FecDecoder::new(false, 4000);
        let mut out = Vec::new();
        let mut seed = loss_seed;
        let mut seqs: Vec<u32> = groups.keys().copied().collect();
        seqs.sort_unstable();
        for seq in seqs {
            let shards = &groups[&seq];
            let (header, _) = ShardHeader::parse(shards[shards.len() - 1]).unwrap();
            // Mode-1 groups closed by timeout before their parity carry y = 0 data shards
            // only when no parity was sent; losing those would be real loss, so spare them.
            let parity = header.parity_shards as usize;
            let mut dropped = 0;
            for shard in shards {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if dropped < parity && (seed >> 33) % 3 == 0 {
                    dropped += 1;
                    continue;
                }
                decoder.input(shard, &mut out).unwrap();
            }
        }
        let mut got = out.clone();
        let mut want = packets.clone();
        got.sort();
        want.sort();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn cook_round_trips_under_any_key(
        key in prop::collection::vec(1u8..=255, 0..40),
        obscure in any::<bool>(),
        checksum in any::<bool>(),
        payload in prop::collection::vec(any::<u8>(), 0..1500),
    ) {
        let options = CookOptions { key, disable_obscure: !obscure, disable_checksum: !checksum };
        let mut packet = payload.clone();
        options.cook(&mut packet);
        let len = options.uncook(&mut packet).unwrap();
        prop_assert_eq!(&packet[..len], &payload[..]);
    }

    #[test]
    fn garbage_never_panics_nor_decodes_under_a_checksum(
        datagrams in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..400), 1..50),
    ) {
        let mut session = FecSession::new(FecParams::default(), CookOptions::default(), 64);
        let mut out = Vec::new();
        for mut d in datagrams {
            let _ = session.receive(&mut d, &mut out);
        }
        // A random datagram passes CRC-32 about once in 2^32 tries.
        prop_assert!(out.is_empty());
    }

    #[test]
    fn unchecked_garbage_never_panics(
        datagrams in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..400), 1..80),
    ) {
        let mut decoder = FecDecoder::new(false, 16);
        let mut out = Vec::new();
        for d in datagrams {
            let _ = decoder.input(&d, &mut out);
        }
        prop_assert!(decoder.open_groups() <= 16);
    }
}

#[test]
fn decoder_memory_is_bounded_by_its_capacity() {
    // 10 000 shards of distinct never-completing groups: at most `capacity` stay.
    let mut decoder = FecDecoder::new(false, 100);
    let mut out = Vec::new();
    for seq in 0..10_000u32 {
        let mut packet = Vec::new();
        ShardHeader {
            seq,
            mode: 0,
            data_shards: 5,
            parity_shards: 2,
            index: 0,
        }
        .write(&mut packet);
        packet.extend_from_slice(&[0u8; 1000]);
        decoder.input(&packet, &mut out).unwrap();
    }
    assert!(decoder.open_groups() <= 100);
    assert!(out.is_empty());
}
