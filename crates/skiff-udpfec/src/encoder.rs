//! Packets → FEC groups, as speederv2's `fec_encode_manager_t` forms them, sans-IO: the caller
//! pushes packets with the current time, sends what comes out, and calls `flush` when
//! `deadline` passes (speederv2's `--timeout` timer).

use std::time::Instant;

use crate::Error;
use crate::cook::COOK_OVERHEAD_MAX;
use crate::header::{HEADER_LEN, ShardHeader};
use crate::params::{FecMode, FecParams};
use crate::rs::CodeCache;

/// speederv2 estimates each shard's own overhead at 40 bytes when it picks the group size
/// that sends the fewest bytes (`header_overhead`).
const SHARD_OVERHEAD_ESTIMATE: usize = 40;

/// Bytes a mode-0 blob starts with: the packet count.
const BLOB_COUNT_LEN: usize = 4;

pub struct FecEncoder {
    params: FecParams,
    seq: u32,
    codes: CodeCache,
    /// Mode 0: the blob being filled (count placeholder, then u16 length + bytes per packet).
    blob: Vec<u8>,
    /// Mode 1: the group's shards so far, each u16 length + bytes.
    shards: Vec<Vec<u8>>,
    /// Packets in the open group.
    count: usize,
    opened_at: Option<Instant>,
}

impl FecEncoder {
    pub fn new(params: FecParams) -> Self {
        let mut seed = [0u8; 4];
        skiff_crypto::random::fill(&mut seed);
        FecEncoder {
            params,
            seq: u32::from_be_bytes(seed),
            codes: CodeCache::default(),
            blob: vec![0; BLOB_COUNT_LEN],
            shards: Vec::new(),
            count: 0,
            opened_at: None,
        }
    }

    pub fn params(&self) -> &FecParams {
        &self.params
    }

    /// When the open group must be flushed, if one is open.
    pub fn deadline(&self) -> Option<Instant> {
        self.opened_at.map(|t| t + self.params.timeout)
    }

    /// Adds one packet; FEC packets ready to send are appended to `out`.
    pub fn push(
        &mut self,
        packet: &[u8],
        now: Instant,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        if packet.len() > u16::MAX as usize {
            return Err(Error::TooLarge(packet.len()));
        }
        if self.params.disable_fec {
            out.push(packet.to_vec());
            return Ok(());
        }
        match self.params.mode {
            FecMode::Blob => self.push_blob(packet, now, out),
            FecMode::PerPacket => {
                self.push_per_packet(packet, now, out);
                Ok(())
            }
        }
    }

