//! Giving our encrypted handshake records the target's lengths, as REALITY does.
//!
//! A passive observer of an authenticated client's connection sees the server's records
//! after the ServerHello. The target (which got the same ClientHello) answered with its own:
//! typically EncryptedExtensions, Certificate, CertificateVerify and Finished each in a record
//! of its own, or all in one. rustls sends its flight in one record of its own length.
//! REALITY puts each message in its own record padded to the target's record's length (or
//! all in one, padded to the target's single record); so does this module.
//!
//! rustls cannot pad, so [`Reframe`] sits between rustls and the socket: it learns the
//! server handshake traffic secret through rustls' key log (of this connection's config
//! only), opens the records rustls writes under it, and writes the same handshake messages
//! again in the target's framing, sealed with the same keys and sequence numbers from 0. The
//! handshake transcript covers messages, not records, so the client sees the same handshake.
//! Anything unexpected and rustls' records go out as they were. After the flight it passes
//! every byte straight through (and exposes the socket again, for the splice).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use rustls::KeyLog;
use skiff_core::{BoxStream, ProxyStream};
use skiff_crypto::{AeadKey, AeadKind, TAG_LEN};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::server_parse::{TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384};

const RECORD_HEADER_LEN: usize = 5;
const RECORD_CCS: u8 = 20;
const RECORD_HANDSHAKE: u8 = 22;
const RECORD_APPLICATION_DATA: u8 = 23;
/// REALITY's rule: a first encrypted record longer than this holds the whole flight.
const COMBINED_OVER: usize = 512;
/// The largest TLSInnerPlaintext (RFC 8446 §5.2).
const MAX_INNER_PLAINTEXT: usize = 16384 + 1;

/// The target's records after its ServerHello, whole lengths (header included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TargetRecords {
    /// A ChangeCipherSpec came first (REALITY pads only then).
    pub ccs: bool,
    /// EncryptedExtensions, Certificate, CertificateVerify, Finished; 0 = not seen.
    pub lengths: [usize; 4],
    /// The first encrypted record was over 512 bytes: the whole flight in one record.
    pub combined: bool,
}

/// Reading the target's flight after its ServerHello.
#[derive(Debug, PartialEq, Eq)]
pub enum FlightRead {
    Incomplete(TargetRecords),
    Done(TargetRecords),
}

/// Reads `input` (what the target sent after its ServerHello record) as REALITY does.
pub fn read_target_flight(input: &[u8]) -> FlightRead {
    let mut seen = TargetRecords::default();
    let Some(ccs) = input.get(..RECORD_HEADER_LEN + 1) else {
        return FlightRead::Incomplete(seen);
    };
    if ccs[..3] != [RECORD_CCS, 3, 3] || ccs[3..] != [0, 1, 1] {
        return FlightRead::Done(seen);
    }
    seen.ccs = true;
    let mut at = RECORD_HEADER_LEN + 1;
    for i in 0..4 {
        let Some(header) = input.get(at..at + RECORD_HEADER_LEN) else {
            return FlightRead::Incomplete(seen);
        };
        if header[0] != RECORD_APPLICATION_DATA || header[1..3] != [3, 3] {
            return FlightRead::Done(seen);
        }
        let whole = RECORD_HEADER_LEN + usize::from(u16::from_be_bytes([header[3], header[4]]));
        seen.lengths[i] = whole;
        if i == 0 && whole > COMBINED_OVER {
            seen.combined = true;
            return FlightRead::Done(seen);
        }
        at += whole;
    }
    FlightRead::Done(seen)
}

/// Catches this connection's server handshake traffic secret from rustls.
#[derive(Debug, Default)]
pub(crate) struct SecretCapture(Mutex<Option<Vec<u8>>>);

const SERVER_HANDSHAKE_SECRET: &str = "SERVER_HANDSHAKE_TRAFFIC_SECRET";

impl KeyLog for SecretCapture {
    fn log(&self, label: &str, _client_random: &[u8], secret: &[u8]) {
        if label == SERVER_HANDSHAKE_SECRET {
            *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(secret.to_vec());
        }
    }
    fn will_log(&self, label: &str) -> bool {
        label == SERVER_HANDSHAKE_SECRET
    }
}

