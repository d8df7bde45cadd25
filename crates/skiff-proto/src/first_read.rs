//! The first read of a protocol whose inbound has fallbacks (VLESS, Trojan). Xray reads such a
//! request in one read of up to 8 KiB; when that read brought fewer bytes than the protocol
//! needs to recognise its client it falls back at once instead of waiting for the rest
//! (proxy/vless/inbound/inbound.go and proxy/trojan/server.go `Process`: `isfb && firstLen <
//! …`). A prober sending a few bytes therefore gets the fallback's answer, not a silent wait
//! for the handshake timeout. An end of stream before any byte is an error there too (no
//! fallback is dialled).

use std::io;

use bytes::Bytes;
use skiff_core::{BoxStream, Prefixed, ProxyStream};
use tokio::io::AsyncReadExt;

/// Xray's first read.
const FIRST_READ: usize = 8192;

enum FirstRead {
    /// Enough to decide: the protocol handshake goes on with this stream (which replays it).
    Enough(BoxStream),
    /// Too short: straight to the fallback with this stream (which replays it).
    Short(BoxStream),
}

/// The stream to run the handshake on, or (`Err`) the stream to hand to the fallback at
/// once: with fallbacks, a first read shorter than `recognisable`; without, never.
pub async fn or_fallback(
    stream: BoxStream,
    has_fallbacks: bool,
    recognisable: usize,
) -> io::Result<Result<BoxStream, BoxStream>> {
    if !has_fallbacks {
        return Ok(Ok(stream));
    }
    Ok(match first_read(stream, recognisable).await? {
        FirstRead::Enough(stream) => Ok(stream),
        FirstRead::Short(stream) => Err(stream),
    })
}

/// Reads once (allocating only when bytes are there, so silent connections stay small) and
/// sorts the connection by whether it sent at least `recognisable` bytes.
async fn first_read(mut stream: BoxStream, recognisable: usize) -> io::Result<FirstRead> {
    std::future::poll_fn(|cx| stream.poll_read_ready(cx)).await?;
    let mut buf = vec![0u8; FIRST_READ];
    let n = stream.read(&mut buf).await?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed before sending anything",
        ));
    }
    let first = Bytes::copy_from_slice(&buf[..n]);
    drop(buf);
    let stream: BoxStream = Box::new(Prefixed::new(first, stream));
    Ok(if n < recognisable {
        FirstRead::Short(stream)
    } else {
        FirstRead::Enough(stream)
    })
}
