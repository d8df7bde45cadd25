//! The Shadowsocks outbound side: an encrypted stream to a server that carries the target
//! address (and, for 2022, the request header) in front of the first payload.

use std::io;

use skiff_core::{Address, BoxStream};

use super::Method;
use super::codec::{Decoder, Encoder, random_padding, random_salt};
use super::stream::SsStream;

/// What a client needs to talk to one server.
#[derive(Clone)]
pub struct ClientConfig {
    pub method: Method,
    /// The user key (AEAD-2017 master key, or 2022 PSK / uPSK).
    pub key: Vec<u8>,
    /// 2022 identity keys (SIP023) in front of the user key; empty for single-user servers.
    pub identity_keys: Vec<Vec<u8>>,
}

/// Never prints keys.
impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("method", &self.method)
            .field("identity_keys", &self.identity_keys.len())
            .finish_non_exhaustive()
    }
}

/// Wraps an established stream to the server as a connection to `target`. The request goes
/// out with the first payload, or alone on the first read, flush or shutdown.
pub fn connect(stream: BoxStream, config: &ClientConfig, target: &Address) -> io::Result<SsStream> {
    let salt = random_salt(config.method);
    let decoder = Decoder::client(config.method, &config.key, &salt);
    let encoder = Encoder::client(
        config.method,
        &config.key,
        &config.identity_keys,
        salt,
        target,
        random_padding(),
    )
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    Ok(SsStream::new(stream, config.method, encoder, decoder, &[]))
}
