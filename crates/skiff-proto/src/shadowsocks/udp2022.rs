//! 2022 UDP packets (shadowsocks.md §2.5–§2.7).
//!
//! AES methods: `AES-ECB(key, session id ‖ packet id) [‖ identity header] ‖ AEAD(body)`, the
//! body AEAD keyed per session (BLAKE3 of PSK ‖ session id) with nonce = header bytes 4..16.
//! ChaCha20: `nonce(24) ‖ XChaCha20-Poly1305(PSK, session id ‖ packet id ‖ body)`.
//! Bodies: request `0 ‖ ts ‖ pad len ‖ pad ‖ address ‖ payload`, response `1 ‖ ts ‖ client
//! session id ‖ pad len ‖ pad ‖ address ‖ payload`.
//!
//! A [`Sender`] seals one session's packets; a [`Receiver`] opens the packets of one peer
//! session (its key and packet-id window). Servers find a client's session with [`identify`].

use std::ops::Range;

use skiff_core::Address;
use skiff_crypto::random;
use skiff_crypto::shadowsocks::{AesBlock, psk_hash_2022, session_subkey_2022};
use skiff_crypto::{AeadKey, AeadKind, TAG_LEN};

use super::header::{TYPE_CLIENT, TYPE_SERVER};
use super::replay::PacketWindow;
use super::{Method, Reader, SsError, address, check_time, read_address};

/// Session id and packet id.
pub const SEPARATE_HEADER_LEN: usize = 16;
/// XChaCha20 nonce in front of a ChaCha packet.
pub const XNONCE_LEN: usize = 24;
/// An identity header.
pub const IDENTITY_LEN: usize = 16;

/// The most a packet adds to its datagram besides the address and identity headers.
pub fn overhead(method: Method) -> usize {
    let front = if method.is_2022_aes() {
        SEPARATE_HEADER_LEN
    } else {
        XNONCE_LEN + SEPARATE_HEADER_LEN
    };
    // type, timestamp, client session id, padding length.
    front + 1 + 8 + 8 + 2 + TAG_LEN
}

/// The key of a session's bodies: the session subkey (AES methods) or the PSK (ChaCha).
pub fn body_key(method: Method, key: &[u8], session_id: u64) -> AeadKey {
    if method.is_2022_aes() {
        let mut subkey = [0u8; 32];
        let subkey = &mut subkey[..method.key_len()];
        session_subkey_2022(key, &session_id.to_be_bytes(), subkey);
        AeadKey::new(method.aead(), subkey).expect("subkey derived for its AEAD")
    } else {
        AeadKey::new(AeadKind::XChaCha20Poly1305, key).expect("PSK checked at load")
    }
}

/// A fresh random session id (never 0, which some peers treat as "none").
pub fn random_session_id() -> u64 {
    let mut b = [0u8; 8];
    loop {
        random::fill(&mut b);
        let id = u64::from_be_bytes(b);
        if id != 0 {
            return id;
        }
    }
}

