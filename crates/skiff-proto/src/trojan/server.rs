//! The Trojan inbound handshake (trojan.md §1, §3): read the request, decide between relay,
//! UDP and fallback. Trojan has no response header: nothing is ever written here.

use std::collections::HashMap;
use std::io;

use skiff_core::stream::with_prefix;
use skiff_core::{Address, BoxStream, ProxyStream};
use tokio::io::AsyncReadExt;

use crate::user_id::UserChangeError;
use skiff_core::Swap;

use super::codec::{
    Command, MAX_REQUEST_HEADER_LEN, Parsed, PasswordHash, parse_request, parse_request_hash,
};

/// How many bytes the handshake reads at most: a whole maximal header fits, plus a little of
/// the payload that usually arrives with it.
const READ_BUF_LEN: usize = 512;
const _: () = assert!(MAX_REQUEST_HEADER_LEN < READ_BUF_LEN);

/// A configured Trojan user.
#[derive(Clone, Debug, Default)]
pub struct TrojanUser {
    /// Reported as the session's user (routing, per-user counters).
    pub email: Option<String>,
}

/// The users of a Trojan inbound, keyed by password hash.
///
/// Timing: the map hashes the received 56 bytes with SipHash under a random per-process key
/// (std's `RandomState`), so which configured entries a lookup compares against does not
/// depend on anything a client can steer; and [`PasswordHash`]'s equality is
/// `skiff_crypto::constant_time_eq`, so each of those comparisons takes the same time however
/// many leading bytes match. A lookup therefore reveals nothing about configured hashes
/// beyond found / not found, which the fallback reveals anyway.
///
/// The map is a snapshot each connection takes, replaced whole when users are added or
/// removed at run time (Xray's API).
#[derive(Debug, Default)]
pub struct TrojanServer {
    users: Swap<HashMap<PasswordHash, TrojanUser>>,
}

impl TrojanServer {
    /// A server for these users; when two share a password, the first one listed is kept.
    pub fn new(users: impl IntoIterator<Item = (PasswordHash, TrojanUser)>) -> TrojanServer {
        let mut map = HashMap::new();
        for (hash, user) in users {
            map.entry(hash).or_insert(user);
        }
        TrojanServer {
            users: Swap::new(map),
        }
    }

    pub fn len(&self) -> usize {
        self.users.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.load().is_empty()
    }

    /// The user whose password hashes to `hash` (see the type's docs on timing).
    pub fn find(&self, hash: &PasswordHash) -> Option<TrojanUser> {
        self.users.load().get(hash).cloned()
    }

    /// Adds a user unless its email or its password is already taken.
    pub fn add_user(&self, hash: PasswordHash, user: TrojanUser) -> Result<(), UserChangeError> {
        self.users.update(|users| {
            let email_taken = crate::user_id::email_taken(
                users.values().map(|u| u.email.as_deref()),
                user.email.as_deref(),
            );
            if email_taken || users.contains_key(&hash) {
                return Err(UserChangeError::Exists);
            }
            let mut next = users.clone();
            next.insert(hash, user);
            Ok(next)
        })
    }

    /// Removes the users with this email.
    pub fn remove_user(&self, email: &str) -> Result<(), UserChangeError> {
        self.users.update(|users| {
            let mut next = users.clone();
            next.retain(|_, u| !crate::user_id::email_is(u.email.as_deref(), email));
            if next.len() == users.len() {
                return Err(UserChangeError::NotFound);
            }
            Ok(next)
        })
    }
}

/// The outcome of a Trojan handshake.
pub enum TrojanAccept {
    /// CONNECT: relay `stream` to `destination`. `stream` replays the payload bytes read with
    /// the header first; `raw_tcp()` still answers the socket when the input was one.
    Stream {
        destination: Address,
        stream: BoxStream,
        /// The user's email.
        user: Option<String>,
    },
    /// UDP ASSOCIATE: `stream` carries Trojan UDP packets ([`super::packet`]), each with its
    /// own address. `destination` is what the request named (often `0.0.0.0:0`), for logs.
    Udp {
        destination: Address,
        stream: BoxStream,
        user: Option<String>,
    },
    /// Not a valid Trojan request for a known password (no CRLF at byte 56, unknown hash, bad
    /// command or address, or the connection ended inside the header): hand it to a fallback.
    /// `stream` replays every byte read so far.
    Fallback { stream: BoxStream },
}

/// Runs the server side of the Trojan handshake on `stream`.
///
/// Reads only as far as the header needs (plus whatever arrived with it). Anything that is
/// not a complete valid request for a known password yields [`TrojanAccept::Fallback`], as
/// trojan-gfw does (Xray instead errors once the hash is known; a prober cannot tell, since it
/// does not know a password). Only I/O errors are errors. The caller applies the handshake
/// timeout, and Xray's "first read shorter than 58 bytes falls back at once" rule when it has
/// fallbacks.
pub async fn accept<S: ProxyStream>(
    mut stream: S,
    server: &TrojanServer,
) -> io::Result<TrojanAccept> {
    let mut buf = [0u8; READ_BUF_LEN];
    let mut filled = 0usize;
    let mut known: Option<TrojanUser> = None;
    loop {
        if filled == buf.len() {
            // Unreachable: a maximal header fits in the buffer.
            return Ok(TrojanAccept::Fallback {
                stream: with_prefix(&buf, stream),
            });
        }
        let n = stream.read(&mut buf[filled..]).await?;
        filled += n;
        let data = &buf[..filled];
        let fallback = |stream| {
            Ok(TrojanAccept::Fallback {
                stream: with_prefix(data, stream),
            })
        };
        if known.is_none() {
            match parse_request_hash(data) {
                Ok(Parsed::Complete(hash)) => match server.find(&hash) {
                    Some(user) => known = Some(user),
                    None => return fallback(stream),
                },
                Ok(Parsed::Incomplete) if n == 0 => return fallback(stream),
                Ok(Parsed::Incomplete) => continue,
                Err(_) => return fallback(stream),
            }
        }
        let Some(user) = &known else { continue };
        let (request, header_len) = match parse_request(data) {
            Ok(Parsed::Complete(parsed)) => parsed,
            Ok(Parsed::Incomplete) if n == 0 => return fallback(stream),
            Ok(Parsed::Incomplete) => continue,
            Err(_) => return fallback(stream),
        };
        let user = user.email.clone();
        let stream = with_prefix(&buf[header_len..filled], stream);
        let destination = request.destination;
        return Ok(match request.command {
            Command::Connect => TrojanAccept::Stream {
                destination,
                stream,
                user,
            },
            Command::UdpAssociate => TrojanAccept::Udp {
                destination,
                stream,
                user,
            },
        });
    }
}
