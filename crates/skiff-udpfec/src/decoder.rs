//! FEC packets → the packets they carry, as speederv2's `fec_decode_manager_t` does: mode-1
//! data shards are handed on as they arrive, a group is decoded as soon as enough shards are
//! in, and only what was missing comes out of a mode-1 decode. Memory is bounded: at most
//! `capacity` shards are held (the oldest group is forgotten first, like `--decode-buf`) and
//! a bounded set of finished groups makes late and replayed shards no-ops.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use crate::Error;
use crate::header::ShardHeader;
use crate::rs::{CodeCache, MAX_SHARDS};

/// speederv2's `--decode-buf` default.
pub const DEFAULT_DECODE_CAPACITY: usize = 2000;

/// Most packets one mode-0 blob may claim to hold (`max_blob_packet_num`).
const MAX_BLOB_PACKETS: usize = 30_000;

/// Finished groups remembered per decoder.
const DONE_MEMORY: usize = 8192;

#[derive(Default)]
struct Group {
    mode: u8,
    /// x and y once a shard that carries them arrived (mode-1 data shards do not).
    shape: Option<(usize, usize)>,
    /// Length of the shards that carry the shape (every mode-0 shard, mode-1 parity).
    shard_len: usize,
    shards: BTreeMap<u8, Vec<u8>>,
}

pub struct FecDecoder {
    disable_fec: bool,
    capacity: usize,
    codes: CodeCache,
    groups: HashMap<u32, Group>,
    /// One entry per held shard: the group it belongs to, oldest first.
    held: VecDeque<u32>,
    done: HashSet<u32>,
    done_order: VecDeque<u32>,
}

impl FecDecoder {
    /// `capacity`: most shards held at once (at least 1).
    pub fn new(disable_fec: bool, capacity: usize) -> Self {
        FecDecoder {
            disable_fec,
            capacity: capacity.max(1),
            codes: CodeCache::default(),
            groups: HashMap::new(),
            held: VecDeque::new(),
            done: HashSet::new(),
            done_order: VecDeque::new(),
        }
    }

    /// Groups currently open (for tests and stats).
    pub fn open_groups(&self) -> usize {
        self.groups.len()
    }

    /// Takes one uncooked FEC packet; packets it completes are appended to `out`.
    pub fn input(&mut self, packet: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        if self.disable_fec {
            out.push(packet.to_vec());
            return Ok(());
        }
        let (header, payload) = ShardHeader::parse(packet)?;
        let (x, y) = (header.data_shards as usize, header.parity_shards as usize);
        match header.mode {
            0 if x == 0 => return Err(Error::Malformed("mode 0 shard without a group size")),
            0 => {}
            1 => {
                if payload.len() < 2 {
                    return Err(Error::Truncated("mode 1 length"));
                }
                let declared = u16::from_be_bytes([payload[0], payload[1]]) as usize;
                if x == 0 && declared + 2 != payload.len() {
                    return Err(Error::Malformed("mode 1 length does not match"));
                }
            }
            _ => return Err(Error::Malformed("unknown FEC mode")),
        }
        if x + y >= MAX_SHARDS {
            return Err(Error::Malformed("group too large"));
        }
        if x != 0 && header.index as usize >= x + y {
            return Err(Error::Malformed("shard index outside its group"));
        }
        if self.done.contains(&header.seq) {
            return Ok(()); // late or replayed shard of a finished group
        }
        if let Some(group) = self.groups.get(&header.seq) {
            if group.shards.contains_key(&header.index) {
                return Ok(()); // duplicate shard
            }
            if !group.shards.is_empty() && group.mode != header.mode {
                return Err(Error::Malformed("mode differs within a group"));
            }
            if x != 0
                && let Some(shape) = group.shape
                && (shape != (x, y) || group.shard_len != payload.len())
            {
                return Err(Error::Malformed("group shape differs between shards"));
            }
        }
        if self.held.len() >= self.capacity {
            let oldest = self.held.pop_front().expect("non-empty");
            if oldest == header.seq {
                // The group outlived the buffer; speederv2 refuses the shard too.
                self.forget(oldest);
                return Err(Error::Malformed("group older than the decode buffer"));
            }
            self.forget(oldest);
        }
        let group = self.groups.entry(header.seq).or_default();
        group.mode = header.mode;
        if x != 0 && group.shape.is_none() {
            group.shape = Some((x, y));
            group.shard_len = payload.len();
        }
        group.shards.insert(header.index, payload.to_vec());
        self.held.push_back(header.seq);

        let held = group.shards.len();
        match (header.mode, group.shape) {
            (0, Some((x, _))) if held > x => self.finish(header.seq),
            (0, Some((x, _))) if held == x => {
                let result = self.decode_blob(header.seq, out);
                self.finish(header.seq);
                result?;
            }
            (1, Some((x, _))) if held > x + 1 => self.finish(header.seq),
            (1, Some((x, _))) if held >= x => {
                let result = self.decode_per_packet(header.seq, header.index, out);
                self.finish(header.seq);
                result?;
            }
            (1, _) if x == 0 => out.push(payload[2..].to_vec()),
            _ => {}
        }
        Ok(())
    }

