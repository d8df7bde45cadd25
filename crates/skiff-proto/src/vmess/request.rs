//! The AEAD request header on the wire (vmess.md §2, §2.2):
//! `AuthID[16] | AEAD(length)[18] | ConnectionNonce[8] | AEAD(instruction)[L+16]`, both AEADs
//! AES-128-GCM under keys the KDF derives from the command key, the auth ID and the nonce,
//! with the auth ID as associated data.

use skiff_crypto::vmess::{kdf, kdf16};
use skiff_crypto::{AeadKey, AeadKind, TAG_LEN};

use super::auth_id::AUTH_ID_LEN;
use super::error::VmessError;
use super::instruction::{Instruction, MAX_INSTRUCTION_LEN, parse_instruction};
use skiff_core::wire::Parsed;

/// The sealed 2-byte length.
pub const LENGTH_BLOCK_LEN: usize = 2 + TAG_LEN;
pub const CONNECTION_NONCE_LEN: usize = 8;
/// Everything before the sealed instruction.
pub const PREFIX_LEN: usize = AUTH_ID_LEN + LENGTH_BLOCK_LEN + CONNECTION_NONCE_LEN;
/// The longest request header anyone sends.
pub const MAX_REQUEST_LEN: usize = PREFIX_LEN + MAX_INSTRUCTION_LEN + TAG_LEN;

const SALT_LENGTH_KEY: &[u8] = b"VMess Header AEAD Key_Length";
const SALT_LENGTH_NONCE: &[u8] = b"VMess Header AEAD Nonce_Length";
const SALT_KEY: &[u8] = b"VMess Header AEAD Key";
const SALT_NONCE: &[u8] = b"VMess Header AEAD Nonce";

/// The AES-128-GCM key and nonce for one of the two sealed parts.
fn part_cipher(
    cmd_key: &[u8; 16],
    key_salt: &[u8],
    nonce_salt: &[u8],
    auth_id: &[u8; AUTH_ID_LEN],
    nonce: &[u8; CONNECTION_NONCE_LEN],
) -> (AeadKey, [u8; 12]) {
    let key = kdf16(cmd_key, &[key_salt, auth_id, nonce]);
    let mut iv = [0u8; 12];
    iv.copy_from_slice(&kdf(cmd_key, &[nonce_salt, auth_id, nonce])[..12]);
    let key = AeadKey::new(AeadKind::Aes128Gcm, &key).expect("16-byte AES-128-GCM key");
    (key, iv)
}

/// Appends the sealed request header: `auth_id` (already sealed, see
/// [`super::auth_id::seal_auth_id`]), the sealed length, `nonce`, the sealed `instruction`
/// (the plaintext from [`super::instruction::encode_instruction`]).
pub fn seal_request(
    cmd_key: &[u8; 16],
    auth_id: &[u8; AUTH_ID_LEN],
    nonce: &[u8; CONNECTION_NONCE_LEN],
    instruction: &[u8],
    out: &mut Vec<u8>,
) {
    out.reserve(PREFIX_LEN + instruction.len() + TAG_LEN);
    out.extend_from_slice(auth_id);
    let at = out.len();
    let len = u16::try_from(instruction.len()).expect("instruction header fits in 64 KiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&[0; TAG_LEN]);
    let (key, iv) = part_cipher(cmd_key, SALT_LENGTH_KEY, SALT_LENGTH_NONCE, auth_id, nonce);
    key.seal_in_place(&iv, auth_id, &mut out[at..]);
    out.extend_from_slice(nonce);
    let at = out.len();
    out.extend_from_slice(instruction);
    out.extend_from_slice(&[0; TAG_LEN]);
    let (key, iv) = part_cipher(cmd_key, SALT_KEY, SALT_NONCE, auth_id, nonce);
    key.seal_in_place(&iv, auth_id, &mut out[at..]);
}

/// Opens a request header whose auth ID already matched a user (the server side). Feed it
/// the bytes received so far, starting with the auth ID, each time more arrive: it answers
/// `Incomplete` until the whole header is there, then the instruction and the header's
/// length. The length is opened once and remembered; the instruction is opened in place.
#[derive(Debug)]
pub struct RequestOpener {
    cmd_key: [u8; 16],
    /// The instruction's length, once the length block opened.
    length: Option<usize>,
}

impl RequestOpener {
    pub fn new(cmd_key: [u8; 16]) -> RequestOpener {
        RequestOpener {
            cmd_key,
            length: None,
        }
    }

    /// How many header bytes are known to be needed (for a drain budget: what the peer
    /// has been told to send so far).
    pub fn needed(&self) -> usize {
        match self.length {
            None => PREFIX_LEN,
            Some(len) => PREFIX_LEN + len + TAG_LEN,
        }
    }

    pub fn open(&mut self, input: &mut [u8]) -> Result<Parsed<(Instruction, usize)>, VmessError> {
        let Some(prefix) = input.get(..PREFIX_LEN) else {
            return Ok(Parsed::Incomplete);
        };
        let mut auth_id = [0u8; AUTH_ID_LEN];
        auth_id.copy_from_slice(&prefix[..AUTH_ID_LEN]);
        let mut nonce = [0u8; CONNECTION_NONCE_LEN];
        nonce.copy_from_slice(&prefix[AUTH_ID_LEN + LENGTH_BLOCK_LEN..]);
        let len = match self.length {
            Some(len) => len,
            None => {
                let mut block = [0u8; LENGTH_BLOCK_LEN];
                block.copy_from_slice(&prefix[AUTH_ID_LEN..AUTH_ID_LEN + LENGTH_BLOCK_LEN]);
                let (key, iv) = part_cipher(
                    &self.cmd_key,
                    SALT_LENGTH_KEY,
                    SALT_LENGTH_NONCE,
                    &auth_id,
                    &nonce,
                );
                let plain = key
                    .open_in_place(&iv, &auth_id, &mut block)
                    .map_err(|_| VmessError::HeaderAuth)?;
                let len = usize::from(u16::from_be_bytes([plain[0], plain[1]]));
                if len > MAX_INSTRUCTION_LEN {
                    return Err(VmessError::HeaderTooLong(len));
                }
                self.length = Some(len);
                len
            }
        };
        let total = PREFIX_LEN + len + TAG_LEN;
        let Some(sealed) = input.get_mut(PREFIX_LEN..total) else {
            return Ok(Parsed::Incomplete);
        };
        let (key, iv) = part_cipher(&self.cmd_key, SALT_KEY, SALT_NONCE, &auth_id, &nonce);
        let plain = key
            .open_in_place(&iv, &auth_id, sealed)
            .map_err(|_| VmessError::HeaderAuth)?;
        let (instruction, _) = parse_instruction(plain)?;
        Ok(Parsed::Complete((instruction, total)))
    }
}
