//! The SOCKS wire format, sans-IO: parsers take the bytes received so far and say either
//! "complete: this value, this many bytes" or "incomplete: read more"; encoders append bytes.
//!
//! Sources: RFC 1928 (SOCKS5), RFC 1929 (username/password for SOCKS5), the SOCKS4 protocol
//! description and its SOCKS4a extension. Nothing here indexes a slice in a way that can panic:
//! all reads go through skiff-core's [`Reader`], which answers `None` when the input runs out.

use skiff_core::wire::Reader;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use skiff_core::Address;

/// Protocol version byte of SOCKS5 messages (RFC 1928).
pub const SOCKS5_VERSION: u8 = 0x05;
/// Protocol version byte of SOCKS4 requests.
pub const SOCKS4_VERSION: u8 = 0x04;
/// Version byte of the RFC 1929 username/password sub-negotiation (not the SOCKS version).
pub const USER_PASS_VERSION: u8 = 0x01;

/// Method: no authentication required.
pub const METHOD_NO_AUTH: u8 = 0x00;
/// Method: username/password (RFC 1929).
pub const METHOD_USER_PASS: u8 = 0x02;
/// Method selection answer meaning "none of your methods is acceptable".
pub const METHOD_NO_ACCEPTABLE: u8 = 0xFF;

const ATYP_IPV4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_IPV6: u8 = 0x04;

/// SOCKS4 reply code: request granted.
pub const SOCKS4_GRANTED: u8 = 0x5A;
/// SOCKS4 reply code: request rejected or failed.
pub const SOCKS4_REJECTED: u8 = 0x5B;

/// SOCKS4 user ids and SOCKS4a domains are NUL-terminated with no length limit in the spec.
/// We cap them (at the SOCKS5 domain limit) so a client cannot make us buffer without end.
pub const SOCKS4_MAX_FIELD: usize = 255;

/// The result of parsing a prefix of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// A whole message: the value and how many input bytes it took.
    Complete(T, usize),
    /// The input is a valid beginning of a message; more bytes are needed.
    Incomplete,
}

impl<T> Parsed<T> {
    /// Transforms the value of a complete message (e.g. into something that does not borrow
    /// the input buffer, so the caller may read more into it).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Parsed<U> {
        match self {
            Parsed::Complete(value, len) => Parsed::Complete(f(value), len),
            Parsed::Incomplete => Parsed::Incomplete,
        }
    }

    /// The value and its length, or None when incomplete.
    pub fn complete(self) -> Option<(T, usize)> {
        match self {
            Parsed::Complete(value, len) => Some((value, len)),
            Parsed::Incomplete => None,
        }
    }
}

/// Why a SOCKS message was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SocksError {
    /// The first byte is not the expected protocol version.
    BadVersion(u8),
    /// The username/password sub-negotiation has a version other than 1.
    BadAuthVersion(u8),
    /// The client offered no method we accept.
    NoAcceptableMethod,
    /// Wrong username or password.
    AuthFailed,
    /// Unknown command, or one this server does not serve (BIND, disabled UDP ASSOCIATE).
    UnsupportedCommand(u8),
    /// Unknown address type byte.
    BadAddressType(u8),
    /// A domain name is not valid UTF-8.
    DomainNotUtf8,
    /// A domain name is empty.
    EmptyDomain,
    /// A domain name is longer than the 255 bytes its length byte can say (encoding only).
    DomainTooLong,
    /// A SOCKS4 user id or SOCKS4a domain is not terminated within [`SOCKS4_MAX_FIELD`] bytes.
    FieldTooLong,
    /// A UDP datagram with FRAG != 0: we do not reassemble fragments.
    Fragmented(u8),
    /// A UDP datagram shorter than its own header.
    Truncated,
    /// A handshake message does not fit the server's buffer.
    MessageTooLong,
    /// SOCKS4 cannot authenticate, so it is refused when accounts are configured.
    Socks4AuthRequired,
    /// A value that this message format cannot carry (encoding only).
    Unencodable(&'static str),
}