    /// Closes the open group (its timeout passed).
    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) {
        if self.count == 0 {
            return;
        }
        match self.params.mode {
            FecMode::Blob => self.close_blob(out),
            FecMode::PerPacket => self.close_per_packet(false, out),
        }
    }

    fn blob_shard_len(&self, shards: usize, next_packet: Option<usize>) -> usize {
        let len = self.blob.len() + next_packet.map_or(0, |n| 2 + n);
        len.div_ceil(shards)
    }

    fn push_blob(
        &mut self,
        packet: &[u8],
        now: Instant,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        let widest = self.params.max_data_shards();
        if self.blob_shard_len(widest, Some(packet.len())) > self.params.mtu {
            if self.count == 0 {
                // Even alone it would not fit: speederv2 drops it with a warning.
                return Err(Error::TooLarge(packet.len()));
            }
            self.close_blob(out);
        }
        if self.count == 0 {
            self.opened_at = Some(now);
        }
        self.blob
            .extend_from_slice(&(packet.len() as u16).to_be_bytes());
        self.blob.extend_from_slice(packet);
        self.count += 1;
        if self.count >= self.params.queue_len {
            self.close_blob(out);
        }
        Ok(())
    }

    /// speederv2's `short_packet_optimize`: the group size among 1..=x that sends the fewest
    /// bytes, counting an estimated per-shard overhead.
    fn blob_group_size(&self) -> usize {
        let widest = self.params.max_data_shards();
        let cost = |x: usize, shard_len: usize| {
            (shard_len + SHARD_OVERHEAD_ESTIMATE) * (x + self.params.redundancy_for(x))
        };
        let mut best = widest;
        let mut best_cost = cost(widest, self.blob_shard_len(widest, Some(0)));
        for x in 1..widest {
            let shard_len = self.blob_shard_len(x, Some(0));
            if shard_len > self.params.mtu {
                continue;
            }
            if cost(x, shard_len) < best_cost {
                best_cost = cost(x, shard_len);
                best = x;
            }
        }
        best
    }

    fn close_blob(&mut self, out: &mut Vec<Vec<u8>>) {
        let x = self.blob_group_size();
        let y = self.params.redundancy_for(x);
        self.blob[..BLOB_COUNT_LEN].copy_from_slice(&(self.count as u32).to_be_bytes());
        let shard_len = self.blob.len().div_ceil(x);
        self.blob.resize(shard_len * x, 0);
        let data: Vec<&[u8]> = self.blob.chunks(shard_len).collect();
        let code = self.codes.get(x, x + y);
        for i in 0..x + y {
            let mut packet = Vec::with_capacity(HEADER_LEN + shard_len + COOK_OVERHEAD_MAX);
            self.header(x, y, i).write(&mut packet);
            if i < x {
                packet.extend_from_slice(data[i]);
            } else {
                let start = packet.len();
                packet.resize(start + shard_len, 0);
                code.encode_parity(&data, i, &mut packet[start..]);
            }
            out.push(packet);
        }
        self.blob.clear();
        self.blob.resize(BLOB_COUNT_LEN, 0);
        self.finish_group();
    }

    fn push_per_packet(&mut self, packet: &[u8], now: Instant, out: &mut Vec<Vec<u8>>) {
        if self.count == 0 {
            self.opened_at = Some(now);
        }
        let mut shard = Vec::with_capacity(2 + packet.len());
        shard.extend_from_slice(&(packet.len() as u16).to_be_bytes());
        shard.extend_from_slice(packet);
        self.shards.push(shard);
        self.count += 1;
        if self.count >= self.params.max_data_shards() {
            self.close_per_packet(true, out);
        } else {
            out.push(self.data_packet(self.count - 1));
        }
    }

    /// A mode-1 data shard as sent: x = y = 0, unpadded.
    fn data_packet(&self, index: usize) -> Vec<u8> {
        let shard = &self.shards[index];
        let mut packet = Vec::with_capacity(HEADER_LEN + shard.len() + COOK_OVERHEAD_MAX);
        ShardHeader {
            seq: self.seq,
            mode: FecMode::PerPacket as u8,
            data_shards: 0,
            parity_shards: 0,
            index: index as u8,
        }
        .write(&mut packet);
        packet.extend_from_slice(shard);
        packet
    }

    /// Sends the parity of the mode-1 group, preceded by its last data shard when the group
    /// closed because that shard filled it (it has not been sent yet).
    fn close_per_packet(&mut self, last_unsent: bool, out: &mut Vec<Vec<u8>>) {
        let x = self.count;
        let y = self.params.redundancy_for(x);
        if last_unsent {
            out.push(self.data_packet(x - 1));
        }
        if y > 0 {
            let shard_len = self.shards.iter().map(Vec::len).max().unwrap_or(0);
            let padded: Vec<Vec<u8>> = self
                .shards
                .iter()
                .map(|s| {
                    let mut p = s.clone();
                    p.resize(shard_len, 0);
                    p
                })
                .collect();
            let data: Vec<&[u8]> = padded.iter().map(Vec::as_slice).collect();
            let code = self.codes.get(x, x + y);
            for i in x..x + y {
                let mut packet = Vec::with_capacity(HEADER_LEN + shard_len + COOK_OVERHEAD_MAX);
                self.header(x, y, i).write(&mut packet);
                let start = packet.len();
                packet.resize(start + shard_len, 0);
                code.encode_parity(&data, i, &mut packet[start..]);
                out.push(packet);
            }
        }
        self.shards.clear();
        self.finish_group();
    }

    fn header(&self, x: usize, y: usize, index: usize) -> ShardHeader {
        ShardHeader {
            seq: self.seq,
            mode: self.params.mode as u8,
            data_shards: x as u8,
            parity_shards: y as u8,
            index: index as u8,
        }
    }

    fn finish_group(&mut self) {
        self.seq = self.seq.wrapping_add(1);
        self.count = 0;
        self.opened_at = None;
    }
}
