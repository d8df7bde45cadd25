//! The Trojan request and UDP packet framing, sans-IO (trojan.md §1, §2).
//!
//! Parsers take the bytes received so far and answer [`Parsed::Complete`] or
//! [`Parsed::Incomplete`] (a valid beginning that needs more bytes); nothing indexes a slice
//! in a way that can panic. Password lookup is not done here: the request carries the 56 hex
//! bytes as received (see [`super::server::TrojanServer`]).

use std::fmt;

use skiff_core::Address;

use crate::address::{self, AddressError, type_first};
pub use skiff_core::wire::Parsed;
use skiff_core::wire::Reader;

/// Length of the password hash on the wire: lower-case hex of SHA-224.
pub const HASH_LEN: usize = 56;
/// The separator after the hash and after the request's address (and in UDP packets).
pub const CRLF: [u8; 2] = *b"\r\n";
/// Hash and CRLF: what a server must see before it can tell a Trojan client from anyone else.
pub const AUTH_LEN: usize = HASH_LEN + 2;
/// The longest domain name written or accepted (its length is one byte).
pub const MAX_DOMAIN_LEN: usize = address::MAX_DOMAIN_LEN;
/// The longest `ATYP ADDR PORT`.
pub const MAX_ADDRESS_LEN: usize = type_first::MAX_LEN;
/// The longest request header: hash, CRLF, command, address, CRLF.
pub const MAX_REQUEST_HEADER_LEN: usize = AUTH_LEN + 1 + MAX_ADDRESS_LEN + 2;
/// The longest UDP packet header: address, length, CRLF.
pub const MAX_PACKET_HEADER_LEN: usize = MAX_ADDRESS_LEN + 2 + 2;
/// The largest payload a packet's 2-byte length can carry.
pub const MAX_PACKET_LEN: usize = u16::MAX as usize;

/// Why Trojan bytes were refused (or could not be encoded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrojanError {
    /// Byte 56 and 57 are not CRLF: not a Trojan request (the fallback trigger).
    NoHashDelimiter,
    /// A command other than CONNECT (1) and UDP ASSOCIATE (3).
    UnknownCommand(u8),
    /// An address type other than 1, 3 and 4.
    BadAddressType(u8),
    /// A domain that is empty, too long or has characters outside `[0-9A-Za-z-._]`.
    BadDomain,
    /// The CRLF after an address (request) or a length (UDP packet) is missing.
    MissingCrlf,
    /// A UDP payload longer than the 2-byte length allows (encoding only).
    PacketTooLong(usize),
}

impl fmt::Display for TrojanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrojanError::NoHashDelimiter => f.write_str("no CRLF after the Trojan password hash"),
            TrojanError::UnknownCommand(c) => write!(f, "unknown Trojan command {c:#04x}"),
            TrojanError::BadAddressType(t) => write!(f, "unknown Trojan address type {t:#04x}"),
            TrojanError::BadDomain => f.write_str("invalid domain name in Trojan address"),
            TrojanError::MissingCrlf => f.write_str("missing CRLF in Trojan header"),
            TrojanError::PacketTooLong(n) => {
                write!(
                    f,
                    "Trojan UDP payload of {n} bytes exceeds {MAX_PACKET_LEN}"
                )
            }
        }
    }
}

impl std::error::Error for TrojanError {}

/// Request commands (trojan.md §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    Connect = 0x01,
    UdpAssociate = 0x03,
}

impl Command {
    /// Only 1 and 3, as trojan-gfw (Xray would take anything but 3 as CONNECT).
    pub fn from_u8(byte: u8) -> Option<Command> {
        match byte {
            0x01 => Some(Command::Connect),
            0x03 => Some(Command::UdpAssociate),
            _ => None,
        }
    }
}

/// The 56 ASCII bytes a client sends: lower-case hex of SHA-224(password).
///
/// Equality is constant-time over the 56 bytes, so a map keyed by it compares keys without an
/// early exit. Debug shows only the first 8 characters.
#[derive(Clone, Copy)]
pub struct PasswordHash([u8; HASH_LEN]);