impl fmt::Display for SocksError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocksError::BadVersion(v) => write!(f, "unsupported SOCKS version {v:#04x}"),
            SocksError::BadAuthVersion(v) => {
                write!(f, "unsupported username/password auth version {v:#04x}")
            }
            SocksError::NoAcceptableMethod => f.write_str("no acceptable authentication method"),
            SocksError::AuthFailed => f.write_str("invalid username or password"),
            SocksError::UnsupportedCommand(c) => write!(f, "unsupported SOCKS command {c:#04x}"),
            SocksError::BadAddressType(t) => write!(f, "unsupported address type {t:#04x}"),
            SocksError::DomainNotUtf8 => f.write_str("domain name is not valid UTF-8"),
            SocksError::EmptyDomain => f.write_str("domain name is empty"),
            SocksError::DomainTooLong => f.write_str("domain name is longer than 255 bytes"),
            SocksError::FieldTooLong => write!(
                f,
                "SOCKS4 user id or domain not terminated within {SOCKS4_MAX_FIELD} bytes"
            ),
            SocksError::Fragmented(n) => write!(f, "fragmented UDP datagram (FRAG={n}) refused"),
            SocksError::Truncated => f.write_str("UDP datagram shorter than its SOCKS header"),
            SocksError::MessageTooLong => f.write_str("SOCKS handshake message too long"),
            SocksError::Socks4AuthRequired => {
                f.write_str("SOCKS4 refused: this server requires authentication")
            }
            SocksError::Unencodable(what) => write!(f, "cannot encode {what}"),
        }
    }
}

impl std::error::Error for SocksError {}

/// SOCKS5 request commands (RFC 1928 §4). SOCKS4 uses the same numbers for CONNECT and BIND.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    Connect = 0x01,
    Bind = 0x02,
    UdpAssociate = 0x03,
}

impl Command {
    pub fn from_u8(byte: u8) -> Option<Command> {
        match byte {
            0x01 => Some(Command::Connect),
            0x02 => Some(Command::Bind),
            0x03 => Some(Command::UdpAssociate),
            _ => None,
        }
    }
}

/// SOCKS5 reply codes (REP field, RFC 1928 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplyCode {
    Succeeded = 0x00,
    GeneralFailure = 0x01,
    NotAllowed = 0x02,
    NetworkUnreachable = 0x03,
    HostUnreachable = 0x04,
    ConnectionRefused = 0x05,
    TtlExpired = 0x06,
    CommandNotSupported = 0x07,
    AddressTypeNotSupported = 0x08,
}

impl ReplyCode {
    /// The reply that best describes a failed outbound connect. SOCKS5 has no "timed out" or
    /// "name not resolved" code; clients (curl, browsers) report 0x04 as "host unreachable",
    /// which is the closest truth for both.
    pub fn for_io_error(error: &io::Error) -> ReplyCode {
        match error.kind() {
            io::ErrorKind::ConnectionRefused => ReplyCode::ConnectionRefused,
            io::ErrorKind::NetworkUnreachable => ReplyCode::NetworkUnreachable,
            io::ErrorKind::HostUnreachable | io::ErrorKind::TimedOut | io::ErrorKind::NotFound => {
                ReplyCode::HostUnreachable
            }
            // A routing rule (or a policy) refused the destination.
            io::ErrorKind::PermissionDenied => ReplyCode::NotAllowed,
            _ => ReplyCode::GeneralFailure,
        }
    }

    /// The reply for a request refused during parsing.
    pub fn for_socks_error(error: &SocksError) -> ReplyCode {
        match error {
            SocksError::UnsupportedCommand(_) => ReplyCode::CommandNotSupported,
            SocksError::BadAddressType(_) => ReplyCode::AddressTypeNotSupported,
            _ => ReplyCode::GeneralFailure,
        }
    }
}

/// A SOCKS5 greeting: the authentication methods the client offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Greeting<'a> {
    pub methods: &'a [u8],
}

impl Greeting<'_> {
    pub fn offers(&self, method: u8) -> bool {
        self.methods.contains(&method)
    }
}

/// An RFC 1929 username/password request. Borrowed so credentials are compared in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserPass<'a> {
    pub username: &'a [u8],
    pub password: &'a [u8],
}

