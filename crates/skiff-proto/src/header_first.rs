//! The write side of a client that must send a request header before any payload (VLESS,
//! Trojan): the header rides in the same write as the first payload (up to a limit), or goes
//! alone when the client reads, flushes or shuts down first. After that, writes pass through.
//! [`HeaderFirstStream`] is that client as a stream.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use skiff_core::{BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// `out` holds the request header; nothing written yet.
    Unsent,
    /// `out[out_pos..]` (header, maybe with first payload) is still to be written.
    Draining,
    /// The header is out: writes go straight through.
    Done,
    /// The request could not be encoded.
    Failed,
}

pub(crate) struct HeaderFirst {
    /// The request header, then the header with the first payload; freed once written.
    out: Vec<u8>,
    out_pos: usize,
    state: State,
    /// Why the request could not be encoded, reported on the first I/O.
    failed: Option<String>,
    /// Names the protocol in that report.
    protocol: &'static str,
    /// At most this many payload bytes ride with the header.
    first_payload_max: usize,
    /// A writer that waits for `out` to drain while a reader may be the one finishing it.
    parked_writer: Option<Waker>,
}

impl HeaderFirst {
    /// `encoded` is the request header, or why it could not be encoded.
    pub(crate) fn new(
        protocol: &'static str,
        encoded: Result<Vec<u8>, String>,
        first_payload_max: usize,
    ) -> HeaderFirst {
        let (out, state, failed) = match encoded {
            Ok(out) => (out, State::Unsent, None),
            Err(why) => (Vec::new(), State::Failed, Some(why)),
        };
        HeaderFirst {
            out,
            out_pos: 0,
            state,
            failed,
            protocol,
            first_payload_max,
            parked_writer: None,
        }
    }

    /// The header is out: the wrapper adds nothing to writes any more.
    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    fn request_error(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "cannot encode {} request: {}",
                self.protocol,
                self.failed.as_deref().unwrap_or("unknown error")
            ),
        )
    }

    /// Writes what is left of `out`. Ready(Ok) once the header (and first payload) are out.
    fn poll_drain(&mut self, inner: &mut BoxStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.state {
            State::Done => return Poll::Ready(Ok(())),
            State::Failed => return Poll::Ready(Err(self.request_error())),
            State::Unsent => self.state = State::Draining,
            State::Draining => {}
        }
        while self.out_pos < self.out.len() {
            let n = ready!(Pin::new(&mut *inner).poll_write(cx, &self.out[self.out_pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.out_pos += n;
        }
        self.out = Vec::new();
        self.out_pos = 0;
        self.state = State::Done;
        if let Some(waker) = self.parked_writer.take() {
            waker.wake();
        }
        Poll::Ready(Ok(()))
    }

    /// Drains `out` on behalf of a writer, remembering it so a reader finishing the drain
    /// wakes it (the inner stream keeps only the last waker per direction).
    fn poll_drain_as_writer(
        &mut self,
        inner: &mut BoxStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        let poll = self.poll_drain(inner, cx);
        if poll.is_pending() {
            match &self.parked_writer {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                _ => self.parked_writer = Some(cx.waker().clone()),
            }
        }
        poll
    }

    /// On the read side: a client that reads before writing still has to send the header, or
    /// the server never answers.
    pub(crate) fn kick_from_reader(
        &mut self,
        inner: &mut BoxStream,
        cx: &mut Context<'_>,
    ) -> io::Result<()> {
        match self.state {
            State::Unsent | State::Draining => match self.poll_drain(inner, cx) {
                Poll::Ready(result) => result,
                // Whoever finishes the write, the reader is woken by the inner read it
                // registers next.
                Poll::Pending => Ok(()),
            },
            State::Failed => Err(self.request_error()),
            State::Done => Ok(()),
        }
    }

    pub(crate) fn poll_write(
        &mut self,
        inner: &mut BoxStream,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.state {
            State::Done => Pin::new(inner).poll_write(cx, buf),
            State::Unsent if !buf.is_empty() => {
                // Header and first payload in one write. The copied bytes are ours now: they
                // count as written even if the inner write has to wait.
                let take = buf.len().min(self.first_payload_max);
                self.out.reserve_exact(take);
                self.out.extend_from_slice(&buf[..take]);
                match self.poll_drain_as_writer(inner, cx) {
                    Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
                    _ => Poll::Ready(Ok(take)),
                }
            }
            _ => {
                ready!(self.poll_drain_as_writer(inner, cx))?;
                Pin::new(inner).poll_write(cx, buf)
            }
        }
    }

    pub(crate) fn poll_write_vectored(
        &mut self,
        inner: &mut BoxStream,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.state == State::Done {
            return Pin::new(inner).poll_write_vectored(cx, bufs);
        }
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &**b);
        self.poll_write(inner, cx, first)
    }

    pub(crate) fn poll_flush(
        &mut self,
        inner: &mut BoxStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_drain_as_writer(inner, cx))?;
        Pin::new(inner).poll_flush(cx)
    }

    pub(crate) fn poll_shutdown(
        &mut self,
        inner: &mut BoxStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_drain_as_writer(inner, cx))?;
        Pin::new(inner).poll_shutdown(cx)
    }

    /// A flush that does not send a header nobody has written behind yet: it finishes a
    /// write already started and flushes the inner stream (a server's response, below).
    fn poll_flush_unforced(
        &mut self,
        inner: &mut BoxStream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        if self.state == State::Draining {
            ready!(self.poll_drain_as_writer(inner, cx))?;
        }
        Pin::new(inner).poll_flush(cx)
    }
}