/// The record keys for one traffic secret.
struct RecordKeys {
    key: AeadKey,
    iv: [u8; 12],
}

impl RecordKeys {
    fn new(suite: u16, secret: &[u8]) -> Option<RecordKeys> {
        let (kind, key_len) = match suite {
            TLS13_AES_128_GCM_SHA256 => (AeadKind::Aes128Gcm, 16),
            TLS13_AES_256_GCM_SHA384 => (AeadKind::Aes256Gcm, 32),
            _ => (AeadKind::ChaCha20Poly1305, 32),
        };
        let expand = if suite == TLS13_AES_256_GCM_SHA384 {
            skiff_crypto::quic::hkdf_sha384_expand_label
        } else {
            skiff_crypto::quic::hkdf_sha256_expand_label
        };
        let mut key = [0u8; 32];
        let mut iv = [0u8; 12];
        expand(secret, b"key", &mut key[..key_len]);
        expand(secret, b"iv", &mut iv);
        Some(RecordKeys {
            key: AeadKey::new(kind, &key[..key_len]).ok()?,
            iv,
        })
    }

    fn nonce(&self, seq: u64) -> [u8; 12] {
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
            *n ^= s;
        }
        nonce
    }

    /// The inner plaintext's content (padding and type removed) if it is a handshake one.
    fn open_handshake(&self, seq: u64, record: &[u8]) -> Option<Vec<u8>> {
        let (header, body) = record.split_at(RECORD_HEADER_LEN);
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(&self.nonce(seq), header, &mut body)
            .ok()?;
        let end = plain.iter().rposition(|&b| b != 0)?;
        (plain[end] == RECORD_HANDSHAKE).then(|| plain[..end].to_vec())
    }

    /// One record carrying `content` as handshake data, padded so the whole record is
    /// `whole` bytes when that is possible.
    fn seal_handshake(&self, seq: u64, content: &[u8], whole: usize, out: &mut Vec<u8>) {
        let bare = content.len() + 1;
        let inner = whole
            .checked_sub(RECORD_HEADER_LEN + TAG_LEN)
            .filter(|n| *n >= bare && *n <= MAX_INNER_PLAINTEXT)
            .unwrap_or(bare);
        let len = inner + TAG_LEN;
        let header = [RECORD_APPLICATION_DATA, 3, 3, (len >> 8) as u8, len as u8];
        let mut body = vec![0u8; len];
        body[..content.len()].copy_from_slice(content);
        body[content.len()] = RECORD_HANDSHAKE;
        self.key.seal_in_place(&self.nonce(seq), &header, &mut body);
        out.extend_from_slice(&header);
        out.extend_from_slice(&body);
    }
}

/// Where [`Reframe`] is: inside the server's first flight, or past it.
#[derive(Debug, PartialEq, Eq)]
enum Stage {
    Flight,
    Through,
}

/// The stream under rustls for an authenticated REALITY client (see the module doc).
pub(crate) struct Reframe {
    inner: BoxStream,
    stage: Stage,
    suite: u16,
    target: TargetRecords,
    capture: Arc<SecretCapture>,
    /// Written by rustls, not yet a whole record.
    incoming: Vec<u8>,
    /// rustls' encrypted records of the flight, as written (sent if re-framing fails).
    originals: Vec<u8>,
    /// The flight's handshake messages, opened.
    messages: Vec<u8>,
    opened: u64,
    /// Bytes ready for the socket, and how many of them went.
    out: Vec<u8>,
    sent: usize,
}

impl Reframe {
    pub(crate) fn new(
        inner: BoxStream,
        suite: u16,
        target: TargetRecords,
        capture: Arc<SecretCapture>,
    ) -> Reframe {
        Reframe {
            inner,
            stage: if target.ccs {
                Stage::Flight
            } else {
                Stage::Through
            },
            suite,
            target,
            capture,
            incoming: Vec::new(),
            originals: Vec::new(),
            messages: Vec::new(),
            opened: 0,
            out: Vec::new(),
            sent: 0,
        }
    }

