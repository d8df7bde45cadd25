//! One smux session as a sans-IO state machine (spec/kcp.md §8): feed it the bytes the peer
//! sent ([`Session::input`]), take the bytes to send ([`Session::take_output`]), and drive its
//! streams with [`Session::open`], [`Session::accept`], [`Session::read`], [`Session::write`],
//! [`Session::shutdown`] and [`Session::close`]. Time comes in as milliseconds.
//!
//! Bounds, as smux has them: all streams' unread data together may exceed `smuxbuf`
//! (`max_receive_buffer`) by at most one input batch — past it [`Session::wants_input`] turns
//! false and the driver stops reading, which backs the peer up through KCP's window. Encoded
//! output waiting for the transport is capped at [`OUTPUT_LIMIT`] (writers wait beyond it), and
//! v2 senders never have more than the peer's window outstanding per stream.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};

use super::frame::{Cmd, HEADER_LEN, Header, SmuxError, UPD_LEN, put_frame, put_update};

/// smux's `initialPeerWindow`: what a v2 sender assumes before the first `UPD`.
pub const INITIAL_PEER_WINDOW: u32 = 262_144;
/// Encoded bytes held for the transport before stream writes wait.
pub const OUTPUT_LIMIT: usize = 128 * 1024;
/// A drained stream buffer bigger than this is given back, so idle streams stay small.
const KEEP_BUFFER: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmuxConfig {
    /// 1 or 2 (`--smuxver`); both ends must agree.
    pub version: u8,
    /// Largest PSH payload we send (smux default 32768; any u16 length is accepted).
    pub max_frame_size: usize,
    /// `--smuxbuf`: unread bytes of all streams before reading pauses.
    pub max_receive_buffer: usize,
    /// `--streambuf`: the v2 per-stream window we announce.
    pub max_stream_buffer: usize,
    /// `--keepalive` in ms: a NOP this often.
    pub keepalive_interval_ms: u32,
    /// Close when nothing arrived for this long (smux default 30 s).
    pub keepalive_timeout_ms: u32,
    /// Keep writing after the peer's FIN. Off as in kcptun 20210922's smux, where a FIN ends
    /// both directions ("passive closing"), which also stops a server from pushing the rest
    /// of a download its client hung up on. On only where both ends are Skiff and the
    /// stream's user may half-close (the `kcptun` network under another protocol).
    pub half_close: bool,
}

impl SmuxConfig {
    /// kcptun 20210922's settings for smux `version` (spec §7 defaults).
    pub fn kcptun(version: u8) -> SmuxConfig {
        SmuxConfig {
            version,
            max_frame_size: 32_768,
            max_receive_buffer: 4_194_304,
            max_stream_buffer: 2_097_152,
            keepalive_interval_ms: 10_000,
            keepalive_timeout_ms: 30_000,
            half_close: false,
        }
    }
}

/// What a stream read found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamRead {
    Data(usize),
    /// Nothing buffered yet.
    Pending,
    /// The peer sent FIN and everything before it was read.
    Eof,
    /// The session ended before the peer closed this stream.
    Reset,
}

/// What a stream write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamWrite {
    Written(usize),
    /// Output is full or (v2) the peer's window is used up: wait for progress.
    Pending,
    /// The stream was shut down locally, or the session ended.
    Closed,
}

#[derive(Default)]
struct Stream {
    recv: VecDeque<u8>,
    fin_received: bool,
    fin_sent: bool,
    /// v2 receiver: bytes read in total (wrapping) and since the last UPD.
    num_read: u32,
    incr: u32,
    /// v2 sender.
    num_written: u32,
    peer_consumed: u32,
    peer_window: u32,
}

pub struct Session {
    config: SmuxConfig,
    next_sid: u32,
    streams: HashMap<u32, Stream>,
    accepted: VecDeque<u32>,
    /// An incomplete frame from the peer.
    input: Vec<u8>,
    /// Encoded frames for the transport; `output[out_pos..]` is still to be taken.
    output: Vec<u8>,
    out_pos: usize,
    /// smux's token bucket: receive budget left before reading pauses.
    bucket: i64,
    last_recv_ms: u32,
    next_keepalive_ms: u32,
    error: Option<SmuxError>,
}

