//! The async adapter: drives the codec over a stream to turn a SOCKS client's handshake into
//! an [`Accepted`], and writes the replies once the dispatcher knows the outcome.
//!
//! The handshake has no timeout of its own: the caller wraps it in the inbound's.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use bytes::Bytes;
use skiff_core::{Accepted, BoxStream, ConnectOutcome, Prefixed, ProxyStream, Reply};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::auth::authenticate;
use super::codec::{
    Command, METHOD_NO_ACCEPTABLE, METHOD_NO_AUTH, METHOD_USER_PASS, Parsed, ReplyCode,
    SOCKS4_VERSION, SOCKS5_VERSION, SocksError, encode_auth_status, encode_method_selection,
    encode_reply, encode_socks4_reply, parse_greeting, parse_request, parse_socks4_request,
    parse_user_pass,
};

/// What a SOCKS inbound allows.
#[derive(Clone, Debug, Default)]
pub struct SocksServerConfig {
    /// Username/password pairs. Empty: no authentication (and SOCKS4 is allowed).
    pub accounts: Vec<(String, String)>,
    /// Whether UDP ASSOCIATE is served.
    pub udp_enabled: bool,
}

/// Why a handshake ended without an [`Accepted`]: the stream failed, or the client sent
/// something we refuse (the refusal has been sent to the client when the protocol has one).
#[derive(Debug)]
pub enum HandshakeError {
    Io(io::Error),
    Socks(SocksError),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Io(e) => write!(f, "SOCKS handshake: {e}"),
            HandshakeError::Socks(e) => write!(f, "SOCKS handshake: {e}"),
        }
    }
}

impl std::error::Error for HandshakeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HandshakeError::Io(e) => Some(e),
            HandshakeError::Socks(e) => Some(e),
        }
    }
}

impl From<io::Error> for HandshakeError {
    fn from(e: io::Error) -> Self {
        HandshakeError::Io(e)
    }
}

impl From<SocksError> for HandshakeError {
    fn from(e: SocksError) -> Self {
        HandshakeError::Socks(e)
    }
}

impl From<HandshakeError> for io::Error {
    fn from(e: HandshakeError) -> Self {
        match e {
            HandshakeError::Io(e) => e,
            HandshakeError::Socks(e) => io::Error::new(io::ErrorKind::InvalidData, e),
        }
    }
}

/// Big enough for the largest message we accept whole: an RFC 1929 request with a 255-byte
/// username and a 255-byte password is 513 bytes, a SOCKS4a request with user id and domain
/// at their 255-byte caps is 520. Everything else is smaller (a SOCKS5 request ≤ 262).
const BUF_LEN: usize = 520;

/// Bytes read from the client and not yet parsed: `data[start..end]`.
struct HandshakeBuf {
    data: [u8; BUF_LEN],
    start: usize,
    end: usize,
}

impl HandshakeBuf {
    fn new() -> HandshakeBuf {
        HandshakeBuf {
            data: [0; BUF_LEN],
            start: 0,
            end: 0,
        }
    }

    fn pending(&self) -> &[u8] {
        self.data.get(self.start..self.end).unwrap_or_default()
    }

    fn consume(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.end);
    }

    /// Reads whatever the client has sent (one read, not one byte at a time), first moving
    /// unparsed bytes to the front if the buffer is full.
    async fn fill<S: AsyncRead + Unpin>(&mut self, stream: &mut S) -> Result<(), HandshakeError> {
        if self.end >= BUF_LEN {
            if self.start == 0 {
                return Err(SocksError::MessageTooLong.into());
            }
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let free = self.data.get_mut(self.end..).unwrap_or_default();
        let n = stream.read(free).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "client closed the connection during the SOCKS handshake",
            )
            .into());
        }
        self.end = (self.end + n).min(BUF_LEN);
        Ok(())
    }

    /// Reads until `parse` completes a message, consumes it and returns its value. `parse`
    /// turns the borrowed message into an owned value, so the buffer is free again.
    async fn next<S: AsyncRead + Unpin, T>(
        &mut self,
        stream: &mut S,
        parse: impl Fn(&[u8]) -> Result<Parsed<T>, SocksError>,
    ) -> Result<T, HandshakeError> {
        loop {
            match parse(self.pending())? {
                Parsed::Complete(value, len) => {
                    self.consume(len);
                    return Ok(value);
                }
                Parsed::Incomplete => self.fill(stream).await?,
            }
        }
    }

    /// The stream to hand on: the client's early payload (bytes after the request that came
    /// in the same reads) goes in front, never dropped.
    fn into_stream<S: ProxyStream>(self, stream: S) -> BoxStream {
        let early = self.pending();
        if early.is_empty() {
            Box::new(stream)
        } else {
            Box::new(Prefixed::new(Bytes::copy_from_slice(early), stream))
        }
    }
}

