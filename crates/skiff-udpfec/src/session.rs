//! One tunnel peer's state both ways, sans-IO: conversation-tagged packets in, cooked FEC
//! datagrams out, and back. A speederv2 client has one of these; a server one per client
//! address. Every packet inside the FEC layer starts with its conversation id (u32,
//! big-endian), which is how many UDP flows share one tunnel.

use std::time::Instant;

use crate::Error;
use crate::cook::CookOptions;
use crate::decoder::FecDecoder;
use crate::encoder::FecEncoder;
use crate::params::FecParams;

/// Conversation id length in front of every inner packet.
pub const CONV_LEN: usize = 4;

/// The largest datagram speederv2 reads from a socket (`max_data_len`); it drops larger ones.
pub const MAX_DATAGRAM: usize = 3600;

pub struct FecSession {
    cook: CookOptions,
    encoder: FecEncoder,
    decoder: FecDecoder,
    inner: Vec<Vec<u8>>,
}

impl FecSession {
    pub fn new(params: FecParams, cook: CookOptions, decode_capacity: usize) -> Self {
        FecSession {
            decoder: FecDecoder::new(params.disable_fec, decode_capacity),
            encoder: FecEncoder::new(params),
            cook,
            inner: Vec::new(),
        }
    }

    /// Queues `payload` of conversation `conv`; datagrams ready for the wire go to `out`.
    pub fn send(
        &mut self,
        conv: u32,
        payload: &[u8],
        now: Instant,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<(), Error> {
        if payload.len() > MAX_DATAGRAM {
            return Err(Error::TooLarge(payload.len()));
        }
        let mut packet = Vec::with_capacity(CONV_LEN + payload.len());
        packet.extend_from_slice(&conv.to_be_bytes());
        packet.extend_from_slice(payload);
        self.inner.clear();
        let result = self.encoder.push(&packet, now, &mut self.inner);
        self.cook_into(out);
        result
    }

    /// When `flush` is due, if a group is open.
    pub fn deadline(&self) -> Option<Instant> {
        self.encoder.deadline()
    }

    /// Closes the open group (its timeout passed); datagrams go to `out`.
    pub fn flush(&mut self, out: &mut Vec<Vec<u8>>) {
        self.inner.clear();
        self.encoder.flush(&mut self.inner);
        self.cook_into(out);
    }

    fn cook_into(&mut self, out: &mut Vec<Vec<u8>>) {
        for mut packet in self.inner.drain(..) {
            self.cook.cook(&mut packet);
            out.push(packet);
        }
    }

    /// Takes one datagram from the wire; the (conversation, payload) pairs it completes go
    /// to `out`. A datagram that fails its checksum or framing is an error and changes nothing
    /// else.
    pub fn receive(
        &mut self,
        datagram: &mut [u8],
        out: &mut Vec<(u32, Vec<u8>)>,
    ) -> Result<(), Error> {
        let len = self.cook.uncook(datagram)?;
        self.receive_uncooked(&datagram[..len], out)
    }

    /// `receive` for a datagram the caller already uncooked (a server checks the outer layer
    /// before it gives an address any state, as speederv2 does).
    pub fn receive_uncooked(
        &mut self,
        packet: &[u8],
        out: &mut Vec<(u32, Vec<u8>)>,
    ) -> Result<(), Error> {
        self.inner.clear();
        let result = self.decoder.input(packet, &mut self.inner);
        for mut packet in self.inner.drain(..) {
            if packet.len() < CONV_LEN {
                continue; // speederv2 skips such packets too
            }
            let conv = u32::from_be_bytes(packet[..CONV_LEN].try_into().expect("4 bytes"));
            // In place: the payload moves down over the id, no second allocation.
            packet.drain(..CONV_LEN);
            out.push((conv, packet));
        }
        result
    }
}
