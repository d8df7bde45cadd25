//! The VLESS request and response headers, sans-IO (vless.md §2, §3).
//!
//! Parsers take the bytes received so far and answer [`Parsed::Complete`] with the value and
//! the number of header bytes, or [`Parsed::Incomplete`] when the input is a valid beginning
//! that needs more bytes. Nothing indexes a slice in a way that can panic: reads go through
//! [`Reader`], which answers `None` when the input runs out. User lookup is not done here: the
//! request carries the raw 16 id bytes (see [`crate::user_id::find_user`]).

use std::fmt;

use skiff_core::Address;
use skiff_core::wire::Reader;

use crate::address::{AddressError, port_first};

/// The only VLESS version.
pub const VERSION: u8 = 0x00;
/// The XTLS Vision flow name carried in the request addons.
pub const FLOW_VISION: &str = "xtls-rprx-vision";
/// The response header every server sends today: version 0, no addons (vless.md §3).
pub const RESPONSE_HEADER: [u8; 2] = [VERSION, 0x00];
/// The longest possible request header: version, id, addons (255), command, port, type,
/// domain (1 + 255).
pub const MAX_REQUEST_HEADER_LEN: usize = 1 + 16 + 1 + 255 + 1 + 2 + 1 + 1 + 255;
/// The longest flow string that fits in the 255-byte addons (tag, 2-byte varint length).
pub const MAX_FLOW_LEN: usize = 255 - 3;
/// The longest domain name written or accepted.
pub const MAX_DOMAIN_LEN: usize = crate::address::MAX_DOMAIN_LEN;

pub use skiff_core::wire::Parsed;

/// Why a VLESS header was refused (or could not be encoded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VlessError {
    /// The version byte is not 0 (in a request this is the fallback trigger, vless.md §5).
    BadVersion(u8),
    /// The addons are not a valid protobuf message.
    BadAddons(&'static str),
    /// The flow in the addons is not UTF-8 (encoding: longer than [`MAX_FLOW_LEN`]).
    BadFlow,
    /// A command byte other than 1..=4.
    UnknownCommand(u8),
    /// An address type byte other than 1..=3.
    BadAddressType(u8),
    /// A domain that is empty, too long or has characters outside `[0-9A-Za-z-._]`.
    BadDomain,
    /// TCP/UDP request without a destination (encoding only).
    MissingDestination,
    /// Mux/Reverse request with a destination (encoding only; these carry none on the wire).
    UnexpectedDestination,
}

impl fmt::Display for VlessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VlessError::BadVersion(v) => write!(f, "invalid VLESS version {v:#04x}"),
            VlessError::BadAddons(why) => write!(f, "invalid VLESS addons: {why}"),
            VlessError::BadFlow => f.write_str("invalid VLESS flow string"),
            VlessError::UnknownCommand(c) => write!(f, "unknown VLESS command {c:#04x}"),
            VlessError::BadAddressType(t) => write!(f, "unknown VLESS address type {t:#04x}"),
            VlessError::BadDomain => f.write_str("invalid domain name in VLESS request"),
            VlessError::MissingDestination => {
                f.write_str("VLESS TCP/UDP request needs a destination")
            }
            VlessError::UnexpectedDestination => {
                f.write_str("VLESS Mux/Reverse request carries no destination")
            }
        }
    }
}

impl std::error::Error for VlessError {}

/// Request commands (vless.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    Tcp = 0x01,
    Udp = 0x02,
    /// Mux.Cool; the implied target is `v1.mux.cool`.
    Mux = 0x03,
    /// Xray reverse proxy; the implied target is `v1.rvs.cool`.
    Reverse = 0x04,
}

impl Command {
    pub fn from_u8(byte: u8) -> Option<Command> {
        match byte {
            0x01 => Some(Command::Tcp),
            0x02 => Some(Command::Udp),
            0x03 => Some(Command::Mux),
            0x04 => Some(Command::Reverse),
            _ => None,
        }
    }