impl Session {
    /// A session for the opening side (`client`: stream ids 3, 5, …) or the accepting side.
    pub fn new(config: SmuxConfig, client: bool, now_ms: u32) -> Session {
        Session {
            config,
            next_sid: if client { 1 } else { 0 },
            streams: HashMap::new(),
            accepted: VecDeque::new(),
            input: Vec::new(),
            output: Vec::new(),
            out_pos: 0,
            bucket: config.max_receive_buffer as i64,
            last_recv_ms: now_ms,
            next_keepalive_ms: now_ms.wrapping_add(config.keepalive_interval_ms),
            error: None,
        }
    }

    pub fn config(&self) -> &SmuxConfig {
        &self.config
    }

    /// Why the session ended, if it did.
    pub fn error(&self) -> Option<&SmuxError> {
        self.error.as_ref()
    }

    pub fn is_closed(&self) -> bool {
        self.error.is_some()
    }

    /// Ends the session (e.g. the transport died): every stream read/write fails from now on.
    pub fn fail(&mut self, error: SmuxError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// True while the receive budget is left: only then should the driver feed more input.
    pub fn wants_input(&self) -> bool {
        self.error.is_none() && self.bucket > 0
    }

    /// Opens a stream: queues its SYN and returns its id.
    pub fn open(&mut self) -> Result<u32, SmuxError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let sid = self.next_sid.wrapping_add(2);
        if sid < 2 {
            return Err(SmuxError::StreamIdsExhausted);
        }
        self.next_sid = sid;
        self.streams.insert(sid, Stream::new());
        self.push(Cmd::Syn, sid, &[]);
        Ok(sid)
    }

    /// The next stream the peer opened.
    pub fn accept(&mut self) -> Option<u32> {
        self.accepted.pop_front()
    }