    fn decode_blob(&mut self, seq: u32, out: &mut Vec<Vec<u8>>) -> Result<(), Error> {
        let Some(group) = self.groups.get_mut(&seq) else {
            return Err(Error::Malformed("no such group"));
        };
        let (x, y) = group.shape.expect("shape known");
        let len = group.shard_len;
        let mut shards: Vec<Option<Vec<u8>>> = vec![None; x + y];
        // Moved, not copied: the caller finishes the group whatever the outcome.
        for (index, shard) in std::mem::take(&mut group.shards) {
            if let Some(slot) = shards.get_mut(usize::from(index)) {
                *slot = Some(shard);
            }
        }
        let code = self.codes.get(x, x + y);
        if !code.reconstruct(&mut shards, len) {
            return Err(Error::Malformed("too few shards"));
        }
        let mut blob = Vec::with_capacity(x * len);
        for shard in &shards[..x] {
            blob.extend_from_slice(shard.as_deref().expect("rebuilt"));
        }
        parse_blob(&blob, out)
    }

    fn decode_per_packet(
        &mut self,
        seq: u32,
        current: u8,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        let group = &self.groups[&seq];
        let (x, y) = group.shape.expect("shape known");
        let len = group.shard_len;
        let mut shards: Vec<Option<Vec<u8>>> = vec![None; x + y];
        for (index, shard) in &group.shards {
            let index = *index as usize;
            if index >= x + y || shard.len() > len {
                return Err(Error::Malformed("mode 1 shard outside its group"));
            }
            let mut padded = shard.clone();
            padded.resize(len, 0);
            shards[index] = Some(padded);
        }
        // Data shards already handed on are not sent again.
        let wanted: Vec<usize> = (0..x)
            .filter(|i| shards[*i].is_none() || *i == current as usize)
            .collect();
        let code = self.codes.get(x, x + y);
        if !code.reconstruct(&mut shards, len) {
            return Err(Error::Malformed("too few shards"));
        }
        let mut recovered = Vec::with_capacity(wanted.len());
        for i in wanted {
            let shard = shards[i].as_deref().expect("rebuilt");
            let inner = u16::from_be_bytes([shard[0], shard[1]]) as usize;
            if inner + 2 > shard.len() {
                return Err(Error::Malformed("recovered length exceeds its shard"));
            }
            recovered.push(shard[2..2 + inner].to_vec());
        }
        out.extend(recovered);
        Ok(())
    }

    /// Drops a group and remembers it as finished.
    fn finish(&mut self, seq: u32) {
        self.forget(seq);
    }

    fn forget(&mut self, seq: u32) {
        self.groups.remove(&seq);
        if self.done.insert(seq) {
            self.done_order.push_back(seq);
            if self.done_order.len() > DONE_MEMORY
                && let Some(old) = self.done_order.pop_front()
            {
                self.done.remove(&old);
            }
        }
    }
}

/// A mode-0 blob: u32 packet count, then per packet a u16 length and its bytes.
fn parse_blob(blob: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), Error> {
    if blob.len() < 4 {
        return Err(Error::Truncated("blob count"));
    }
    let count = u32::from_be_bytes(blob[..4].try_into().expect("4 bytes")) as usize;
    if count > MAX_BLOB_PACKETS {
        return Err(Error::Malformed("blob claims too many packets"));
    }
    let mut pos = 4;
    let mut packets = Vec::with_capacity(count.min(256));
    for _ in 0..count {
        if pos + 2 > blob.len() {
            return Err(Error::Truncated("blob packet length"));
        }
        let len = u16::from_be_bytes([blob[pos], blob[pos + 1]]) as usize;
        pos += 2;
        if pos + len > blob.len() {
            return Err(Error::Truncated("blob packet"));
        }
        packets.push(blob[pos..pos + len].to_vec());
        pos += len;
    }
    out.extend(packets);
    Ok(())
}
