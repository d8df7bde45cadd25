//! Datagrams over a VMess connection (UDP, command 0x02, vmess.md §4.4): each datagram is
//! exactly one chunk, both ways; the destination is the one of the request header.

use std::io;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use skiff_core::BoxStream;
use tokio::io::{ReadHalf, WriteHalf};

use super::halves::{ChunkReader, ChunkWriter};
use crate::datagram::{DatagramRecv, DatagramSend};

/// The receiving half (from [`super::stream::VmessStream::into_packets`]).
pub struct VmessPacketReader {
    inner: ReadHalf<BoxStream>,
    reader: ChunkReader,
}

impl VmessPacketReader {
    pub(crate) fn new(inner: ReadHalf<BoxStream>, reader: ChunkReader) -> VmessPacketReader {
        VmessPacketReader { inner, reader }
    }
}

impl DatagramRecv for VmessPacketReader {
    fn poll_recv_datagram(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        let chunk = ready!(self.reader.poll_chunk(cx, &mut self.inner))?;
        Poll::Ready(Ok(chunk.map(Bytes::copy_from_slice)))
    }

    fn buffered(&self) -> usize {
        self.reader.buffered()
    }
}

/// The sending half.
pub struct VmessPacketWriter {
    inner: WriteHalf<BoxStream>,
    writer: ChunkWriter,
}

impl VmessPacketWriter {
    pub(crate) fn new(inner: WriteHalf<BoxStream>, writer: ChunkWriter) -> VmessPacketWriter {
        VmessPacketWriter { inner, writer }
    }
}

impl DatagramSend for VmessPacketWriter {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.writer.poll_ready(cx, &mut self.inner)
    }

    fn start_send(&mut self, payload: &[u8]) -> io::Result<()> {
        self.writer.start_packet(payload)
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.writer.poll_flush_packets(cx, &mut self.inner)
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.writer.poll_shutdown(cx, &mut self.inner)
    }
}
