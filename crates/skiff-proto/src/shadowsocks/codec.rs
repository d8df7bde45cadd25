//! Whole TCP directions, sans-IO (shadowsocks.md §1.4, §2.2, §2.3): an [`Encoder`] turns
//! payload into the bytes of one direction (salt and headers in front of the first chunk), a
//! [`Decoder`] opens what the peer sends, in place. Neither allocates per chunk: both work on
//! buffers the caller owns.

use skiff_core::Address;
use skiff_crypto::TAG_LEN;
use skiff_crypto::shadowsocks::{aead_subkey, session_subkey_2022};

use super::cipher::{CHUNK_OVERHEAD, ChunkDecoder, Cipher, LENGTH_BLOCK, Step, seal_chunk};
use super::header::{
    self, IDENTITY_HEADER_LEN, MAX_PADDING, REQUEST_FIXED_LEN, response_fixed_len,
};
use super::{Method, SsError, address};

/// The session cipher of one direction: AEAD-2017 subkey (HKDF) or 2022 subkey (BLAKE3).
pub fn session_cipher(method: Method, key: &[u8], salt: &[u8]) -> Cipher {
    let mut subkey = [0u8; 32];
    let subkey = &mut subkey[..method.key_len()];
    if method.is_2022() {
        session_subkey_2022(key, salt, subkey);
    } else {
        aead_subkey(key, salt, subkey);
    }
    Cipher::new(method.aead(), subkey)
}

/// A fresh random salt for `method`.
pub fn random_salt(method: Method) -> Vec<u8> {
    let mut salt = vec![0u8; method.salt_len()];
    skiff_crypto::random::fill(&mut salt);
    salt
}

/// Random padding for a 2022 request without initial payload: 1..=900 bytes (never 0, which a
/// server must refuse when there is no payload either).
pub fn random_padding() -> usize {
    let mut b = [0u8; 2];
    skiff_crypto::random::fill(&mut b);
    1 + usize::from(u16::from_le_bytes(b)) % MAX_PADDING
}

/// What goes in front of the first chunk, until it is written.
#[derive(Debug)]
enum First {
    Client2017 {
        salt: Vec<u8>,
        target: Vec<u8>,
    },
    Client2022 {
        salt: Vec<u8>,
        identity: Vec<[u8; IDENTITY_HEADER_LEN]>,
        target: Vec<u8>,
        padding: usize,
    },
    Server2017 {
        salt: Vec<u8>,
    },
    Server2022 {
        salt: Vec<u8>,
        request_salt: Vec<u8>,
    },
}

/// Encodes one direction of a TCP connection.
#[derive(Debug)]
pub struct Encoder {
    cipher: Cipher,
    max_payload: usize,
    first: Option<First>,
    /// Header bytes the first write may add (bounded, fixed at construction).
    header_bound: usize,
}

impl Encoder {
    /// The client side: `salt` (method's salt length), `key` the user key (master key or
    /// uPSK), `identity_keys` the 2022 iPSKs in front of it (SIP023; AES methods only),
    /// `padding` the padding used if the first write has no payload (2022; 1..=900).
    pub fn client(
        method: Method,
        key: &[u8],
        identity_keys: &[Vec<u8>],
        salt: Vec<u8>,
        target: &Address,
        padding: usize,
    ) -> Result<Encoder, SsError> {
        let cipher = session_cipher(method, key, &salt);
        let target = address::to_vec(target)?;
        let salt_len = salt.len();
        let (first, header_bound) = if method.is_2022() {
            let identity: Vec<[u8; 16]> = identity_keys
                .iter()
                .enumerate()
                .map(|(i, ipsk)| {
                    let next = identity_keys.get(i + 1).map_or(key, Vec::as_slice);
                    header::tcp_identity_header(ipsk, &salt, next)
                })
                .collect();
            let padding = padding.clamp(1, MAX_PADDING);
            let bound = salt_len
                + identity.len() * IDENTITY_HEADER_LEN
                + REQUEST_FIXED_LEN
                + 2 * TAG_LEN
                + target.len()
                + 2
                + padding;
            (
                First::Client2022 {
                    salt,
                    identity,
                    target,
                    padding,
                },
                bound,
            )
        } else {
            let bound = salt_len + CHUNK_OVERHEAD + target.len();
            (First::Client2017 { salt, target }, bound)
        };
        Ok(Encoder {
            cipher,
            max_payload: method.max_payload(),
            first: Some(first),
            header_bound,
        })
    }

