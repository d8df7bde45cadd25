//! The body (vmess.md §4): per direction a sealer and an opener that agree on the chunk
//! format the request's security and options select, sans-IO and in place.
//!
//! One chunk: a length field (2 bytes, XOR-masked with a SHAKE128 stream under M, or an
//! 18-byte AEAD under A), the AEAD-sealed payload, then 0..63 bytes of padding under P (whose
//! length the mask stream also decides, drawn before the length mask). A chunk with an empty
//! payload ends the direction. `none` keeps the framing without the AEAD; `zero` (option S
//! cleared with `none`) is no framing at all.

use skiff_crypto::hash::{Shake128Stream, md5};
use skiff_crypto::random;
use skiff_crypto::vmess::kdf16;
use skiff_crypto::{AeadKey, AeadKind, TAG_LEN};

use super::error::VmessError;
use super::instruction::{Instruction, options, security};

/// Payload bytes per chunk the writers put in a stream: Xray's 8 KiB buffer less the length,
/// the tag and the largest padding.
pub const STREAM_CHUNK_PAYLOAD: usize = 8192 - 2 - TAG_LEN - 64;
/// The largest padding P adds.
pub const MAX_PADDING: usize = 63;
/// The most any chunk adds to its payload (authenticated length, tag, padding).
pub const MAX_CHUNK_OVERHEAD: usize = 2 + TAG_LEN + TAG_LEN + MAX_PADDING;
/// The largest datagram one chunk carries (the 16-bit size covers tag and padding).
pub const MAX_PACKET_PAYLOAD: usize = u16::MAX as usize - TAG_LEN - MAX_PADDING;

/// The body cipher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyCipher {
    Aes128Gcm,
    ChaCha20Poly1305,
    /// Security `none`: framing without encryption.
    None,
}

/// Everything that decides the body format, from the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyFormat {
    pub cipher: BodyCipher,
    /// S: chunked. Only `none` can go without (then the body is the raw stream: `zero`).
    pub chunked: bool,
    /// M: SHAKE128-masked lengths.
    pub masking: bool,
    /// P: random padding per chunk.
    pub padding: bool,
    /// A: AEAD-sealed lengths (AEAD ciphers only).
    pub auth_length: bool,
    /// UDP: every chunk is one datagram (`none` then also pads, as packets do).
    pub packet: bool,
}

impl BodyFormat {
    /// The body format a request asks for, or why it cannot be honoured (as Xray refuses
    /// them: unknown or AUTO security, padding without masking).
    pub fn of_request(ins: &Instruction) -> Result<BodyFormat, VmessError> {
        let opt = ins.options;
        let cipher = match ins.security {
            security::AES_128_GCM => BodyCipher::Aes128Gcm,
            security::CHACHA20_POLY1305 => BodyCipher::ChaCha20Poly1305,
            security::NONE => BodyCipher::None,
            other => return Err(VmessError::UnsupportedSecurity(other)),
        };
        let masking = opt & options::CHUNK_MASKING != 0;
        let padding = opt & options::GLOBAL_PADDING != 0;
        if padding && !masking {
            return Err(VmessError::BadOptions("global padding needs chunk masking"));
        }
        let packet = ins.command == super::instruction::Command::Udp;
        // The AEAD ciphers are chunked whatever S says (Xray and v2fly read them that way).
        let chunked = cipher != BodyCipher::None || opt & options::CHUNK_STREAM != 0;
        if packet && !chunked {
            return Err(VmessError::BadOptions("UDP needs a chunk stream"));
        }
        Ok(BodyFormat {
            cipher,
            chunked,
            masking,
            padding,
            auth_length: cipher != BodyCipher::None && opt & options::AUTHENTICATED_LENGTH != 0,
            packet,
        })
    }

    fn tag_len(&self) -> usize {
        match self.cipher {
            BodyCipher::None => 0,
            _ => TAG_LEN,
        }
    }

    /// `none` over TCP: `[length][payload]`, no tag, no padding (v2fly's ChunkStream).
    fn plain_stream(&self) -> bool {
        self.cipher == BodyCipher::None && !self.packet
    }

    fn length_len(&self) -> usize {
        if self.auth_length { 2 + TAG_LEN } else { 2 }
    }
}

/// The data AEAD key for a body key: AES-128-GCM takes it as is, ChaCha20-Poly1305 its MD5
/// expansion `MD5(k) || MD5(MD5(k))`.
fn body_key(cipher: BodyCipher, key: &[u8; 16]) -> Option<AeadKey> {
    match cipher {
        BodyCipher::Aes128Gcm => {
            Some(AeadKey::new(AeadKind::Aes128Gcm, key).expect("16-byte AES-128-GCM key"))
        }
        BodyCipher::ChaCha20Poly1305 => Some(
            AeadKey::new(AeadKind::ChaCha20Poly1305, &chacha_key(key))
                .expect("32-byte ChaCha20-Poly1305 key"),
        ),
        BodyCipher::None => None,
    }
}

