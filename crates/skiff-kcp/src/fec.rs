//! kcp-go's Reed-Solomon FEC layer (spec/kcp.md §4).
//!
//! Header in front of the KCP bytes: `seqid u32 LE | flag u16 LE (0xf1 data, 0xf2 parity)`,
//! and for data shards a `size u16 LE = 2 + len(KCP bytes)`. The coded shard is everything from
//! the size field on, zero-padded to the longest shard of the group; parity shards carry exactly
//! that many bytes after their 6-byte header.

use crate::gf;

pub(crate) const FEC_HEADER_SIZE: usize = 6;
/// FEC header plus the data shard's size field: what the encoder reserves before KCP bytes.
pub(crate) const FEC_HEADER_SIZE_PLUS2: usize = 8;
pub(crate) const TYPE_DATA: u16 = 0xf1;
pub(crate) const TYPE_PARITY: u16 = 0xf2;
/// Shards older than this are dropped from the decoder queue.
const FEC_EXPIRE_MS: i32 = 60_000;

fn itimediff(later: u32, earlier: u32) -> i32 {
    later.wrapping_sub(earlier) as i32
}

/// Reads the flag of a packet that starts at its FEC header (`None` if shorter than 6 bytes).
pub(crate) fn fec_flag(pkt: &[u8]) -> Option<u16> {
    Some(u16::from_le_bytes([*pkt.get(4)?, *pkt.get(5)?]))
}

/// Turns outgoing KCP datagrams into data shards and, every `ds` of them, `ps` parity shards.
pub(crate) struct FecEncoder {
    ds: usize,
    ps: usize,
    next: u32,
    paws: u32,
    /// The current group's data shards, from the size field on (capacity kept across groups).
    shards: Vec<Vec<u8>>,
    count: usize,
    max_len: usize,
    /// `ps × ds` multiplication tables of the parity rows.
    tables: Vec<gf::MulTable>,
    parity: Vec<Vec<u8>>,
}

impl FecEncoder {
    pub(crate) fn new(ds: usize, ps: usize) -> Option<FecEncoder> {
        let m = gf::encoding_matrix(ds, ps)?;
        let tables = m[ds * ds..].iter().map(|&c| gf::MulTable::new(c)).collect();
        let group = (ds + ps) as u32;
        Some(FecEncoder {
            ds,
            ps,
            next: 0,
            paws: (u32::MAX / group) * group,
            shards: vec![Vec::new(); ds],
            count: 0,
            max_len: 0,
            tables,
            parity: vec![Vec::new(); ps],
        })
    }

    /// Marks `pkt[0..8]` (FEC header and size field; the KCP bytes follow) as the next data
    /// shard and caches it. Returns true when the group is complete and parity is ready to be
    /// taken with [`FecEncoder::write_parity`] for `0..ps`.
    pub(crate) fn encode(&mut self, pkt: &mut [u8]) -> bool {
        if pkt.len() < FEC_HEADER_SIZE_PLUS2 {
            return false;
        }
        pkt[0..4].copy_from_slice(&self.next.to_le_bytes());
        pkt[4..6].copy_from_slice(&TYPE_DATA.to_le_bytes());
        self.next = self.next.wrapping_add(1);
        let payload_len = pkt.len() - FEC_HEADER_SIZE;
        pkt[6..8].copy_from_slice(&(payload_len as u16).to_le_bytes());
        let Some(shard) = self.shards.get_mut(self.count) else {
            return false;
        };
        shard.clear();
        shard.extend_from_slice(&pkt[FEC_HEADER_SIZE..]);
        self.count += 1;
        self.max_len = self.max_len.max(payload_len);
        if self.count < self.ds {
            return false;
        }
        let len = self.max_len;
        for shard in &mut self.shards {
            shard.resize(len, 0);
        }
        for (r, parity) in self.parity.iter_mut().enumerate() {
            parity.clear();
            parity.resize(len, 0);
            for (c, shard) in self.shards.iter().enumerate() {
                gf::mul_add(&self.tables[r * self.ds + c], parity, shard);
            }
        }
        self.count = 0;
        self.max_len = 0;
        true
    }

