//! One KCP conversation as kcp-go's `UDPSession` builds it: ARQ below, then FEC, then the
//! nonce+CRC header and the packet cipher (spec/kcp.md §2). Datagrams in, datagrams out.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::arq::{InputError, Kcp, itimediff};
use crate::crypt::{CRYPT_HEADER_SIZE, Cipher, NonceSource};
use crate::fec::{FEC_HEADER_SIZE_PLUS2, FecDecoder, FecEncoder, TYPE_DATA, TYPE_PARITY, fec_flag};
use crate::segment::{OVERHEAD, SegmentHeader};
use crate::{KcpConfig, KcpError};

/// Largest datagram looked at; anything longer cannot come from a kcp-go peer (MTU ≤ 1500).
const MAX_DATAGRAM: usize = 65_535;
/// Outgoing datagrams kept for [`KcpSession::poll_datagram`] before new ones are dropped.
const OUT_QUEUE_LIMIT: usize = 8192;
/// Spare datagram buffers kept for reuse (about one FEC group).
const POOL_LIMIT: usize = 16;

/// Counters of one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KcpStats {
    /// Datagrams given to [`KcpSession::handle_datagram`].
    pub datagrams_in: u64,
    /// Datagrams taken with [`KcpSession::poll_datagram`].
    pub datagrams_out: u64,
    /// Segments sent again (fast, early or timeout retransmission).
    pub retransmits: u64,
    /// KCP packets rebuilt from parity shards and accepted.
    pub fec_recovered: u64,
    /// Incoming datagrams discarded: bad checksum, too short, wrong conv, malformed.
    pub dropped: u64,
    /// Outgoing datagrams discarded because nobody polled them (queue full).
    pub dropped_out: u64,
}

/// Wraps outgoing KCP packets into wire datagrams.
struct Emitter<'a> {
    nonce: &'a mut NonceSource,
    fec: Option<&'a mut FecEncoder>,
    out: &'a mut VecDeque<Vec<u8>>,
    pool: &'a mut Vec<Vec<u8>>,
    stats: &'a mut KcpStats,
}

impl Emitter<'_> {
    fn push(&mut self, fill: impl FnOnce(&mut Vec<u8>)) {
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        fill(&mut buf);
        // Encrypted later, all of a flush together: see [`KcpSession::flush`].
        if self.out.len() >= OUT_QUEUE_LIMIT || !Cipher::prepare(self.nonce, &mut buf) {
            self.stats.dropped_out += 1;
            if self.pool.len() < POOL_LIMIT {
                self.pool.push(buf);
            }
            return;
        }
        self.out.push_back(buf);
    }

    /// `pkt` = crypt header room, FEC header room (if FEC), KCP segments.
    fn emit(&mut self, pkt: &mut [u8]) {
        let mut parity_ready = false;
        if let Some(fec) = self.fec.as_deref_mut()
            && let Some(fec_part) = pkt.get_mut(CRYPT_HEADER_SIZE..)
        {
            parity_ready = fec.encode(fec_part);
        }
        self.push(|buf| buf.extend_from_slice(pkt));
        if parity_ready && let Some(fec) = self.fec.take() {
            for k in 0..fec.parity_shards() {
                self.push(|buf| {
                    buf.resize(CRYPT_HEADER_SIZE, 0);
                    fec.write_parity(k, buf);
                });
            }
            self.fec = Some(fec);
        }
    }
}

/// One KCP conversation with its FEC and crypt state.
pub struct KcpSession {
    kcp: Kcp,
    cipher: Arc<Cipher>,
    nonce: NonceSource,
    fec_enc: Option<FecEncoder>,
    fec_dec: Option<FecDecoder>,
    ack_nodelay: bool,
    out: VecDeque<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    rx_buf: Vec<u8>,
    stats: KcpStats,
    started: bool,
    next_flush: u32,
    flush_pending: bool,
}

fn fec_enabled(config: &KcpConfig) -> bool {
    config.data_shards > 0 && config.parity_shards > 0
}

