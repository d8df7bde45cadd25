//! The VMess inbound handshake (vmess.md §2): identify the user from the auth ID, open the
//! request header, check it was not seen before, and hand back the connection as a stream
//! (TCP) or datagrams (UDP). Nothing is written here: the response header leaves with the
//! first response data.
//!
//! A failed authentication (unknown user, stale or replayed auth ID, a header that does not
//! open) looks like Xray's to a prober: on raw TCP the server keeps reading a fixed-per-server
//! number of bytes and then closes without a byte of its own; over TLS or WebSocket (where
//! Xray does not drain either) it closes at once. Problems after a good header (a replayed
//! session, an unknown security) close at once, as in Xray.

use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

use skiff_core::{Address, ProxyStream};
use tokio::io::AsyncReadExt;

use super::auth_id::AUTH_ID_LEN;
use super::chunk::{BodyCipher, BodyFormat, ChunkOpener, ChunkSealer};
use super::error::VmessError;
use super::halves::{ChunkReader, ChunkWriter};
use super::instruction::Command;
use super::packet::{VmessPacketReader, VmessPacketWriter};
use super::request::{MAX_REQUEST_LEN, RequestOpener};
use super::response::{plain_response_header, response_keys, seal_response};
use super::stream::VmessStream;
use super::users::VmessServer;
use skiff_core::wire::Parsed;

/// The handshake's read buffer: a whole maximal header, plus payload that came with it.
const HANDSHAKE_BUF: usize = 1024;
const _: () = assert!(MAX_REQUEST_LEN < HANDSHAKE_BUF);

/// The outcome of a VMess handshake.
pub enum VmessAccept {
    /// TCP: relay `stream` (payload both ways) to `destination`.
    Stream {
        destination: Address,
        stream: VmessStream,
        /// The user's email and level.
        user: Option<String>,
        level: u32,
    },
    /// UDP: datagrams to and from `destination`, one chunk each.
    Udp {
        destination: Address,
        reader: VmessPacketReader,
        writer: VmessPacketWriter,
        user: Option<String>,
        level: u32,
    },
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn invalid(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error)
}

/// Reads into `buf[*filled..]`; the end of the stream is an `UnexpectedEof` error.
async fn read_more<S: ProxyStream>(
    stream: &mut S,
    buf: &mut [u8],
    filled: &mut usize,
) -> io::Result<()> {
    let n = stream.read(&mut buf[*filled..]).await?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed inside the VMess request header",
        ));
    }
    *filled += n;
    Ok(())
}

/// Xray reads a connection in reads of up to 8 KiB (its buffer size), each taking whatever
/// has arrived. A refused connection is closed once the drain is satisfied, so whatever its
/// last read did not take makes the kernel answer with a reset; what it took does not. A
/// prober sees a FIN when its bytes fit that read and a reset past it: measured against Xray
/// 26.7, a probe sent at once gets a FIN up to 8192 bytes and a reset from 8193 on.
const XRAY_READ: usize = 8192;

/// Refuses an unauthenticated connection: with `drain`, reads until `budget` bytes have come
/// in all (or the peer stops), in Xray's 8 KiB reads, then answers the error; the caller
/// closes. `consumed`: bytes the handshake already read (within Xray's first read).
async fn refuse<S: ProxyStream>(
    stream: &mut S,
    drain: bool,
    budget: usize,
    consumed: usize,
    why: String,
) -> io::Error {
    if drain {
        let mut consumed = consumed;
        // The end of the Xray read the consumed bytes belong to.
        let mut read_end = XRAY_READ;
        let mut sink = [0u8; XRAY_READ];
        while consumed < budget {
            if consumed == read_end {
                read_end += XRAY_READ;
            }
            match stream.read(&mut sink[..read_end - consumed]).await {
                Ok(0) | Err(_) => return invalid(format!("invalid VMess request: {why}")),
                Ok(n) => consumed += n,
            }
        }
        // The last read took whatever had arrived up to its end, without waiting for more.
        while consumed < read_end {
            match try_read(stream, &mut sink[..read_end - consumed]).await {
                Some(n) if n > 0 => consumed += n,
                _ => break,
            }
        }
    }
    invalid(format!("invalid VMess request: {why}"))
}