    /// The server side: `key` the user's key, `salt` ours, `request_salt` the client's (2022
    /// responses repeat it).
    pub fn server(method: Method, key: &[u8], salt: Vec<u8>, request_salt: &[u8]) -> Encoder {
        let cipher = session_cipher(method, key, &salt);
        let salt_len = salt.len();
        let (first, header_bound) = if method.is_2022() {
            (
                First::Server2022 {
                    salt,
                    request_salt: request_salt.to_vec(),
                },
                salt_len + response_fixed_len(request_salt.len()) + 2 * TAG_LEN,
            )
        } else {
            (First::Server2017 { salt }, salt_len)
        };
        Encoder {
            cipher,
            max_payload: method.max_payload(),
            first: Some(first),
            header_bound,
        }
    }

    /// The salt and headers have not been written yet.
    pub fn header_pending(&self) -> bool {
        self.first.is_some()
    }

    /// Whether an empty write still produces bytes (a client's request has to go out even
    /// when it has nothing to say yet).
    pub fn sends_header_alone(&self) -> bool {
        matches!(
            self.first,
            Some(First::Client2017 { .. } | First::Client2022 { .. })
        )
    }

    /// An output buffer this long always takes `input_len` payload bytes (and the headers).
    pub fn max_output(&self, input_len: usize) -> usize {
        let chunks = input_len / self.max_payload + 2;
        self.header_bound + input_len + chunks * CHUNK_OVERHEAD
    }

    /// Encodes as much of `input` as fits into `out`; returns (input consumed, bytes written).
    /// `now` (Unix seconds) goes into 2022 headers. An empty input writes the header if a
    /// client's is pending, else nothing.
    pub fn encode(&mut self, input: &[u8], out: &mut [u8], now: u64) -> (usize, usize) {
        let mut consumed = 0;
        let mut written = 0;
        if let Some(first) = self.first.take() {
            match self.encode_first(&first, input, out, now) {
                Some((c, w)) => {
                    consumed = c;
                    written = w;
                }
                None => {
                    self.first = Some(first);
                    return (0, 0);
                }
            }
        }
        while consumed < input.len() {
            let room = out.len() - written;
            if room <= CHUNK_OVERHEAD {
                break;
            }
            let take = (input.len() - consumed)
                .min(self.max_payload)
                .min(room - CHUNK_OVERHEAD);
            written += seal_chunk(
                &mut self.cipher,
                &input[consumed..consumed + take],
                &mut out[written..],
            );
            consumed += take;
        }
        (consumed, written)
    }

    /// The salt, headers and first payload; None when nothing is to be written now (a
    /// server's first write without payload) or `out` is too short for the headers.
    fn encode_first(
        &mut self,
        first: &First,
        input: &[u8],
        out: &mut [u8],
        now: u64,
    ) -> Option<(usize, usize)> {
        match first {
            First::Client2017 { salt, target } => {
                let fixed = salt.len() + CHUNK_OVERHEAD + target.len();
                let room = out.len().checked_sub(fixed)?;
                let take = input
                    .len()
                    .min(self.max_payload.saturating_sub(target.len()))
                    .min(room);
                out[..salt.len()].copy_from_slice(salt);
                let len = target.len() + take;
                let chunk = &mut out[salt.len()..salt.len() + len + CHUNK_OVERHEAD];
                chunk[..2].copy_from_slice(&(len as u16).to_be_bytes());
                self.cipher.seal(&mut chunk[..LENGTH_BLOCK]);
                let body = &mut chunk[LENGTH_BLOCK..];
                body[..target.len()].copy_from_slice(target);
                body[target.len()..len].copy_from_slice(&input[..take]);
                self.cipher.seal(body);
                Some((take, salt.len() + len + CHUNK_OVERHEAD))
            }
            First::Client2022 {
                salt,
                identity,
                target,
                padding,
            } => {
                let front = salt.len() + identity.len() * IDENTITY_HEADER_LEN;
                let fixed_at = front;
                let var_at = fixed_at + REQUEST_FIXED_LEN + TAG_LEN;
                let bare = target.len() + 2;
                let room = out.len().checked_sub(var_at + bare + TAG_LEN)?;
                let take = input
                    .len()
                    .min(usize::from(u16::MAX) - bare - MAX_PADDING)
                    .min(room);
                let padding = if take == 0 { *padding } else { 0 };
                if room < take + padding {
                    return None;
                }
                let var_len = bare + padding + take;
                out[..salt.len()].copy_from_slice(salt);
                for (i, id) in identity.iter().enumerate() {
                    let at = salt.len() + i * IDENTITY_HEADER_LEN;
                    out[at..at + IDENTITY_HEADER_LEN].copy_from_slice(id);
                }
                let fixed = &mut out[fixed_at..var_at];
                fixed[..REQUEST_FIXED_LEN]
                    .copy_from_slice(&header::request_fixed(now, var_len as u16));
                self.cipher.seal(fixed);
                let var = &mut out[var_at..var_at + var_len + TAG_LEN];
                var[..target.len()].copy_from_slice(target);
                var[target.len()..bare].copy_from_slice(&(padding as u16).to_be_bytes());
                var[bare..bare + padding].fill(0);
                var[bare + padding..var_len].copy_from_slice(&input[..take]);
                self.cipher.seal(var);
                Some((take, var_at + var_len + TAG_LEN))
            }
            First::Server2017 { salt } => {
                if input.is_empty() || out.len() < salt.len() {
                    return None;
                }
                out[..salt.len()].copy_from_slice(salt);
                // The chunks follow in the caller's loop.
                Some((0, salt.len()))
            }
            First::Server2022 { salt, request_salt } => {
                let fixed_len = response_fixed_len(request_salt.len());
                let payload_at = salt.len() + fixed_len + TAG_LEN;
                let room = out.len().checked_sub(payload_at + TAG_LEN)?;
                let take = input.len().min(self.max_payload).min(room);
                if take == 0 {
                    return None;
                }
                out[..salt.len()].copy_from_slice(salt);
                let fixed = &mut out[salt.len()..payload_at];
                header::write_response_fixed(now, request_salt, take as u16, fixed);
                self.cipher.seal(fixed);
                let body = &mut out[payload_at..payload_at + take + TAG_LEN];
                body[..take].copy_from_slice(&input[..take]);
                self.cipher.seal(body);
                Some((take, payload_at + take + TAG_LEN))
            }
        }
    }
}

