//! A VMess inbound's users and who an auth ID belongs to (vmess.md §2.1).
//!
//! An auth ID is one AES block sealed with a per-user key, and its plaintext (timestamp,
//! random salt, CRC) names nobody: the only way to learn the user is to try each user's key
//! until the CRC matches. No index can make that sub-linear without changing the protocol,
//! so the lookup is linear but cheap and bounded: each user keeps only the expanded AES
//! decryption schedule (built once from the config), and a try is one AES-128 block
//! decryption and a 4-byte compare (the timestamp's high half is zero until 2106; a wrong key
//! passes that with probability 2^-32, so the CRC32 is computed for the right user only). The
//! first match decides, as in Xray. Measured here (AMD EPYC with AES-NI, `vmess_lookup_cost`):
//! about 16 ns per user, 35 µs for a connection that matches none of 2 000 users. A prober's
//! garbage always costs the full walk, which therefore says nothing about the user list.
//!
//! After the match come the timestamp window (±120 s) and the auth-ID replay filter
//! ([`super::replay`]); a failure there is reported like an unknown user.

use std::sync::{Arc, Mutex, PoisonError};

use skiff_core::Swap;

use skiff_crypto::hash::sha256;
use skiff_crypto::kdf::hmac_sha256;
use skiff_crypto::random;
use skiff_crypto::vmess::AuthIdOpener;

use super::auth_id::{AUTH_ID_LEN, MAX_CLOCK_SKEW, open_auth_id, timestamp_in_window};
use super::keys::cmd_key;
use super::replay::{Check, ReplayFilter};
use crate::user_id::{UserChangeError, UserId};

/// Auth IDs are remembered at least this long: the whole span of acceptable timestamps.
const AUTH_ID_MEMORY: i64 = 2 * MAX_CLOCK_SKEW;
/// Xray's session history: (user, body key, body IV) are remembered 3 minutes.
const SESSION_MEMORY: i64 = 180;
/// Values per filter generation (see [`super::replay`]): ~4 000 new connections a second.
const FILTER_CAP: usize = 1 << 20;

/// A configured VMess user.
#[derive(Clone, Debug)]
pub struct VmessUser {
    pub id: UserId,
    /// Reported as the session's user (routing, per-user counters).
    pub email: Option<String>,
    /// The user's policy level.
    pub level: u32,
}

pub(crate) struct ServerUser {
    /// Only the decryption key schedule: a lookup walks these.
    pub auth: AuthIdOpener,
    pub cmd_key: [u8; 16],
    pub email: Option<String>,
    pub level: u32,
}

impl ServerUser {
    fn of(user: &VmessUser) -> ServerUser {
        let cmd_key = cmd_key(user.id.as_bytes());
        ServerUser {
            auth: AuthIdOpener::for_cmd_key(&cmd_key),
            cmd_key,
            email: user.email.clone(),
            level: user.level,
        }
    }
}

/// Why an auth ID was refused (for the log; the wire sees the same for all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthFailure {
    /// No user's key gives a matching CRC.
    UnknownUser,
    /// A user's key matched, but the timestamp is negative or more than 120 s off.
    BadTime,
    /// Seen within the window.
    Replayed,
    /// The replay filter is full.
    FilterFull,
}

impl std::fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AuthFailure::UnknownUser => "no user matches the auth ID",
            AuthFailure::BadTime => "auth ID timestamp out of the ±120 s window",
            AuthFailure::Replayed => "replayed auth ID",
            AuthFailure::FilterFull => "auth-ID replay filter full",
        })
    }
}

/// A request's (user index, body key, body IV).
type SessionId = (u32, [u8; 16], [u8; 16]);

/// The users of a VMess inbound with its replay filters. Shared by all its connections.
pub struct VmessServer {
    /// A snapshot per connection, replaced whole when users are added or removed at run time
    /// (Xray's API).
    users: Swap<Vec<Arc<ServerUser>>>,
    auth_ids: Mutex<ReplayFilter<[u8; AUTH_ID_LEN]>>,
    sessions: Mutex<ReplayFilter<SessionId>>,
    drain: DrainSize,
    /// v2ray's `disableInsecureEncryption`: refuse security `none` (and `zero`).
    pub(crate) refuse_insecure: bool,
}

impl std::fmt::Debug for VmessServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmessServer")
            .field("users", &self.users.load().len())
            .finish_non_exhaustive()
    }
}

impl VmessServer {
    pub fn new(users: &[VmessUser]) -> VmessServer {
        VmessServer {
            drain: DrainSize::for_users(users),
            users: Swap::new(users.iter().map(|u| Arc::new(ServerUser::of(u))).collect()),
            auth_ids: Mutex::new(ReplayFilter::new(AUTH_ID_MEMORY, FILTER_CAP)),
            sessions: Mutex::new(ReplayFilter::new(SESSION_MEMORY, FILTER_CAP)),
            refuse_insecure: false,
        }
    }