    /// Feeds bytes the peer sent (after snappy, if any). Frames may be split anywhere.
    pub fn input(&mut self, data: &[u8], now_ms: u32) -> Result<(), SmuxError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if !data.is_empty() {
            self.last_recv_ms = now_ms;
        }
        let result = if self.input.is_empty() {
            self.frames(data)
                .map(|used| self.input.extend_from_slice(&data[used..]))
        } else {
            self.input.extend_from_slice(data);
            let mut buffered = std::mem::take(&mut self.input);
            let result = self.frames(&buffered).map(|used| {
                buffered.drain(..used);
            });
            self.input = buffered;
            result
        };
        if let Err(e) = result {
            self.fail(e.clone());
            return Err(e);
        }
        if self.input.is_empty() && self.input.capacity() > KEEP_BUFFER * 2 {
            self.input = Vec::new();
        }
        Ok(())
    }

    /// Handles every complete frame at the front of `buf`; returns the bytes used.
    fn frames(&mut self, buf: &[u8]) -> Result<usize, SmuxError> {
        let mut at = 0;
        while let Some(head) = buf.get(at..at + HEADER_LEN) {
            let mut raw = [0u8; HEADER_LEN];
            raw.copy_from_slice(head);
            let header = Header::decode(&raw, self.config.version)?;
            let len = usize::from(header.length);
            let Some(body) = buf.get(at + HEADER_LEN..at + HEADER_LEN + len) else {
                break;
            };
            at += HEADER_LEN + len;
            self.frame(header, body)?;
        }
        Ok(at)
    }

    fn frame(&mut self, header: Header, body: &[u8]) -> Result<(), SmuxError> {
        let sid = header.sid;
        match header.cmd {
            Cmd::Nop => {}
            Cmd::Syn => {
                if let std::collections::hash_map::Entry::Vacant(slot) = self.streams.entry(sid) {
                    slot.insert(Stream::new());
                    self.accepted.push_back(sid);
                }
            }
            Cmd::Fin => {
                if let Some(s) = self.streams.get_mut(&sid) {
                    s.fin_received = true;
                }
            }
            Cmd::Psh => {
                // Data for a stream we closed (or never had) is dropped, as smux does.
                if let Some(s) = self.streams.get_mut(&sid)
                    && !body.is_empty()
                {
                    let _ = s.recv.write_all(body);
                    self.bucket -= body.len() as i64;
                }
            }
            Cmd::Upd => {
                if body.len() != UPD_LEN {
                    return Err(SmuxError::UpdateLength(header.length));
                }
                if let Some(s) = self.streams.get_mut(&sid) {
                    s.peer_consumed = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
                    s.peer_window = u32::from_le_bytes([body[4], body[5], body[6], body[7]]);
                }
            }
        }
        Ok(())
    }

    /// Reads buffered data of stream `sid` into `buf`.
    pub fn read(&mut self, sid: u32, buf: &mut [u8]) -> StreamRead {
        let version = self.config.version;
        let half_window = (self.config.max_stream_buffer / 2) as u32;
        let window = u32::try_from(self.config.max_stream_buffer).unwrap_or(u32::MAX);
        let dead = self.error.is_some();
        let Some(s) = self.streams.get_mut(&sid) else {
            return StreamRead::Reset;
        };
        if s.recv.is_empty() {
            if s.recv.capacity() > KEEP_BUFFER {
                s.recv = VecDeque::new();
            }
            return if s.fin_received {
                StreamRead::Eof
            } else if dead {
                StreamRead::Reset
            } else {
                StreamRead::Pending
            };
        }
        if buf.is_empty() {
            return StreamRead::Data(0);
        }
        let n = s.recv.read(buf).unwrap_or(0);
        self.bucket += n as i64;
        if version >= 2 && !dead {
            s.num_read = s.num_read.wrapping_add(n as u32);
            s.incr = s.incr.wrapping_add(n as u32);
            // smux sends an update after the first read and after every half window.
            if s.incr >= half_window || s.num_read == n as u32 {
                s.incr = 0;
                let consumed = s.num_read;
                put_update(&mut self.output, version, sid, consumed, window);
            }
        }
        StreamRead::Data(n)
    }

    /// Queues PSH frames carrying a prefix of `data` for stream `sid`.
    pub fn write(&mut self, sid: u32, data: &[u8]) -> StreamWrite {
        if self.error.is_some() {
            return StreamWrite::Closed;
        }
        let room = OUTPUT_LIMIT.saturating_sub(self.pending_output());
        let version = self.config.version;
        let frame_max = self.config.max_frame_size.clamp(1, usize::from(u16::MAX));
        let half_close = self.config.half_close;
        let Some(s) = self.streams.get_mut(&sid) else {
            return StreamWrite::Closed;
        };
        // Without half-close a peer's FIN ends our writing too ("passive closing" in
        // xtaci/smux, which kcptun 20210922 uses), so a client that hung up stops the server
        // from pushing the rest of a download into a stream nobody reads.
        if s.fin_sent || (s.fin_received && !half_close) {
            return StreamWrite::Closed;
        }
        if data.is_empty() {
            return StreamWrite::Written(0);
        }
        let mut allowed = data.len();
        if version >= 2 {
            let inflight = s.num_written.wrapping_sub(s.peer_consumed) as i32;
            let window = (s.peer_window as i32).wrapping_sub(inflight);
            allowed = allowed.min(usize::try_from(window).unwrap_or(0));
        }
        // Room for at least one header plus a byte; frames are cut to fit what is left.
        let mut budget = room;
        let mut taken = 0;
        while taken < allowed && budget > HEADER_LEN {
            let n = (allowed - taken).min(frame_max).min(budget - HEADER_LEN);
            put_frame(
                &mut self.output,
                version,
                Cmd::Psh,
                sid,
                &data[taken..taken + n],
            );
            taken += n;
            budget -= HEADER_LEN + n;
        }
        if taken == 0 {
            return StreamWrite::Pending;
        }
        s.num_written = s.num_written.wrapping_add(taken as u32);
        StreamWrite::Written(taken)
    }

    /// Queues FIN (once): we send no more. Reading goes on until the peer's FIN, but the peer
    /// (smux) stops writing when it sees ours, so only data already on the way arrives.
    pub fn shutdown(&mut self, sid: u32) {
        let send = match self.streams.get_mut(&sid) {
            Some(s) if !s.fin_sent => {
                s.fin_sent = true;
                true
            }
            _ => false,
        };
        if send && self.error.is_none() {
            self.push(Cmd::Fin, sid, &[]);
        }
    }

    /// The stream's handle is gone: FIN if not yet sent, forget it, return its unread bytes
    /// to the receive budget.
    pub fn close(&mut self, sid: u32) {
        self.shutdown(sid);
        if let Some(s) = self.streams.remove(&sid) {
            self.bucket += s.recv.len() as i64;
        }
        self.accepted.retain(|&a| a != sid);
    }

    /// A read on `sid` would not return Pending.
    pub fn readable(&self, sid: u32) -> bool {
        match self.streams.get(&sid) {
            Some(s) => !s.recv.is_empty() || s.fin_received || self.error.is_some(),
            None => true,
        }
    }

    /// A write on `sid` would not return Pending.
    pub fn writable(&self, sid: u32) -> bool {
        if self.error.is_some() || self.pending_output() + HEADER_LEN >= OUTPUT_LIMIT {
            return self.error.is_some();
        }
        match self.streams.get(&sid) {
            Some(s)
                if self.config.version >= 2
                    && !s.fin_sent
                    && (self.config.half_close || !s.fin_received) =>
            {
                let inflight = s.num_written.wrapping_sub(s.peer_consumed) as i32;
                (s.peer_window as i32).wrapping_sub(inflight) > 0
            }
            _ => true,
        }
    }

    /// Encoded bytes waiting for the transport.
    pub fn pending_output(&self) -> usize {
        self.output.len() - self.out_pos
    }

    /// Moves up to `max` bytes of pending output to the end of `out`.
    pub fn take_output(&mut self, max: usize, out: &mut Vec<u8>) -> usize {
        let n = self.pending_output().min(max);
        out.extend_from_slice(&self.output[self.out_pos..self.out_pos + n]);
        self.out_pos += n;
        if self.out_pos == self.output.len() {
            self.output.clear();
            self.out_pos = 0;
            if self.output.capacity() > OUTPUT_LIMIT * 2 {
                self.output = Vec::new();
            }
        } else if self.out_pos > self.output.len() / 2 {
            self.output.drain(..self.out_pos);
            self.out_pos = 0;
        }
        n
    }

    /// Keepalive: queues a NOP every interval; fails the session when nothing arrived for
    /// the timeout while it was reading (a paused reader is not a silent peer).
    pub fn tick(&mut self, now_ms: u32) -> Result<(), SmuxError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.bucket <= 0 {
            // Reading is paused by our own readers, not by a silent peer.
            self.last_recv_ms = now_ms;
        }
        if elapsed(self.next_keepalive_ms, now_ms) {
            self.push(Cmd::Nop, 0, &[]);
            self.next_keepalive_ms = now_ms.wrapping_add(self.config.keepalive_interval_ms);
        }
        if self.bucket > 0
            && now_ms.wrapping_sub(self.last_recv_ms) >= self.config.keepalive_timeout_ms
        {
            self.fail(SmuxError::KeepaliveTimeout);
            return Err(SmuxError::KeepaliveTimeout);
        }
        Ok(())
    }

    /// When [`Session::tick`] next has something to do.
    pub fn next_tick_ms(&self, now_ms: u32) -> u32 {
        let timeout = self
            .last_recv_ms
            .wrapping_add(self.config.keepalive_timeout_ms);
        let until = |t: u32| t.wrapping_sub(now_ms) as i32;
        if until(timeout) < until(self.next_keepalive_ms) && until(timeout) > 0 {
            timeout
        } else {
            self.next_keepalive_ms
        }
    }

    fn push(&mut self, cmd: Cmd, sid: u32, data: &[u8]) {
        put_frame(&mut self.output, self.config.version, cmd, sid, data);
    }
}