async fn send<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// Sends a refusal and returns `error`. A failure to send is ignored: the refusal reason is
/// the more useful error to report.
async fn refuse<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    error: SocksError,
) -> Result<Accepted, HandshakeError> {
    let _ = send(stream, bytes).await;
    Err(error.into())
}

fn socks5_reply(code: ReplyCode, bound: SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(22);
    encode_reply(code, unmap(bound), &mut out);
    out
}

const UNSPECIFIED: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// A dual-stack socket reports IPv4 peers as `::ffff:a.b.c.d`; an IPv4-only client can only
/// use the IPv4 form.
fn unmap(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => addr,
        },
        SocketAddr::V4(_) => addr,
    }
}

/// Runs the server side of a SOCKS5, SOCKS4 or SOCKS4a handshake.
///
/// CONNECT gives [`Accepted::Stream`] (reply not yet sent: call [`write_reply`] once the
/// outcome is known); UDP ASSOCIATE, when enabled, gives [`Accepted::UdpAssociate`] (call
/// [`write_udp_associate_reply`]). Everything else is refused with the protocol's refusal
/// message before the error is returned.
pub async fn handshake<S: ProxyStream>(
    mut stream: S,
    config: &SocksServerConfig,
) -> Result<Accepted, HandshakeError> {
    let mut buf = HandshakeBuf::new();
    buf.fill(&mut stream).await?;
    match buf.pending().first().copied() {
        Some(SOCKS5_VERSION) => socks5(stream, buf, config).await,
        Some(SOCKS4_VERSION) => socks4(stream, buf, config).await,
        // Not SOCKS at all: there is no refusal message to send in an unknown protocol.
        Some(other) => Err(SocksError::BadVersion(other).into()),
        None => Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
    }
}

async fn socks5<S: ProxyStream>(
    mut stream: S,
    mut buf: HandshakeBuf,
    config: &SocksServerConfig,
) -> Result<Accepted, HandshakeError> {
    // Method negotiation (RFC 1928 §3).
    let wanted = if config.accounts.is_empty() {
        METHOD_NO_AUTH
    } else {
        METHOD_USER_PASS
    };
    let method = buf
        .next(&mut stream, |b| {
            parse_greeting(b).map(|p| {
                p.map(|g| {
                    if g.offers(wanted) {
                        wanted
                    } else {
                        METHOD_NO_ACCEPTABLE
                    }
                })
            })
        })
        .await?;
    if method == METHOD_NO_ACCEPTABLE {
        let refusal = encode_method_selection(METHOD_NO_ACCEPTABLE);
        return refuse(&mut stream, &refusal, SocksError::NoAcceptableMethod).await;
    }
    send(&mut stream, &encode_method_selection(method)).await?;

    // Username/password sub-negotiation (RFC 1929).
    let user = if method == METHOD_USER_PASS {
        let checked = buf
            .next(&mut stream, |b| {
                parse_user_pass(b).map(|p| {
                    p.map(|up| {
                        authenticate(&config.accounts, up.username, up.password).map(str::to_owned)
                    })
                })
            })
            .await;
        match checked {
            Ok(Some(user)) => {
                send(&mut stream, &encode_auth_status(true)).await?;
                Some(user)
            }
            Ok(None) => {
                let refusal = encode_auth_status(false);
                return refuse(&mut stream, &refusal, SocksError::AuthFailed).await;
            }
            Err(HandshakeError::Socks(e)) => {
                return refuse(&mut stream, &encode_auth_status(false), e).await;
            }
            Err(e) => return Err(e),
        }
    } else {
        None
    };

    // The request (RFC 1928 §4).
    let request = match buf.next(&mut stream, parse_request).await {
        Ok(request) => request,
        Err(HandshakeError::Socks(e)) => {
            let refusal = socks5_reply(ReplyCode::for_socks_error(&e), UNSPECIFIED);
            return refuse(&mut stream, &refusal, e).await;
        }
        Err(e) => return Err(e),
    };
    match request.command {
        Command::Connect => Ok(Accepted::Stream {
            destination: request.address,
            stream: buf.into_stream(stream),
            reply: Reply::Socks5,
            user,
            level: None,
        }),
        Command::UdpAssociate if config.udp_enabled => Ok(Accepted::UdpAssociate {
            control: buf.into_stream(stream),
            client_hint: request.address,
            user,
        }),
        command => {
            let refusal = socks5_reply(ReplyCode::CommandNotSupported, UNSPECIFIED);
            let error = SocksError::UnsupportedCommand(command as u8);
            refuse(&mut stream, &refusal, error).await
        }
    }
}

