//! One mKCP connection, sans-IO: segments in, packets out, the caller's millisecond clock.
//!
//! The close handshake is V2Ray's. mKCP has no half-close: closing ends both directions.
//! ```text
//! Active ──close()──▶ ReadyToClose ──own data all acked, or 15 s──▶ Terminating ──8 s──▶ Terminated
//!   │ peer's close flag                │ peer's close flag or terminate       ▲ peer's terminate
//!   ▼                                  ▼                                      │
//! PeerClosed ──close()──▶ Terminating   (as above)                            │
//!   │ terminate                                                               │
//!   ▼                                                                         │
//! PeerTerminating ──close() or 4 s──────────────────────────────────────────▶─┘ (→ Terminating,
//!                                                              or Terminated when closed by us)
//! ```
//! While ReadyToClose every segment carries the close flag; Terminating sends a terminate
//! command every second. An Active connection that hears nothing for 30 s closes itself.

use super::config::MkcpConfig;
use super::output::Output;
use super::packet::PacketWriter;
use super::recv::Receiver;
use super::rtt::RoundTrip;
use super::segment::{Cmd, OPT_CLOSE, Segment, segments};
use super::send::{AckFields, Sender};
use super::time::{before, due};

const PING_INTERVAL: u32 = 3_000;
const IDLE_CLOSE: u32 = 30_000;
const READY_TO_CLOSE_LIMIT: u32 = 15_000;
const TERMINATING_LIMIT: u32 = 8_000;
const PEER_TERMINATING_LIMIT: u32 = 4_000;
const TERMINATING_INTERVAL: u32 = 1_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Active,
    /// Closed here; sending what is queued.
    ReadyToClose,
    /// The peer closed; it reads no more.
    PeerClosed,
    /// Both sides are done; telling the peer.
    Terminating,
    /// The peer is terminating.
    PeerTerminating,
    Terminated,
}

/// Writing to a connection that is no longer active.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("mKCP connection closed")
    }
}

impl std::error::Error for Closed {}

pub struct MkcpSession {
    conv: u16,
    state: State,
    state_since: u32,
    last_incoming: u32,
    last_ping: u32,
    tti: u32,
    rtt: RoundTrip,
    send: Sender,
    recv: Receiver,
    out: Output,
    writer: PacketWriter,
    /// Set when something new is queued that the next update should send at once.
    urgent: bool,
    /// When the last terminate command went out in this Terminating state.
    last_terminate: Option<u32>,
}