/// `MD5(k) || MD5(MD5(k))`.
pub fn chacha_key(key: &[u8; 16]) -> [u8; 32] {
    let first = md5(&[key]);
    let second = md5(&[&first]);
    let mut out = [0u8; 32];
    out[..16].copy_from_slice(&first);
    out[16..].copy_from_slice(&second);
    out
}

/// A chunk nonce counter: `BE16(i) || IV[2..12]`, `i` from 0 wrapping at 65536.
struct ChunkNonce {
    nonce: [u8; 12],
    count: u16,
}

impl ChunkNonce {
    fn new(iv: &[u8; 16]) -> ChunkNonce {
        let mut nonce = [0u8; 12];
        nonce[2..].copy_from_slice(&iv[2..12]);
        ChunkNonce { nonce, count: 0 }
    }

    /// The nonce for the next chunk.
    fn next(&mut self) -> [u8; 12] {
        self.nonce[..2].copy_from_slice(&self.count.to_be_bytes());
        self.count = self.count.wrapping_add(1);
        self.nonce
    }
}

/// The per-direction state shared by sealer and opener.
struct Codec {
    format: BodyFormat,
    aead: Option<AeadKey>,
    nonce: ChunkNonce,
    /// The SHAKE128 stream under M (it also decides padding lengths).
    mask: Option<Shake128Stream>,
    /// Option A: the length AEAD and its own counter (over the *request* IV, both ways).
    length_aead: Option<(AeadKey, ChunkNonce)>,
}

impl Codec {
    /// `key`/`iv`: this direction's body key and IV; `request_key`/`request_iv`: the
    /// request's (option A derives its length key from them in both directions).
    fn new(
        format: BodyFormat,
        key: &[u8; 16],
        iv: &[u8; 16],
        request_key: &[u8; 16],
        request_iv: &[u8; 16],
    ) -> Codec {
        let length_aead = format.auth_length.then(|| {
            let alk = kdf16(request_key, &[b"auth_len"]);
            let aead = body_key(format.cipher, &alk).expect("A only with an AEAD cipher");
            (aead, ChunkNonce::new(request_iv))
        });
        Codec {
            format,
            aead: body_key(format.cipher, key),
            nonce: ChunkNonce::new(iv),
            mask: (format.masking && format.chunked).then(|| Shake128Stream::new(iv)),
            length_aead,
        }
    }

    /// The padding length of the next chunk (drawn first, vmess.md §4.1).
    fn next_padding(&mut self) -> usize {
        match (
            &mut self.mask,
            self.format.padding && !self.format.plain_stream(),
        ) {
            (Some(mask), true) => usize::from(mask.next_u16() % 64),
            _ => 0,
        }
    }
}

/// Seals one direction's chunks.
pub struct ChunkSealer {
    codec: Codec,
}

impl ChunkSealer {
    pub fn new(
        format: BodyFormat,
        key: &[u8; 16],
        iv: &[u8; 16],
        request_key: &[u8; 16],
        request_iv: &[u8; 16],
    ) -> ChunkSealer {
        ChunkSealer {
            codec: Codec::new(format, key, iv, request_key, request_iv),
        }
    }

    pub fn format(&self) -> BodyFormat {
        self.codec.format
    }

    /// Appends one chunk carrying `payload` (at most [`MAX_PACKET_PAYLOAD`] bytes; an empty
    /// payload is the end-of-stream chunk). Without framing (`zero`) the payload is appended
    /// as is. Reserve `payload.len() + MAX_CHUNK_OVERHEAD` first and nothing allocates. A
    /// payload too long for one chunk is an error and appends nothing.
    pub fn seal(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), VmessError> {
        let format = self.codec.format;
        if !format.chunked {
            out.extend_from_slice(payload);
            return Ok(());
        }
        if payload.len() > MAX_PACKET_PAYLOAD {
            return Err(VmessError::ChunkLength(payload.len()));
        }
        let padding = self.codec.next_padding();
        let tag = format.tag_len();
        let size = payload.len() + tag + padding;
        // At most MAX_PACKET_PAYLOAD + TAG_LEN + MAX_PADDING = u16::MAX.
        let size16 = size as u16;
        let at = out.len();
        if let Some((aead, nonce)) = &mut self.codec.length_aead {
            out.extend_from_slice(&(size16 - TAG_LEN as u16).to_be_bytes());
            out.extend_from_slice(&[0; TAG_LEN]);
            aead.seal_in_place(&nonce.next(), &[], &mut out[at..]);
        } else {
            let mask = self.codec.mask.as_mut().map_or(0, Shake128Stream::next_u16);
            out.extend_from_slice(&(size16 ^ mask).to_be_bytes());
        }
        let body = out.len();
        out.extend_from_slice(payload);
        if let Some(aead) = &self.codec.aead {
            out.extend_from_slice(&[0; TAG_LEN]);
            aead.seal_in_place(&self.codec.nonce.next(), &[], &mut out[body..]);
        }
        if padding > 0 {
            let pad = out.len();
            out.resize(pad + padding, 0);
            random::fill(&mut out[pad..]);
        }
        Ok(())
    }