    /// Whether port and address follow the command byte on the wire.
    pub fn has_destination(self) -> bool {
        matches!(self, Command::Tcp | Command::Udp)
    }
}

/// A VLESS request header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub version: u8,
    /// The raw user id bytes as received; look them up with [`crate::user_id::find_user`].
    pub user: [u8; 16],
    /// Addons field 1. An empty flow string is the protobuf default and reads as `None`.
    pub flow: Option<String>,
    pub command: Command,
    /// Present exactly for [`Command::Tcp`] and [`Command::Udp`].
    pub destination: Option<Address>,
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

/// Checks the version and returns the user id, without looking further. Servers use this to
/// decide between fallback (bad version, unknown user) and plain error (anything after a known
/// user is wrong), as vless.md §5 requires.
pub fn parse_request_user(buf: &[u8]) -> Result<Parsed<[u8; 16]>, VlessError> {
    let mut r = Reader::new(buf);
    let version = need!(r.u8());
    if version != VERSION {
        return Err(VlessError::BadVersion(version));
    }
    Ok(Parsed::Complete(need!(r.array::<16>())))
}

/// Parses a request header; on success returns the request and the header length (the
/// payload starts right after it).
pub fn parse_request(buf: &[u8]) -> Result<Parsed<(Request, usize)>, VlessError> {
    let mut r = Reader::new(buf);
    let version = need!(r.u8());
    if version != VERSION {
        return Err(VlessError::BadVersion(version));
    }
    let user = need!(r.array::<16>());
    let addons_len = need!(r.u8());
    let addons = need!(r.take(usize::from(addons_len)));
    let flow = parse_addons(addons)?;
    let command_byte = need!(r.u8());
    let command = Command::from_u8(command_byte).ok_or(VlessError::UnknownCommand(command_byte))?;
    let destination = if command.has_destination() {
        Some(need!(port_first::read(&mut r)?))
    } else {
        None
    };
    let request = Request {
        version,
        user,
        flow,
        command,
        destination,
    };
    Ok(Parsed::Complete((request, r.pos())))
}

impl From<AddressError> for VlessError {
    fn from(e: AddressError) -> VlessError {
        match e {
            AddressError::BadType(t) => VlessError::BadAddressType(t),
            AddressError::BadDomain => VlessError::BadDomain,
        }
    }
}

