//! The auth ID that opens every AEAD request (vmess.md §2.1): `timestamp (u64 BE) || salt[4]
//! || CRC32(first 12 bytes)`, sealed as one AES-128 block under the user's auth-ID key. Only
//! the right key yields a matching CRC, which is how a server tells its users apart.

use skiff_crypto::hash::crc32;
use skiff_crypto::vmess::{AuthIdOpener, AuthIdSealer};

pub const AUTH_ID_LEN: usize = 16;
/// How far (seconds) an auth ID's timestamp may be from the server's clock, either way.
pub const MAX_CLOCK_SKEW: i64 = 120;

/// Seals an auth ID for `timestamp` (Unix seconds) with the random `salt`.
pub fn seal_auth_id(cipher: &AuthIdSealer, timestamp: i64, salt: [u8; 4]) -> [u8; AUTH_ID_LEN] {
    let mut block = [0u8; AUTH_ID_LEN];
    block[..8].copy_from_slice(&timestamp.to_be_bytes());
    block[8..12].copy_from_slice(&salt);
    let check = crc32(&block[..12]);
    block[12..].copy_from_slice(&check.to_be_bytes());
    cipher.encrypt_block(&mut block);
    block
}

/// Opens `auth_id` with one user's cipher: the timestamp when the CRC matches (the id is that
/// user's), `None` otherwise.
///
/// Before the CRC, a cheap filter: the timestamp's high 32 bits are zero until 2106, and a
/// wrong key gives them a 2^-32 chance of being so, so a server trying every user computes
/// almost no CRCs. (Only absurd timestamps, negative or past 2106, are then reported as an
/// unknown user rather than a bad time; they are refused either way.)
pub fn open_auth_id(cipher: &AuthIdOpener, auth_id: &[u8; AUTH_ID_LEN]) -> Option<i64> {
    let mut block = *auth_id;
    cipher.decrypt_block(&mut block);
    if block[..4] != [0; 4] {
        return None;
    }
    let (head, check) = block.split_at(12);
    let check = u32::from_be_bytes([check[0], check[1], check[2], check[3]]);
    if crc32(head) != check {
        return None;
    }
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&head[..8]);
    Some(i64::from_be_bytes(ts))
}

/// Xray's window: not negative, at most [`MAX_CLOCK_SKEW`] seconds from `now`.
pub fn timestamp_in_window(timestamp: i64, now: i64) -> bool {
    timestamp >= 0 && timestamp.abs_diff(now) <= MAX_CLOCK_SKEW as u64
}