/// A SOCKS5 request: a command and its destination (for UDP ASSOCIATE: the client's hint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub command: Command,
    pub address: Address,
}

/// A SOCKS4 or SOCKS4a request. `command` is Connect or Bind. A 4a domain ends up in
/// `address` (as an IP when it is an IP literal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Socks4Request<'a> {
    pub command: Command,
    pub address: Address,
    pub user_id: &'a [u8],
}

/// A NUL-terminated field of at most `max` bytes (the NUL is consumed, not returned).
/// Errors as soon as `max + 1` bytes have arrived without a NUL, so a valid message's prefix
/// is never an error.
fn until_nul<'a>(c: &mut Reader<'a>, max: usize) -> Result<Option<&'a [u8]>, SocksError> {
    let rest = c.rest();
    let window = rest.get(..max.saturating_add(1)).unwrap_or(rest);
    match window.iter().position(|&b| b == 0) {
        Some(len) => {
            let field = c.take(len);
            c.u8();
            Ok(field)
        }
        None if rest.len() > max => Err(SocksError::FieldTooLong),
        None => Ok(None),
    }
}

/// Unwraps a cursor read, or returns `Incomplete` from the enclosing parser.
macro_rules! need {
    ($read:expr) => {
        match $read {
            Some(value) => value,
            None => return Ok(Parsed::Incomplete),
        }
    };
}

/// Maps a domain name from the wire to an address. A "domain" that is an IP literal is an IP
/// (clients do send them that way), so routing sees one form for one destination.
fn domain_address(raw: &[u8], port: u16) -> Result<Address, SocksError> {
    if raw.is_empty() {
        return Err(SocksError::EmptyDomain);
    }
    let name = std::str::from_utf8(raw).map_err(|_| SocksError::DomainNotUtf8)?;
    Ok(match name.parse::<IpAddr>() {
        Ok(ip) => Address::Ip(SocketAddr::new(ip, port)),
        Err(_) => Address::Domain(name.to_owned(), port),
    })
}

/// Reads ATYP, the address and the port (the tail shared by requests, replies and UDP headers).
/// `Ok(None)` means incomplete.
fn read_address(c: &mut Reader<'_>) -> Result<Option<Address>, SocksError> {
    let Some(atyp) = c.u8() else {
        return Ok(None);
    };
    match atyp {
        ATYP_IPV4 => {
            let (Some(ip), Some(port)) = (c.array::<4>(), c.u16()) else {
                return Ok(None);
            };
            Ok(Some(Address::Ip(SocketAddr::new(
                Ipv4Addr::from(ip).into(),
                port,
            ))))
        }
        ATYP_IPV6 => {
            let (Some(ip), Some(port)) = (c.array::<16>(), c.u16()) else {
                return Ok(None);
            };
            Ok(Some(Address::Ip(SocketAddr::new(
                Ipv6Addr::from(ip).into(),
                port,
            ))))
        }
        ATYP_DOMAIN => {
            let Some(len) = c.u8() else {
                return Ok(None);
            };
            // Refuse an empty name now rather than after the port arrives.
            if len == 0 {
                return Err(SocksError::EmptyDomain);
            }
            let Some(raw) = c.take(usize::from(len)) else {
                return Ok(None);
            };
            // Check the name before waiting for the port: a bad name is bad whatever follows.
            std::str::from_utf8(raw).map_err(|_| SocksError::DomainNotUtf8)?;
            let Some(port) = c.u16() else {
                return Ok(None);
            };
            domain_address(raw, port).map(Some)
        }
        other => Err(SocksError::BadAddressType(other)),
    }
}

/// Parses the SOCKS5 greeting: `VER NMETHODS METHODS...`.
pub fn parse_greeting(buf: &[u8]) -> Result<Parsed<Greeting<'_>>, SocksError> {
    let mut c = Reader::new(buf);
    let version = need!(c.u8());
    if version != SOCKS5_VERSION {
        return Err(SocksError::BadVersion(version));
    }
    let count = need!(c.u8());
    let methods = need!(c.take(usize::from(count)));
    Ok(Parsed::Complete(Greeting { methods }, c.pos()))
}

