//! Datagrams over a Trojan UDP ASSOCIATE stream (trojan.md §2). Both directions use the same
//! framing, each packet carrying an address (its destination client→server, its source
//! server→client), so the same type serves both sides:
//! * outbound: `TrojanPacketStream::new(client::connect(stream, hash, first, Command::UdpAssociate))`;
//! * inbound: `TrojanPacketStream::new(stream)` with the stream of [`super::server::TrojanAccept::Udp`].

use std::io;

use bytes::Bytes;
use skiff_core::{Address, BoxStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};

use super::codec::encode_packet;
use super::udp::PacketDecoder;

/// How much room a read gets: a typical datagram, so idle associations stay small.
const READ_CHUNK: usize = 4096;

/// A Trojan UDP stream as packets. See the module docs.
pub struct TrojanPacketStream {
    reader: TrojanPacketReader,
    writer: TrojanPacketWriter,
}

impl TrojanPacketStream {
    pub fn new(stream: BoxStream) -> TrojanPacketStream {
        let (read, write) = tokio::io::split(stream);
        TrojanPacketStream {
            reader: TrojanPacketReader {
                inner: read,
                decoder: PacketDecoder::new(),
            },
            writer: TrojanPacketWriter {
                inner: write,
                frame: Vec::new(),
            },
        }
    }

    /// The receiving and sending halves, usable from different tasks.
    pub fn into_split(self) -> (TrojanPacketReader, TrojanPacketWriter) {
        (self.reader, self.writer)
    }
}

/// The receiving half.
pub struct TrojanPacketReader {
    inner: ReadHalf<BoxStream>,
    decoder: PacketDecoder,
}

impl TrojanPacketReader {
    /// Receives the next datagram whole with its address. `Ok(None)` is the end of the stream
    /// between packets (the peer closed cleanly); the end inside a packet is an
    /// `UnexpectedEof` error, a malformed packet an `InvalidData` error. Cancel-safe: a partly
    /// received packet stays buffered.
    pub async fn recv_packet(&mut self) -> io::Result<Option<(Address, Bytes)>> {
        loop {
            match self.decoder.next_packet() {
                Ok(Some(packet)) => return Ok(Some(packet)),
                Ok(None) => {}
                Err(error) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, error));
                }
            }
            let buf = self.decoder.buffer_mut();
            if buf.capacity() - buf.len() < READ_CHUNK / 2 {
                buf.reserve(READ_CHUNK);
            }
            if self.inner.read_buf(buf).await? == 0 {
                if self.decoder.buffered() == 0 {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "Trojan UDP stream closed inside a packet",
                ));
            }
        }
    }

    /// Received bytes not yet returned as datagrams: non-zero after an error means the
    /// stream ended or failed inside a packet.
    pub fn buffered(&self) -> usize {
        self.decoder.buffered()
    }
}

/// The sending half.
pub struct TrojanPacketWriter {
    inner: WriteHalf<BoxStream>,
    /// Reused frame buffer.
    frame: Vec<u8>,
}

impl TrojanPacketWriter {
    /// Sends one datagram (header and payload in one write) and flushes. A payload over 65535
    /// bytes or an address the format cannot carry is an `InvalidInput` error. Not
    /// cancel-safe: a cancelled send may leave a partial packet on the stream.
    pub async fn send(&mut self, address: &Address, payload: &[u8]) -> io::Result<()> {
        self.frame.clear();
        encode_packet(address, payload, &mut self.frame)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
        self.inner.write_all(&self.frame).await?;
        if self.frame.capacity() > 16 * 1024 {
            // One jumbo datagram should not pin 64 KiB for the association's life.
            self.frame = Vec::new();
        }
        self.inner.flush().await
    }

    /// Shuts the sending direction down (half-close).
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.inner.shutdown().await
    }
}
