//! The 8-byte header in front of every FEC shard: group sequence (u32, big-endian), mode,
//! data shard count x, parity shard count y, index in the group. Mode-1 data shards carry
//! x = y = 0 so the receiver can hand them on at once.

use crate::Error;

pub const HEADER_LEN: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardHeader {
    pub seq: u32,
    pub mode: u8,
    pub data_shards: u8,
    pub parity_shards: u8,
    pub index: u8,
}

impl ShardHeader {
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&[self.mode, self.data_shards, self.parity_shards, self.index]);
    }

    pub fn parse(packet: &[u8]) -> Result<(ShardHeader, &[u8]), Error> {
        if packet.len() < HEADER_LEN {
            return Err(Error::Truncated("FEC header"));
        }
        let header = ShardHeader {
            seq: u32::from_be_bytes(packet[..4].try_into().expect("4 bytes")),
            mode: packet[4],
            data_shards: packet[5],
            parity_shards: packet[6],
            index: packet[7],
        };
        Ok((header, &packet[HEADER_LEN..]))
    }
}
