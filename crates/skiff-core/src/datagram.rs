//! Datagrams carried inside one proxy stream (VLESS and VMess UDP, command 0x02): the
//! receiving and sending halves as the app moves datagrams through them, whatever the framing
//! underneath. The sending half works like a sink: wait until ready, hand over one datagram,
//! flush.

use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll};

use bytes::Bytes;

/// The receiving half.
pub trait DatagramRecv: Send {
    /// The next datagram, whole; `None` when the peer ended the stream between datagrams.
    /// Cancel-safe: a partly received datagram stays buffered.
    fn poll_recv_datagram(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>>;

    /// Bytes received but not returned yet: non-zero after an error means the stream ended or
    /// failed inside a datagram.
    fn buffered(&self) -> usize;
}

/// The sending half.
pub trait DatagramSend: Send {
    /// Ready once an earlier datagram no longer holds the way.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Takes one datagram (framed and, where the protocol says so, sealed into the half's
    /// buffer); [`DatagramSend::poll_flush`] writes it. A datagram the framing cannot carry is
    /// an `InvalidInput` error.
    fn start_send(&mut self, payload: &[u8]) -> io::Result<()>;

    /// Writes every datagram taken and flushes the stream.
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Ends the sending direction (the protocol's end mark, if any, then the stream's).
    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
}

pub type BoxDatagramRecv = Box<dyn DatagramRecv>;
pub type BoxDatagramSend = Box<dyn DatagramSend>;

/// Receives the next datagram (see [`DatagramRecv::poll_recv_datagram`]).
pub async fn recv<R: DatagramRecv + ?Sized>(half: &mut R) -> io::Result<Option<Bytes>> {
    poll_fn(|cx| half.poll_recv_datagram(cx)).await
}

/// Sends one datagram and flushes. If cancelled after the datagram was taken, the next
/// send (or a shutdown) finishes writing it first.
pub async fn send<S: DatagramSend + ?Sized>(half: &mut S, payload: &[u8]) -> io::Result<()> {
    poll_fn(|cx| half.poll_ready(cx)).await?;
    half.start_send(payload)?;
    poll_fn(|cx| half.poll_flush(cx)).await
}

/// Ends the sending direction.
pub async fn shutdown<S: DatagramSend + ?Sized>(half: &mut S) -> io::Result<()> {
    poll_fn(|cx| half.poll_shutdown(cx)).await
}
