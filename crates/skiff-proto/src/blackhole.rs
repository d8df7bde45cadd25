//! The `blackhole` outbound: swallows everything. With `response: http` the client first gets
//! a bare 403 so browsers stop retrying.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use skiff_core::{
    Address, BoxFuture, BoxPacketConn, BoxStream, Metadata, Outbound, PacketConn, ProxyStream,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const HTTP_403: &[u8] = b"HTTP/1.1 403 Forbidden\r\nConnection: close\r\nCache-Control: max-age=3600, public\r\nContent-Length: 0\r\n\r\n";

pub struct Blackhole {
    pub http_response: bool,
}

impl Outbound for Blackhole {
    fn connect<'a>(
        &'a self,
        _meta: &'a Metadata,
        _destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        let response: &'static [u8] = if self.http_response { HTTP_403 } else { b"" };
        Box::pin(async move {
            let stream: BoxStream = Box::new(Void { response });
            Ok(stream)
        })
    }

    fn bind<'a>(&'a self, _meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async {
            let conn: BoxPacketConn = Box::new(VoidPackets);
            Ok(conn)
        })
    }
}

/// Reads yield the canned response, then EOF; writes vanish.
struct Void {
    response: &'static [u8],
}

impl ProxyStream for Void {}

impl AsyncRead for Void {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self.response.len().min(buf.remaining());
        let (now, later) = self.response.split_at(n);
        buf.put_slice(now);
        self.response = later;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Void {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

struct VoidPackets;

impl PacketConn for VoidPackets {
    fn poll_recv_from(
        &self,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        Poll::Pending
    }
    fn send_to<'a>(&'a self, _: &'a [u8], _: &'a Address) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}