    /// Takes bytes rustls wrote during the flight.
    fn take(&mut self, data: &[u8]) {
        if self.stage == Stage::Through {
            self.out.extend_from_slice(data);
            return;
        }
        self.incoming.extend_from_slice(data);
        let mut at = 0;
        while self.stage == Stage::Flight {
            let Some(header) = self.incoming.get(at..at + RECORD_HEADER_LEN) else {
                break;
            };
            let whole = RECORD_HEADER_LEN + usize::from(u16::from_be_bytes([header[3], header[4]]));
            let Some(record) = self.incoming.get(at..at + whole) else {
                break;
            };
            let record = record.to_vec();
            at += whole;
            if record[0] != RECORD_APPLICATION_DATA {
                // ServerHello, ChangeCipherSpec: as they are. An alert ends the flight.
                if record[0] != RECORD_HANDSHAKE && record[0] != RECORD_CCS {
                    self.give_up();
                }
                self.out.extend_from_slice(&record);
                continue;
            }
            self.originals.extend_from_slice(&record);
            let opened = self
                .keys()
                .and_then(|keys| keys.open_handshake(self.opened, &record));
            let Some(content) = opened else {
                self.give_up();
                break;
            };
            self.opened += 1;
            self.messages.extend_from_slice(&content);
            if let Some(framed) = self.flight_complete() {
                self.out.extend_from_slice(&framed);
                self.originals.clear();
                self.stage = Stage::Through;
            }
        }
        let rest = self.incoming.split_off(at.min(self.incoming.len()));
        self.incoming = rest;
        if self.stage == Stage::Through {
            let rest = std::mem::take(&mut self.incoming);
            self.out.extend_from_slice(&rest);
            self.forget_secret();
        }
    }

    fn keys(&self) -> Option<RecordKeys> {
        let secret = self.capture.0.lock().ok()?.clone()?;
        RecordKeys::new(self.suite, &secret)
    }

    /// rustls' records go out unchanged from here on.
    fn give_up(&mut self) {
        let originals = std::mem::take(&mut self.originals);
        self.out.extend_from_slice(&originals);
        self.stage = Stage::Through;
        self.forget_secret();
    }

    /// The handshake secret is not kept for the connection's life once the flight is out.
    fn forget_secret(&mut self) {
        if let Ok(mut secret) = self.capture.0.lock()
            && let Some(bytes) = secret.as_mut()
        {
            bytes.fill(0);
            *secret = None;
        }
        self.messages.clear();
    }

    /// Once the opened messages end with a whole Finished: the flight in the target's
    /// framing. None while incomplete, or (after giving up) when it cannot be re-framed.
    fn flight_complete(&mut self) -> Option<Vec<u8>> {
        let mut list = Vec::new();
        let mut at = 0;
        while let Some(head) = self.messages.get(at..at + 4) {
            let len = 4 + (u32::from_be_bytes([0, head[1], head[2], head[3]]) as usize);
            let message = self.messages.get(at..at + len)?;
            list.push(message);
            at += len;
        }
        if at != self.messages.len() || list.last()?.first() != Some(&20) {
            return None;
        }
        let keys = self.keys()?;
        let mut framed = Vec::new();
        if self.target.combined {
            keys.seal_handshake(0, &self.messages, self.target.lengths[0], &mut framed);
            return Some(framed);
        }
        for (seq, message) in list.iter().enumerate() {
            let index = match message[0] {
                8 => 0,
                11 => 1,
                15 => 2,
                20 => 3,
                _ => {
                    self.give_up();
                    return None;
                }
            };
            keys.seal_handshake(seq as u64, message, self.target.lengths[index], &mut framed);
        }
        Some(framed)
    }

