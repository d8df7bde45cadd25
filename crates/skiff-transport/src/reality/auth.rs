//! REALITY's authentication in the ClientHello, server side: the key both ends derive from
//! the X25519 exchange, and opening the sealed session ID.
//!
//! The client seals 16 bytes into the 32-byte legacy session ID (16 of plaintext, 16 of GCM
//! tag): its version (3 bytes), one reserved byte, the Unix time in seconds (u32, big
//! endian) and its short id (8 bytes). The key is HKDF-SHA256 of the X25519 secret between
//! the server's private key and the client's key share, salted with the first 20 bytes of
//! the ClientHello random, info "REALITY"; the nonce is the random's last 12 bytes, and the
//! additional data is the whole ClientHello message with the session ID zeroed.

use skiff_crypto::{AeadKey, AeadKind};

/// The session ID REALITY uses: always 32 bytes.
pub const SESSION_ID_LEN: usize = 32;
/// Where the session ID starts in a ClientHello handshake message: the 4-byte handshake
/// header, the legacy version (2), the random (32) and the session ID's length byte.
pub const SESSION_ID_OFFSET: usize = 4 + 2 + 32 + 1;

/// REALITY's per-connection key: HKDF-SHA256 (salt: the ClientHello random's first 20
/// bytes, info "REALITY") of the X25519 shared secret. The same on both sides; it keys the
/// session ID's AEAD and the temporary certificate's HMAC.
pub fn reality_auth_key(shared_secret: &[u8; 32], client_random: &[u8; 32]) -> [u8; 32] {
    let mut key = [0u8; 32];
    skiff_crypto::kdf::hkdf_sha256(shared_secret, &client_random[..20], b"REALITY", &mut key);
    key
}

/// What an authentic session ID carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionFields {
    /// The client's version, [major, minor, patch] (Xray's own version for Xray clients).
    pub version: [u8; 3],
    /// Unix time in seconds at the client.
    pub unix_time: u32,
    /// The short id, zero-padded to 8 bytes.
    pub short_id: [u8; 8],
}

/// Opens the session ID of `client_hello` (the handshake message, header included) with
/// `auth_key`. None when the message is too short or the tag does not verify.
pub fn open_session_id(auth_key: &[u8; 32], client_hello: &[u8]) -> Option<SessionFields> {
    let end = SESSION_ID_OFFSET + SESSION_ID_LEN;
    if client_hello.len() < end
        || usize::from(client_hello[SESSION_ID_OFFSET - 1]) != SESSION_ID_LEN
    {
        return None;
    }
    let random = &client_hello[6..38];
    let mut sealed = [0u8; SESSION_ID_LEN];
    sealed.copy_from_slice(&client_hello[SESSION_ID_OFFSET..end]);
    let mut aad = client_hello.to_vec();
    aad[SESSION_ID_OFFSET..end].fill(0);
    let key = AeadKey::new(AeadKind::Aes256Gcm, auth_key).ok()?;
    let plain = key.open_in_place(&random[20..], &aad, &mut sealed).ok()?;
    Some(SessionFields {
        version: [plain[0], plain[1], plain[2]],
        unix_time: u32::from_be_bytes([plain[4], plain[5], plain[6], plain[7]]),
        short_id: plain[8..16].try_into().ok()?,
    })
}

/// The client's side, for tests and the fuzz entry point: seals `fields` into the session
/// ID of `client_hello` (a handshake message with a 32-byte session ID) in place, as Xray's
/// client does. A message too short to hold one is left alone.
pub(crate) fn seal_session_id(
    auth_key: &[u8; 32],
    fields: &SessionFields,
    client_hello: &mut [u8],
) {
    let end = SESSION_ID_OFFSET + SESSION_ID_LEN;
    if client_hello.len() < end {
        return;
    }
    client_hello[SESSION_ID_OFFSET..end].fill(0);
    let aad = client_hello.to_vec();
    // Plaintext in the first 16 bytes, room for the tag after it.
    let mut whole = [0u8; SESSION_ID_LEN];
    whole[..3].copy_from_slice(&fields.version);
    whole[4..8].copy_from_slice(&fields.unix_time.to_be_bytes());
    whole[8..16].copy_from_slice(&fields.short_id);
    let key = AeadKey::new(AeadKind::Aes256Gcm, auth_key).unwrap();
    key.seal_in_place(&client_hello[26..38], &aad, &mut whole);
    client_hello[SESSION_ID_OFFSET..end].copy_from_slice(&whole);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_session_id_opens_with_its_key_only() {
        let mut hello = vec![0u8; 100];
        hello[38] = 32;
        for (i, b) in hello[6..38].iter_mut().enumerate() {
            *b = i as u8;
        }
        let key = reality_auth_key(&[7; 32], hello[6..38].try_into().unwrap());
        let fields = SessionFields {
            version: [26, 7, 28],
            unix_time: 1_800_000_000,
            short_id: [1, 2, 3, 4, 0, 0, 0, 0],
        };
        seal_session_id(&key, &fields, &mut hello);
        assert_eq!(open_session_id(&key, &hello), Some(fields));
        let other = reality_auth_key(&[8; 32], hello[6..38].try_into().unwrap());
        assert_eq!(open_session_id(&other, &hello), None);
        // Any other byte of the message is covered too.
        hello[90] ^= 1;
        assert_eq!(open_session_id(&key, &hello), None);
        assert_eq!(open_session_id(&key, &hello[..50]), None);
    }
}
