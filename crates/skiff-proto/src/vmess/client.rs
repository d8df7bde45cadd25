//! The VMess outbound side (vmess.md §2–§4): build and seal the request header for a
//! destination, then speak chunks over the connection. The header leaves with the first
//! payload ([`super::stream`]); the response header is checked before the first byte of the
//! response is returned.

use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

use skiff_core::{Address, BoxStream};
use skiff_crypto::random;
use skiff_crypto::vmess::AuthIdSealer;

use super::auth_id::seal_auth_id;
use super::chunk::{BodyFormat, ChunkOpener, ChunkSealer};
use super::error::VmessError;
use super::halves::{ChunkReader, ChunkWriter, ExpectResponse};
use super::instruction::{Command, Instruction, VERSION, encode_instruction, options, security};
use super::keys::cmd_key;
use super::request::{CONNECTION_NONCE_LEN, seal_request};
use super::response::response_keys;
use super::stream::VmessStream;
use crate::user_id::UserId;

/// The body security a user asks for (`security` of an outbound user).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    /// AES-128-GCM where the CPU has AES instructions, ChaCha20-Poly1305 elsewhere.
    Auto,
    Aes128Gcm,
    ChaCha20Poly1305,
    /// Chunked but not encrypted.
    None,
    /// Not even chunked: the body is the raw stream (TCP; UDP falls back to `none`).
    Zero,
}

impl Security {
    /// `Auto` decided for this machine; the others as they are.
    pub fn resolve(self) -> Security {
        match self {
            Security::Auto if aes_hardware() => Security::Aes128Gcm,
            Security::Auto => Security::ChaCha20Poly1305,
            other => other,
        }
    }
}

/// Whether this CPU encrypts AES in hardware (then AES-128-GCM beats ChaCha20).
pub fn aes_hardware() -> bool {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
    {
        false
    }
}

/// A VMess outbound user: keys derived once, the security resolved once.
#[derive(Debug)]
pub struct VmessClient {
    cmd_key: [u8; 16],
    auth: AuthIdSealer,
    security: Security,
    /// The `AuthenticatedLength` experiment (option A; AEAD securities only).
    auth_length: bool,
    /// Send the end-of-stream chunk when our side ends (unless `NoTerminationSignal`).
    end_signal: bool,
}

/// The random material of one request (fresh per connection; fixed in tests).
#[derive(Clone, Debug)]
pub struct RequestRandom {
    pub body_iv: [u8; 16],
    pub body_key: [u8; 16],
    pub response_auth: u8,
    pub padding: Vec<u8>,
    pub auth_salt: [u8; 4],
    pub nonce: [u8; CONNECTION_NONCE_LEN],
}

impl RequestRandom {
    pub fn fresh() -> RequestRandom {
        let mut r = [0u8; 16 + 16 + 1 + 1 + 4 + CONNECTION_NONCE_LEN];
        random::fill(&mut r);
        let mut padding = vec![0u8; usize::from(r[33] % 16)];
        random::fill(&mut padding);
        RequestRandom {
            body_iv: r[..16].try_into().unwrap_or_default(),
            body_key: r[16..32].try_into().unwrap_or_default(),
            response_auth: r[32],
            padding,
            auth_salt: r[34..38].try_into().unwrap_or_default(),
            nonce: r[38..].try_into().unwrap_or_default(),
        }
    }
}

impl VmessClient {
    pub fn new(
        id: &UserId,
        security: Security,
        auth_length: bool,
        no_termination_signal: bool,
    ) -> VmessClient {
        let cmd_key = cmd_key(id.as_bytes());
        VmessClient {
            auth: AuthIdSealer::for_cmd_key(&cmd_key),
            cmd_key,
            security: security.resolve(),
            auth_length,
            end_signal: !no_termination_signal,
        }
    }

    /// The security actually used (`Auto` resolved).
    pub fn security(&self) -> Security {
        self.security
    }

    /// The instruction header this client sends for `destination` (options as Xray and
    /// v2fly choose them: S always but for `zero`, M for every chunked security, P with the
    /// AEAD ones, A when asked).
    pub fn instruction(
        &self,
        destination: &Address,
        command: Command,
        random: &RequestRandom,
    ) -> Instruction {
        let security = match (self.security, command) {
            (Security::Zero, Command::Udp) => Security::None,
            (s, _) => s,
        };
        let (sec, mut opts) = match security {
            Security::Aes128Gcm | Security::Auto => (
                security::AES_128_GCM,
                options::CHUNK_STREAM | options::CHUNK_MASKING | options::GLOBAL_PADDING,
            ),
            Security::ChaCha20Poly1305 => (
                security::CHACHA20_POLY1305,
                options::CHUNK_STREAM | options::CHUNK_MASKING | options::GLOBAL_PADDING,
            ),
            Security::None => (
                security::NONE,
                options::CHUNK_STREAM | options::CHUNK_MASKING,
            ),
            Security::Zero => (security::NONE, 0),
        };
        if self.auth_length && sec != security::NONE {
            opts |= options::AUTHENTICATED_LENGTH;
        }
        Instruction {
            version: VERSION,
            body_iv: random.body_iv,
            body_key: random.body_key,
            response_auth: random.response_auth,
            options: opts,
            security: sec,
            command,
            destination: (command != Command::Mux).then(|| destination.clone()),
        }
    }

    /// The sealed request header for `instruction` at `timestamp` (Unix seconds).
    pub fn seal(
        &self,
        instruction: &Instruction,
        random: &RequestRandom,
        timestamp: i64,
        out: &mut Vec<u8>,
    ) -> Result<(), VmessError> {
        let mut plain = Vec::with_capacity(128);
        encode_instruction(instruction, &random.padding, &mut plain)?;
        let auth_id = seal_auth_id(&self.auth, timestamp, random.auth_salt);
        seal_request(&self.cmd_key, &auth_id, &random.nonce, &plain, out);
        Ok(())
    }

    /// Wraps an established transport (raw TCP, TLS or WebSocket) as a VMess connection to
    /// `destination`. For UDP, split the result with [`VmessStream::into_packets`].
    pub fn connect(
        &self,
        stream: BoxStream,
        destination: &Address,
        command: Command,
    ) -> io::Result<VmessStream> {
        let random = RequestRandom::fresh();
        let instruction = self.instruction(destination, command, &random);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let mut header = Vec::with_capacity(128);
        self.seal(&instruction, &random, now, &mut header)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(self.stream_for(stream, &instruction, header))
    }

    /// The connection's halves for a sealed `header` of `instruction`.
    fn stream_for(
        &self,
        stream: BoxStream,
        instruction: &Instruction,
        header: Vec<u8>,
    ) -> VmessStream {
        let format = BodyFormat::of_request(instruction).expect("a client builds valid requests");
        let (key, iv) = (&instruction.body_key, &instruction.body_iv);
        let (resp_key, resp_iv) = response_keys(key, iv);
        let sealer = ChunkSealer::new(format, key, iv, key, iv);
        let opener = ChunkOpener::new(format, &resp_key, &resp_iv, key, iv);
        let expect = ExpectResponse {
            key: resp_key,
            iv: resp_iv,
            auth: instruction.response_auth,
        };
        let reader = ChunkReader::new(opener, Some(expect), &[]);
        let writer = ChunkWriter::new(sealer, header, self.end_signal);
        VmessStream::new(stream, reader, writer, true)
    }
}
