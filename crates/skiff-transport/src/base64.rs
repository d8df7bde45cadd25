//! Base64 (RFC 4648): standard alphabet with padding, and URL-safe alphabet without padding.

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn encode_with(data: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let symbols = chunk.len() + 1;
        for i in 0..4 {
            if i < symbols {
                out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// Standard alphabet, `=` padded (used for `Sec-WebSocket-Key` / `-Accept`).
pub fn encode_std(data: &[u8]) -> String {
    encode_with(data, STD, true)
}

/// URL-safe alphabet, no padding (Go's `base64.RawURLEncoding`; used for early data).
pub fn encode_url_nopad(data: &[u8]) -> String {
    encode_with(data, URL, false)
}

/// Why a base64 string was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// A byte outside the alphabet (or misplaced padding).
    InvalidByte(usize),
    /// A length that no encoding produces (4k+1 symbols, or bad padding count).
    InvalidLength,
    /// Non-zero bits in the unused part of the last symbol (non-canonical encoding).
    TrailingBits,
}

fn value(c: u8, alphabet: &[u8; 64]) -> Option<u8> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        _ if c == alphabet[62] => 62,
        _ if c == alphabet[63] => 63,
        _ => return None,
    };
    Some(v)
}

fn decode_symbols(s: &[u8], alphabet: &[u8; 64]) -> Result<Vec<u8>, DecodeError> {
    if s.len() % 4 == 1 {
        return Err(DecodeError::InvalidLength);
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 2);
    for (ci, chunk) in s.chunks(4).enumerate() {
        let mut n: u32 = 0;
        for (i, &c) in chunk.iter().enumerate() {
            let v = value(c, alphabet).ok_or(DecodeError::InvalidByte(ci * 4 + i))?;
            n |= u32::from(v) << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = chunk.len() - 1; // 4 symbols → 3 bytes, 3 → 2, 2 → 1
        // Reject non-canonical encodings: the bits below the kept bytes must be zero.
        if keep < 3 && (n & (0x00ff_ffff >> (8 * keep))) != 0 {
            return Err(DecodeError::TrailingBits);
        }
        out.extend_from_slice(&bytes[..keep]);
    }
    Ok(out)
}

/// Decodes the standard alphabet; padding is required to a multiple of 4 symbols.
pub fn decode_std(s: &[u8]) -> Result<Vec<u8>, DecodeError> {
    if !s.len().is_multiple_of(4) {
        return Err(DecodeError::InvalidLength);
    }
    let pads = s.iter().rev().take_while(|&&c| c == b'=').count();
    if pads > 2 {
        return Err(DecodeError::InvalidLength);
    }
    decode_symbols(&s[..s.len() - pads], STD)
}

/// Decodes the URL-safe alphabet without padding (`=` is rejected).
pub fn decode_url_nopad(s: &[u8]) -> Result<Vec<u8>, DecodeError> {
    decode_symbols(s, URL)
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

    #[test]
    fn rejects_bad_input() {
        assert_eq!(decode_url_nopad(b"A"), Err(DecodeError::InvalidLength));
        assert_eq!(decode_url_nopad(b"Zh"), Err(DecodeError::TrailingBits));
        assert_eq!(decode_url_nopad(b"Zg="), Err(DecodeError::InvalidByte(2)));
        assert_eq!(decode_std(b"Zg="), Err(DecodeError::InvalidLength));
        assert_eq!(decode_std(b"Z==="), Err(DecodeError::InvalidLength));
        assert_eq!(decode_std(b"Zm=v"), Err(DecodeError::InvalidByte(2)));
    }
}
