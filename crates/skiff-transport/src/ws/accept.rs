//! `Sec-WebSocket-Accept` = base64(SHA-1(key ‖ GUID)) (RFC 6455 §4.2.2).

use sha1::{Digest, Sha1};

const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Accept value for the `Sec-WebSocket-Key` header value `key` (as sent, base64 text).
pub fn accept_key(key: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(key);
    h.update(GUID);
    crate::base64::encode_std(&h.finalize())
}

/// `Sec-WebSocket-Key` header value for 16 random bytes.
pub fn client_key(nonce: &[u8; 16]) -> String {
    crate::base64::encode_std(nonce)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6455_1_3_example() {
        assert_eq!(
            accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(client_key(b"the sample nonce"), "dGhlIHNhbXBsZSBub25jZQ==");
    }
}