/// Seals the packets of one session.
pub struct Sender {
    method: Method,
    session_id: u64,
    next_packet_id: u64,
    /// AES methods: encrypts the separate header (the first identity key, else the PSK).
    header: Option<AesBlock>,
    body: AeadKey,
    /// Client with identity keys: per iPSK, its AES key and the hash of the next key.
    identity: Vec<(AesBlock, [u8; 16])>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("method", &self.method)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Sender {
    /// A client session (`key` the user PSK, `identity_keys` the iPSKs in front of it).
    pub fn client(
        method: Method,
        key: &[u8],
        identity_keys: &[Vec<u8>],
        session_id: u64,
    ) -> Sender {
        let header_key = identity_keys.first().map_or(key, Vec::as_slice);
        let identity = identity_keys
            .iter()
            .enumerate()
            .map(|(i, ipsk)| {
                let next = identity_keys.get(i + 1).map_or(key, Vec::as_slice);
                (
                    AesBlock::new(ipsk).expect("identity keys are AES keys"),
                    psk_hash_2022(next),
                )
            })
            .collect();
        Sender::with(method, header_key, key, identity, session_id)
    }

    /// A server session answering a client of user key `key`.
    pub fn server(method: Method, key: &[u8], session_id: u64) -> Sender {
        Sender::with(method, key, key, Vec::new(), session_id)
    }

    fn with(
        method: Method,
        header_key: &[u8],
        key: &[u8],
        identity: Vec<(AesBlock, [u8; 16])>,
        session_id: u64,
    ) -> Sender {
        Sender {
            method,
            session_id,
            next_packet_id: 0,
            header: method
                .is_2022_aes()
                .then(|| AesBlock::new(header_key).expect("2022 AES keys")),
            body: body_key(method, key, session_id),
            identity,
        }
    }

    pub fn session_id(&self) -> u64 {
        self.session_id
    }

    /// Packet length for `target` and `payload` with `padding`.
    pub fn packet_len(
        &self,
        target: &Address,
        payload: usize,
        padding: usize,
    ) -> Result<usize, SsError> {
        Ok(overhead(self.method)
            + self.identity.len() * IDENTITY_LEN
            + padding
            + address::encoded_len(target)?
            + payload)
    }

    /// A client's request packet; returns its length.
    pub fn seal_request(
        &mut self,
        now: u64,
        padding: usize,
        target: &Address,
        payload: &[u8],
        out: &mut [u8],
    ) -> Result<usize, SsError> {
        self.seal(now, None, padding, target, payload, out)
    }

    /// A server's response packet to client session `client_session_id`.
    pub fn seal_response(
        &mut self,
        now: u64,
        client_session_id: u64,
        target: &Address,
        payload: &[u8],
        out: &mut [u8],
    ) -> Result<usize, SsError> {
        self.seal(now, Some(client_session_id), 0, target, payload, out)
    }

    fn seal(
        &mut self,
        now: u64,
        client_session_id: Option<u64>,
        padding: usize,
        target: &Address,
        payload: &[u8],
        out: &mut [u8],
    ) -> Result<usize, SsError> {
        let mut total = self.packet_len(target, payload.len(), padding)?;
        if client_session_id.is_none() {
            // Requests carry no client session id in the body.
            total -= 8;
        }
        let out = out.get_mut(..total).ok_or(SsError::TooLong)?;
        let packet_id = self.next_packet_id;
        self.next_packet_id += 1;
        let mut header = [0u8; SEPARATE_HEADER_LEN];
        header[..8].copy_from_slice(&self.session_id.to_be_bytes());
        header[8..].copy_from_slice(&packet_id.to_be_bytes());
        let aes = self.header.is_some();
        let front = if aes { 0 } else { XNONCE_LEN };
        // Identity headers (AES only) go right after the separate header.
        let mut at = front + SEPARATE_HEADER_LEN;
        if aes {
            for (block, hash) in &self.identity {
                let mut eih = [0u8; 16];
                for (e, (h, s)) in eih.iter_mut().zip(hash.iter().zip(header.iter())) {
                    *e = h ^ s;
                }
                block.encrypt(&mut eih);
                out[at..at + IDENTITY_LEN].copy_from_slice(&eih);
                at += IDENTITY_LEN;
            }
        }
        let body_start = if aes { at } else { front };
        if !aes {
            out[front..front + SEPARATE_HEADER_LEN].copy_from_slice(&header);
        }
        let kind = if client_session_id.is_some() {
            TYPE_SERVER
        } else {
            TYPE_CLIENT
        };
        out[at] = kind;
        out[at + 1..at + 9].copy_from_slice(&now.to_be_bytes());
        at += 9;
        if let Some(id) = client_session_id {
            out[at..at + 8].copy_from_slice(&id.to_be_bytes());
            at += 8;
        }
        out[at..at + 2].copy_from_slice(&(padding as u16).to_be_bytes());
        at += 2;
        out[at..at + padding].fill(0);
        at += padding;
        at += address::write(target, &mut out[at..])?;
        out[at..at + payload.len()].copy_from_slice(payload);
        let sealed = &mut out[body_start..];
        if let Some(block) = &self.header {
            self.body.seal_in_place(&header[4..], &[], sealed);
            let mut encrypted = header;
            block.encrypt(&mut encrypted);
            out[..SEPARATE_HEADER_LEN].copy_from_slice(&encrypted);
        } else {
            let mut nonce = [0u8; XNONCE_LEN];
            random::fill(&mut nonce);
            self.body.seal_in_place(&nonce, &[], sealed);
            out[..XNONCE_LEN].copy_from_slice(&nonce);
        }
        Ok(total)
    }
}

/// Who sent a packet, found before its body is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identified {
    pub session_id: u64,
    pub packet_id: u64,
    /// Identity header hash (multi-user servers): names the user's key.
    pub user_hash: Option<[u8; 16]>,
    /// Where the sealed body starts (AES methods); ChaCha packets are opened as a whole.
    pub body_at: usize,
}