/// A stream whose writes go through [`HeaderFirst`] (Trojan's whole client; under VLESS's,
/// which also strips the response). Reads pass straight through, after sending a header
/// still waiting so that a server-speaks-first protocol gets going.
///
/// [`HeaderFirstStream::response`] is the server's side of the same idea: a response header
/// (VLESS's) that leaves with the first bytes of the answer, as Xray's does, not as soon as
/// the request is accepted. A client that ends its tunnel without reading (sing-box's does,
/// once its upload is done and nothing came back) would otherwise close with our unread
/// header in its socket, which the kernel answers with a reset that throws away the tail of
/// its upload. There reads pass straight through, a flush does not force the header out,
/// and a shutdown does (the client then reads a whole response).
pub(crate) struct HeaderFirstStream {
    inner: BoxStream,
    header: HeaderFirst,
    leads: Leads,
}

/// Whose header the stream holds back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leads {
    /// A client's request: a read or a flush sends it too.
    Request,
    /// A server's response: only the answer's first bytes or its end send it.
    Response,
}

impl HeaderFirstStream {
    pub(crate) fn new(inner: BoxStream, header: HeaderFirst) -> HeaderFirstStream {
        HeaderFirstStream {
            inner,
            header,
            leads: Leads::Request,
        }
    }

    /// A server stream whose `header` waits for the first answer.
    pub(crate) fn response(
        inner: BoxStream,
        protocol: &'static str,
        header: &[u8],
    ) -> HeaderFirstStream {
        HeaderFirstStream {
            inner,
            // The first answer rides whole with the header (the relay writes at most its
            // buffer's worth at a time).
            header: HeaderFirst::new(protocol, Ok(header.to_vec()), 64 * 1024),
            leads: Leads::Response,
        }
    }
}

impl AsyncRead for HeaderFirstStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.leads == Leads::Request && !this.header.is_done() {
            this.header.kick_from_reader(&mut this.inner, cx)?;
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for HeaderFirstStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.header.poll_write(&mut this.inner, cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.header.poll_write_vectored(&mut this.inner, cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.leads {
            Leads::Request => this.header.poll_flush(&mut this.inner, cx),
            Leads::Response => this.header.poll_flush_unforced(&mut this.inner, cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.header.poll_shutdown(&mut this.inner, cx)
    }
}

impl ProxyStream for HeaderFirstStream {
    /// Once the header is out the wrapper adds nothing: the relay may splice the socket
    /// underneath (only ever raw when the protocol runs without TLS).
    fn raw_tcp(&self) -> Option<&tokio::net::TcpStream> {
        if self.header.is_done() {
            self.inner.raw_tcp()
        } else {
            None
        }
    }

    /// A server's read side never carried anything of ours: spliceable from the start. A
    /// client's waits for its request to be out, which its reads may have to send.
    fn raw_tcp_read(&self) -> Option<&tokio::net::TcpStream> {
        match self.leads {
            Leads::Response => self.inner.raw_tcp_read(),
            Leads::Request => self.raw_tcp(),
        }
    }

    fn raw_tcp_write(&self) -> Option<&tokio::net::TcpStream> {
        if self.header.is_done() {
            self.inner.raw_tcp_write()
        } else {
            None
        }
    }

    fn take_read_residue(&mut self) -> Option<bytes::Bytes> {
        self.inner.take_read_residue()
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.leads == Leads::Request
            && !self.header.is_done()
            && let Err(error) = self.header.kick_from_reader(&mut self.inner, cx)
        {
            return Poll::Ready(Err(error));
        }
        self.inner.poll_read_ready(cx)
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A connected pair: the server side wrapped, the client side bare.
    async fn pair() -> (HeaderFirstStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (
            HeaderFirstStream::response(Box::new(server), "VLESS", &[0, 0]),
            client,
        )
    }

    async fn nothing_arrives(client: &mut TcpStream) -> bool {
        let mut byte = [0u8; 1];
        tokio::time::timeout(Duration::from_millis(150), client.read(&mut byte))
            .await
            .is_err()
    }

    #[tokio::test]
    async fn the_header_leaves_with_the_first_answer_not_on_a_flush() {
        let (mut server, mut client) = pair().await;
        assert!(
            server.raw_tcp_read().is_some(),
            "reads are ours from the start"
        );
        assert!(
            server.raw_tcp_write().is_none(),
            "the header is still to go"
        );
        server.flush().await.unwrap();
        assert!(
            nothing_arrives(&mut client).await,
            "a flush sent the header"
        );
        server.write_all(b"answer").await.unwrap();
        let mut got = [0u8; 8];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"\0\0answer");
        assert!(
            server.raw_tcp_write().is_some(),
            "spliceable once it is out"
        );
        server.write_all(b"more").await.unwrap();
        let mut got = [0u8; 4];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"more");
    }

    #[tokio::test]
    async fn an_answer_that_ends_empty_still_gets_the_header() {
        let (mut server, mut client) = pair().await;
        server.shutdown().await.unwrap();
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, [0, 0]);
    }

    #[tokio::test]
    async fn reading_sends_nothing() {
        let (mut server, mut client) = pair().await;
        client.write_all(b"request").await.unwrap();
        let mut got = [0u8; 7];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"request");
        assert!(nothing_arrives(&mut client).await, "a read sent the header");
    }
}