impl Stream {
    fn new() -> Stream {
        Stream {
            peer_window: INITIAL_PEER_WINDOW,
            ..Stream::default()
        }
    }
}

/// `deadline` has passed at `now` (wrapping millisecond clock).
fn elapsed(deadline: u32, now: u32) -> bool {
    (now.wrapping_sub(deadline) as i32) >= 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(version: u8) -> (Session, Session) {
        let c = SmuxConfig::kcptun(version);
        (Session::new(c, true, 0), Session::new(c, false, 0))
    }

    fn pump(from: &mut Session, to: &mut Session) {
        let mut wire = Vec::new();
        from.take_output(usize::MAX, &mut wire);
        to.input(&wire, 1).unwrap();
    }

    #[test]
    fn client_stream_ids_and_live_bytes() {
        let (mut c, _) = pair(1);
        assert_eq!(c.open().unwrap(), 3);
        assert_eq!(c.write(3, b"hello"), StreamWrite::Written(5));
        let mut wire = Vec::new();
        c.take_output(usize::MAX, &mut wire);
        assert_eq!(
            wire,
            b"\x01\x00\x00\x00\x03\x00\x00\x00\x01\x02\x05\x00\x03\x00\x00\x00hello"
        );
        assert_eq!(c.open().unwrap(), 5);
    }

    /// spec §8 live v2 exchange: the server's UPD after its first read of 12 bytes.
    #[test]
    fn v2_update_after_first_read() {
        let (mut c, mut s) = pair(2);
        let sid = c.open().unwrap();
        c.write(sid, b"hello-kcptun");
        pump(&mut c, &mut s);
        assert_eq!(s.accept(), Some(3));
        let mut buf = [0u8; 64];
        assert_eq!(s.read(3, &mut buf), StreamRead::Data(12));
        let mut wire = Vec::new();
        s.take_output(usize::MAX, &mut wire);
        assert_eq!(wire, [2, 4, 8, 0, 3, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0x20, 0]);
    }

    #[test]
    fn fin_ends_both_directions_after_the_data() {
        let (mut c, mut s) = pair(1);
        let sid = c.open().unwrap();
        c.write(sid, b"abc");
        c.shutdown(sid);
        assert_eq!(c.write(sid, b"x"), StreamWrite::Closed);
        pump(&mut c, &mut s);
        let sid = s.accept().unwrap();
        let mut buf = [0u8; 2];
        assert_eq!(s.read(sid, &mut buf), StreamRead::Data(2));
        assert_eq!(s.read(sid, &mut buf), StreamRead::Data(1));
        assert_eq!(s.read(sid, &mut buf), StreamRead::Eof);
        // No half-close, as in smux: the FIN ended the other direction too.
        assert_eq!(s.write(sid, b"back"), StreamWrite::Closed);
        assert!(s.writable(sid), "a blocked writer wakes to see the close");
        s.close(sid);
        pump(&mut s, &mut c);
        let mut buf = [0u8; 8];
        assert_eq!(c.read(3, &mut buf), StreamRead::Eof);
        assert_eq!(s.stream_count(), 0);
    }

    #[test]
    fn half_close_keeps_the_other_direction_when_asked() {
        let (mut c, mut s) = pair(1);
        c.config.half_close = true;
        s.config.half_close = true;
        let sid = c.open().unwrap();
        c.write(sid, b"abc");
        c.shutdown(sid);
        pump(&mut c, &mut s);
        let sid = s.accept().unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(s.read(sid, &mut buf), StreamRead::Data(3));
        assert_eq!(s.read(sid, &mut buf), StreamRead::Eof);
        assert_eq!(s.write(sid, b"back"), StreamWrite::Written(4));
        s.close(sid);
        pump(&mut s, &mut c);
        assert_eq!(c.read(3, &mut buf), StreamRead::Data(4));
        assert_eq!(c.read(3, &mut buf), StreamRead::Eof);
    }

    #[test]
    fn v2_window_blocks_the_writer_until_update() {
        let (mut c, mut s) = pair(2);
        let sid = c.open().unwrap();
        let chunk = vec![7u8; 100_000];
        let mut sent = 0;
        let mut wire = Vec::new();
        loop {
            match c.write(sid, &chunk) {
                StreamWrite::Written(n) => sent += n,
                StreamWrite::Pending => {
                    if c.pending_output() > 0 {
                        c.take_output(usize::MAX, &mut wire);
                        continue;
                    }
                    break;
                }
                StreamWrite::Closed => panic!("closed"),
            }
        }
        assert_eq!(sent, INITIAL_PEER_WINDOW as usize);
        assert!(!c.writable(sid));
        s.input(&wire, 1).unwrap();
        let mut buf = vec![0u8; 1000];
        assert_eq!(s.read(sid, &mut buf), StreamRead::Data(1000));
        pump(&mut s, &mut c);
        assert!(c.writable(sid));
    }

    #[test]
    fn receive_budget_pauses_input() {
        let mut cfg = SmuxConfig::kcptun(1);
        cfg.max_receive_buffer = 10;
        let (mut c, mut s) = (Session::new(cfg, true, 0), Session::new(cfg, false, 0));
        let sid = c.open().unwrap();
        c.write(sid, &[1u8; 20]);
        pump(&mut c, &mut s);
        assert!(!s.wants_input());
        let mut buf = [0u8; 20];
        assert_eq!(s.read(sid, &mut buf), StreamRead::Data(20));
        assert!(s.wants_input());
    }

    #[test]
    fn errors_and_keepalive() {
        let (mut c, _) = pair(1);
        assert_eq!(
            c.input(&[2, 0, 0, 0, 3, 0, 0, 0], 0),
            Err(SmuxError::Version(2))
        );
        assert!(c.is_closed());
        let (_, mut s) = pair(1);
        assert_eq!(
            s.input(&[1, 9, 0, 0, 3, 0, 0, 0], 0),
            Err(SmuxError::Command(9))
        );
        let (mut c, _) = pair(1);
        assert_eq!(c.tick(10_000), Ok(()));
        let mut wire = Vec::new();
        c.take_output(usize::MAX, &mut wire);
        assert_eq!(wire, [1, 3, 0, 0, 0, 0, 0, 0]);
        assert_eq!(c.tick(30_000), Err(SmuxError::KeepaliveTimeout));
        let mut buf = [0u8; 4];
        assert_eq!(c.read(3, &mut buf), StreamRead::Reset);
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn bytes_arrive_intact_in_any_split(
                version in 1u8..=2,
                writes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..5000), 0..8),
                split in 1usize..3000,
            ) {
                let cfg = SmuxConfig::kcptun(version);
                let mut c = Session::new(cfg, true, 0);
                let mut s = Session::new(cfg, false, 0);
                let sid = c.open().unwrap();
                let mut all = Vec::new();
                let mut wire = Vec::new();
                for w in &writes {
                    let mut at = 0;
                    while at < w.len() {
                        match c.write(sid, &w[at..]) {
                            StreamWrite::Written(n) => at += n,
                            _ => { c.take_output(usize::MAX, &mut wire); }
                        }
                    }
                    all.extend_from_slice(w);
                }
                c.shutdown(sid);
                c.take_output(usize::MAX, &mut wire);
                for piece in wire.chunks(split) {
                    s.input(piece, 1).unwrap();
                }
                prop_assert_eq!(s.accept(), Some(sid));
                let mut got = Vec::new();
                let mut buf = [0u8; 777];
                loop {
                    match s.read(sid, &mut buf) {
                        StreamRead::Data(n) => got.extend_from_slice(&buf[..n]),
                        StreamRead::Eof => break,
                        other => prop_assert!(false, "{:?}", other),
                    }
                }
                prop_assert_eq!(got, all);
            }

            #[test]
            fn random_bytes_never_panic(version in 1u8..=2, bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
                let mut s = Session::new(SmuxConfig::kcptun(version), false, 0);
                let _ = s.input(&bytes, 5);
                while let Some(sid) = s.accept() {
                    let mut buf = [0u8; 100];
                    let _ = s.read(sid, &mut buf);
                    let _ = s.write(sid, b"x");
                    s.close(sid);
                }
                let _ = s.tick(100_000);
                let mut out = Vec::new();
                s.take_output(usize::MAX, &mut out);
            }
        }
    }
}
