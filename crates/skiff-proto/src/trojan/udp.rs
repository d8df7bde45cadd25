//! Incremental decoding of the Trojan UDP packet stream, sans-IO (trojan.md §2). Packets may
//! be split or coalesced arbitrarily by the stream below.

use bytes::{Buf, Bytes, BytesMut};
use skiff_core::Address;

use super::codec::{Parsed, TrojanError, parse_packet};

/// [`feed`](Self::feed) it received bytes, then call [`next_packet`](Self::next_packet) until
/// it returns `Ok(None)`. It holds at most the bytes fed but not yet returned as packets; call
/// `next_packet` after each `feed` to keep that at one packet (≤ header + 64 KiB) plus one read.
#[derive(Debug, Default)]
pub struct PacketDecoder {
    buf: BytesMut,
    failed: Option<TrojanError>,
}

impl PacketDecoder {
    pub fn new() -> PacketDecoder {
        PacketDecoder::default()
    }

    /// Adds received bytes (ignored after an error).
    pub fn feed(&mut self, data: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(data);
        }
    }

    /// Bytes fed but not yet returned: non-zero at the end of the stream means it was cut
    /// inside a packet.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The buffer itself, for an async reader to read into directly.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// The next complete packet (address and payload), `Ok(None)` when more bytes are needed.
    /// After an error the stream is unusable and every later call returns that error.
    pub fn next_packet(&mut self) -> Result<Option<(Address, Bytes)>, TrojanError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        match parse_packet(&self.buf) {
            Ok(Parsed::Complete(head)) => {
                let mut packet = self.buf.split_to(head.len);
                packet.advance(head.payload.start);
                Ok(Some((head.address, packet.freeze())))
            }
            Ok(Parsed::Incomplete) => Ok(None),
            Err(error) => {
                self.failed = Some(error.clone());
                self.buf = BytesMut::new();
                Err(error)
            }
        }
    }
}