/// Parses the RFC 1929 request: `VER=1 ULEN UNAME PLEN PASSWD`. Empty fields are accepted
/// (some clients send an empty password); they simply won't match a configured account.
pub fn parse_user_pass(buf: &[u8]) -> Result<Parsed<UserPass<'_>>, SocksError> {
    let mut c = Reader::new(buf);
    let version = need!(c.u8());
    if version != USER_PASS_VERSION {
        return Err(SocksError::BadAuthVersion(version));
    }
    let user_len = need!(c.u8());
    let username = need!(c.take(usize::from(user_len)));
    let pass_len = need!(c.u8());
    let password = need!(c.take(usize::from(pass_len)));
    Ok(Parsed::Complete(UserPass { username, password }, c.pos()))
}

/// Parses the SOCKS5 request: `VER CMD RSV ATYP DST.ADDR DST.PORT`. RSV is ignored.
pub fn parse_request(buf: &[u8]) -> Result<Parsed<Request>, SocksError> {
    let mut c = Reader::new(buf);
    let version = need!(c.u8());
    if version != SOCKS5_VERSION {
        return Err(SocksError::BadVersion(version));
    }
    let cmd = need!(c.u8());
    let command = Command::from_u8(cmd).ok_or(SocksError::UnsupportedCommand(cmd))?;
    let _reserved = need!(c.u8());
    let address = need!(read_address(&mut c)?);
    Ok(Parsed::Complete(Request { command, address }, c.pos()))
}

/// Parses a SOCKS4 request, `VN=4 CD DSTPORT DSTIP USERID NUL`, and its 4a form, where
/// DSTIP is 0.0.0.x (x != 0) and a NUL-terminated domain follows the user id.
pub fn parse_socks4_request(buf: &[u8]) -> Result<Parsed<Socks4Request<'_>>, SocksError> {
    let mut c = Reader::new(buf);
    let version = need!(c.u8());
    if version != SOCKS4_VERSION {
        return Err(SocksError::BadVersion(version));
    }
    let cd = need!(c.u8());
    let command = match cd {
        0x01 => Command::Connect,
        0x02 => Command::Bind,
        other => return Err(SocksError::UnsupportedCommand(other)),
    };
    let port = need!(c.u16());
    let ip = need!(c.array::<4>());
    let user_id = need!(until_nul(&mut c, SOCKS4_MAX_FIELD)?);
    let address = match ip {
        [0, 0, 0, x] if x != 0 => {
            let domain = need!(until_nul(&mut c, SOCKS4_MAX_FIELD)?);
            domain_address(domain, port)?
        }
        _ => Address::Ip(SocketAddr::new(Ipv4Addr::from(ip).into(), port)),
    };
    Ok(Parsed::Complete(
        Socks4Request {
            command,
            address,
            user_id,
        },
        c.pos(),
    ))
}

/// Parses the header of a SOCKS5 UDP datagram: `RSV RSV FRAG ATYP DST.ADDR DST.PORT`; the
/// payload starts at the returned length. FRAG != 0 is refused: we don't reassemble, and
/// RFC 1928 §7 allows an implementation that doesn't to drop such datagrams.
pub fn parse_udp_header(buf: &[u8]) -> Result<Parsed<Address>, SocksError> {
    let mut c = Reader::new(buf);
    let _reserved = need!(c.u16());
    let frag = need!(c.u8());
    if frag != 0 {
        return Err(SocksError::Fragmented(frag));
    }
    let address = need!(read_address(&mut c)?);
    Ok(Parsed::Complete(address, c.pos()))
}

/// Checks that a domain fits the one-byte length of the wire format.
fn check_domain(name: &str) -> Result<u8, SocksError> {
    if name.is_empty() {
        return Err(SocksError::EmptyDomain);
    }
    u8::try_from(name.len()).map_err(|_| SocksError::DomainTooLong)
}

/// The encoded size of `ATYP ADDR PORT` for an address (domains assumed valid).
pub fn encoded_address_len(addr: &Address) -> usize {
    match addr {
        Address::Ip(SocketAddr::V4(_)) => 1 + 4 + 2,
        Address::Ip(SocketAddr::V6(_)) => 1 + 16 + 2,
        Address::Domain(name, _) => 1 + 1 + name.len() + 2,
    }
}

