//! The 2022 TCP headers (shadowsocks.md §2.2, §2.3) and identity headers (§2.7), as plain
//! bytes: sealing and opening is the caller's.

use skiff_core::Address;
use skiff_crypto::shadowsocks::{AesBlock, identity_subkey_2022, psk_hash_2022};

use super::{Reader, SsError, address, check_time, read_address};

/// Type byte of a client's request header.
pub const TYPE_CLIENT: u8 = 0;
/// Type byte of a server's response header.
pub const TYPE_SERVER: u8 = 1;
/// The request's fixed header: type, timestamp, length of the variable header chunk.
pub const REQUEST_FIXED_LEN: usize = 1 + 8 + 2;
/// The most padding a request header carries.
pub const MAX_PADDING: usize = 900;
/// An identity header (SIP023) is one AES block.
pub const IDENTITY_HEADER_LEN: usize = 16;

/// The fixed request header.
pub fn request_fixed(timestamp: u64, variable_len: u16) -> [u8; REQUEST_FIXED_LEN] {
    let mut out = [0u8; REQUEST_FIXED_LEN];
    out[0] = TYPE_CLIENT;
    out[1..9].copy_from_slice(&timestamp.to_be_bytes());
    out[9..].copy_from_slice(&variable_len.to_be_bytes());
    out
}

/// Checks an opened fixed request header; returns the length of the variable header chunk.
pub fn parse_request_fixed(plain: &[u8], now: u64) -> Result<usize, SsError> {
    let mut r = Reader::new(plain);
    let kind = r.u8().ok_or(SsError::Truncated)?;
    if kind != TYPE_CLIENT {
        return Err(SsError::BadType(kind));
    }
    check_time(r.u64().ok_or(SsError::Truncated)?, now)?;
    Ok(usize::from(r.u16().ok_or(SsError::Truncated)?))
}

/// The variable request header (opened): target address, padding, initial payload. Returns
/// the address and where the initial payload starts. A header with neither payload nor
/// padding, or padding past its end, is refused.
pub fn parse_request_variable(plain: &[u8]) -> Result<(Address, usize), SsError> {
    let mut r = Reader::new(plain);
    let target = read_address(&mut r)?;
    let padding = usize::from(r.u16().ok_or(SsError::Truncated)?);
    r.take(padding).ok_or(SsError::BadPadding)?;
    if padding == 0 && r.rest().is_empty() {
        return Err(SsError::BadPadding);
    }
    Ok((target, r.pos()))
}

/// Length of the fixed response header for a salt of `salt_len` bytes.
pub fn response_fixed_len(salt_len: usize) -> usize {
    1 + 8 + salt_len + 2
}

/// Writes the fixed response header into `out`; returns its length.
pub fn write_response_fixed(
    timestamp: u64,
    request_salt: &[u8],
    first_len: u16,
    out: &mut [u8],
) -> usize {
    let len = response_fixed_len(request_salt.len());
    let out = &mut out[..len];
    out[0] = TYPE_SERVER;
    out[1..9].copy_from_slice(&timestamp.to_be_bytes());
    out[9..9 + request_salt.len()].copy_from_slice(request_salt);
    out[len - 2..].copy_from_slice(&first_len.to_be_bytes());
    len
}

/// Checks an opened fixed response header against our request; returns the length of the
/// first payload chunk.
pub fn parse_response_fixed(plain: &[u8], request_salt: &[u8], now: u64) -> Result<usize, SsError> {
    let mut r = Reader::new(plain);
    let kind = r.u8().ok_or(SsError::Truncated)?;
    if kind != TYPE_SERVER {
        return Err(SsError::BadType(kind));
    }
    check_time(r.u64().ok_or(SsError::Truncated)?, now)?;
    let salt = r.take(request_salt.len()).ok_or(SsError::Truncated)?;
    if !skiff_crypto::constant_time_eq(salt, request_salt) {
        return Err(SsError::WrongRequest);
    }
    Ok(usize::from(r.u16().ok_or(SsError::Truncated)?))
}

/// The TCP identity header naming `next_key` under identity key `ipsk` for this `salt`.
pub fn tcp_identity_header(ipsk: &[u8], salt: &[u8], next_key: &[u8]) -> [u8; 16] {
    let mut block = psk_hash_2022(next_key);
    identity_cipher(ipsk, salt).encrypt(&mut block);
    block
}

/// Opens a TCP identity header: the hash of the key it names.
pub fn open_tcp_identity_header(ipsk: &[u8], salt: &[u8], header: &[u8; 16]) -> [u8; 16] {
    let mut block = *header;
    identity_cipher(ipsk, salt).decrypt(&mut block);
    block
}

fn identity_cipher(ipsk: &[u8], salt: &[u8]) -> AesBlock {
    let mut subkey = [0u8; 32];
    let subkey = &mut subkey[..ipsk.len()];
    identity_subkey_2022(ipsk, salt, subkey);
    AesBlock::new(subkey).expect("identity keys are AES-128 or AES-256 keys")
}

/// Encoded variable header size for `target` with `padding` and `payload` bytes.
pub fn request_variable_len(
    target: &Address,
    padding: usize,
    payload: usize,
) -> Result<usize, SsError> {
    Ok(address::encoded_len(target)? + 2 + padding + payload)
}
