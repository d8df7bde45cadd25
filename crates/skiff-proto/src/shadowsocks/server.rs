//! The Shadowsocks inbound handshake (shadowsocks.md §1.4, §2.2, §2.4, §2.7): find the user,
//! open the request, check 2022 timestamps and the salt pool, read the target address.
//!
//! A request that fails in any way gets no byte and no early close: the connection is read
//! and discarded until the client gives up (or the caller's handshake timeout ends it), so a
//! prober learns neither where the check failed nor how many bytes it took.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use skiff_core::{Address, BoxStream, Swap};
use skiff_crypto::TAG_LEN;
use skiff_crypto::shadowsocks::psk_hash_2022;
use tokio::io::AsyncReadExt;

use super::cipher::{ChunkDecoder, LENGTH_BLOCK};
use super::codec::{Decoder, Encoder, random_salt, session_cipher};
use super::header::{self, IDENTITY_HEADER_LEN, REQUEST_FIXED_LEN};
use super::method::MAX_PAYLOAD_2017;
use super::replay::SaltFilter;
use super::stream::SsStream;
use super::{Method, SsError, address, unix_now};
use crate::user_id::UserChangeError;

/// A configured user: method and key (AEAD-2017 master key, or 2022 PSK / uPSK).
#[derive(Clone)]
pub struct ServerUser {
    pub method: Method,
    pub key: Vec<u8>,
    /// Reported as the session's user (routing, per-user counters).
    pub email: Option<String>,
    pub level: u32,
}

/// Never prints keys.
impl std::fmt::Debug for ServerUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerUser")
            .field("method", &self.method)
            .field("email", &self.email)
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

/// A Shadowsocks inbound's users and its salt pool.
pub struct ShadowsocksServer {
    /// A snapshot per request, replaced whole when users are added or removed at run time
    /// (Xray's API; 2022 multi-user only).
    users: Swap<SsUsers>,
    /// 2022 multi-user: the server's identity PSK; users are found by identity header.
    identity_key: Option<Vec<u8>>,
    /// The 2022 method, fixed at start (every user of a 2022 server has it).
    method_2022: Option<Method>,
    replay: Mutex<SaltFilter>,
}

/// The users, each at an index that never changes while the server runs (UDP sessions keep
/// it): a removed user leaves an empty slot, an added one takes a new slot.
#[derive(Clone, Debug, Default)]
pub struct SsUsers {
    slots: Vec<Option<ServerUser>>,
    /// 2022 multi-user: identity hash (of the uPSK) → slot.
    by_hash: HashMap<[u8; 16], usize>,
}

impl SsUsers {
    pub fn get(&self, index: usize) -> Option<&ServerUser> {
        self.slots.get(index)?.as_ref()
    }

    /// The users present, in order.
    pub fn iter(&self) -> impl Iterator<Item = &ServerUser> {
        self.slots.iter().flatten()
    }

    /// The users present with their indices.
    pub fn indexed(&self) -> impl Iterator<Item = (usize, &ServerUser)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, u)| u.as_ref().map(|u| (i, u)))
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    pub fn first(&self) -> Option<&ServerUser> {
        self.iter().next()
    }
}

impl std::fmt::Debug for ShadowsocksServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShadowsocksServer")
            .field("users", &self.users)
            .field("identity", &self.identity_key.is_some())
            .finish_non_exhaustive()
    }
}

/// A valid request: relay `stream` (payload that came with the request is read first) to
/// `destination` for `users[user]`, whose email is `email`.
pub struct ShadowsocksAccept {
    pub destination: Address,
    pub stream: SsStream,
    pub user: usize,
    pub email: Option<String>,
}

impl ShadowsocksServer {
    /// `users` all AEAD-2017 (any mix of methods), or all the same 2022 method. With
    /// `identity_key` (2022 AES methods), clients name their user by identity header.
    pub fn new(users: Vec<ServerUser>, identity_key: Option<Vec<u8>>) -> ShadowsocksServer {
        let by_hash = if identity_key.is_some() {
            users
                .iter()
                .enumerate()
                .map(|(i, u)| (psk_hash_2022(&u.key), i))
                .collect()
        } else {
            HashMap::new()
        };
        let method_2022 = users.first().map(|u| u.method).filter(|m| m.is_2022());
        ShadowsocksServer {
            method_2022,
            users: Swap::new(SsUsers {
                slots: users.into_iter().map(Some).collect(),
                by_hash,
            }),
            identity_key,
            replay: Mutex::new(SaltFilter::default()),
        }
    }

    /// The users now.
    pub fn users(&self) -> Arc<SsUsers> {
        self.users.load()
    }