    /// Appends parity shard `k` (header and bytes) to `out` and advances the sequence id.
    pub(crate) fn write_parity(&mut self, k: usize, out: &mut Vec<u8>) {
        let Some(parity) = self.parity.get(k) else {
            return;
        };
        out.extend_from_slice(&self.next.to_le_bytes());
        out.extend_from_slice(&TYPE_PARITY.to_le_bytes());
        out.extend_from_slice(parity);
        // Sequence ids wrap only after a parity shard, so groups stay aligned.
        self.next = self.next.wrapping_add(1) % self.paws.max(1);
    }

    /// Frees the shard caches between groups (idle sessions); they regrow on the next packet.
    pub(crate) fn shrink_if_between_groups(&mut self) {
        if self.count == 0 {
            for b in self.shards.iter_mut().chain(self.parity.iter_mut()) {
                *b = Vec::new();
            }
        }
    }

    pub(crate) fn parity_shards(&self) -> usize {
        self.ps
    }
}

struct RxShard {
    seqid: u32,
    parity: bool,
    ts: u32,
    /// Bytes after the 6-byte FEC header.
    data: Vec<u8>,
}

/// Collects shards by sequence id and rebuilds lost data shards of a group.
pub(crate) struct FecDecoder {
    ds: usize,
    group: usize,
    matrix: Vec<u8>,
    rx: Vec<RxShard>,
    rx_limit: usize,
    pool: Vec<Vec<u8>>,
    /// Shards rebuilt by the last [`FecDecoder::decode`]: `size u16 LE | KCP bytes | padding`.
    pub(crate) recovered: Vec<Vec<u8>>,
}

impl FecDecoder {
    pub(crate) fn new(ds: usize, ps: usize) -> Option<FecDecoder> {
        let matrix = gf::encoding_matrix(ds, ps)?;
        Some(FecDecoder {
            ds,
            group: ds + ps,
            matrix,
            rx: Vec::new(),
            rx_limit: 3 * (ds + ps),
            pool: Vec::new(),
            recovered: Vec::new(),
        })
    }

    /// Drops spare buffers (idle sessions); queued shards stay until complete or expired.
    pub(crate) fn shrink_idle(&mut self) {
        self.pool = Vec::new();
    }

    /// Hands back buffers of [`FecDecoder::recovered`] once the caller has used them.
    pub(crate) fn recycle_recovered(&mut self) {
        while let Some(b) = self.recovered.pop() {
            self.give(b);
        }
    }

    fn give(&mut self, b: Vec<u8>) {
        if self.pool.len() < self.group {
            self.pool.push(b);
        }
    }