impl KcpSession {
    pub fn new(conv: u32, config: &KcpConfig) -> Result<KcpSession, KcpError> {
        let cipher = Cipher::shared(config.crypt, &config.key)?;
        let (fec_enc, fec_dec, header) = if fec_enabled(config) {
            if config.data_shards + config.parity_shards > 255 {
                return Err(KcpError::InvalidConfig(
                    "datashard + parityshard must be ≤ 255",
                ));
            }
            let enc = FecEncoder::new(config.data_shards, config.parity_shards);
            let dec = FecDecoder::new(config.data_shards, config.parity_shards);
            let (Some(enc), Some(dec)) = (enc, dec) else {
                return Err(KcpError::InvalidConfig(
                    "no Reed-Solomon code for these shard counts",
                ));
            };
            (
                Some(enc),
                Some(dec),
                CRYPT_HEADER_SIZE + FEC_HEADER_SIZE_PLUS2,
            )
        } else {
            (None, None, CRYPT_HEADER_SIZE)
        };
        let mut kcp = Kcp::new(conv);
        if !kcp.set_mtu(config.mtu, header) {
            return Err(KcpError::InvalidConfig(
                "mtu must be within 50..=1500 and fit the headers",
            ));
        }
        kcp.set_nodelay(
            config.nodelay,
            config.interval_ms,
            config.resend,
            config.no_congestion,
        );
        kcp.set_wndsize(config.snd_wnd, config.rcv_wnd);
        kcp.set_stream(config.stream_mode);
        Ok(KcpSession {
            kcp,
            cipher,
            nonce: NonceSource::new(),
            fec_enc,
            fec_dec,
            ack_nodelay: config.ack_nodelay,
            out: VecDeque::new(),
            pool: Vec::new(),
            rx_buf: Vec::new(),
            stats: KcpStats::default(),
            started: false,
            next_flush: 0,
            flush_pending: false,
        })
    }

    fn flush(&mut self, now_ms: u32, ack_only: bool) -> u32 {
        let KcpSession {
            kcp,
            cipher,
            nonce,
            fec_enc,
            out,
            pool,
            stats,
            ..
        } = self;
        let mut emitter = Emitter {
            nonce,
            fec: fec_enc.as_mut(),
            out,
            pool,
            stats,
        };
        let before = emitter.out.len();
        let report = kcp.flush(now_ms, ack_only, &mut |pkt| emitter.emit(pkt));
        // Sealed as one batch: AES-CFB chains of several datagrams run interleaved.
        let fresh = before.min(out.len());
        cipher.encrypt_many(out.range_mut(fresh..));
        self.stats.retransmits += report.retransmits;
        report.next_in
    }

    /// One UDP datagram exactly as it came off the wire (crypt header, FEC header, segments).
    /// Bad/forged/short datagrams are dropped and counted, never an error that kills the session.
    pub fn handle_datagram(&mut self, datagram: &[u8], now_ms: u32) {
        self.stats.datagrams_in += 1;
        if datagram.len() > MAX_DATAGRAM {
            self.stats.dropped += 1;
            return;
        }
        let mut rx = std::mem::take(&mut self.rx_buf);
        rx.clear();
        rx.extend_from_slice(datagram);
        let accepted = match self.cipher.open(&mut rx) {
            Some(body) => self.input(body, now_ms),
            None => false,
        };
        self.rx_buf = rx;
        if !accepted {
            self.stats.dropped += 1;
        }
    }

    /// Decrypted datagram body → FEC → KCP. true if KCP took at least part of it.
    fn input(&mut self, body: &[u8], now_ms: u32) -> bool {
        let mut slides = false;
        let mut accepted = false;
        let mut note = |r: Result<bool, InputError>, accepted: &mut bool| {
            if let Ok(s) = r {
                slides |= s;
                *accepted = true;
            }
        };
        match fec_flag(body) {
            Some(flag @ (TYPE_DATA | TYPE_PARITY)) => {
                if body.len() < FEC_HEADER_SIZE_PLUS2 {
                    return false;
                }
                // A peer may use FEC while we do not: kcp-go then decodes with (1, 1).
                if self.fec_dec.is_none() {
                    self.fec_dec = FecDecoder::new(1, 1);
                }
                let Some(dec) = self.fec_dec.as_mut() else {
                    return false;
                };
                dec.decode(body, now_ms);
                if flag == TYPE_DATA {
                    let kcp_bytes = body.get(FEC_HEADER_SIZE_PLUS2..).unwrap_or_default();
                    note(self.kcp.input(kcp_bytes, true, now_ms), &mut accepted);
                } else {
                    accepted = true;
                }
                for r in &dec.recovered {
                    let Some(sz) = r
                        .get(..2)
                        .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
                    else {
                        continue;
                    };
                    if sz < 2 || sz > r.len() {
                        continue;
                    }
                    let res = self.kcp.input(&r[2..sz], false, now_ms);
                    if res.is_ok() {
                        self.stats.fec_recovered += 1;
                    }
                    note(res, &mut accepted);
                }
                dec.recycle_recovered();
            }
            _ => {
                if body.len() < OVERHEAD {
                    return false;
                }
                note(self.kcp.input(body, true, now_ms), &mut accepted);
            }
        }
        if slides {
            self.flush(now_ms, false);
        } else if (self.ack_nodelay && self.kcp.has_acks()) || self.kcp.acks_overflowing() {
            self.flush(now_ms, true);
        }
        accepted
    }

