//! Base64 (RFC 4648) as the WebSocket layer needs it, from the `base64` crate: the standard
//! alphabet with padding, and the URL-safe alphabet without. Both decoders are strict:
//! padding exactly as the alphabet wants it and no stray bits in the last symbol.

use ::base64::Engine as _;
use ::base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

/// Why a base64 string was rejected.
pub use ::base64::DecodeError;

/// Standard alphabet, `=` padded (used for `Sec-WebSocket-Key` / `-Accept`).
pub fn encode_std(data: &[u8]) -> String {
    STANDARD.encode(data)
}

/// URL-safe alphabet, no padding (Go's `base64.RawURLEncoding`; used for early data).
pub fn encode_url_nopad(data: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(data)
}

/// Decodes the standard alphabet; padding is required to a multiple of 4 symbols.
pub fn decode_std(s: &[u8]) -> Result<Vec<u8>, DecodeError> {
    STANDARD.decode(s)
}

/// Decodes the URL-safe alphabet without padding (`=` is rejected).
pub fn decode_url_nopad(s: &[u8]) -> Result<Vec<u8>, DecodeError> {
    URL_SAFE_NO_PAD.decode(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors() {
        let cases: [(&[u8], &str); 7] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
        ];
        for (raw, enc) in cases {
            assert_eq!(encode_std(raw), enc);
            assert_eq!(decode_std(enc.as_bytes()).unwrap(), raw);
            let url = enc.trim_end_matches('=');
            assert_eq!(encode_url_nopad(raw), url);
            assert_eq!(decode_url_nopad(url.as_bytes()).unwrap(), raw);
        }
    }

    #[test]
    fn alphabets_differ() {
        let raw = [0xfb, 0xff, 0xbf];
        assert_eq!(encode_std(&raw), "+/+/");
        assert_eq!(encode_url_nopad(&raw), "-_-_");
        assert!(decode_url_nopad(b"+/+/").is_err());
        assert!(decode_std(b"-_-_").is_err());
    }

    /// What the handshake code relies on: bad lengths, stray bits and misplaced padding fail.
    #[test]
    fn rejects_bad_input() {
        for bad in [&b"A"[..], b"Zh", b"Zg="] {
            assert!(decode_url_nopad(bad).is_err(), "{bad:?}");
        }
        for bad in [&b"Zg="[..], b"Z===", b"Zm=v", b"Zh==", b"Zg"] {
            assert!(decode_std(bad).is_err(), "{bad:?}");
        }
    }
}
