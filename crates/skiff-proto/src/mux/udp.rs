//! One UDP session carried over Mux.Cool, server side: what Xray clients send for UDP over
//! VLESS (XUDP, always with XTLS Vision; also plain Mux UDP). The first frame opens the
//! session and names its destination; its datagrams, and the replies framed as Keep frames
//! with the source address, then flow through the usual datagram halves.
//!
//! Only the session the first frame opened is served, to that destination: frames of other
//! sessions, and datagrams a client addresses elsewhere (full-cone use of one XUDP session),
//! are dropped. TCP sub-connections (Mux proper) are refused.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use skiff_core::{Address, BoxStream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};

use super::frame::{
    NETWORK_UDP, OPTION_DATA, STATUS_END, STATUS_KEEP, STATUS_NEW, encode_end, encode_udp_keep,
    parse_frame,
};
use crate::datagram::{DatagramRecv, DatagramSend};

/// A first frame larger than this is not a UDP session opening.
const FIRST_FRAME_MAX: usize = 2 + 512 + 2 + 65_535;

/// The opened session.
pub struct MuxUdp {
    pub destination: Address,
    pub reader: MuxUdpReader,
    pub writer: MuxUdpWriter,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads the first frame: it must be New with network UDP. The caller applies the handshake
/// timeout.
pub async fn accept_udp(mut stream: BoxStream) -> io::Result<MuxUdp> {
    let mut buf = Vec::with_capacity(2048);
    let (frame, len) = loop {
        if let Some(parsed) = parse_frame(&buf).map_err(|e| invalid(e.to_string()))? {
            break parsed;
        }
        if buf.len() >= FIRST_FRAME_MAX {
            return Err(invalid("Mux: first frame too long".into()));
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "Mux: closed before the first frame",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    if frame.status != STATUS_NEW {
        return Err(invalid(
            "Mux: the first frame does not open a session".into(),
        ));
    }
    let (Some(NETWORK_UDP), Some(destination)) = (frame.network, frame.address.clone()) else {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "Mux TCP sub-connections are not supported (only UDP/XUDP sessions)",
        ));
    };
    let first =
        (frame.option & OPTION_DATA != 0).then(|| Bytes::copy_from_slice(&buf[frame.data.clone()]));
    buf.drain(..len);
    let (read, write) = tokio::io::split(stream);
    let end = buf.len();
    Ok(MuxUdp {
        destination: destination.clone(),
        reader: MuxUdpReader {
            inner: read,
            session: frame.session,
            destination: destination.clone(),
            first,
            buf,
            end,
            ended: false,
        },
        writer: MuxUdpWriter {
            inner: write,
            session: frame.session,
            source: destination,
            frame: Vec::new(),
            pos: 0,
            ended: false,
        },
    })
}

pub struct MuxUdpReader {
    inner: ReadHalf<BoxStream>,
    session: u16,
    destination: Address,
    /// The datagram that came with the New frame.
    first: Option<Bytes>,
    /// `buf[..end]` holds bytes received and not yet parsed.
    buf: Vec<u8>,
    end: usize,
    ended: bool,
}

impl DatagramRecv for MuxUdpReader {
    fn poll_recv_datagram(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Ok(Some(first)));
        }
        loop {
            if self.ended {
                return Poll::Ready(Ok(None));
            }
            match parse_frame(&self.buf[..self.end]).map_err(|e| invalid(e.to_string()))? {
                Some((frame, len)) => {
                    let ours = frame.session == self.session;
                    let data = (ours
                        && frame.option & OPTION_DATA != 0
                        && matches!(frame.status, STATUS_NEW | STATUS_KEEP)
                        && frame
                            .address
                            .as_ref()
                            .is_none_or(|a| *a == self.destination))
                    .then(|| Bytes::copy_from_slice(&self.buf[frame.data.clone()]));
                    if ours && frame.status == STATUS_END {
                        self.ended = true;
                    }
                    self.buf.copy_within(len..self.end, 0);
                    self.end -= len;
                    if let Some(data) = data {
                        return Poll::Ready(Ok(Some(data)));
                    }
                }
                None => {
                    if self.buf.len() < self.end + 4096 {
                        self.buf.resize(self.end + 4096, 0);
                    }
                    let mut read = ReadBuf::new(&mut self.buf[self.end..]);
                    ready!(Pin::new(&mut self.inner).poll_read(cx, &mut read))?;
                    let n = read.filled().len();
                    if n == 0 {
                        if self.end == 0 {
                            return Poll::Ready(Ok(None));
                        }
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "Mux: closed inside a frame",
                        )));
                    }
                    self.end += n;
                }
            }
        }
    }

    fn buffered(&self) -> usize {
        self.end
    }
}

pub struct MuxUdpWriter {
    inner: WriteHalf<BoxStream>,
    session: u16,
    /// Replies are framed as coming from the session's destination.
    source: Address,
    frame: Vec<u8>,
    pos: usize,
    ended: bool,
}

impl MuxUdpWriter {
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.pos < self.frame.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.frame[self.pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pos += n;
        }
        self.frame.clear();
        self.pos = 0;
        Poll::Ready(Ok(()))
    }
}

impl DatagramSend for MuxUdpWriter {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_drain(cx)
    }

    fn start_send(&mut self, payload: &[u8]) -> io::Result<()> {
        encode_udp_keep(&mut self.frame, self.session, &self.source, payload);
        Ok(())
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        if !self.ended {
            self.ended = true;
            encode_end(&mut self.frame, self.session, false);
            ready!(self.poll_drain(cx))?;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagram;
    use tokio::io::AsyncWriteExt;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_udp_session_round_trip() {
        let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
        let mut wire = hex("0014 0000 01 01 02 4ee9 01 7f000001 0102030405060708 0003 6f6e65");
        // Keep for our session, one for another session (dropped), then End.
        wire.extend(hex("0004 0000 02 01 0003 74776f"));
        wire.extend(hex("0004 0007 02 01 0001 78"));
        wire.extend(hex("0004 0000 03 00"));
        b.write_all(&wire).await.unwrap();
        let mut udp = accept_udp(Box::new(a)).await.unwrap();
        assert_eq!(
            udp.destination,
            Address::Ip("127.0.0.1:20201".parse().unwrap())
        );
        let got = |x: Option<Bytes>| x.map(|b| b.to_vec());
        assert_eq!(
            got(datagram::recv(&mut udp.reader).await.unwrap()),
            Some(b"one".to_vec())
        );
        assert_eq!(
            got(datagram::recv(&mut udp.reader).await.unwrap()),
            Some(b"two".to_vec())
        );
        assert_eq!(got(datagram::recv(&mut udp.reader).await.unwrap()), None);
        datagram::send(&mut udp.writer, b"back").await.unwrap();
        datagram::shutdown(&mut udp.writer).await.unwrap();
        let mut out = Vec::new();
        b.read_to_end(&mut out).await.unwrap();
        let mut want = hex("000c 0000 02 01 02 4ee9 01 7f000001 0004");
        want.extend_from_slice(b"back");
        want.extend(hex("0004 0000 03 00"));
        assert_eq!(out, want);
    }

    #[tokio::test]
    async fn tcp_sessions_are_refused() {
        let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
        b.write_all(&hex("000c 0001 01 01 01 4ee8 01 7f000001 0001 78"))
            .await
            .unwrap();
        let err = accept_udp(Box::new(a)).await.err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::Unsupported);
    }
}
