//! The response header (vmess.md §3): the server echoes the request's V byte, AEAD-sealed as
//! two AES-128-GCM messages (length, then header) under keys derived from the response body
//! key and IV, which are themselves SHA-256 of the request's.

use skiff_crypto::hash::sha256;
use skiff_crypto::vmess::{kdf, kdf16};
use skiff_crypto::{AeadKey, AeadKind, TAG_LEN};

use super::error::VmessError;
use skiff_core::wire::Parsed;

const SALT_LENGTH_KEY: &[u8] = b"AEAD Resp Header Len Key";
const SALT_LENGTH_IV: &[u8] = b"AEAD Resp Header Len IV";
const SALT_KEY: &[u8] = b"AEAD Resp Header Key";
const SALT_IV: &[u8] = b"AEAD Resp Header IV";

const LENGTH_BLOCK_LEN: usize = 2 + TAG_LEN;
/// V, options, command, command length, command data (at most 255).
pub const MAX_RESPONSE_HEADER_LEN: usize = 4 + 255;

/// `(RespKey, RespIV) = (SHA-256(ReqKey)[..16], SHA-256(ReqIV)[..16])`.
pub fn response_keys(body_key: &[u8; 16], body_iv: &[u8; 16]) -> ([u8; 16], [u8; 16]) {
    let mut key = [0u8; 16];
    key.copy_from_slice(&sha256(&[body_key])[..16]);
    let mut iv = [0u8; 16];
    iv.copy_from_slice(&sha256(&[body_iv])[..16]);
    (key, iv)
}

fn part_cipher(
    resp_key: &[u8; 16],
    resp_iv: &[u8; 16],
    key_salt: &[u8],
    iv_salt: &[u8],
) -> (AeadKey, [u8; 12]) {
    let key = kdf16(resp_key, &[key_salt]);
    let mut iv = [0u8; 12];
    iv.copy_from_slice(&kdf(resp_iv, &[iv_salt])[..12]);
    let key = AeadKey::new(AeadKind::Aes128Gcm, &key).expect("16-byte AES-128-GCM key");
    (key, iv)
}

/// The header servers send: V echoed, no options, no command.
pub fn plain_response_header(response_auth: u8) -> [u8; 4] {
    [response_auth, 0, 0, 0]
}

/// Appends the sealed response header carrying `header` (e.g. [`plain_response_header`]).
pub fn seal_response(resp_key: &[u8; 16], resp_iv: &[u8; 16], header: &[u8], out: &mut Vec<u8>) {
    let len = u16::try_from(header.len()).expect("response header fits in 64 KiB");
    out.reserve(LENGTH_BLOCK_LEN + header.len() + TAG_LEN);
    let at = out.len();
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&[0; TAG_LEN]);
    let (key, iv) = part_cipher(resp_key, resp_iv, SALT_LENGTH_KEY, SALT_LENGTH_IV);
    key.seal_in_place(&iv, &[], &mut out[at..]);
    let at = out.len();
    out.extend_from_slice(header);
    out.extend_from_slice(&[0; TAG_LEN]);
    let (key, iv) = part_cipher(resp_key, resp_iv, SALT_KEY, SALT_IV);
    key.seal_in_place(&iv, &[], &mut out[at..]);
}

/// Opens the response header at the start of `input` (the client side), checking that it
/// echoes `response_auth`. Returns the header length on the wire once it is all there. The
/// length block is opened on a copy (so `Incomplete` can be retried), the header in place.
/// Any command the server attached (legacy dynamic port) is skipped.
pub fn open_response(
    resp_key: &[u8; 16],
    resp_iv: &[u8; 16],
    response_auth: u8,
    input: &mut [u8],
) -> Result<Parsed<usize>, VmessError> {
    let Some(block) = input.get(..LENGTH_BLOCK_LEN) else {
        return Ok(Parsed::Incomplete);
    };
    let mut length = [0u8; LENGTH_BLOCK_LEN];
    length.copy_from_slice(block);
    let (key, iv) = part_cipher(resp_key, resp_iv, SALT_LENGTH_KEY, SALT_LENGTH_IV);
    let plain = key
        .open_in_place(&iv, &[], &mut length)
        .map_err(|_| VmessError::ResponseAuth)?;
    let len = usize::from(u16::from_be_bytes([plain[0], plain[1]]));
    if !(4..=MAX_RESPONSE_HEADER_LEN).contains(&len) {
        return Err(VmessError::ResponseAuth);
    }
    let total = LENGTH_BLOCK_LEN + len + TAG_LEN;
    let Some(sealed) = input.get_mut(LENGTH_BLOCK_LEN..total) else {
        return Ok(Parsed::Incomplete);
    };
    let (key, iv) = part_cipher(resp_key, resp_iv, SALT_KEY, SALT_IV);
    let header = key
        .open_in_place(&iv, &[], sealed)
        .map_err(|_| VmessError::ResponseAuth)?;
    if header[0] != response_auth {
        return Err(VmessError::ResponseMismatch {
            expected: response_auth,
            got: header[0],
        });
    }
    if usize::from(header[3]) > len - 4 {
        return Err(VmessError::ResponseAuth);
    }
    Ok(Parsed::Complete(total))
}
