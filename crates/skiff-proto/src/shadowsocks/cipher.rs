//! One direction's AEAD with its nonce counter, and the chunk framing every TCP stream uses
//! after its headers (shadowsocks.md §1.3, §1.4): `[AEAD(u16 len)] [AEAD(payload)]`, each
//! seal and open taking the next little-endian nonce.

use std::ops::Range;

use skiff_crypto::{AeadKey, AeadKind, NonceCounter, TAG_LEN};

use super::SsError;

/// An encrypted length: two bytes and a tag.
pub const LENGTH_BLOCK: usize = 2 + TAG_LEN;
/// What a chunk adds to its payload.
pub const CHUNK_OVERHEAD: usize = LENGTH_BLOCK + TAG_LEN;

/// A session subkey and the nonce it will use next.
pub struct Cipher {
    key: AeadKey,
    nonce: NonceCounter,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cipher")
            .field("kind", &self.key.kind())
            .finish_non_exhaustive()
    }
}

impl Cipher {
    /// `subkey` must be `kind.key_len()` bytes (callers derive it for exactly that).
    pub fn new(kind: AeadKind, subkey: &[u8]) -> Cipher {
        Cipher {
            key: AeadKey::new(kind, subkey).expect("subkey derived for its AEAD"),
            nonce: NonceCounter::new(kind.nonce_len()),
        }
    }

    /// Seals `in_out[..len - TAG_LEN]` in place (tag into the last TAG_LEN bytes).
    pub fn seal(&mut self, in_out: &mut [u8]) {
        self.key.seal_in_place(self.nonce.as_bytes(), &[], in_out);
        self.nonce.increment();
    }

    /// Opens a sealed message in place. The nonce advances only on success: a failed open
    /// ends the stream anyway.
    pub fn open<'a>(&mut self, in_out: &'a mut [u8]) -> Result<&'a mut [u8], SsError> {
        let plain = self
            .key
            .open_in_place(self.nonce.as_bytes(), &[], in_out)
            .map_err(|_| SsError::Auth)?;
        self.nonce.increment();
        Ok(plain)
    }
}

/// Seals one chunk of `payload` (at most `u16::MAX` bytes) into the start of `out`, which
/// must hold `payload.len() + CHUNK_OVERHEAD`; returns the bytes written.
pub fn seal_chunk(cipher: &mut Cipher, payload: &[u8], out: &mut [u8]) -> usize {
    let len = payload.len();
    debug_assert!(len <= usize::from(u16::MAX));
    out[..2].copy_from_slice(&(len as u16).to_be_bytes());
    cipher.seal(&mut out[..LENGTH_BLOCK]);
    let body = &mut out[LENGTH_BLOCK..LENGTH_BLOCK + len + TAG_LEN];
    body[..len].copy_from_slice(payload);
    cipher.seal(body);
    len + CHUNK_OVERHEAD
}

/// Seals `plain` as one message with no length prefix (2022 headers and the first response
/// payload) into `out`; returns the bytes written.
pub fn seal_message(cipher: &mut Cipher, plain: &[u8], out: &mut [u8]) -> usize {
    let sealed = &mut out[..plain.len() + TAG_LEN];
    sealed[..plain.len()].copy_from_slice(plain);
    cipher.seal(sealed);
    plain.len() + TAG_LEN
}

/// What one step of [`ChunkDecoder::decode`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Not enough bytes for the next block: at least this many are needed in all.
    NeedMore(usize),
    /// `consumed` input bytes were used; `plain` (within the input) is decrypted payload.
    Consumed {
        consumed: usize,
        plain: Option<Range<usize>>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Length,
    Payload(usize),
}

/// Opens length-prefixed chunks in place.
#[derive(Debug)]
pub struct ChunkDecoder {
    cipher: Cipher,
    state: State,
    max_payload: usize,
}

impl ChunkDecoder {
    /// A decoder whose next block is a length.
    pub fn new(cipher: Cipher, max_payload: usize) -> ChunkDecoder {
        ChunkDecoder {
            cipher,
            state: State::Length,
            max_payload,
        }
    }

    /// A decoder whose next block is a payload of `len` bytes without a length block before
    /// it: the first chunk after a 2022 header, or a chunk whose length a server already
    /// opened while finding the user.
    pub fn at_payload(cipher: Cipher, max_payload: usize, len: usize) -> ChunkDecoder {
        ChunkDecoder {
            cipher,
            state: State::Payload(len),
            max_payload,
        }
    }

    /// Between chunks: an end of stream here is a clean end.
    pub fn at_boundary(&self) -> bool {
        self.state == State::Length
    }

    /// Ciphertext bytes the next block needs.
    pub fn need(&self) -> usize {
        match self.state {
            State::Length => LENGTH_BLOCK,
            State::Payload(len) => len + TAG_LEN,
        }
    }

    /// Opens what `input` holds of the next blocks, in place: a length block, then (if it is
    /// all there) the payload it announces.
    pub fn decode(&mut self, input: &mut [u8]) -> Result<Step, SsError> {
        let mut consumed = 0;
        if self.state == State::Length {
            let Some(block) = input.get_mut(..LENGTH_BLOCK) else {
                return Ok(Step::NeedMore(LENGTH_BLOCK));
            };
            let plain = self.cipher.open(block)?;
            let len = usize::from(u16::from_be_bytes([plain[0], plain[1]]));
            if len > self.max_payload {
                return Err(SsError::BadLength(len));
            }
            self.state = State::Payload(len);
            consumed = LENGTH_BLOCK;
        }
        let State::Payload(len) = self.state else {
            return Ok(Step::Consumed {
                consumed,
                plain: None,
            });
        };
        let end = consumed + len + TAG_LEN;
        let Some(body) = input.get_mut(consumed..end) else {
            if consumed > 0 {
                return Ok(Step::Consumed {
                    consumed,
                    plain: None,
                });
            }
            return Ok(Step::NeedMore(len + TAG_LEN));
        };
        self.cipher.open(body)?;
        self.state = State::Length;
        Ok(Step::Consumed {
            consumed: end,
            plain: Some(consumed..consumed + len),
        })
    }
}