/// The key that opens what identifies a packet: the separate header's AES key (AES methods)
/// or the PSK of the whole packet (ChaCha). A server's is its PSK (iPSK when multi-user); a
/// client's, for responses, its user PSK.
pub struct PeerKey {
    block: Option<AesBlock>,
    chacha: Option<AeadKey>,
}

impl std::fmt::Debug for PeerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerKey").finish_non_exhaustive()
    }
}

impl PeerKey {
    /// `key` must have the method's key length (checked at config load).
    pub fn new(method: Method, key: &[u8]) -> PeerKey {
        if method.is_2022_aes() {
            PeerKey {
                block: Some(AesBlock::new(key).expect("2022 AES key")),
                chacha: None,
            }
        } else {
            PeerKey {
                block: None,
                chacha: Some(AeadKey::new(AeadKind::XChaCha20Poly1305, key).expect("32-byte PSK")),
            }
        }
    }
}

/// Reads the session and packet ids of a packet. AES methods: decrypts the separate header in
/// place and, with `identity` (multi-user servers), reads the identity header. ChaCha: opens
/// the whole packet, in place.
pub fn identify(peer: &PeerKey, identity: bool, packet: &mut [u8]) -> Result<Identified, SsError> {
    if let Some(block) = &peer.block {
        let extra = if identity { IDENTITY_LEN } else { 0 };
        if packet.len() < SEPARATE_HEADER_LEN + extra + TAG_LEN {
            return Err(SsError::Truncated);
        }
        let mut header = [0u8; SEPARATE_HEADER_LEN];
        header.copy_from_slice(&packet[..SEPARATE_HEADER_LEN]);
        block.decrypt(&mut header);
        packet[..SEPARATE_HEADER_LEN].copy_from_slice(&header);
        let user_hash = if identity {
            let mut eih = [0u8; IDENTITY_LEN];
            eih.copy_from_slice(&packet[SEPARATE_HEADER_LEN..SEPARATE_HEADER_LEN + IDENTITY_LEN]);
            block.decrypt(&mut eih);
            for (e, s) in eih.iter_mut().zip(header.iter()) {
                *e ^= s;
            }
            Some(eih)
        } else {
            None
        };
        let (sid, pid) = ids(&header);
        return Ok(Identified {
            session_id: sid,
            packet_id: pid,
            user_hash,
            body_at: SEPARATE_HEADER_LEN + extra,
        });
    }
    let key = peer.chacha.as_ref().ok_or(SsError::Auth)?;
    if packet.len() < XNONCE_LEN + SEPARATE_HEADER_LEN + TAG_LEN {
        return Err(SsError::Truncated);
    }
    let (nonce, sealed) = packet.split_at_mut(XNONCE_LEN);
    let plain = key
        .open_in_place(nonce, &[], sealed)
        .map_err(|_| SsError::Auth)?;
    let mut header = [0u8; SEPARATE_HEADER_LEN];
    header.copy_from_slice(&plain[..SEPARATE_HEADER_LEN]);
    let (sid, pid) = ids(&header);
    Ok(Identified {
        session_id: sid,
        packet_id: pid,
        user_hash: None,
        body_at: XNONCE_LEN + SEPARATE_HEADER_LEN,
    })
}