    /// Writes what is waiting; Ready once all of it went.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = std::task::ready!(
                Pin::new(&mut self.inner).poll_write(cx, &self.out[self.sent..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    fn transparent(&self) -> bool {
        self.stage == Stage::Through && self.out.is_empty()
    }
}

impl AsyncRead for Reframe {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Reframe {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_drain(cx))?;
        if self.transparent() {
            return Pin::new(&mut self.inner).poll_write(cx, buf);
        }
        self.take(buf);
        // Start sending; what cannot go now goes on the next write or flush.
        if let Poll::Ready(Err(e)) = self.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // rustls flushes once its flight is written: a flight still held here could not be
        // re-framed (no Finished seen), so it goes out as rustls wrote it.
        if self.stage == Stage::Flight && !(self.originals.is_empty() && self.incoming.is_empty()) {
            self.give_up();
            let rest = std::mem::take(&mut self.incoming);
            self.out.extend_from_slice(&rest);
        }
        std::task::ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl ProxyStream for Reframe {
    fn raw_tcp(&self) -> Option<&TcpStream> {
        self.transparent().then(|| self.inner.raw_tcp()).flatten()
    }
    fn take_read_residue(&mut self) -> Option<Bytes> {
        self.inner.take_read_residue()
    }
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.poll_read_ready(cx)
    }
    fn raw_tcp_read(&self) -> Option<&TcpStream> {
        self.inner.raw_tcp_read()
    }
    fn raw_tcp_write(&self) -> Option<&TcpStream> {
        self.transparent()
            .then(|| self.inner.raw_tcp_write())
            .flatten()
    }
    fn reset_on_close(&mut self) {
        self.inner.reset_on_close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any bytes: an answer, never a panic, and lengths only from headers it read.
        #[test]
        fn target_flight_reading_never_panics(input in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let (FlightRead::Done(seen) | FlightRead::Incomplete(seen)) = read_target_flight(&input);
            for len in seen.lengths {
                prop_assert!(len == 0 || (RECORD_HEADER_LEN..=RECORD_HEADER_LEN + 65535).contains(&len));
            }
        }
    }

    fn record(kind: u8, len: usize) -> Vec<u8> {
        let mut r = vec![kind, 3, 3, (len >> 8) as u8, len as u8];
        r.resize(5 + len, 0);
        r
    }

    #[test]
    fn target_flights_separate_or_combined() {
        let mut flight = record(RECORD_CCS, 1);
        flight[5] = 1;
        for len in [22, 431, 92, 48] {
            flight.extend_from_slice(&record(RECORD_APPLICATION_DATA, len));
        }
        let expect = TargetRecords {
            ccs: true,
            lengths: [27, 436, 97, 53],
            combined: false,
        };
        assert_eq!(read_target_flight(&flight), FlightRead::Done(expect));
        assert!(matches!(
            read_target_flight(&flight[..flight.len() - 60]),
            FlightRead::Incomplete(_)
        ));
        let mut combined = flight[..6].to_vec();
        combined.extend_from_slice(&record(RECORD_APPLICATION_DATA, 3000)[..100]);
        let FlightRead::Done(seen) = read_target_flight(&combined) else {
            panic!()
        };
        assert!(seen.combined && seen.lengths[0] == 3005);
        assert_eq!(
            read_target_flight(&record(RECORD_APPLICATION_DATA, 10)),
            FlightRead::Done(TargetRecords::default())
        );
    }

    #[test]
    fn sealed_records_have_the_asked_length_and_open_again() {
        for suite in [0x1301, 0x1302, 0x1303] {
            let keys = RecordKeys::new(suite, &[5; 48]).unwrap();
            let message = [8, 0, 0, 2, 0, 0];
            let mut out = Vec::new();
            keys.seal_handshake(3, &message, 100, &mut out);
            assert_eq!(out.len(), 100);
            assert_eq!(keys.open_handshake(3, &out).unwrap(), message);
            // Too short a target record: no padding, never truncation.
            let mut out = Vec::new();
            keys.seal_handshake(0, &message, 10, &mut out);
            assert_eq!(out.len(), 5 + message.len() + 1 + TAG_LEN);
            assert_eq!(keys.open_handshake(0, &out).unwrap(), message);
        }
    }
}