    /// 2022 multi-user: adds a user (its uPSK in `key`, the server's method) unless its email
    /// or its key is already taken. Other servers take no users at run time.
    pub fn add_user(&self, key: Vec<u8>, email: Option<String>, level: u32) -> io::Result<()> {
        let Some(method) = self.method_2022().filter(|_| self.identity_key.is_some()) else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "only a Shadowsocks 2022 multi-user inbound takes users at run time",
            ));
        };
        if key.len() != method.key_len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a {} key is {} bytes", method.name(), method.key_len()),
            ));
        }
        self.users.update(|users| {
            let hash = psk_hash_2022(&key);
            let email_taken = crate::user_id::email_taken(
                users.iter().map(|u| u.email.as_deref()),
                email.as_deref(),
            );
            if email_taken || users.by_hash.contains_key(&hash) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    UserChangeError::Exists,
                ));
            }
            let mut next = users.clone();
            next.by_hash.insert(hash, next.slots.len());
            next.slots.push(Some(ServerUser {
                method,
                key,
                email,
                level,
            }));
            Ok(next)
        })
    }

    /// AEAD-2017: adds a user (any 2017 method, as a 2017 server's users may mix them) unless
    /// its email is taken. A 2022 server takes none this way.
    pub fn add_user_2017(&self, user: ServerUser) -> io::Result<()> {
        if self.method_2022.is_some() || user.method.is_2022() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "only an AEAD-2017 inbound takes AEAD-2017 users",
            ));
        }
        if user.key.len() != user.method.key_len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {} key is {} bytes",
                    user.method.name(),
                    user.method.key_len()
                ),
            ));
        }
        self.users.update(|users| {
            if crate::user_id::email_taken(
                users.iter().map(|u| u.email.as_deref()),
                user.email.as_deref(),
            ) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    UserChangeError::Exists,
                ));
            }
            let mut next = users.clone();
            next.slots.push(Some(user.clone()));
            Ok(next)
        })
    }

    /// Removes the users with this email.
    pub fn remove_user(&self, email: &str) -> io::Result<()> {
        self.users.update(|users| {
            let mut next = users.clone();
            let mut removed = false;
            for slot in &mut next.slots {
                if slot
                    .as_ref()
                    .is_some_and(|u| crate::user_id::email_is(u.email.as_deref(), email))
                {
                    *slot = None;
                    removed = true;
                }
            }
            if !removed {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    UserChangeError::NotFound,
                ));
            }
            next.by_hash.retain(|_, i| next.slots[*i].is_some());
            Ok(next)
        })
    }

    /// 2022 multi-user: the identity key.
    pub fn identity_key(&self) -> Option<&[u8]> {
        self.identity_key.as_deref()
    }

    /// The 2022 method, if this server speaks 2022.
    pub fn method_2022(&self) -> Option<Method> {
        self.method_2022
    }

    /// The user an identity header hash names.
    pub fn user_by_hash(&self, hash: &[u8; 16]) -> Option<usize> {
        self.users.load().by_hash.get(hash).copied()
    }

    /// Records a request salt; false when it is a replay.
    pub fn fresh_salt(&self, salt: &[u8]) -> bool {
        let mut pool = self
            .replay
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pool.check_and_insert(salt, Instant::now())
    }
}

/// Runs the server side of the handshake on `stream`. On any failure the connection is
/// drained until the client closes it (see the module docs), then the error is returned;
/// the caller's handshake timeout bounds the wait.
pub async fn accept(
    mut stream: BoxStream,
    server: &ShadowsocksServer,
) -> io::Result<ShadowsocksAccept> {
    let mut buf = [0u8; 1024];
    let users = server.users();
    let opened = if server.method_2022().is_some() {
        open_2022(&mut stream, server, &users, &mut buf).await
    } else {
        open_2017(&mut stream, server, &users, &mut buf).await
    };
    let (user, request_salt, decoder, have, used) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            drain(&mut stream).await;
            return Err(e);
        }
    };
    let Some(found) = users.get(user) else {
        drain(&mut stream).await;
        return Err(SsError::UnknownUser.into());
    };
    let method = found.method;
    let encoder = Encoder::server(method, &found.key, random_salt(method), &request_salt);
    let mut ss = SsStream::new(stream, method, encoder, decoder, &buf[used..have]);
    let target = if method.is_2022() {
        read_variable_header(&mut ss).await
    } else {
        read_address(&mut ss).await
    };
    match target {
        Ok(destination) => Ok(ShadowsocksAccept {
            destination,
            stream: ss,
            user,
            email: found.email.clone(),
        }),
        Err(e) => {
            let mut inner = ss.into_inner();
            drain(&mut inner).await;
            Err(e)
        }
    }
}

/// What opening the request's first block gave: user index, request salt, the decoder for
/// the rest, bytes in `buf`, bytes of `buf` used.
type Opened = (usize, Vec<u8>, Decoder, usize, usize);

/// Reads until `buf[..want]` is filled; returns how many bytes `buf` holds (maybe more).
async fn read_at_least(stream: &mut BoxStream, buf: &mut [u8], want: usize) -> io::Result<usize> {
    let mut have = 0;
    while have < want {
        let n = stream.read(&mut buf[have..]).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed inside the Shadowsocks request",
            ));
        }
        have += n;
    }
    Ok(have)
}