/// Reads a protobuf varint (at most 10 bytes, no overflow).
fn read_varint(r: &mut Reader<'_>) -> Result<u64, VlessError> {
    let mut value = 0u64;
    for i in 0..10 {
        let byte = r.u8().ok_or(VlessError::BadAddons("truncated varint"))?;
        if i == 9 && byte > 1 {
            return Err(VlessError::BadAddons("varint overflows 64 bits"));
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(VlessError::BadAddons("varint too long"))
}

fn write_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Parses the addons protobuf `Addons { string Flow = 1; bytes Seed = 2; }` and returns the
/// flow. Unknown fields (and field 1 with a wire type other than length-delimited) are skipped;
/// groups and invalid wire types are errors. The last occurrence of field 1 wins (protobuf
/// semantics); an empty flow is `None`.
pub fn parse_addons(addons: &[u8]) -> Result<Option<String>, VlessError> {
    let mut r = Reader::new(addons);
    let mut flow: Option<&[u8]> = None;
    while r.pos() < addons.len() {
        let key = read_varint(&mut r)?;
        let field = key >> 3;
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return Err(VlessError::BadAddons("invalid field number"));
        }
        match key & 7 {
            0 => {
                read_varint(&mut r)?;
            }
            1 => {
                r.take(8)
                    .ok_or(VlessError::BadAddons("truncated fixed64"))?;
            }
            2 => {
                let len = read_varint(&mut r)?;
                let len = usize::try_from(len)
                    .map_err(|_| VlessError::BadAddons("truncated length-delimited field"))?;
                let bytes = r
                    .take(len)
                    .ok_or(VlessError::BadAddons("truncated length-delimited field"))?;
                if field == 1 {
                    flow = Some(bytes);
                }
            }
            5 => {
                r.take(4)
                    .ok_or(VlessError::BadAddons("truncated fixed32"))?;
            }
            _ => return Err(VlessError::BadAddons("unsupported wire type")),
        }
    }
    match flow {
        None | Some([]) => Ok(None),
        Some(bytes) => std::str::from_utf8(bytes)
            .map(|s| Some(s.to_owned()))
            .map_err(|_| VlessError::BadFlow),
    }
}

/// Appends the addons (length byte and protobuf) for a flow: a single `0x00` without flow.
fn encode_addons(flow: Option<&str>, out: &mut Vec<u8>) -> Result<(), VlessError> {
    match flow {
        None | Some("") => out.push(0),
        Some(flow) => {
            if flow.len() > MAX_FLOW_LEN {
                return Err(VlessError::BadFlow);
            }
            let mut proto = Vec::with_capacity(flow.len() + 3);
            proto.push(0x0a); // field 1, wire type 2
            write_varint(flow.len() as u64, &mut proto);
            proto.extend_from_slice(flow.as_bytes());
            out.push(proto.len() as u8);
            out.extend_from_slice(&proto);
        }
    }
    Ok(())
}

/// Appends a request header. Addons are written only when `flow` is a non-empty string (as
/// `0a <len> <flow>`), otherwise a single `0x00`. On error nothing is appended.
pub fn encode_request(request: &Request, out: &mut Vec<u8>) -> Result<(), VlessError> {
    if request.version != VERSION {
        return Err(VlessError::BadVersion(request.version));
    }
    let mut buf = Vec::with_capacity(64);
    buf.push(request.version);
    buf.extend_from_slice(&request.user);
    encode_addons(request.flow.as_deref(), &mut buf)?;
    buf.push(request.command as u8);
    match (request.command.has_destination(), &request.destination) {
        (true, None) => return Err(VlessError::MissingDestination),
        (false, Some(_)) => return Err(VlessError::UnexpectedDestination),
        (false, None) => {}
        (true, Some(destination)) => port_first::write(destination, &mut buf)?,
    }
    out.extend_from_slice(&buf);
    Ok(())
}

/// Parses a response header (version, addons length, addons); returns its length. The
/// version must be [`VERSION`] (the only request version); the addons must be a valid
/// protobuf and are otherwise ignored.
pub fn parse_response_header(buf: &[u8]) -> Result<Parsed<usize>, VlessError> {
    let mut r = Reader::new(buf);
    let version = need!(r.u8());
    if version != VERSION {
        return Err(VlessError::BadVersion(version));
    }
    let addons_len = need!(r.u8());
    let addons = need!(r.take(usize::from(addons_len)));
    parse_addons(addons)?;
    Ok(Parsed::Complete(r.pos()))
}

/// Fuzz entry point: runs every VLESS parser on arbitrary bytes. Besides "never panics" it
/// checks that a parsed request re-encodes and parses back to the same value, and that the
/// UDP decoder yields the same packets whether fed at once or byte by byte.
pub fn fuzz_parse_all(data: &[u8]) {
    let _ = parse_request_user(data);
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
    if let Ok(Parsed::Complete(len)) = parse_response_header(data) {
        assert!(len <= data.len());
    }
    let _ = parse_addons(data);

    let mut whole = super::udp::PacketDecoder::new();
    whole.feed(data);
    let mut split = super::udp::PacketDecoder::new();
    let mut packets = Vec::new();
    while let Ok(Some(packet)) = whole.next_packet() {
        packets.push(packet);
    }
    let mut again = Vec::new();
    for byte in data {
        split.feed(std::slice::from_ref(byte));
        while let Ok(Some(packet)) = split.next_packet() {
            again.push(packet);
        }
    }
    assert_eq!(packets, again);
}
