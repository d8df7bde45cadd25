//! `--fix-gro`: each encrypted safer packet goes out as `[length: u16 BE][ciphertext]`, so
//! that a receiver whose NIC or kernel merged several segments (GRO) can cut them apart.
//! The prefix is hidden: under `xor` its two bytes are XORed with the first two `gro` key
//! bytes; under `aes128cbc` the frame's first 16 bytes (prefix and 14 ciphertext bytes) go
//! through AES-ECB with the sender's `cipher_key`; other modes leave it plain (udp2raw only
//! tests for CBC there, not CFB). Handshake (bare) packets are never framed.
//!
//! The receiver walks the buffer while at least 16 bytes remain: reveal, read the length,
//! stop if it overruns the buffer or exceeds [`crate::MAX_DATA_LEN`].

use std::ops::Range;

use crate::{Codec, Error, MAX_DATA_LEN};

/// Appends one frame holding `ciphertext` (the output of [`Codec::encrypt`]).
pub fn push_frame(codec: &Codec, ciphertext: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
    if ciphertext.len() > usize::from(u16::MAX) {
        return Err(Error::TooLong {
            what: "gro frame",
            len: ciphertext.len(),
            max: 65535,
        });
    }
    let start = out.len();
    out.extend_from_slice(&(ciphertext.len() as u16).to_be_bytes());
    out.extend_from_slice(ciphertext);
    codec.gro_hide(&mut out[start..]);
    Ok(())
}

/// Reveals the frames of `buf` in place and returns the ciphertext ranges, in order. Like
/// udp2raw, it stops at the first length that does not fit.
pub fn split_frames(codec: &Codec, buf: &mut [u8]) -> Vec<Range<usize>> {
    let mut frames = Vec::new();
    let mut at = 0;
    while buf.len() - at >= 16 {
        codec.gro_reveal(&mut buf[at..]);
        let len = usize::from(u16::from_be_bytes([buf[at], buf[at + 1]]));
        at += 2;
        if len > buf.len() - at || len > MAX_DATA_LEN {
            break;
        }
        frames.push(at..at + len);
        at += len;
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuthMode, CipherMode, Role};

    #[test]
    fn frames_round_trip_in_every_cipher_mode() {
        let keys_s = crate::Keys::derive(b"gro", Role::Server);
        let keys_c = crate::Keys::derive(b"gro", Role::Client);
        for cipher in CipherMode::ALL {
            let s = Codec::from_keys(&keys_s, Role::Server, cipher, AuthMode::Md5);
            let c = Codec::from_keys(&keys_c, Role::Client, cipher, AuthMode::Md5);
            let mut buf = Vec::new();
            let a = s.encrypt(&[1; 30]).unwrap();
            let b = s.encrypt(&[2; 50]).unwrap();
            push_frame(&s, &a, &mut buf).unwrap();
            push_frame(&s, &b, &mut buf).unwrap();
            let ranges = split_frames(&c, &mut buf);
            assert_eq!(ranges.len(), 2, "{cipher:?}");
            assert_eq!(c.decrypt(&buf[ranges[0].clone()]).unwrap(), [1; 30]);
            assert_eq!(c.decrypt(&buf[ranges[1].clone()]).unwrap(), [2; 50]);
        }
    }
}