    /// Appends the end-of-stream chunk (nothing without framing).
    pub fn seal_end(&mut self, out: &mut Vec<u8>) {
        // An empty payload always fits.
        let _ = self.seal(&[], out);
    }
}

/// What [`ChunkOpener::open`] found at the start of its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opened {
    /// The input holds a valid beginning; at least this many bytes (from its start) are
    /// needed in all.
    NeedMore(usize),
    /// A chunk: its plaintext is `input[start..end]`, the chunk took `consumed` bytes.
    Payload {
        start: usize,
        end: usize,
        consumed: usize,
    },
    /// The end-of-stream chunk, `consumed` bytes.
    End { consumed: usize },
}

/// Opens one direction's chunks. Feed it the received bytes from the start of the next
/// chunk; it decodes the length once (the mask and padding draws happen exactly once per
/// chunk) and opens the payload in place when it is all there. After an error every call
/// returns that error.
pub struct ChunkOpener {
    codec: Codec,
    /// The decoded chunk size and padding of the chunk being received.
    pending: Option<(usize, usize)>,
    failed: Option<VmessError>,
}

impl ChunkOpener {
    pub fn new(
        format: BodyFormat,
        key: &[u8; 16],
        iv: &[u8; 16],
        request_key: &[u8; 16],
        request_iv: &[u8; 16],
    ) -> ChunkOpener {
        ChunkOpener {
            codec: Codec::new(format, key, iv, request_key, request_iv),
            pending: None,
            failed: None,
        }
    }

    pub fn format(&self) -> BodyFormat {
        self.codec.format
    }

    pub fn open(&mut self, input: &mut [u8]) -> Result<Opened, VmessError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.open_inner(input);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    fn open_inner(&mut self, input: &mut [u8]) -> Result<Opened, VmessError> {
        let format = self.codec.format;
        if !format.chunked {
            return Ok(if input.is_empty() {
                Opened::NeedMore(1)
            } else {
                Opened::Payload {
                    start: 0,
                    end: input.len(),
                    consumed: input.len(),
                }
            });
        }
        let length_len = format.length_len();
        let (size, padding) = match self.pending {
            Some(pending) => pending,
            None => {
                let Some(field) = input.get(..length_len) else {
                    return Ok(Opened::NeedMore(length_len));
                };
                let padding = self.codec.next_padding();
                let size = if let Some((aead, nonce)) = &mut self.codec.length_aead {
                    let mut block = [0u8; 2 + TAG_LEN];
                    block.copy_from_slice(field);
                    let plain = aead
                        .open_in_place(&nonce.next(), &[], &mut block)
                        .map_err(|_| VmessError::ChunkAuth)?;
                    usize::from(u16::from_be_bytes([plain[0], plain[1]])) + TAG_LEN
                } else {
                    let mask = self.codec.mask.as_mut().map_or(0, Shake128Stream::next_u16);
                    usize::from(u16::from_be_bytes([field[0], field[1]]) ^ mask)
                };
                self.pending = Some((size, padding));
                (size, padding)
            }
        };
        let tag = format.tag_len();
        if format.plain_stream() {
            if size == 0 {
                self.pending = None;
                return Ok(Opened::End {
                    consumed: length_len,
                });
            }
        } else if size < tag + padding {
            return Err(VmessError::ChunkLength(size));
        }
        let total = length_len + size;
        let Some(chunk) = input.get_mut(length_len..total) else {
            return Ok(Opened::NeedMore(total));
        };
        self.pending = None;
        let sealed = &mut chunk[..size - padding];
        let plain_len = match &self.codec.aead {
            Some(aead) => aead
                .open_in_place(&self.codec.nonce.next(), &[], sealed)
                .map_err(|_| VmessError::ChunkAuth)?
                .len(),
            None => sealed.len(),
        };
        if plain_len == 0 {
            return Ok(Opened::End { consumed: total });
        }
        Ok(Opened::Payload {
            start: length_len,
            end: length_len + plain_len,
            consumed: total,
        })
    }
}