/// Appends `ATYP ADDR PORT`. On error nothing is appended. IPv6 flow info and scope id are
/// not part of the format and are dropped.
pub fn encode_address(addr: &Address, out: &mut Vec<u8>) -> Result<(), SocksError> {
    match addr {
        Address::Ip(SocketAddr::V4(sa)) => {
            out.push(ATYP_IPV4);
            out.extend_from_slice(&sa.ip().octets());
        }
        Address::Ip(SocketAddr::V6(sa)) => {
            out.push(ATYP_IPV6);
            out.extend_from_slice(&sa.ip().octets());
        }
        Address::Domain(name, _) => {
            let len = check_domain(name)?;
            out.push(ATYP_DOMAIN);
            out.push(len);
            out.extend_from_slice(name.as_bytes());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
    Ok(())
}

/// Appends a SOCKS5 greeting offering `methods` (client side; used by tests and outbounds).
pub fn encode_greeting(methods: &[u8], out: &mut Vec<u8>) -> Result<(), SocksError> {
    let count =
        u8::try_from(methods.len()).map_err(|_| SocksError::Unencodable("over 255 methods"))?;
    out.extend_from_slice(&[SOCKS5_VERSION, count]);
    out.extend_from_slice(methods);
    Ok(())
}

/// The server's method selection message: `VER METHOD`.
pub fn encode_method_selection(method: u8) -> [u8; 2] {
    [SOCKS5_VERSION, method]
}

/// Appends an RFC 1929 username/password request (client side).
pub fn encode_user_pass(
    username: &[u8],
    password: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), SocksError> {
    let too_long = |_| SocksError::Unencodable("credential over 255 bytes");
    let user_len = u8::try_from(username.len()).map_err(too_long)?;
    let pass_len = u8::try_from(password.len()).map_err(too_long)?;
    out.extend_from_slice(&[USER_PASS_VERSION, user_len]);
    out.extend_from_slice(username);
    out.push(pass_len);
    out.extend_from_slice(password);
    Ok(())
}

/// The RFC 1929 status message: `VER=1 STATUS`, STATUS 0 on success.
pub fn encode_auth_status(success: bool) -> [u8; 2] {
    [USER_PASS_VERSION, if success { 0x00 } else { 0x01 }]
}

/// Appends a SOCKS5 request (client side). On error nothing is appended.
pub fn encode_request(
    command: Command,
    addr: &Address,
    out: &mut Vec<u8>,
) -> Result<(), SocksError> {
    if let Address::Domain(name, _) = addr {
        check_domain(name)?;
    }
    out.extend_from_slice(&[SOCKS5_VERSION, command as u8, 0x00]);
    encode_address(addr, out)
}

/// Appends a SOCKS5 reply: `VER REP RSV ATYP BND.ADDR BND.PORT`.
pub fn encode_reply(code: ReplyCode, bound: SocketAddr, out: &mut Vec<u8>) {
    out.extend_from_slice(&[SOCKS5_VERSION, code as u8, 0x00]);
    // An IP address always encodes.
    let _ = encode_address(&Address::Ip(bound), out);
}

/// Appends a SOCKS4 request (client side). A domain, or an IPv6 address (which SOCKS4 cannot
/// carry as such), is sent the SOCKS4a way: DSTIP 0.0.0.1 and the name after the user id.
pub fn encode_socks4_request(
    command: Command,
    addr: &Address,
    user_id: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), SocksError> {
    if command == Command::UdpAssociate {
        return Err(SocksError::Unencodable("UDP ASSOCIATE in SOCKS4"));
    }
    let field_ok = |f: &[u8]| f.len() <= SOCKS4_MAX_FIELD && !f.contains(&0);
    if !field_ok(user_id) {
        return Err(SocksError::Unencodable("SOCKS4 user id"));
    }
    let (ip, domain) = match addr {
        // 0.0.0.x (x != 0) on the wire means "SOCKS4a, domain follows": such an address must
        // travel as text too.
        Address::Ip(SocketAddr::V4(sa)) => match sa.ip().octets() {
            [0, 0, 0, x] if x != 0 => ([0, 0, 0, 1], Some(sa.ip().to_string())),
            octets => (octets, None),
        },
        Address::Ip(SocketAddr::V6(sa)) => ([0, 0, 0, 1], Some(sa.ip().to_string())),
        Address::Domain(name, _) => {
            check_domain(name)?;
            if !field_ok(name.as_bytes()) {
                return Err(SocksError::Unencodable("SOCKS4a domain"));
            }
            ([0, 0, 0, 1], Some(name.clone()))
        }
    };
    out.extend_from_slice(&[SOCKS4_VERSION, command as u8]);
    out.extend_from_slice(&addr.port().to_be_bytes());
    out.extend_from_slice(&ip);
    out.extend_from_slice(user_id);
    out.push(0);
    if let Some(name) = domain {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
    }
    Ok(())
}

/// The SOCKS4 reply: `VN=0 CD DSTPORT DSTIP`. Clients ignore DSTPORT/DSTIP for CONNECT; we
/// fill them with the bound address when it is IPv4, else zeros.
pub fn encode_socks4_reply(granted: bool, bound: Option<SocketAddr>) -> [u8; 8] {
    let code = if granted {
        SOCKS4_GRANTED
    } else {
        SOCKS4_REJECTED
    };
    let (port, ip) = match bound {
        Some(SocketAddr::V4(sa)) => (sa.port(), sa.ip().octets()),
        _ => (0, [0; 4]),
    };
    let [p0, p1] = port.to_be_bytes();
    let [a, b, c, d] = ip;
    [0x00, code, p0, p1, a, b, c, d]
}

/// Appends a SOCKS5 UDP datagram header (FRAG 0) for `addr`. On error nothing is appended.
pub fn encode_udp_header(addr: &Address, out: &mut Vec<u8>) -> Result<(), SocksError> {
    if let Address::Domain(name, _) = addr {
        check_domain(name)?;
    }
    out.extend_from_slice(&[0x00, 0x00, 0x00]);
    encode_address(addr, out)
}

/// Runs every parser on `data` and checks the invariants a fuzzer should hunt for:
/// no panic; a complete message's length is within the input; one byte less is incomplete;
/// re-encoding a parsed value parses back to the same value. Panics if an invariant breaks
/// (that is what a fuzz target wants to hear about).
pub fn fuzz_parse_all(data: &[u8]) {
    // A macro, not a generic function: parsed values borrow from whichever buffer they came
    // from, and the round trip parses a second, local buffer.
    macro_rules! check {
        ($parse:expr, $encode:expr) => {
            if let Ok(Parsed::Complete(value, len)) = $parse(data) {
                assert!(
                    len >= 1 && len <= data.len(),
                    "consumed {len} of {}",
                    data.len()
                );
                let shorter = data.get(..len - 1).unwrap_or_default();
                assert!(
                    matches!($parse(shorter), Ok(Parsed::Incomplete)),
                    "a strict prefix of a complete message must be incomplete"
                );
                let mut out = Vec::new();
                let encode = $encode;
                encode(&value, &mut out).expect("a parsed value re-encodes");
                match $parse(&out) {
                    Ok(Parsed::Complete(again, again_len)) => {
                        assert_eq!(again, value);
                        assert_eq!(again_len, out.len());
                    }
                    other => panic!("re-encoded message did not parse back: {other:?}"),
                }
            }
        };
    }
    check!(parse_greeting, |g: &Greeting<'_>, out: &mut Vec<u8>| {
        encode_greeting(g.methods, out)
    });
    check!(parse_user_pass, |u: &UserPass<'_>, out: &mut Vec<u8>| {
        encode_user_pass(u.username, u.password, out)
    });
    check!(parse_request, |r: &Request, out: &mut Vec<u8>| {
        encode_request(r.command, &r.address, out)
    });
    check!(
        parse_socks4_request,
        |r: &Socks4Request<'_>, out: &mut Vec<u8>| {
            encode_socks4_request(r.command, &r.address, r.user_id, out)
        }
    );
    check!(parse_udp_header, encode_udp_header);
}
