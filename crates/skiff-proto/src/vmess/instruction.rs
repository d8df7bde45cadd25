//! The instruction header ("command section", vmess.md §2.3): what the client asks for and
//! the keys of the body, checksummed with FNV-1a. It travels AEAD-sealed (see
//! [`super::request`]); this module only lays out and reads the plaintext.

use skiff_core::Address;
use skiff_crypto::hash::fnv1a32;

use super::error::VmessError;
use skiff_core::wire::Reader;

use crate::address::{AddressError, port_first};

/// The only instruction version anyone sends (servers do not check it).
pub const VERSION: u8 = 0x01;
/// The longest instruction header: fixed part, port, domain (1 + 255), padding, checksum.
pub const MAX_INSTRUCTION_LEN: usize = 38 + 2 + 1 + 1 + 255 + 15 + 4;
/// The fixed part before the port: version, IV, key, V, options, P‖Sec, reserved, command.
const FIXED_LEN: usize = 38;

/// Request commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    Tcp = 0x01,
    Udp = 0x02,
    /// Mux.Cool; no port or address follow, the implied target is `v1.mux.cool`.
    Mux = 0x03,
}

impl Command {
    pub fn from_u8(byte: u8) -> Option<Command> {
        match byte {
            0x01 => Some(Command::Tcp),
            0x02 => Some(Command::Udp),
            0x03 => Some(Command::Mux),
            _ => None,
        }
    }
}

/// Option bits (vmess.md §2.3).
pub mod options {
    /// S: the body is a chunk stream.
    pub const CHUNK_STREAM: u8 = 0x01;
    /// R: legacy connection reuse, ignored.
    pub const CONNECTION_REUSE: u8 = 0x02;
    /// M: chunk lengths are masked with a SHAKE128 stream.
    pub const CHUNK_MASKING: u8 = 0x04;
    /// P: random padding after each chunk (needs M).
    pub const GLOBAL_PADDING: u8 = 0x08;
    /// A: chunk lengths are AEAD-sealed (experiment).
    pub const AUTHENTICATED_LENGTH: u8 = 0x10;
}

/// Security nibble values on the wire.
pub mod security {
    pub const AES_128_GCM: u8 = 0x03;
    pub const CHACHA20_POLY1305: u8 = 0x04;
    pub const NONE: u8 = 0x05;
}

/// A decoded instruction header. Padding is not kept (its content means nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    pub version: u8,
    /// ReqIV: the request body IV.
    pub body_iv: [u8; 16],
    /// ReqKey: the request body key.
    pub body_key: [u8; 16],
    /// V: echoed in the response header.
    pub response_auth: u8,
    /// Raw option bits ([`options`]).
    pub options: u8,
    /// The security nibble as sent ([`security`]).
    pub security: u8,
    pub command: Command,
    /// Present exactly for TCP and UDP.
    pub destination: Option<Address>,
}

/// Appends the instruction header with `padding` (0..=15 bytes; its length goes into the
/// high nibble) and the checksum. On error nothing is appended.
pub fn encode_instruction(
    ins: &Instruction,
    padding: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), VmessError> {
    let pad_len = u8::try_from(padding.len())
        .ok()
        .filter(|&n| n <= 15)
        .ok_or(VmessError::BadOptions(
            "instruction padding longer than 15 bytes",
        ))?;
    if ins.security > 0x0f {
        return Err(VmessError::UnsupportedSecurity(ins.security));
    }
    let start = out.len();
    out.reserve(FIXED_LEN + 2 + 1 + 1 + 255 + padding.len() + 4);
    out.push(ins.version);
    out.extend_from_slice(&ins.body_iv);
    out.extend_from_slice(&ins.body_key);
    out.push(ins.response_auth);
    out.push(ins.options);
    out.push((pad_len << 4) | ins.security);
    out.push(0);
    out.push(ins.command as u8);
    let has_destination = ins.command != Command::Mux;
    match (has_destination, &ins.destination) {
        (false, None) => {}
        (true, Some(destination)) => {
            if let Err(e) = encode_address(destination, out) {
                out.truncate(start);
                return Err(e);
            }
        }
        _ => {
            out.truncate(start);
            return Err(VmessError::BadDestination);
        }
    }
    out.extend_from_slice(padding);
    let check = fnv1a32(&out[start..]);
    out.extend_from_slice(&check.to_be_bytes());
    Ok(())
}

/// Port, then address type and address (Xray's "port then address" layout).
fn encode_address(destination: &Address, out: &mut Vec<u8>) -> Result<(), VmessError> {
    port_first::write(destination, out).map_err(address_error)
}

fn address_error(e: AddressError) -> VmessError {
    match e {
        AddressError::BadType(t) => VmessError::BadAddressType(t),
        AddressError::BadDomain => VmessError::BadDomain,
    }
}

/// Parses a whole (opened) instruction header; returns it and its length including the
/// checksum. Bytes after the checksum are ignored, as Xray ignores them.
pub fn parse_instruction(buf: &[u8]) -> Result<(Instruction, usize), VmessError> {
    let mut r = Reader::new(buf);
    let version = r.u8().ok_or(VmessError::Truncated)?;
    let body_iv = r.array::<16>().ok_or(VmessError::Truncated)?;
    let body_key = r.array::<16>().ok_or(VmessError::Truncated)?;
    let response_auth = r.u8().ok_or(VmessError::Truncated)?;
    let options = r.u8().ok_or(VmessError::Truncated)?;
    let pad_sec = r.u8().ok_or(VmessError::Truncated)?;
    let _reserved = r.u8().ok_or(VmessError::Truncated)?;
    let command_byte = r.u8().ok_or(VmessError::Truncated)?;
    let command = Command::from_u8(command_byte).ok_or(VmessError::UnknownCommand(command_byte))?;
    let destination = match command {
        Command::Mux => None,
        Command::Tcp | Command::Udp => Some(
            port_first::read(&mut r)
                .map_err(address_error)?
                .ok_or(VmessError::Truncated)?,
        ),
    };
    r.take(usize::from(pad_sec >> 4))
        .ok_or(VmessError::Truncated)?;
    let checked = r.pos();
    let check = u32::from_be_bytes(r.array::<4>().ok_or(VmessError::Truncated)?);
    if fnv1a32(&buf[..checked]) != check {
        return Err(VmessError::BadChecksum);
    }
    let ins = Instruction {
        version,
        body_iv,
        body_key,
        response_auth,
        options,
        security: pad_sec & 0x0f,
        command,
        destination,
    };
    Ok((ins, r.pos()))
}