impl PasswordHash {
    /// The hash of a configured password (its UTF-8 bytes, no salt: trojan.md §5).
    pub fn of(password: &str) -> PasswordHash {
        let digest = skiff_crypto::hash::sha224(&[password.as_bytes()]);
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; HASH_LEN];
        for (pair, byte) in out.chunks_exact_mut(2).zip(digest) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0x0f)];
        }
        PasswordHash(out)
    }

    /// Wraps 56 bytes as received.
    pub const fn from_bytes(bytes: [u8; HASH_LEN]) -> PasswordHash {
        PasswordHash(bytes)
    }

    pub const fn as_bytes(&self) -> &[u8; HASH_LEN] {
        &self.0
    }
}

impl PartialEq for PasswordHash {
    fn eq(&self, other: &PasswordHash) -> bool {
        skiff_crypto::constant_time_eq(&self.0, &other.0)
    }
}

impl Eq for PasswordHash {}

/// Hashes the same bytes equality compares, so `a == b` implies equal hashes.
impl std::hash::Hash for PasswordHash {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = String::from_utf8_lossy(&self.0[..8]);
        write!(f, "PasswordHash({head}…)")
    }
}

/// A Trojan request header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub hash: PasswordHash,
    pub command: Command,
    /// For UDP ASSOCIATE only informative: every packet carries its own destination.
    pub destination: Address,
}

/// CRLF, checked byte by byte so a wrong first byte is an error at once.
fn crlf(r: &mut Reader<'_>, error: TrojanError) -> Result<Option<()>, TrojanError> {
    for expected in CRLF {
        match r.u8() {
            None => return Ok(None),
            Some(b) if b != expected => return Err(error),
            Some(_) => {}
        }
    }
    Ok(Some(()))
}

/// Propagates "need more bytes" out of a parser.
macro_rules! need {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return Ok(Parsed::Incomplete),
        }
    };
}

/// Reads `ATYP ADDR PORT` (SOCKS5 numbering, Xray's domain rule).
fn read_address(r: &mut Reader<'_>) -> Result<Option<Address>, TrojanError> {
    type_first::read(r).map_err(TrojanError::from)
}

/// Appends `ATYP ADDR PORT`. Domains must pass Xray's rule (what a Skiff or Xray server
/// accepts). On error nothing is appended.
pub fn encode_address(address: &Address, out: &mut Vec<u8>) -> Result<(), TrojanError> {
    type_first::write(address, out).map_err(TrojanError::from)
}

impl From<AddressError> for TrojanError {
    fn from(e: AddressError) -> TrojanError {
        match e {
            AddressError::BadType(t) => TrojanError::BadAddressType(t),
            AddressError::BadDomain => TrojanError::BadDomain,
        }
    }
}

/// Reads the password hash and its CRLF, without looking further. Servers use this to decide
/// on a fallback before anything else (trojan.md §3, §4): no CRLF at byte 56 is
/// [`TrojanError::NoHashDelimiter`].
pub fn parse_request_hash(buf: &[u8]) -> Result<Parsed<PasswordHash>, TrojanError> {
    let mut r = Reader::new(buf);
    let hash = need!(r.array::<HASH_LEN>());
    need!(crlf(&mut r, TrojanError::NoHashDelimiter)?);
    Ok(Parsed::Complete(PasswordHash(hash)))
}

/// Parses a request header; on success returns the request and the header length (the
/// payload starts right after it).
pub fn parse_request(buf: &[u8]) -> Result<Parsed<(Request, usize)>, TrojanError> {
    let mut r = Reader::new(buf);
    let hash = need!(r.array::<HASH_LEN>());
    need!(crlf(&mut r, TrojanError::NoHashDelimiter)?);
    let command_byte = need!(r.u8());
    let command =
        Command::from_u8(command_byte).ok_or(TrojanError::UnknownCommand(command_byte))?;
    let destination = need!(read_address(&mut r)?);
    need!(crlf(&mut r, TrojanError::MissingCrlf)?);
    let request = Request {
        hash: PasswordHash(hash),
        command,
        destination,
    };
    Ok(Parsed::Complete((request, r.pos())))
}

