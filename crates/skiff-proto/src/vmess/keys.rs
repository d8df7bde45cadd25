//! What a user id turns into (vmess.md §1): the command key, from which the auth-ID key and
//! every header key derive.

use skiff_crypto::hash::md5;

/// The literal appended to the id before hashing it into the command key.
const CMD_KEY_MAGIC: &[u8] = b"c48619fe-8f02-49e0-b9e9-edf763e17e21";

/// `CmdKey = MD5(UUID || "c48619fe-8f02-49e0-b9e9-edf763e17e21")`.
pub fn cmd_key(id: &[u8; 16]) -> [u8; 16] {
    md5(&[id, CMD_KEY_MAGIC])
}