async fn socks4<S: ProxyStream>(
    mut stream: S,
    mut buf: HandshakeBuf,
    config: &SocksServerConfig,
) -> Result<Accepted, HandshakeError> {
    let rejected = encode_socks4_reply(false, None);
    // The user id is identification, not authentication: it is not kept as the user.
    let request = match buf
        .next(&mut stream, |b| {
            parse_socks4_request(b).map(|p| p.map(|r| (r.command, r.address)))
        })
        .await
    {
        Ok(request) => request,
        Err(HandshakeError::Socks(e)) => return refuse(&mut stream, &rejected, e).await,
        Err(e) => return Err(e),
    };
    // Read the whole request before refusing, so the client reads our answer instead of a
    // reset caused by closing with its bytes unread.
    if !config.accounts.is_empty() {
        return refuse(&mut stream, &rejected, SocksError::Socks4AuthRequired).await;
    }
    match request {
        (Command::Connect, destination) => Ok(Accepted::Stream {
            destination,
            stream: buf.into_stream(stream),
            reply: Reply::Socks4,
            user: None,
            level: None,
        }),
        (command, _) => {
            let error = SocksError::UnsupportedCommand(command as u8);
            refuse(&mut stream, &rejected, error).await
        }
    }
}

/// Writes the reply for a CONNECT once the dispatcher knows the outcome. `kind` is the
/// [`Reply`] from [`Accepted::Stream`]; `Reply::None` writes nothing. A success without a
/// known bound address announces 0.0.0.0:0 (clients ignore it for CONNECT).
pub async fn write_reply<S: AsyncWrite + Unpin>(
    stream: &mut S,
    kind: Reply,
    outcome: ConnectOutcome<'_>,
) -> io::Result<()> {
    let (bound, failure) = match outcome {
        ConnectOutcome::Connected { bound } => (bound, None),
        ConnectOutcome::Failed(error) => (None, Some(error)),
    };
    match kind {
        Reply::Socks5 => {
            let code = failure.map_or(ReplyCode::Succeeded, ReplyCode::for_io_error);
            send(stream, &socks5_reply(code, bound.unwrap_or(UNSPECIFIED))).await
        }
        Reply::Socks4 => {
            send(
                stream,
                &encode_socks4_reply(failure.is_none(), bound.map(unmap)),
            )
            .await
        }
        Reply::None => Ok(()),
        Reply::HttpConnect => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "SOCKS write_reply asked for an HTTP reply",
        )),
    }
}

/// Writes the successful reply to UDP ASSOCIATE, announcing where the client must send its
/// datagrams (an IPv4-mapped address is announced as IPv4).
pub async fn write_udp_associate_reply<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bound: SocketAddr,
) -> io::Result<()> {
    send(stream, &socks5_reply(ReplyCode::Succeeded, bound)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_compacts_and_caps() {
        let mut buf = HandshakeBuf::new();
        buf.end = BUF_LEN;
        buf.consume(BUF_LEN + 10);
        assert_eq!(buf.start, BUF_LEN);
        assert!(buf.pending().is_empty());
    }

    #[tokio::test]
    async fn full_buffer_without_a_message_is_too_long() {
        let mut buf = HandshakeBuf::new();
        buf.end = BUF_LEN;
        let mut empty: &[u8] = &[];
        let err = buf.fill(&mut empty).await.unwrap_err();
        assert!(matches!(
            err,
            HandshakeError::Socks(SocksError::MessageTooLong)
        ));
    }

    #[tokio::test]
    async fn full_buffer_with_parsed_bytes_compacts() {
        let mut buf = HandshakeBuf::new();
        buf.data[BUF_LEN - 1] = 7;
        buf.end = BUF_LEN;
        buf.consume(BUF_LEN - 1);
        let mut more: &[u8] = &[8, 9];
        buf.fill(&mut more).await.unwrap();
        assert_eq!(buf.pending(), &[7, 8, 9]);
    }

    #[test]
    fn unmaps_v4_mapped_addresses() {
        let mapped: SocketAddr = "[::ffff:10.0.0.1]:53".parse().unwrap();
        assert_eq!(unmap(mapped), "10.0.0.1:53".parse::<SocketAddr>().unwrap());
        let v6: SocketAddr = "[2001:db8::1]:53".parse().unwrap();
        assert_eq!(unmap(v6), v6);
    }
}
