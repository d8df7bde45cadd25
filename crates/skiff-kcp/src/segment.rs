//! The 24-byte KCP segment header (spec/kcp.md §5), little-endian.

pub(crate) const OVERHEAD: usize = 24;

pub(crate) const CMD_PUSH: u8 = 81;
pub(crate) const CMD_ACK: u8 = 82;
pub(crate) const CMD_WASK: u8 = 83;
pub(crate) const CMD_WINS: u8 = 84;

/// A segment header; the data (`len` bytes) follows it on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentHeader {
    pub conv: u32,
    pub cmd: u8,
    pub frg: u8,
    pub wnd: u16,
    pub ts: u32,
    pub sn: u32,
    pub una: u32,
    pub len: u32,
}

impl SegmentHeader {
    /// Writes the header into the first 24 bytes of `out` (which must be that long).
    pub fn encode(&self, out: &mut [u8; OVERHEAD]) {
        out[0..4].copy_from_slice(&self.conv.to_le_bytes());
        out[4] = self.cmd;
        out[5] = self.frg;
        out[6..8].copy_from_slice(&self.wnd.to_le_bytes());
        out[8..12].copy_from_slice(&self.ts.to_le_bytes());
        out[12..16].copy_from_slice(&self.sn.to_le_bytes());
        out[16..20].copy_from_slice(&self.una.to_le_bytes());
        out[20..24].copy_from_slice(&self.len.to_le_bytes());
    }

    /// Reads a header from the front of `data`; `None` if fewer than 24 bytes.
    pub fn decode(data: &[u8]) -> Option<SegmentHeader> {
        let h: &[u8; OVERHEAD] = data.get(..OVERHEAD)?.try_into().ok()?;
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        Some(SegmentHeader {
            conv: u32_at(0),
            cmd: h[4],
            frg: h[5],
            wnd: u16::from_le_bytes([h[6], h[7]]),
            ts: u32_at(8),
            sn: u32_at(12),
            una: u32_at(16),
            len: u32_at(20),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn live_push_header_decodes() {
        // spec §2.1: conv a9419b9a, PUSH, frg 0, wnd 512, ts 0x496, sn 1, una 0, len 13
        let b = [
            0xa9, 0x41, 0x9b, 0x9a, 0x51, 0x00, 0x00, 0x02, 0x96, 0x04, 0, 0, 1, 0, 0, 0, 0, 0, 0,
            0, 0x0d, 0, 0, 0,
        ];
        let h = SegmentHeader::decode(&b).unwrap();
        assert_eq!(
            h,
            SegmentHeader {
                conv: 0x9a9b41a9,
                cmd: CMD_PUSH,
                frg: 0,
                wnd: 512,
                ts: 0x496,
                sn: 1,
                una: 0,
                len: 13
            }
        );
        let mut out = [0u8; OVERHEAD];
        h.encode(&mut out);
        assert_eq!(out, b);
    }

    proptest! {
        #[test]
        fn encode_decode_is_identity(conv: u32, cmd: u8, frg: u8, wnd: u16, ts: u32, sn: u32, una: u32, len: u32) {
            let h = SegmentHeader { conv, cmd, frg, wnd, ts, sn, una, len };
            let mut out = [0u8; OVERHEAD];
            h.encode(&mut out);
            prop_assert_eq!(SegmentHeader::decode(&out), Some(h));
        }

        #[test]
        fn decode_never_panics(data: Vec<u8>) {
            let _ = SegmentHeader::decode(&data);
        }
    }
}