/// Appends a request header. On error nothing is appended.
pub fn encode_request(request: &Request, out: &mut Vec<u8>) -> Result<(), TrojanError> {
    let mut buf = Vec::with_capacity(AUTH_LEN + 1 + 24);
    buf.extend_from_slice(request.hash.as_bytes());
    buf.extend_from_slice(&CRLF);
    buf.push(request.command as u8);
    encode_address(&request.destination, &mut buf)?;
    buf.extend_from_slice(&CRLF);
    out.extend_from_slice(&buf);
    Ok(())
}

/// A parsed UDP packet: its address (destination client→server, source server→client), where
/// its payload lies in the input, and the whole packet's length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketHead {
    pub address: Address,
    pub payload: std::ops::Range<usize>,
    pub len: usize,
}

/// Parses the first UDP packet of `buf` (trojan.md §2): `ATYP ADDR PORT LEN CRLF PAYLOAD`.
pub fn parse_packet(buf: &[u8]) -> Result<Parsed<PacketHead>, TrojanError> {
    let mut r = Reader::new(buf);
    let address = need!(read_address(&mut r)?);
    let len = usize::from(need!(r.u16()));
    need!(crlf(&mut r, TrojanError::MissingCrlf)?);
    let start = r.pos();
    need!(r.take(len));
    Ok(Parsed::Complete(PacketHead {
        address,
        payload: start..start + len,
        len: r.pos(),
    }))
}

/// Appends one UDP packet. On error nothing is appended.
pub fn encode_packet(
    address: &Address,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), TrojanError> {
    let len =
        u16::try_from(payload.len()).map_err(|_| TrojanError::PacketTooLong(payload.len()))?;
    let start = out.len();
    out.reserve(MAX_PACKET_HEADER_LEN + payload.len());
    if let Err(error) = encode_address(address, out) {
        out.truncate(start);
        return Err(error);
    }
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&CRLF);
    out.extend_from_slice(payload);
    Ok(())
}

/// Fuzz entry point: runs every Trojan parser on arbitrary bytes. Besides "never panics" it
/// checks that what parses re-encodes to bytes that parse back to the same value, and that
/// UDP packets come out the same whether the stream arrives at once or byte by byte.
pub fn fuzz_parse_all(data: &[u8]) {
    let _ = parse_request_hash(data);
    if let Ok(Parsed::Complete((request, len))) = parse_request(data) {
        assert!(len <= data.len() && len <= MAX_REQUEST_HEADER_LEN);
        let mut encoded = Vec::new();
        encode_request(&request, &mut encoded).expect("a parsed request re-encodes");
        match parse_request(&encoded) {
            Ok(Parsed::Complete((again, again_len))) => {
                assert_eq!(again, request);
                assert_eq!(again_len, encoded.len());
            }
            other => panic!("re-encoded request does not parse: {other:?}"),
        }
    }
    let whole = packets(data, data.len().max(1));
    let split = packets(data, 1);
    assert_eq!(whole, split);
    for (address, payload) in &whole {
        let mut encoded = Vec::new();
        encode_packet(address, payload, &mut encoded).expect("a parsed packet re-encodes");
        match parse_packet(&encoded) {
            Ok(Parsed::Complete(head)) => {
                assert_eq!(&head.address, address);
                assert_eq!(&encoded[head.payload], &payload[..]);
                assert_eq!(head.len, encoded.len());
            }
            other => panic!("re-encoded packet does not parse: {other:?}"),
        }
    }
}

/// The packets a [`super::udp::PacketDecoder`] yields when `data` arrives `chunk` bytes
/// at a time, up to the first error.
fn packets(data: &[u8], chunk: usize) -> Vec<(Address, Vec<u8>)> {
    let mut decoder = super::udp::PacketDecoder::new();
    let mut out = Vec::new();
    for part in data.chunks(chunk) {
        decoder.feed(part);
        loop {
            match decoder.next_packet() {
                Ok(Some((address, payload))) => out.push((address, payload.to_vec())),
                Ok(None) => break,
                Err(_) => return out,
            }
        }
    }
    out
}
