//! A VMess connection as one byte stream (TCP, command 0x01), client or server side: reads
//! open the peer's chunks, writes seal ours. The header of our side leaves with the first
//! data; a client whose application has written nothing 100 ms after it started reading
//! sends it alone (as Xray waits 100 ms for a first payload), so server-speaks-first
//! protocols work.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use skiff_core::{BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::halves::{ChunkReader, ChunkWriter};
use super::packet::{VmessPacketReader, VmessPacketWriter};

/// How long a client waits for a first payload before its header leaves alone.
const FIRST_PAYLOAD_WAIT: Duration = Duration::from_millis(100);

/// See the module docs. Built by [`super::client::connect`] and [`super::server::accept`].
pub struct VmessStream {
    inner: BoxStream,
    reader: ChunkReader,
    writer: ChunkWriter,
    /// Client: armed once the reader waits while the header has not left.
    kick: Kick,
}

enum Kick {
    /// Server, or the header already left.
    Off,
    /// Client with the header unsent; the timer starts when the reader first waits.
    Armed(Option<Pin<Box<Sleep>>>),
}

impl VmessStream {
    pub(crate) fn new(
        inner: BoxStream,
        reader: ChunkReader,
        writer: ChunkWriter,
        client: bool,
    ) -> VmessStream {
        VmessStream {
            inner,
            reader,
            writer,
            kick: if client { Kick::Armed(None) } else { Kick::Off },
        }
    }

    /// The same connection as datagrams (UDP, command 0x02): every chunk is one datagram.
    pub fn into_packets(self) -> (VmessPacketReader, VmessPacketWriter) {
        let (read, write) = tokio::io::split(self.inner);
        (
            VmessPacketReader::new(read, self.reader),
            VmessPacketWriter::new(write, self.writer),
        )
    }

    /// Buffer bytes held by the reading and the writing direction (both 0 while idle).
    pub fn buffer_capacity(&self) -> (usize, usize) {
        (self.reader.capacity(), self.writer.capacity())
    }

    /// Client: sends the header alone once the first payload is overdue.
    fn poll_kick(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let Kick::Armed(timer) = &mut self.kick else {
            return Ok(());
        };
        if !self.writer.header_pending() {
            self.kick = Kick::Off;
            return Ok(());
        }
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(FIRST_PAYLOAD_WAIT)));
        if timer.as_mut().poll(cx).is_pending() {
            return Ok(());
        }
        match self.writer.poll_send_header(cx, &mut self.inner) {
            Poll::Ready(Ok(())) => {
                self.kick = Kick::Off;
                Ok(())
            }
            Poll::Ready(Err(e)) => Err(e),
            // The reader's waker is parked on the write; it comes back here.
            Poll::Pending => Ok(()),
        }
    }
}

impl AsyncRead for VmessStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.poll_kick(cx)?;
        if !this.reader.has_buffered() {
            // Take a read buffer only once the transport has something: a read that would
            // find nothing costs no allocation.
            ready!(this.inner.poll_read_ready(cx))?;
        }
        this.reader.poll_read(cx, &mut this.inner, buf)
    }
}

impl AsyncWrite for VmessStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.writer.poll_write(cx, &mut this.inner, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.writer.poll_flush(cx, &mut this.inner)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.writer.poll_shutdown(cx, &mut this.inner)
    }
}

impl ProxyStream for VmessStream {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.reader.has_buffered() {
            return Poll::Ready(Ok(()));
        }
        if let Err(e) = self.poll_kick(cx) {
            return Poll::Ready(Err(e));
        }
        self.inner.poll_read_ready(cx)
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}
