//! The async edge of mKCP (V2Ray's `network: "kcp"`): tokio UDP sockets and one timer task per
//! connection around the sans-IO [`skiff_kcp::mkcp::MkcpSession`], each connection exposed as
//! a stream the usual layers (TLS) and protocols run on.
//!
//! * [`conn`]: a session behind a mutex, driven by its task (sleep until the session's next
//!   deadline, a datagram, or a poke from the stream).
//! * [`stream`]: the connection as AsyncRead/AsyncWrite. mKCP has no half-close: shutdown
//!   only flushes; dropping the stream closes both directions, after queued data is acked.
//! * [`listener`]: a server's UDP socket, connections keyed by peer address and conv.
//! * [`dial`]: a client connection on its own connected UDP socket.

pub mod conn;
pub mod dial;
pub mod listener;
pub mod stream;

use tokio::net::UdpSocket;

/// Socket buffers asked for (the kernel may cap them): bursts of a full window must not be
/// dropped by a small default receive buffer.
const SOCKET_BUFFER: usize = 4 << 20;

pub(crate) fn tune_socket(socket: &UdpSocket) {
    let sock = socket2::SockRef::from(socket);
    let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
}

#[cfg(test)]
mod tests;