/// AEAD-2017: salt and the first length block; every user is tried on the length block.
async fn open_2017(
    stream: &mut BoxStream,
    server: &ShadowsocksServer,
    users: &SsUsers,
    buf: &mut [u8],
) -> io::Result<Opened> {
    let want = users
        .iter()
        .map(|u| u.method.salt_len() + LENGTH_BLOCK)
        .max()
        .ok_or_else(|| io::Error::from(SsError::UnknownUser))?;
    let have = read_at_least(stream, buf, want).await?;
    for (index, user) in users.indexed() {
        let salt_len = user.method.salt_len();
        let salt = &buf[..salt_len];
        let mut block = [0u8; LENGTH_BLOCK];
        block.copy_from_slice(&buf[salt_len..salt_len + LENGTH_BLOCK]);
        let mut cipher = session_cipher(user.method, &user.key, salt);
        let Ok(plain) = cipher.open(&mut block) else {
            continue;
        };
        let len = usize::from(u16::from_be_bytes([plain[0], plain[1]]));
        if len > MAX_PAYLOAD_2017 {
            return Err(SsError::BadLength(len).into());
        }
        if !server.fresh_salt(salt) {
            return Err(SsError::Replay.into());
        }
        let decoder = Decoder::Chunks(ChunkDecoder::at_payload(cipher, MAX_PAYLOAD_2017, len));
        return Ok((index, salt.to_vec(), decoder, have, salt_len + LENGTH_BLOCK));
    }
    Err(SsError::Auth.into())
}

/// 2022: salt, identity header (multi-user), fixed header; type, timestamp, then the pool.
async fn open_2022(
    stream: &mut BoxStream,
    server: &ShadowsocksServer,
    users: &SsUsers,
    buf: &mut [u8],
) -> io::Result<Opened> {
    let method = server
        .method_2022()
        .ok_or_else(|| io::Error::from(SsError::UnknownUser))?;
    let salt_len = method.salt_len();
    let eih = if server.identity_key.is_some() {
        IDENTITY_HEADER_LEN
    } else {
        0
    };
    let fixed_at = salt_len + eih;
    let want = fixed_at + REQUEST_FIXED_LEN + TAG_LEN;
    let have = read_at_least(stream, buf, want).await?;
    let (salt, rest) = buf.split_at_mut(salt_len);
    let user = match &server.identity_key {
        Some(ipsk) => {
            let mut header = [0u8; IDENTITY_HEADER_LEN];
            header.copy_from_slice(&rest[..IDENTITY_HEADER_LEN]);
            let hash = header::open_tcp_identity_header(ipsk, salt, &header);
            *users.by_hash.get(&hash).ok_or(SsError::UnknownUser)?
        }
        None => 0,
    };
    let key = &users.get(user).ok_or(SsError::UnknownUser)?.key;
    let mut cipher = session_cipher(method, key, salt);
    let fixed = &mut rest[eih..eih + REQUEST_FIXED_LEN + TAG_LEN];
    let plain = cipher.open(fixed)?;
    let var_len = header::parse_request_fixed(plain, unix_now())?;
    if var_len == 0 {
        // Not even room for an address.
        return Err(SsError::BadPadding.into());
    }
    // Only an authentic, timely request may enter the pool (else a prober could fill it).
    if !server.fresh_salt(salt) {
        return Err(SsError::Replay.into());
    }
    let decoder = Decoder::Chunks(ChunkDecoder::at_payload(
        cipher,
        method.max_payload(),
        var_len,
    ));
    Ok((user, salt.to_vec(), decoder, have, want))
}

/// 2022: the variable header is the first chunk, whole: address, padding, initial payload.
async fn read_variable_header(ss: &mut SsStream) -> io::Result<Address> {
    std::future::poll_fn(|cx| ss.poll_chunk(cx)).await?;
    let (target, payload_at) = header::parse_request_variable(ss.chunk())?;
    ss.consume(payload_at);
    Ok(target)
}

/// AEAD-2017: the address at the start of the payload (it may span chunks).
async fn read_address(ss: &mut SsStream) -> io::Result<Address> {
    let mut acc = [0u8; address::MAX_LEN];
    let mut have = 0;
    loop {
        std::future::poll_fn(|cx| ss.poll_chunk(cx)).await?;
        let chunk = ss.chunk();
        if chunk.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "Shadowsocks request ended before its address",
            ));
        }
        let take = chunk.len().min(acc.len() - have);
        acc[have..have + take].copy_from_slice(&chunk[..take]);
        match address::parse(&acc[..have + take])? {
            address::Parsed::Complete(target, len) => {
                ss.consume(len - have);
                return Ok(target);
            }
            address::Parsed::Incomplete => {
                ss.consume(take);
                have += take;
            }
        }
    }
}

/// Reads and discards until the peer closes or fails.
async fn drain(stream: &mut BoxStream) {
    let mut sink = [0u8; 1024];
    while let Ok(n) = stream.read(&mut sink).await {
        if n == 0 {
            return;
        }
    }
}