    /// Sends the acks gathered since the last flush, if any. A driver calls this once per burst
    /// of datagrams it handled: kcp-go holds acks until its next interval tick (up to 30 ms in
    /// mode fast), which on a clean link stretches the round trip the sender's window sees and
    /// caps throughput at window / (RTT + interval). One packed ack datagram per burst keeps
    /// the round trip honest at a fraction of the cost of `ack_nodelay` (one per datagram).
    /// Only the timing changes; the segments are the ones kcp-go would send.
    pub fn flush_acks(&mut self, now_ms: u32) {
        if self.kcp.has_acks() {
            self.flush(now_ms, true);
        }
    }

    /// Queue application bytes (stream mode); returns how many were taken, 0 when the send
    /// queue is full (about `min(snd_wnd, remote window)` segments waiting, like kcp-go).
    pub fn send(&mut self, data: &[u8]) -> usize {
        let take = data.len().min(self.kcp.send_capacity());
        let n = self.kcp.send(&data[..take]);
        if n > 0 {
            // kcptun turns write delay off: every write is flushed at once (at the next update).
            self.flush_pending = true;
        }
        n
    }

    /// Deliver received in-order bytes; 0 when nothing is ready.
    pub fn recv(&mut self, buf: &mut [u8]) -> usize {
        self.kcp.recv(buf)
    }

    /// Whether [`KcpSession::recv`] has bytes to return.
    pub fn readable(&self) -> bool {
        self.kcp.readable()
    }

    /// Next datagram to put on the wire (already FEC-encoded and encrypted), appended into `out`
    /// after clearing it. false when none.
    pub fn poll_datagram(&mut self, out: &mut Vec<u8>) -> bool {
        out.clear();
        let mut buf = loop {
            let Some(buf) = self.out.pop_front() else {
                return false;
            };
            if !buf.is_empty() {
                break buf;
            }
            // The cipher refused it (see Cipher::encrypt_many); never expected.
            self.stats.dropped_out += 1;
        };
        // Hand over the buffer itself and keep the caller's for reuse: no copy.
        std::mem::swap(out, &mut buf);
        if self.pool.len() < POOL_LIMIT {
            self.pool.push(buf);
        }
        if self.out.is_empty() && self.out.capacity() > POOL_LIMIT {
            self.out.shrink_to(POOL_LIMIT);
        }
        self.stats.datagrams_out += 1;
        true
    }

    /// Drive timers (resend, acks, window probes). Call at the time next_update_ms says, and
    /// after handle_datagram/send.
    pub fn update(&mut self, now_ms: u32) {
        if !self.started {
            self.started = true;
            self.next_flush = now_ms;
        }
        let due = itimediff(now_ms, self.next_flush) >= 0;
        if due || self.flush_pending {
            self.flush_pending = false;
            let next_in = self.flush(now_ms, false);
            if due {
                self.next_flush = now_ms.wrapping_add(next_in);
                self.shrink_if_idle();
            }
        }
    }

    /// After a burst, hand memory back once nothing is queued or in flight.
    fn shrink_if_idle(&mut self) {
        if !self.kcp.shrink_if_idle() || !self.out.is_empty() {
            return;
        }
        self.pool.truncate(2);
        if let Some(enc) = self.fec_enc.as_mut() {
            enc.shrink_if_between_groups();
        }
        if let Some(dec) = self.fec_dec.as_mut() {
            dec.shrink_idle();
        }
    }

    /// Absolute ms at which update() must run next.
    pub fn next_update_ms(&self, now_ms: u32) -> u32 {
        if !self.started || self.flush_pending || itimediff(self.next_flush, now_ms) <= 0 {
            now_ms
        } else {
            self.next_flush
        }
    }

    /// kcp dead link (a segment was sent 20 times without an ack).
    pub fn is_dead(&self) -> bool {
        self.kcp.is_dead()
    }

    /// Segments queued or in flight.
    pub fn wait_snd(&self) -> usize {
        self.kcp.wait_snd()
    }

    pub fn stats(&self) -> KcpStats {
        self.stats
    }
}

/// For a server demultiplexing a fresh peer: decrypt+FEC-parse a datagram and return the conv
/// of its first KCP segment. Parity shards give `None` (kcp-go wants a data packet first).
pub fn peek_conv(config: &KcpConfig, datagram: &[u8]) -> Option<u32> {
    if datagram.len() > MAX_DATAGRAM {
        return None;
    }
    let cipher = Cipher::shared(config.crypt, &config.key).ok()?;
    let mut buf = datagram.to_vec();
    let body = cipher.open(&mut buf)?;
    let kcp_bytes = match fec_flag(body) {
        Some(TYPE_DATA) => body.get(FEC_HEADER_SIZE_PLUS2..)?,
        Some(TYPE_PARITY) => return None,
        _ => body,
    };
    SegmentHeader::decode(kcp_bytes).map(|h| h.conv)
}