/// Decodes one direction of a TCP connection, in place.
#[derive(Debug)]
pub enum Decoder {
    /// A client reading an AEAD-2017 server: the salt comes first.
    Salt2017 { method: Method, key: Vec<u8> },
    /// A client reading a 2022 server: salt and response header, which must name our
    /// request salt.
    Response2022 {
        method: Method,
        key: Vec<u8>,
        request_salt: Vec<u8>,
    },
    /// Chunks (a server after the request headers, a client after the response header).
    Chunks(ChunkDecoder),
}

impl Decoder {
    /// What a client expects back for a request it encoded with `key` and `request_salt`.
    pub fn client(method: Method, key: &[u8], request_salt: &[u8]) -> Decoder {
        if method.is_2022() {
            Decoder::Response2022 {
                method,
                key: key.to_vec(),
                request_salt: request_salt.to_vec(),
            }
        } else {
            Decoder::Salt2017 {
                method,
                key: key.to_vec(),
            }
        }
    }

    /// Between chunks (or before anything): an end of stream here is a clean end.
    pub fn at_boundary(&self) -> bool {
        match self {
            Decoder::Chunks(chunks) => chunks.at_boundary(),
            _ => true,
        }
    }

    /// Still reading the peer's header (a 2022 one needs the clock).
    pub fn in_header(&self) -> bool {
        !matches!(self, Decoder::Chunks(_))
    }

    /// Ciphertext bytes the next step needs in all.
    pub fn need(&self) -> usize {
        match self {
            Decoder::Salt2017 { method, .. } => method.salt_len(),
            Decoder::Response2022 { method, .. } => {
                method.salt_len() + response_fixed_len(method.salt_len()) + TAG_LEN
            }
            Decoder::Chunks(chunks) => chunks.need(),
        }
    }

    /// Opens what `input` holds of the next blocks in place; `now` in Unix seconds.
    pub fn decode(&mut self, input: &mut [u8], now: u64) -> Result<Step, SsError> {
        let need = self.need();
        match self {
            Decoder::Chunks(chunks) => chunks.decode(input),
            Decoder::Salt2017 { method, key } => {
                let Some(salt) = input.get(..need) else {
                    return Ok(Step::NeedMore(need));
                };
                let cipher = session_cipher(*method, key, salt);
                *self = Decoder::Chunks(ChunkDecoder::new(cipher, method.max_payload()));
                Ok(Step::Consumed {
                    consumed: need,
                    plain: None,
                })
            }
            Decoder::Response2022 {
                method,
                key,
                request_salt,
            } => {
                let Some(block) = input.get_mut(..need) else {
                    return Ok(Step::NeedMore(need));
                };
                let (salt, fixed) = block.split_at_mut(method.salt_len());
                let mut cipher = session_cipher(*method, key, salt);
                let plain = cipher.open(fixed)?;
                let first_len = header::parse_response_fixed(plain, request_salt, now)?;
                *self = Decoder::Chunks(ChunkDecoder::at_payload(
                    cipher,
                    method.max_payload(),
                    first_len,
                ));
                Ok(Step::Consumed {
                    consumed: need,
                    plain: None,
                })
            }
        }
    }
}