fn ids(header: &[u8; SEPARATE_HEADER_LEN]) -> (u64, u64) {
    let mut sid = [0u8; 8];
    let mut pid = [0u8; 8];
    sid.copy_from_slice(&header[..8]);
    pid.copy_from_slice(&header[8..]);
    (u64::from_be_bytes(sid), u64::from_be_bytes(pid))
}

/// What a packet said, once opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// Request: the destination; response: the source of the reply.
    pub address: Address,
    /// Where the datagram lies in the packet buffer.
    pub payload: Range<usize>,
    /// Responses: the client session they answer.
    pub client_session_id: Option<u64>,
}

/// The packets of one peer session: its body key and which packet ids it already used.
pub struct Receiver {
    method: Method,
    session_id: u64,
    body: AeadKey,
    window: PacketWindow,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Receiver {
    /// The session `session_id` of a peer whose packets use user key `key`.
    pub fn new(method: Method, key: &[u8], session_id: u64) -> Receiver {
        Receiver {
            method,
            session_id,
            body: body_key(method, key, session_id),
            window: PacketWindow::default(),
        }
    }

    pub fn session_id(&self) -> u64 {
        self.session_id
    }

    /// Opens the rest of an identified packet of this session (a request from a client when
    /// `from_client`, else a response) and records its packet id. A replayed id, stale
    /// timestamp or wrong type is refused and leaves the window as it was.
    pub fn open(
        &mut self,
        id: &Identified,
        packet: &mut [u8],
        from_client: bool,
        now: u64,
    ) -> Result<Opened, SsError> {
        if id.session_id != self.session_id {
            return Err(SsError::WrongRequest);
        }
        if !self.window.check(id.packet_id) {
            return Err(SsError::Replay);
        }
        let body = if self.method.is_2022_aes() {
            let (header, rest) = packet.split_at_mut(SEPARATE_HEADER_LEN);
            let sealed = rest
                .get_mut(id.body_at - SEPARATE_HEADER_LEN..)
                .ok_or(SsError::Truncated)?;
            let plain = self
                .body
                .open_in_place(&header[4..], &[], sealed)
                .map_err(|_| SsError::Auth)?;
            id.body_at..id.body_at + plain.len()
        } else {
            // `identify` opened it already; the tag is at the end.
            let end = packet
                .len()
                .checked_sub(TAG_LEN)
                .ok_or(SsError::Truncated)?;
            id.body_at..end
        };
        let opened = parse_body(&packet[body.clone()], from_client, now)?;
        let offset = body.start;
        self.window.record(id.packet_id);
        Ok(Opened {
            address: opened.address,
            payload: opened.payload.start + offset..opened.payload.end + offset,
            client_session_id: opened.client_session_id,
        })
    }
}

/// Parses an opened body (after the session and packet ids).
fn parse_body(plain: &[u8], from_client: bool, now: u64) -> Result<Opened, SsError> {
    let mut r = Reader::new(plain);
    let kind = r.u8().ok_or(SsError::Truncated)?;
    let want = if from_client {
        TYPE_CLIENT
    } else {
        TYPE_SERVER
    };
    if kind != want {
        return Err(SsError::BadType(kind));
    }
    check_time(r.u64().ok_or(SsError::Truncated)?, now)?;
    let client_session_id = if from_client {
        None
    } else {
        Some(r.u64().ok_or(SsError::Truncated)?)
    };
    let padding = usize::from(r.u16().ok_or(SsError::Truncated)?);
    r.take(padding).ok_or(SsError::BadPadding)?;
    let address = read_address(&mut r)?;
    Ok(Opened {
        address,
        payload: r.pos()..plain.len(),
        client_session_id,
    })
}