impl std::fmt::Debug for MkcpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MkcpSession")
            .field("conv", &self.conv)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl MkcpSession {
    /// A connection with conversation `conv` whose packets `writer` frames.
    pub fn new(conv: u16, config: &MkcpConfig, writer: PacketWriter, now: u32) -> MkcpSession {
        let max_segments = config.max_packet().saturating_sub(writer.overhead());
        let mss = config.mss(writer.overhead());
        MkcpSession {
            conv,
            state: State::Active,
            state_since: now,
            last_incoming: now,
            last_ping: now,
            tti: config.tti_ms(),
            rtt: RoundTrip::new(config.tti_ms(), now),
            send: Sender::new(
                config.sending_in_flight(),
                config.sending_buffer(),
                config.congestion,
                mss,
            ),
            recv: Receiver::new(config.receiving_window()),
            out: Output::new(max_segments.max(mss + super::segment::DATA_OVERHEAD)),
            writer,
            urgent: false,
            last_terminate: None,
        }
    }

    pub fn conv(&self) -> u16 {
        self.conv
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Bytes of data one segment carries.
    pub fn mss(&self) -> usize {
        self.send.mss()
    }

    fn set_state(&mut self, state: State, now: u32) {
        self.state = state;
        self.state_since = now;
        self.last_terminate = None;
        match state {
            State::Active => {}
            State::ReadyToClose => self.recv.discard(),
            State::PeerClosed | State::PeerTerminating => self.send.discard(),
            State::Terminating | State::Terminated => {
                self.recv.discard();
                self.send.discard();
            }
        }
        self.urgent = true;
    }

    /// The segments of one received packet (already opened by its [`super::PacketFormat`]).
    /// Segments of other conversations end the packet, as in V2Ray.
    pub fn input(&mut self, plain: &[u8], now: u32) {
        if self.state == State::Terminated {
            return;
        }
        self.last_incoming = now;
        for seg in segments(plain) {
            if seg.conv() != self.conv {
                break;
            }
            if seg.opt() & OPT_CLOSE != 0 {
                self.on_peer_closed(now);
            }
            match seg {
                Segment::Data {
                    ts,
                    sn,
                    sending_next,
                    payload,
                    ..
                } => {
                    if matches!(self.state, State::Active | State::PeerClosed) {
                        self.recv.on_data(sn, ts, sending_next, payload);
                    }
                    self.urgent = true;
                }
                Segment::Ack {
                    receiving_window,
                    receiving_next,
                    ts,
                    numbers,
                    ..
                } => {
                    let ack = AckFields {
                        receiving_window,
                        receiving_next,
                        ts,
                        numbers,
                    };
                    self.send.on_ack(ack, now, &mut self.rtt);
                    self.urgent = true;
                }
                Segment::Cmd {
                    cmd,
                    sending_next,
                    receiving_next,
                    peer_rto,
                    ..
                } => {
                    if cmd == Cmd::Terminate {
                        match self.state {
                            State::Active | State::PeerClosed => {
                                self.set_state(State::PeerTerminating, now)
                            }
                            State::ReadyToClose => self.set_state(State::Terminating, now),
                            State::Terminating => self.set_state(State::Terminated, now),
                            State::PeerTerminating | State::Terminated => {}
                        }
                    }
                    self.send.clear_below(receiving_next);
                    self.recv.clear_acks(sending_next);
                    self.rtt.update_peer(peer_rto, now);
                }
            }
        }
    }

    fn on_peer_closed(&mut self, now: u32) {
        match self.state {
            State::ReadyToClose => self.set_state(State::Terminating, now),
            State::Active => self.set_state(State::PeerClosed, now),
            _ => {}
        }
    }

    /// Queues data; returns how much was taken (0: the window is full, wait).
    pub fn send(&mut self, data: &[u8]) -> Result<usize, Closed> {
        if self.state != State::Active {
            return Err(Closed);
        }
        let n = self.send.push(data);
        if n > 0 {
            self.urgent = true;
        }
        Ok(n)
    }

    /// There is room for [`MkcpSession::send`] (or it would fail: closed).
    pub fn writable(&self) -> bool {
        self.state != State::Active || self.send.has_room()
    }

    /// Copies received in-order data into `buf`.
    pub fn recv(&mut self, buf: &mut [u8]) -> usize {
        if self.read_closed_state() {
            return 0;
        }
        self.recv.read(buf)
    }

    fn read_closed_state(&self) -> bool {
        matches!(
            self.state,
            State::ReadyToClose | State::Terminating | State::Terminated
        )
    }

    /// Data is waiting to be read.
    pub fn readable(&self) -> bool {
        !self.read_closed_state() && self.recv.readable()
    }

    /// Nothing more will ever be read (the peer terminated, or we closed).
    pub fn read_finished(&self) -> bool {
        self.read_closed_state() || (self.state == State::PeerTerminating && !self.recv.readable())
    }

    /// Data not yet acknowledged by the peer.
    pub fn unacked(&self) -> usize {
        self.send.unacked()
    }

    /// Closes both directions; queued data is still delivered (V2Ray `Close`).
    pub fn close(&mut self, now: u32) {
        match self.state {
            State::Active => self.set_state(State::ReadyToClose, now),
            State::PeerClosed => self.set_state(State::Terminating, now),
            State::PeerTerminating => self.set_state(State::Terminated, now),
            _ => {}
        }
    }

    pub fn is_terminated(&self) -> bool {
        self.state == State::Terminated
    }

    fn opt(&self) -> u8 {
        if self.state == State::ReadyToClose {
            OPT_CLOSE
        } else {
            0
        }
    }

    fn ping(&mut self, cmd: Cmd, now: u32) {
        self.out.push(&Segment::Cmd {
            conv: self.conv,
            cmd,
            opt: self.opt(),
            sending_next: self.send.first_una,
            receiving_next: self.recv.next,
            peer_rto: self.rtt.timeout(),
        });
        self.last_ping = now;
    }

    /// Timers and output (V2Ray `flush`): call at [`MkcpSession::next_update_ms`] and after
    /// input or writes.
    pub fn update(&mut self, now: u32) {
        self.urgent = false;
        if self.state == State::Terminated {
            return;
        }
        if self.state == State::Active && due(now, self.last_incoming.wrapping_add(IDLE_CLOSE)) {
            self.close(now);
        }
        if self.state == State::ReadyToClose && self.send.is_empty() {
            self.set_state(State::Terminating, now);
        }
        let in_state = now.wrapping_sub(self.state_since);
        if self.state == State::Terminating {
            if self
                .last_terminate
                .is_none_or(|at| due(now, at.wrapping_add(TERMINATING_INTERVAL)))
            {
                self.ping(Cmd::Terminate, now);
                self.last_terminate = Some(now);
            }
            if in_state > TERMINATING_LIMIT {
                self.set_state(State::Terminated, now);
            }
            self.urgent = false;
            return;
        }
        if self.state == State::PeerTerminating && in_state > PEER_TERMINATING_LIMIT {
            self.set_state(State::Terminating, now);
            self.ping(Cmd::Terminate, now);
            self.last_terminate = Some(now);
            self.urgent = false;
            return;
        }
        if self.state == State::ReadyToClose && in_state > READY_TO_CLOSE_LIMIT {
            self.set_state(State::Terminating, now);
            self.ping(Cmd::Terminate, now);
            self.last_terminate = Some(now);
            self.urgent = false;
            return;
        }
        let rto = self.rtt.timeout();
        let (conv, opt) = (self.conv, self.opt());
        self.recv.flush(now, rto, conv, opt, &mut self.out);
        let una_updated = std::mem::take(&mut self.send.una_updated);
        let had_data = !self.send.is_empty();
        self.send.flush(now, rto, conv, opt, &mut self.out);
        if (una_updated && !had_data) || due(now, self.last_ping.wrapping_add(PING_INTERVAL)) {
            self.ping(Cmd::Ping, now);
        }
        self.urgent = false;
    }

    /// When [`MkcpSession::update`] should run next (it may run earlier).
    pub fn next_update_ms(&self, now: u32) -> u32 {
        if self.state == State::Terminated {
            return now.wrapping_add(60_000);
        }
        if self.urgent {
            return now;
        }
        let mut next = now.wrapping_add(60_000);
        let mut consider = |t: u32| {
            if before(t, next) {
                next = t;
            }
        };
        match self.state {
            State::Terminating => {
                match self.last_terminate {
                    None => consider(now),
                    Some(at) => consider(at.wrapping_add(TERMINATING_INTERVAL)),
                }
                consider(self.state_since.wrapping_add(TERMINATING_LIMIT + 1));
            }
            State::PeerTerminating => {
                consider(self.last_ping.wrapping_add(PING_INTERVAL));
                consider(self.state_since.wrapping_add(PEER_TERMINATING_LIMIT + 1));
                if let Some(at) = self.recv.next_deadline().flatten() {
                    consider(at);
                }
            }
            State::Terminated => {}
            State::Active | State::ReadyToClose | State::PeerClosed => {
                consider(self.last_ping.wrapping_add(PING_INTERVAL));
                if self.state == State::Active {
                    consider(self.last_incoming.wrapping_add(IDLE_CLOSE));
                }
                if self.state == State::ReadyToClose {
                    consider(self.state_since.wrapping_add(READY_TO_CLOSE_LIMIT + 1));
                }
                match self.recv.next_deadline() {
                    Some(None) => consider(now),
                    Some(Some(at)) => consider(at),
                    None => {}
                }
                let (resend, unsent) = self.send.next_deadline();
                if unsent {
                    // A closed peer window: probe once per tick, as V2Ray's ticker does.
                    consider(now.wrapping_add(self.tti));
                }
                if let Some(at) = resend {
                    consider(at);
                }
            }
        }
        if before(next, now) { now } else { next }
    }

    /// The next packet to send, framed into `out`; false when there is none.
    pub fn poll_datagram(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(plain) = self.out.pop() else {
            return false;
        };
        self.writer.write(&plain, out);
        self.out.recycle(plain);
        !out.is_empty() || self.poll_datagram(out)
    }

    /// Packets are waiting in [`MkcpSession::poll_datagram`].
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether pings are the only reason to wake (for idle accounting).
    pub fn has_acks_pending(&self) -> bool {
        self.recv.has_acks()
    }
}