    fn take(&mut self) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b
    }

    /// Feeds one FEC packet (starting at its seqid). Rebuilt data shards land in `recovered`.
    pub(crate) fn decode(&mut self, pkt: &[u8], now_ms: u32) {
        self.recycle_recovered();
        let (Some(seq), Some(flag), Some(body)) =
            (pkt.get(0..4), fec_flag(pkt), pkt.get(FEC_HEADER_SIZE..))
        else {
            return;
        };
        let seqid = u32::from_le_bytes([seq[0], seq[1], seq[2], seq[3]]);
        let parity = flag == TYPE_PARITY;

        // Ordered insertion, searching from the newest end, dropping duplicates.
        let mut insert_at = 0;
        for i in (0..self.rx.len()).rev() {
            let other = self.rx[i].seqid;
            if other == seqid {
                return;
            }
            if itimediff(seqid, other) > 0 {
                insert_at = i + 1;
                break;
            }
        }
        let mut data = self.take();
        data.extend_from_slice(body);
        self.rx.insert(
            insert_at,
            RxShard {
                seqid,
                parity,
                ts: now_ms,
                data,
            },
        );

        let group = self.group as u32;
        let begin = seqid - seqid % group;
        let end = begin.wrapping_add(group - 1);
        // The group's shards are contiguous in the ordered queue around `insert_at`.
        let lo = insert_at.saturating_sub((seqid % group) as usize);
        let hi = (lo + self.group).min(self.rx.len());
        let mut first = None;
        let mut present = 0;
        let mut data_present = 0;
        let mut max_len = 0;
        for i in lo..hi {
            let s = &self.rx[i];
            if itimediff(s.seqid, end) > 0 {
                break;
            }
            if itimediff(s.seqid, begin) >= 0 {
                first.get_or_insert(i);
                present += 1;
                data_present += usize::from(!s.parity);
                max_len = max_len.max(s.data.len());
            }
        }
        if let Some(first) = first {
            if data_present == self.ds {
                self.free_range(first, present);
            } else if present >= self.ds {
                self.reconstruct(first, present, begin, max_len);
                self.free_range(first, present);
            }
        }

        if self.rx.len() > self.rx_limit {
            self.free_range(0, 1);
        }
        let expired = self
            .rx
            .iter()
            .take_while(|s| itimediff(now_ms, s.ts) > FEC_EXPIRE_MS)
            .count();
        self.free_range(0, expired);
    }

    fn free_range(&mut self, first: usize, n: usize) {
        let end = (first + n).min(self.rx.len());
        if first >= end {
            return;
        }
        let limit = self.group;
        let mut pool = std::mem::take(&mut self.pool);
        for s in self.rx.drain(first..end) {
            if pool.len() < limit {
                pool.push(s.data);
            }
        }
        self.pool = pool;
    }

    /// Rebuilds the missing data shards of the group in `rx[first..first+n]`.
    fn reconstruct(&mut self, first: usize, n: usize, begin: u32, max_len: usize) {
        let ds = self.ds;
        let Some(shards) = self.rx.get(first..first + n) else {
            return;
        };
        // Index within the group → position in `shards`.
        let mut have: Vec<Option<usize>> = vec![None; self.group];
        for (pos, s) in shards.iter().enumerate() {
            if let Some(slot) = have.get_mut(s.seqid.wrapping_sub(begin) as usize) {
                *slot = Some(pos);
            }
        }
        // Any `ds` received shards determine the data: rows of the encoding matrix for them.
        let used: Vec<(usize, usize)> = have
            .iter()
            .enumerate()
            .filter_map(|(idx, pos)| pos.map(|p| (idx, p)))
            .take(ds)
            .collect();
        if used.len() < ds {
            return;
        }
        let mut sub = Vec::with_capacity(ds * ds);
        for &(idx, _) in &used {
            sub.extend_from_slice(&self.matrix[idx * ds..idx * ds + ds]);
        }
        let Some(inv) = gf::invert(&sub, ds) else {
            return;
        };
        let missing: Vec<usize> = (0..ds).filter(|&k| have[k].is_none()).collect();
        for k in missing {
            let mut out = self.pool.pop().unwrap_or_default();
            out.clear();
            out.resize(max_len, 0);
            for (j, &(_, pos)) in used.iter().enumerate() {
                let c = inv[k * ds + j];
                if c == 0 {
                    continue;
                }
                gf::mul_add(&gf::MulTable::new(c), &mut out, &self.rx[first + pos].data);
            }
            self.recovered.push(out);
        }
    }

    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.rx.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Builds a group of `ds` data packets (FEC header + size + kcp bytes) and its parity packets.
    fn group(ds: usize, ps: usize, payloads: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut enc = FecEncoder::new(ds, ps).unwrap();
        let mut out = Vec::new();
        for p in payloads {
            let mut pkt = vec![0u8; FEC_HEADER_SIZE_PLUS2];
            pkt.extend_from_slice(p);
            let ready = enc.encode(&mut pkt);
            out.push(pkt);
            if ready {
                for k in 0..enc.parity_shards() {
                    let mut par = Vec::new();
                    enc.write_parity(k, &mut par);
                    out.push(par);
                }
            }
        }
        out
    }

    #[test]
    fn header_layout_matches_live_packet() {
        let mut enc = FecEncoder::new(10, 3).unwrap();
        let mut first = vec![0u8; 8 + 32];
        enc.encode(&mut first);
        let mut second = vec![0u8; 8 + 37];
        enc.encode(&mut second);
        // spec §2.1: "01000000 f100 2700"
        assert_eq!(&second[..8], &[1, 0, 0, 0, 0xf1, 0, 0x27, 0]);
        assert_eq!(&first[..8], &[0, 0, 0, 0, 0xf1, 0, 0x22, 0]);
    }

    #[test]
    fn parity_is_the_matrix_applied_to_padded_shards() {
        let payloads: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8 + 1; 3 + i]).collect();
        let pkts = group(10, 3, &payloads);
        assert_eq!(pkts.len(), 13);
        let m = gf::encoding_matrix(10, 3).unwrap();
        let max = payloads.iter().map(|p| p.len() + 2).max().unwrap();
        for r in 0..3 {
            let par = &pkts[10 + r];
            assert_eq!(
                u32::from_le_bytes(par[0..4].try_into().unwrap()),
                10 + r as u32
            );
            assert_eq!(&par[4..6], &[0xf2, 0]);
            assert_eq!(par.len() - 6, max);
            for i in 0..max {
                let mut acc = 0;
                for c in 0..10 {
                    let b = pkts[c][6..].get(i).copied().unwrap_or(0);
                    acc ^= gf::mul(m[(10 + r) * 10 + c], b);
                }
                assert_eq!(par[6 + i], acc, "row {r} byte {i}");
            }
        }
    }

    #[test]
    fn complete_group_is_freed_without_recovery() {
        let payloads: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; 40]).collect();
        let pkts = group(10, 3, &payloads);
        let mut dec = FecDecoder::new(10, 3).unwrap();
        for p in &pkts[..10] {
            dec.decode(p, 0);
            assert!(dec.recovered.is_empty());
        }
        assert_eq!(dec.queued(), 0);
    }

    #[test]
    fn sequence_ids_wrap_after_parity_and_groups_still_decode() {
        let mut enc = FecEncoder::new(10, 3).unwrap();
        assert_eq!(enc.paws % 13, 0);
        enc.next = enc.paws - 13;
        let mut dec = FecDecoder::new(10, 3).unwrap();
        let mut seqids = Vec::new();
        let mut recovered = 0;
        for i in 0..20u8 {
            let mut pkt = vec![0u8; FEC_HEADER_SIZE_PLUS2];
            pkt.extend_from_slice(&[i; 30]);
            let ready = enc.encode(&mut pkt);
            seqids.push(u32::from_le_bytes(pkt[..4].try_into().unwrap()));
            // lose data shard 4 of each group
            if i % 10 != 4 {
                dec.decode(&pkt, 0);
            }
            if ready {
                for k in 0..3 {
                    let mut par = Vec::new();
                    enc.write_parity(k, &mut par);
                    seqids.push(u32::from_le_bytes(par[..4].try_into().unwrap()));
                    dec.decode(&par, 0);
                    recovered += dec.recovered.len();
                    for r in &dec.recovered {
                        assert_eq!(&r[2..32], &[i - 5; 30]);
                    }
                }
            }
        }
        assert_eq!(seqids[12], enc.paws - 1);
        assert_eq!(seqids[13], 0, "wraps to 0 after the group's last parity");
        assert_eq!(recovered, 2);
    }

    proptest! {
        #[test]
        fn recovers_any_loss_up_to_parity(
            ds in 1usize..12,
            ps in 1usize..5,
            lens in proptest::collection::vec(0usize..200, 12),
            lost_seed: u64,
            seed: u8,
        ) {
            let payloads: Vec<Vec<u8>> = (0..ds)
                .map(|i| (0..lens[i]).map(|j| (j as u8).wrapping_mul(31) ^ seed ^ i as u8).collect())
                .collect();
            let pkts = group(ds, ps, &payloads);
            prop_assert_eq!(pkts.len(), ds + ps);
            // Lose a pseudo-random set of at most `ps` shards.
            let mut lost = std::collections::BTreeSet::new();
            let mut x = lost_seed | 1;
            for _ in 0..ps {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                lost.insert((x % (ds + ps) as u64) as usize);
            }
            let mut dec = FecDecoder::new(ds, ps).unwrap();
            // What KCP would see: received data shards plus rebuilt ones. Shards arriving after a
            // group was complete can rebuild it again (kcp-go does the same; KCP drops the
            // duplicate segments), so compare distinct contents.
            let mut got: Vec<Vec<u8>> = Vec::new();
            for (i, p) in pkts.iter().enumerate() {
                if lost.contains(&i) { continue; }
                dec.decode(p, 0);
                if i < ds { got.push(payloads[i].clone()); }
                for r in &dec.recovered {
                    let sz = u16::from_le_bytes([r[0], r[1]]) as usize;
                    got.push(r[2..sz].to_vec());
                }
            }
            let mut want = payloads.clone();
            want.sort();
            want.dedup();
            got.sort();
            got.dedup();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn decoder_never_panics_and_stays_bounded(pkts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..200)) {
            let mut dec = FecDecoder::new(3, 2).unwrap();
            for (i, p) in pkts.iter().enumerate() {
                dec.decode(p, i as u32 * 1000);
                prop_assert!(dec.queued() <= 3 * 5);
            }
        }
    }
}