/// One read that does not wait: Some(n) when bytes (or the end, n = 0) were there.
async fn try_read<S: ProxyStream>(stream: &mut S, buf: &mut [u8]) -> Option<usize> {
    use std::pin::Pin;
    use std::task::Poll;
    use tokio::io::ReadBuf;
    std::future::poll_fn(|cx| {
        let mut out = ReadBuf::new(buf);
        match Pin::new(&mut *stream).poll_read(cx, &mut out) {
            Poll::Ready(Ok(())) => Poll::Ready(Some(out.filled().len())),
            Poll::Ready(Err(_)) | Poll::Pending => Poll::Ready(None),
        }
    })
    .await
}

/// Runs the server side of the handshake on `stream`. `drain`: the stream is raw TCP, where a
/// failed authentication reads on before closing (see the module docs). The caller applies
/// the handshake timeout (which also bounds the drain) and logs errors.
pub async fn accept<S: ProxyStream>(
    mut stream: S,
    server: &VmessServer,
    drain: bool,
) -> io::Result<VmessAccept> {
    let mut buf = [0u8; HANDSHAKE_BUF];
    let mut filled = 0usize;
    let budget = server.drain_size();
    while filled < AUTH_ID_LEN {
        read_more(&mut stream, &mut buf, &mut filled).await?;
    }
    let mut auth_id = [0u8; AUTH_ID_LEN];
    auth_id.copy_from_slice(&buf[..AUTH_ID_LEN]);
    let now = unix_now();
    let users = server.users();
    let index = match server.authenticate_in(&users, &auth_id, now) {
        Ok(index) => index,
        Err(why) => return Err(refuse(&mut stream, drain, budget, filled, why.to_string()).await),
    };
    let Some(user) = users.get(index) else {
        return Err(invalid("VMess user index out of range"));
    };
    let mut opener = RequestOpener::new(user.cmd_key);
    let (ins, header_len) = loop {
        match opener.open(&mut buf[..filled]) {
            Ok(Parsed::Complete(parsed)) => break parsed,
            Ok(Parsed::Incomplete) if filled == buf.len() => {
                // Unreachable: a maximal header fits in the buffer.
                return Err(invalid(VmessError::HeaderTooLong(filled)));
            }
            Ok(Parsed::Incomplete) => read_more(&mut stream, &mut buf, &mut filled).await?,
            Err(VmessError::HeaderAuth) => {
                let why = VmessError::HeaderAuth.to_string();
                return Err(refuse(&mut stream, drain, budget, filled, why).await);
            }
            Err(e) => return Err(invalid(e)),
        }
    };
    if !server.fresh_session(index, &ins.body_key, &ins.body_iv, now) {
        return Err(invalid(VmessError::ReplayedSession));
    }
    let format = BodyFormat::of_request(&ins).map_err(invalid)?;
    if server.refuse_insecure && format.cipher == BodyCipher::None {
        return Err(invalid(
            "VMess client is using insecure encryption (security none)",
        ));
    }
    let destination = match (ins.command, ins.destination.clone()) {
        // Mux.Cool: the stream goes on to `v1.mux.cool`, which the dispatcher serves.
        (Command::Mux, _) => Address::Domain(crate::mux::MUX_COOL_DOMAIN.into(), 0),
        (_, Some(destination)) => destination,
        (_, None) => return Err(invalid(VmessError::BadDestination)),
    };
    let (resp_key, resp_iv) = response_keys(&ins.body_key, &ins.body_iv);
    let mut header = Vec::new();
    seal_response(
        &resp_key,
        &resp_iv,
        &plain_response_header(ins.response_auth),
        &mut header,
    );
    let opener = ChunkOpener::new(
        format,
        &ins.body_key,
        &ins.body_iv,
        &ins.body_key,
        &ins.body_iv,
    );
    let sealer = ChunkSealer::new(format, &resp_key, &resp_iv, &ins.body_key, &ins.body_iv);
    let reader = ChunkReader::new(opener, None, &buf[header_len..filled]);
    let writer = ChunkWriter::new(sealer, header, true);
    let stream = VmessStream::new(Box::new(stream), reader, writer, false);
    let user_name = user.email.clone();
    let level = user.level;
    Ok(match ins.command {
        Command::Udp => {
            let (reader, writer) = stream.into_packets();
            VmessAccept::Udp {
                destination,
                reader,
                writer,
                user: user_name,
                level,
            }
        }
        _ => VmessAccept::Stream {
            destination,
            stream,
            user: user_name,
            level,
        },
    })
}