    /// With `refuse`, clients asking for security `none` or `zero` are refused after their
    /// header (v2ray's `disableInsecureEncryption`).
    pub fn refuse_insecure(mut self, refuse: bool) -> VmessServer {
        self.refuse_insecure = refuse;
        self
    }

    pub fn user_count(&self) -> usize {
        self.users.load().len()
    }

    /// The users now, for one connection's handshake.
    pub(crate) fn users(&self) -> Arc<Vec<Arc<ServerUser>>> {
        self.users.load()
    }

    /// Adds `user` unless its email is already taken (Xray's rule: emails name users).
    pub fn add_user(&self, user: &VmessUser) -> Result<(), UserChangeError> {
        let added = Arc::new(ServerUser::of(user));
        self.users.update(|users| {
            if crate::user_id::email_taken(
                users.iter().map(|u| u.email.as_deref()),
                user.email.as_deref(),
            ) {
                return Err(UserChangeError::Exists);
            }
            let mut next = users.clone();
            next.push(added);
            Ok(next)
        })
    }

    /// Removes the users with this email.
    pub fn remove_user(&self, email: &str) -> Result<(), UserChangeError> {
        self.users.update(|users| {
            let next: Vec<Arc<ServerUser>> = users
                .iter()
                .filter(|u| !crate::user_id::email_is(u.email.as_deref(), email))
                .cloned()
                .collect();
            if next.len() == users.len() {
                return Err(UserChangeError::NotFound);
            }
            Ok(next)
        })
    }

    /// The index of the user `auth_id` belongs to, at `now` (Unix seconds), in the users now.
    pub fn authenticate(
        &self,
        auth_id: &[u8; AUTH_ID_LEN],
        now: i64,
    ) -> Result<usize, AuthFailure> {
        self.authenticate_in(&self.users(), auth_id, now)
    }

    /// The index in `users` (a snapshot of this server's) of the user `auth_id` belongs to.
    pub(crate) fn authenticate_in(
        &self,
        users: &[Arc<ServerUser>],
        auth_id: &[u8; AUTH_ID_LEN],
        now: i64,
    ) -> Result<usize, AuthFailure> {
        let (index, timestamp) = users
            .iter()
            .enumerate()
            .find_map(|(i, u)| open_auth_id(&u.auth, auth_id).map(|ts| (i, ts)))
            .ok_or(AuthFailure::UnknownUser)?;
        if !timestamp_in_window(timestamp, now) {
            return Err(AuthFailure::BadTime);
        }
        let mut filter = self.auth_ids.lock().unwrap_or_else(PoisonError::into_inner);
        match filter.check(*auth_id, now) {
            Check::Fresh => Ok(index),
            Check::Seen => Err(AuthFailure::Replayed),
            Check::Full => Err(AuthFailure::FilterFull),
        }
    }

    /// Records a request's body key and IV for `user`; false when they were seen in the last
    /// three minutes (or the history is full).
    pub fn fresh_session(&self, user: usize, key: &[u8; 16], iv: &[u8; 16], now: i64) -> bool {
        let mut history = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let user = u32::try_from(user).unwrap_or(u32::MAX);
        history.check((user, *key, *iv), now) == Check::Fresh
    }

    /// How many bytes a refused connection is read for before it is closed.
    pub fn drain_size(&self) -> usize {
        self.drain.for_connection()
    }
}

/// Xray's answer to a failed authentication on raw TCP: keep reading a number of bytes fixed
/// per server (derived from its users) plus a little per-connection randomness, then close,
/// so the point where a prober's bytes stop mattering does not depend on what they were
/// (vmess.md §2.3). Same ranges as Xray: `16 + 38 + [0, 3266) + [0, [1, 64])`.
#[derive(Clone, Copy, Debug)]
struct DrainSize {
    base: usize,
    spread: usize,
}

impl DrainSize {
    fn for_users(users: &[VmessUser]) -> DrainSize {
        let mut seed = [0u8; 32];
        if users.is_empty() {
            random::fill(&mut seed);
        } else {
            // Like Xray's behaviour seed, from every id (not the same numbers: Xray's come from
            // Go's math/rand, which there is no need to imitate).
            let macs: Vec<[u8; 32]> = users
                .iter()
                .map(|u| hmac_sha256(b"VMESSBSKDF", &[u.id.as_bytes()]))
                .collect();
            let parts: Vec<&[u8]> = macs.iter().map(|m| &m[..]).collect();
            seed = sha256(&parts);
        }
        let roll = |bytes: &[u8], n: u64| {
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            (u64::from_le_bytes(b) % n) as usize
        };
        DrainSize {
            base: 16 + 38 + roll(&seed[..8], 3266),
            spread: roll(&seed[8..16], 64) + 1,
        }
    }

    fn for_connection(&self) -> usize {
        let mut r = [0u8; 2];
        random::fill(&mut r);
        self.base + usize::from(u16::from_le_bytes(r)) % self.spread
    }
}
