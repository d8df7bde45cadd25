//! AEAD-2017 UDP packets (shadowsocks.md §1.5): `salt ‖ AEAD(subkey(salt), nonce 0,
//! SOCKS5 address ‖ datagram)`, a fresh salt each; the same both ways (the address names the
//! destination going out, the source coming back).

use std::ops::Range;

use skiff_core::Address;
use skiff_crypto::TAG_LEN;

use super::codec::session_cipher;
use super::{Method, SsError, address};

/// What a packet adds to its datagram besides the address.
pub fn overhead(method: Method) -> usize {
    method.salt_len() + TAG_LEN
}

/// Seals `payload` for `target` into `out` with `salt`; returns the packet length.
pub fn seal_packet(
    method: Method,
    key: &[u8],
    salt: &[u8],
    target: &Address,
    payload: &[u8],
    out: &mut [u8],
) -> Result<usize, SsError> {
    let salt_len = method.salt_len();
    let addr_len = address::encoded_len(target)?;
    let total = salt_len + addr_len + payload.len() + TAG_LEN;
    let out = out.get_mut(..total).ok_or(SsError::TooLong)?;
    out[..salt_len].copy_from_slice(salt.get(..salt_len).ok_or(SsError::Truncated)?);
    let body = &mut out[salt_len..];
    address::write(target, body)?;
    body[addr_len..addr_len + payload.len()].copy_from_slice(payload);
    session_cipher(method, key, &out[..salt_len]).seal(&mut out[salt_len..]);
    Ok(total)
}

/// Opens a packet in place; returns the address and where the datagram lies in `packet`.
pub fn open_packet(
    method: Method,
    key: &[u8],
    packet: &mut [u8],
) -> Result<(Address, Range<usize>), SsError> {
    let salt_len = method.salt_len();
    if packet.len() < salt_len + TAG_LEN {
        return Err(SsError::Truncated);
    }
    let (salt, sealed) = packet.split_at_mut(salt_len);
    let plain = session_cipher(method, key, salt).open(sealed)?;
    match address::parse(plain)? {
        address::Parsed::Complete(addr, len) => Ok((addr, salt_len + len..salt_len + plain.len())),
        address::Parsed::Incomplete => Err(SsError::Truncated),
    }
}

/// Opens a packet with the first of `keys` that authenticates it (multi-user servers try
/// each user); returns that key's index too. `scratch` must be as long as the packet: a
/// failed attempt spoils the bytes it opened, so each try starts from a fresh copy.
pub fn open_packet_any(
    keys: &[(Method, &[u8])],
    packet: &mut [u8],
    scratch: &mut [u8],
) -> Result<(usize, Address, Range<usize>), SsError> {
    if keys.len() == 1 {
        let (method, key) = keys[0];
        return open_packet(method, key, packet).map(|(a, r)| (0, a, r));
    }
    let scratch = scratch.get_mut(..packet.len()).ok_or(SsError::TooLong)?;
    for (index, (method, key)) in keys.iter().enumerate() {
        scratch.copy_from_slice(packet);
        if let Ok((addr, range)) = open_packet(*method, key, scratch) {
            packet.copy_from_slice(scratch);
            return Ok((index, addr, range));
        }
    }
    Err(SsError::Auth)
}
