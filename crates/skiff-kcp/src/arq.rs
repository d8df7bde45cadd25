//! The KCP control block with kcp-go 5.6's semantics (spec/kcp.md §6, §9): send/receive
//! queues and buffers, the ack list, RTT/RTO, fast and early retransmit, the congestion window,
//! window probing, stream mode and the dead-link mark.
//!
//! Sans-IO: the caller passes the time (ms, wrapping u32) and an output sink; flush hands it
//! whole KCP packets with `reserved` untouched bytes in front for the FEC and crypt headers.

use std::collections::VecDeque;

use crate::segment::{CMD_ACK, CMD_PUSH, CMD_WASK, CMD_WINS, OVERHEAD, SegmentHeader};

const RTO_NDL: u32 = 30;
const RTO_MIN: u32 = 100;
const RTO_DEF: u32 = 200;
const RTO_MAX: u32 = 60_000;
const ASK_SEND: u32 = 1;
const ASK_TELL: u32 = 2;
const WND_SND: u32 = 32;
const WND_RCV: u32 = 32;
const MTU_DEF: usize = 1400;
const INTERVAL: u32 = 100;
const DEADLINK: u32 = 20;
const THRESH_INIT: u32 = 2;
const THRESH_MIN: u32 = 2;
const PROBE_INIT: u32 = 7000;
const PROBE_LIMIT: u32 = 120_000;
/// kcp-go caps the MTU at the Ethernet payload size.
pub(crate) const MTU_LIMIT: usize = 1500;
/// Spare segment buffers kept for reuse.
const SEGMENT_POOL_LIMIT: usize = 16;

pub(crate) fn itimediff(later: u32, earlier: u32) -> i32 {
    later.wrapping_sub(earlier) as i32
}

#[derive(Default)]
struct Segment {
    frg: u8,
    ts: u32,
    sn: u32,
    resendts: u32,
    rto: u32,
    fastack: u32,
    xmit: u32,
    acked: bool,
    data: Vec<u8>,
}

/// Why [`Kcp::input`] stopped early (the datagram's remaining segments are ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputError {
    TooShort,
    WrongConv,
    Truncated,
    UnknownCmd,
}

/// What one flush did, for the session's counters.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FlushReport {
    /// Milliseconds until the next flush is useful (interval, or sooner for a pending resend).
    pub(crate) next_in: u32,
    pub(crate) retransmits: u64,
}

pub(crate) struct Kcp {
    conv: u32,
    mtu: usize,
    mss: usize,
    reserved: usize,
    dead: bool,

    snd_una: u32,
    snd_nxt: u32,
    rcv_nxt: u32,

    ssthresh: u32,
    rx_rttvar: i32,
    rx_srtt: i32,
    rx_rto: u32,
    rx_minrto: u32,

    snd_wnd: u32,
    rcv_wnd: u32,
    rmt_wnd: u32,
    cwnd: u32,
    incr: u32,
    probe: u32,

    interval: u32,
    nodelay: bool,
    ts_probe: u32,
    probe_wait: u32,
    dead_link: u32,

    fastresend: u32,
    nocwnd: bool,
    stream: bool,

    snd_queue: VecDeque<Segment>,
    snd_buf: VecDeque<Segment>,
    rcv_buf: VecDeque<Segment>,
    rcv_queue: VecDeque<Segment>,
    /// Bytes of `rcv_queue`'s front segment already handed to the reader (stream reads).
    rcv_offset: usize,
    acklist: Vec<(u32, u32)>,

    buffer: Vec<u8>,
    pool: Vec<Vec<u8>>,
}

impl Kcp {
    pub(crate) fn new(conv: u32) -> Kcp {
        Kcp {
            conv,
            mtu: MTU_DEF,
            mss: MTU_DEF - OVERHEAD,
            reserved: 0,
            dead: false,
            snd_una: 0,
            snd_nxt: 0,
            rcv_nxt: 0,
            ssthresh: THRESH_INIT,
            rx_rttvar: 0,
            rx_srtt: 0,
            rx_rto: RTO_DEF,
            rx_minrto: RTO_MIN,
            snd_wnd: WND_SND,
            rcv_wnd: WND_RCV,
            rmt_wnd: WND_RCV,
            cwnd: 0,
            incr: 0,
            probe: 0,
            interval: INTERVAL,
            nodelay: false,
            ts_probe: 0,
            probe_wait: 0,
            dead_link: DEADLINK,
            fastresend: 0,
            nocwnd: false,
            stream: false,
            snd_queue: VecDeque::new(),
            snd_buf: VecDeque::new(),
            rcv_buf: VecDeque::new(),
            rcv_queue: VecDeque::new(),
            rcv_offset: 0,
            acklist: Vec::new(),
            buffer: Vec::new(),
            pool: Vec::new(),
        }
    }

    /// kcp-go's `SetMtu` with `reserved` header bytes kept in front of every packet.
    pub(crate) fn set_mtu(&mut self, mtu: usize, reserved: usize) -> bool {
        if !(50..=MTU_LIMIT).contains(&mtu) || reserved + OVERHEAD >= mtu {
            return false;
        }
        self.mtu = mtu;
        self.reserved = reserved;
        self.mss = mtu - OVERHEAD - reserved;
        true
    }

    pub(crate) fn set_nodelay(&mut self, nodelay: bool, interval: u32, resend: u32, nc: bool) {
        self.nodelay = nodelay;
        self.rx_minrto = if nodelay { RTO_NDL } else { RTO_MIN };
        self.interval = interval.clamp(10, 5000);
        self.fastresend = resend;
        self.nocwnd = nc;
    }

    pub(crate) fn set_wndsize(&mut self, snd: u16, rcv: u16) {
        if snd > 0 {
            self.snd_wnd = u32::from(snd);
        }
        if rcv > 0 {
            self.rcv_wnd = u32::from(rcv);
        }
    }

    pub(crate) fn set_stream(&mut self, stream: bool) {
        self.stream = stream;
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead
    }

    pub(crate) fn wait_snd(&self) -> usize {
        self.snd_buf.len() + self.snd_queue.len()
    }

    pub(crate) fn has_acks(&self) -> bool {
        !self.acklist.is_empty()
    }

    /// How many bytes `send` may take now: kcp-go blocks writers once
    /// `WaitSnd() >= min(snd_wnd, rmt_wnd)`.
    pub(crate) fn send_capacity(&self) -> usize {
        let limit = self.snd_wnd.min(self.rmt_wnd) as usize;
        let waiting = self.wait_snd();
        if waiting >= limit {
            return 0;
        }
        let mut room = (limit - waiting) * self.mss;
        if self.stream
            && let Some(last) = self.snd_queue.back()
        {
            room += self.mss.saturating_sub(last.data.len());
        }
        room
    }

    fn new_data(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(bytes);
        v
    }

    fn recycle(&mut self, seg: Segment) {
        // A few spare buffers save allocator round trips; more would pin an idle session's
        // memory at its busiest moment.
        if self.pool.len() < SEGMENT_POOL_LIMIT {
            self.pool.push(seg.data);
        }
    }

    /// Queues user bytes; in stream mode tops up the last queued segment first. The caller has
    /// already bounded `buffer` by [`Kcp::send_capacity`]. Returns the bytes queued.
    pub(crate) fn send(&mut self, mut buffer: &[u8]) -> usize {
        let total = buffer.len();
        if buffer.is_empty() {
            return 0;
        }
        if self.stream
            && let Some(last) = self.snd_queue.back_mut()
            && last.data.len() < self.mss
        {
            let extend = (self.mss - last.data.len()).min(buffer.len());
            last.data.extend_from_slice(&buffer[..extend]);
            buffer = &buffer[extend..];
        }
        if buffer.is_empty() {
            return total;
        }
        let mut count = buffer.len().div_ceil(self.mss).max(1);
        if !self.stream && count > 255 {
            // A message has at most 255 fragments; take what fits.
            count = 255;
        }
        for i in 0..count {
            let size = buffer.len().min(self.mss);
            let data = self.new_data(&buffer[..size]);
            let frg = if self.stream {
                0
            } else {
                (count - i - 1) as u8
            };
            self.snd_queue.push_back(Segment {
                frg,
                data,
                ..Segment::default()
            });
            buffer = &buffer[size..];
        }
        total - buffer.len()
    }

    /// Copies received in-order bytes into `out`; 0 when none are ready.
    pub(crate) fn recv(&mut self, out: &mut [u8]) -> usize {
        let fast_recover = self.rcv_queue.len() >= self.rcv_wnd as usize;
        let mut n = 0;
        while n < out.len() {
            let Some(front) = self.rcv_queue.front() else {
                break;
            };
            let rest = front.data.get(self.rcv_offset..).unwrap_or_default();
            let take = rest.len().min(out.len() - n);
            out[n..n + take].copy_from_slice(&rest[..take]);
            n += take;
            self.rcv_offset += take;
            if self.rcv_offset >= front.data.len() {
                self.rcv_offset = 0;
                if let Some(seg) = self.rcv_queue.pop_front() {
                    self.recycle(seg);
                }
            }
        }
        self.move_to_rcv_queue();
        if self.rcv_queue.len() < self.rcv_wnd as usize && fast_recover {
            // The peer saw a zero window: tell it there is room again.
            self.probe |= ASK_TELL;
        }
        n
    }

    /// Gives back queue capacity a burst left behind once everything is delivered and acked,
    /// so an idle session costs a few KiB again. Cheap when already small.
    /// Returns whether the control block is idle.
    pub(crate) fn shrink_if_idle(&mut self) -> bool {
        const KEEP: usize = 16;
        if !self.snd_queue.is_empty()
            || !self.snd_buf.is_empty()
            || !self.rcv_buf.is_empty()
            || !self.rcv_queue.is_empty()
            || !self.acklist.is_empty()
        {
            return false;
        }
        if self.snd_queue.capacity() > KEEP {
            self.snd_queue.shrink_to(KEEP);
        }
        if self.snd_buf.capacity() > KEEP {
            self.snd_buf.shrink_to(KEEP);
        }
        if self.rcv_buf.capacity() > KEEP {
            self.rcv_buf.shrink_to(KEEP);
        }
        if self.rcv_queue.capacity() > KEEP {
            self.rcv_queue.shrink_to(KEEP);
        }
        if self.acklist.capacity() > KEEP * 4 {
            self.acklist.shrink_to(KEEP * 4);
        }
        self.pool.truncate(2);
        true
    }

    /// Bytes ready for [`Kcp::recv`].
    pub(crate) fn readable(&self) -> bool {
        !self.rcv_queue.is_empty()
    }

    fn move_to_rcv_queue(&mut self) {
        while let Some(front) = self.rcv_buf.front() {
            if front.sn == self.rcv_nxt && self.rcv_queue.len() < self.rcv_wnd as usize {
                self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
                if let Some(seg) = self.rcv_buf.pop_front() {
                    self.rcv_queue.push_back(seg);
                }
            } else {
                break;
            }
        }
    }

    fn wnd_unused(&self) -> u16 {
        let used = self.rcv_queue.len() as u32;
        self.rcv_wnd.saturating_sub(used).min(u32::from(u16::MAX)) as u16
    }

    fn update_ack(&mut self, rtt: i32) {
        if self.rx_srtt == 0 {
            self.rx_srtt = rtt;
            self.rx_rttvar = rtt >> 1;
        } else {
            let mut delta = rtt.saturating_sub(self.rx_srtt);
            self.rx_srtt = self.rx_srtt.saturating_add(delta >> 3);
            delta = delta.saturating_abs();
            if rtt < self.rx_srtt - self.rx_rttvar {
                // A sample below the expected range gets an 8× smaller weight (kcp-go).
                self.rx_rttvar += (delta - self.rx_rttvar) >> 5;
            } else {
                self.rx_rttvar += (delta - self.rx_rttvar) >> 2;
            }
        }
        if self.rx_srtt < 1 {
            self.rx_srtt = 1;
        }
        let var4 = (self.rx_rttvar.max(0) as u32).saturating_mul(4);
        let rto = (self.rx_srtt as u32).saturating_add(self.interval.max(var4));
        self.rx_rto = rto.clamp(self.rx_minrto, RTO_MAX);
    }

    fn shrink_buf(&mut self) {
        self.snd_una = self.snd_buf.front().map_or(self.snd_nxt, |s| s.sn);
    }

    fn parse_ack(&mut self, sn: u32) {
        if itimediff(sn, self.snd_una) < 0 || itimediff(sn, self.snd_nxt) >= 0 {
            return;
        }
        for seg in self.snd_buf.iter_mut() {
            if seg.sn == sn {
                // Marked, not removed: `una` sweeps it later without shifting the buffer.
                seg.acked = true;
                seg.data.clear();
                break;
            }
            if itimediff(sn, seg.sn) < 0 {
                break;
            }
        }
    }

    fn parse_fastack(&mut self, sn: u32, ts: u32) {
        if itimediff(sn, self.snd_una) < 0 || itimediff(sn, self.snd_nxt) >= 0 {
            return;
        }
        for seg in self.snd_buf.iter_mut() {
            if itimediff(sn, seg.sn) < 0 {
                break;
            } else if sn != seg.sn && itimediff(seg.ts, ts) <= 0 {
                seg.fastack = seg.fastack.saturating_add(1);
            }
        }
    }

    fn parse_una(&mut self, una: u32) -> usize {
        let mut count = 0;
        while let Some(front) = self.snd_buf.front() {
            if itimediff(una, front.sn) > 0 {
                if let Some(seg) = self.snd_buf.pop_front() {
                    self.recycle(seg);
                }
                count += 1;
            } else {
                break;
            }
        }
        count
    }

    fn parse_data(&mut self, sn: u32, frg: u8, data: &[u8]) {
        if itimediff(sn, self.rcv_nxt.wrapping_add(self.rcv_wnd)) >= 0
            || itimediff(sn, self.rcv_nxt) < 0
        {
            return;
        }
        let mut insert_at = 0;
        let mut repeat = false;
        for (i, seg) in self.rcv_buf.iter().enumerate().rev() {
            if seg.sn == sn {
                repeat = true;
                break;
            }
            if itimediff(sn, seg.sn) > 0 {
                insert_at = i + 1;
                break;
            }
        }
        if !repeat {
            let data = self.new_data(data);
            self.rcv_buf.insert(
                insert_at,
                Segment {
                    frg,
                    sn,
                    data,
                    ..Segment::default()
                },
            );
        }
        self.move_to_rcv_queue();
    }

    /// Processes the KCP segments of one datagram. `regular` is false for FEC-rebuilt packets,
    /// whose window field is not trusted and which give no RTT sample. Returns whether the send
    /// window slid (kcp-go then flushes at once).
    pub(crate) fn input(
        &mut self,
        mut data: &[u8],
        regular: bool,
        now: u32,
    ) -> Result<bool, InputError> {
        let prev_una = self.snd_una;
        if data.len() < OVERHEAD {
            return Err(InputError::TooShort);
        }
        let mut latest: Option<u32> = None;
        let mut window_slides = false;
        let mut result = Ok(());
        while let Some(h) = SegmentHeader::decode(data) {
            if h.conv != self.conv {
                result = Err(InputError::WrongConv);
                break;
            }
            let body = &data[OVERHEAD..];
            let Some(payload) = body.get(..h.len as usize) else {
                result = Err(InputError::Truncated);
                break;
            };
            if !matches!(h.cmd, CMD_PUSH | CMD_ACK | CMD_WASK | CMD_WINS) {
                result = Err(InputError::UnknownCmd);
                break;
            }
            if regular {
                self.rmt_wnd = u32::from(h.wnd);
            }
            if self.parse_una(h.una) > 0 {
                window_slides = true;
            }
            self.shrink_buf();
            match h.cmd {
                CMD_ACK => {
                    self.parse_ack(h.sn);
                    self.parse_fastack(h.sn, h.ts);
                    latest = Some(match latest {
                        Some(l) if itimediff(l, h.ts) > 0 => l,
                        _ => h.ts,
                    });
                }
                CMD_PUSH if itimediff(h.sn, self.rcv_nxt.wrapping_add(self.rcv_wnd)) < 0 => {
                    self.acklist.push((h.sn, h.ts));
                    if itimediff(h.sn, self.rcv_nxt) >= 0 {
                        self.parse_data(h.sn, h.frg, payload);
                    }
                }
                CMD_PUSH => {} // beyond our receive window: not even acked (kcp-go)
                CMD_WASK => self.probe |= ASK_TELL,
                _ => {} // WINS: the window field above was the news.
            }
            data = &body[payload.len()..];
        }

        if regular
            && let Some(ts) = latest
            && itimediff(now, ts) >= 0
        {
            self.update_ack(itimediff(now, ts));
        }

        if !self.nocwnd && itimediff(self.snd_una, prev_una) > 0 && self.cwnd < self.rmt_wnd {
            let mss = self.mss as u32;
            if self.cwnd < self.ssthresh {
                self.cwnd += 1;
                self.incr += mss;
            } else {
                if self.incr < mss {
                    self.incr = mss;
                }
                self.incr += (mss * mss) / self.incr + mss / 16;
                if (self.cwnd + 1) * mss <= self.incr {
                    self.cwnd = self.incr.div_ceil(mss.max(1));
                }
            }
            if self.cwnd > self.rmt_wnd {
                self.cwnd = self.rmt_wnd;
                self.incr = self.rmt_wnd * mss;
            }
        }
        result.map(|()| window_slides)
    }

    /// Too many queued acks (a peer flooding duplicates between flushes): time to send them.
    pub(crate) fn acks_overflowing(&self) -> bool {
        self.acklist.len() >= (self.rcv_wnd as usize).saturating_mul(2).max(256)
    }

    /// Writes acks, probes and due segments as packets of at most `mtu` bytes into `output`
    /// (each slice starts with `reserved` bytes for the outer headers).
    pub(crate) fn flush(
        &mut self,
        now: u32,
        ack_only: bool,
        output: &mut dyn FnMut(&mut [u8]),
    ) -> FlushReport {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        buffer.resize(self.reserved, 0);
        let mtu = self.mtu;
        let reserved = self.reserved;
        let mut make_space = |buffer: &mut Vec<u8>, space: usize| {
            if buffer.len() + space > mtu && buffer.len() > reserved {
                output(&mut buffer[..]);
                buffer.truncate(reserved);
            }
        };
        let wnd = self.wnd_unused();
        let una = self.rcv_nxt;
        let mut seg = SegmentHeader {
            conv: self.conv,
            cmd: CMD_ACK,
            wnd,
            una,
            ..SegmentHeader::default()
        };
        let mut header = [0u8; OVERHEAD];

        let acks = self.acklist.len();
        for (i, &(sn, ts)) in self.acklist.iter().enumerate() {
            // Skip acks for segments already covered by una, except the last (kcp-go).
            if itimediff(sn, self.rcv_nxt) >= 0 || i + 1 == acks {
                make_space(&mut buffer, OVERHEAD);
                seg.sn = sn;
                seg.ts = ts;
                seg.encode(&mut header);
                buffer.extend_from_slice(&header);
            }
        }
        self.acklist.clear();

        let mut report = FlushReport {
            next_in: self.interval,
            retransmits: 0,
        };
        if ack_only {
            if buffer.len() > reserved {
                output(&mut buffer[..]);
            }
            self.buffer = buffer;
            return report;
        }

        if self.rmt_wnd == 0 {
            if self.probe_wait == 0 {
                self.probe_wait = PROBE_INIT;
                self.ts_probe = now.wrapping_add(self.probe_wait);
            } else if itimediff(now, self.ts_probe) >= 0 {
                self.probe_wait = self.probe_wait.max(PROBE_INIT);
                self.probe_wait += self.probe_wait / 2;
                self.probe_wait = self.probe_wait.min(PROBE_LIMIT);
                self.ts_probe = now.wrapping_add(self.probe_wait);
                self.probe |= ASK_SEND;
            }
        } else {
            self.ts_probe = 0;
            self.probe_wait = 0;
        }
        seg.sn = 0;
        seg.ts = 0;
        for (flag, cmd) in [(ASK_SEND, CMD_WASK), (ASK_TELL, CMD_WINS)] {
            if self.probe & flag != 0 {
                seg.cmd = cmd;
                make_space(&mut buffer, OVERHEAD);
                seg.encode(&mut header);
                buffer.extend_from_slice(&header);
            }
        }
        self.probe = 0;

        let mut cwnd = self.snd_wnd.min(self.rmt_wnd);
        if !self.nocwnd {
            cwnd = cwnd.min(self.cwnd);
        }
        let mut new_segs = 0;
        while itimediff(self.snd_nxt, self.snd_una.wrapping_add(cwnd)) < 0 {
            let Some(mut s) = self.snd_queue.pop_front() else {
                break;
            };
            s.sn = self.snd_nxt;
            self.snd_buf.push_back(s);
            self.snd_nxt = self.snd_nxt.wrapping_add(1);
            new_segs += 1;
        }

        let resent = if self.fastresend == 0 {
            u32::MAX
        } else {
            self.fastresend
        };
        let mut change = 0u32;
        let mut lost = false;
        let mut min_rto = self.interval as i32;
        let rx_rto = self.rx_rto;
        let nodelay = self.nodelay;
        let dead_link = self.dead_link;
        seg.cmd = CMD_PUSH;
        for s in self.snd_buf.iter_mut() {
            if s.acked {
                continue;
            }
            let mut needsend = false;
            if s.xmit == 0 {
                needsend = true;
                s.rto = rx_rto;
                s.resendts = now.wrapping_add(s.rto);
            } else if s.fastack >= resent || (s.fastack > 0 && new_segs == 0) {
                // Fast retransmit, or kcp-go's early retransmit when nothing new went out.
                needsend = true;
                s.fastack = 0;
                s.rto = rx_rto;
                s.resendts = now.wrapping_add(s.rto);
                change += 1;
                report.retransmits += 1;
            } else if itimediff(now, s.resendts) >= 0 {
                needsend = true;
                s.rto = s
                    .rto
                    .saturating_add(if nodelay { rx_rto / 2 } else { rx_rto });
                s.fastack = 0;
                s.resendts = now.wrapping_add(s.rto);
                lost = true;
                report.retransmits += 1;
            }
            if needsend {
                s.xmit += 1;
                s.ts = now;
                seg.frg = s.frg;
                seg.ts = now;
                seg.sn = s.sn;
                seg.len = s.data.len() as u32;
                make_space(&mut buffer, OVERHEAD + s.data.len());
                seg.encode(&mut header);
                buffer.extend_from_slice(&header);
                buffer.extend_from_slice(&s.data);
                if s.xmit >= dead_link {
                    self.dead = true;
                }
            }
            let rto = itimediff(s.resendts, now);
            if rto > 0 && rto < min_rto {
                min_rto = rto;
            }
        }
        if buffer.len() > reserved {
            output(&mut buffer[..]);
        }
        self.buffer = buffer;

        if !self.nocwnd {
            if change > 0 {
                let inflight = self.snd_nxt.wrapping_sub(self.snd_una);
                self.ssthresh = (inflight / 2).max(THRESH_MIN);
                // With fast resend off `resent` is u32::MAX and kcp-go's uint32 sum wraps to
                // ssthresh − 1: an early retransmit then shrinks the window. Same here.
                self.cwnd = self.ssthresh.wrapping_add(resent);
                self.incr = self.cwnd.wrapping_mul(self.mss as u32);
            }
            if lost {
                self.ssthresh = (cwnd / 2).max(THRESH_MIN);
                self.cwnd = 1;
                self.incr = self.mss as u32;
            }
            if self.cwnd < 1 {
                self.cwnd = 1;
                self.incr = self.mss as u32;
            }
        }
        report.next_in = min_rto.max(1) as u32;
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Kcp, Kcp) {
        let mut a = Kcp::new(7);
        let mut b = Kcp::new(7);
        for k in [&mut a, &mut b] {
            k.set_stream(true);
            k.set_nodelay(false, 30, 2, true);
        }
        (a, b)
    }

    fn pump(from: &mut Kcp, to: &mut Kcp, now: u32) {
        let mut pkts = Vec::new();
        from.flush(now, false, &mut |p| pkts.push(p.to_vec()));
        for p in pkts {
            let _ = to.input(&p, true, now);
        }
    }

    #[test]
    fn stream_bytes_arrive_in_order() {
        let (mut a, mut b) = pair();
        let data: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        assert_eq!(a.send(&data), data.len());
        assert_eq!(a.wait_snd(), 4);
        pump(&mut a, &mut b, 0);
        let mut got = vec![0u8; 6000];
        let n = b.recv(&mut got);
        assert_eq!(&got[..n], &data[..]);
        pump(&mut b, &mut a, 10);
        assert_eq!(a.wait_snd(), 0);
    }

    #[test]
    fn stream_mode_tops_up_the_last_segment() {
        let (mut a, _) = pair();
        a.send(b"abc");
        a.send(b"def");
        assert_eq!(a.wait_snd(), 1);
    }

    #[test]
    fn wrong_conv_and_unknown_cmd_stop_the_datagram() {
        let mut k = Kcp::new(1);
        let mut h = [0u8; OVERHEAD];
        SegmentHeader {
            conv: 2,
            cmd: CMD_PUSH,
            ..Default::default()
        }
        .encode(&mut h);
        assert_eq!(k.input(&h, true, 0), Err(InputError::WrongConv));
        SegmentHeader {
            conv: 1,
            cmd: 99,
            ..Default::default()
        }
        .encode(&mut h);
        assert_eq!(k.input(&h, true, 0), Err(InputError::UnknownCmd));
        SegmentHeader {
            conv: 1,
            cmd: CMD_PUSH,
            len: 5,
            ..Default::default()
        }
        .encode(&mut h);
        assert_eq!(k.input(&h, true, 0), Err(InputError::Truncated));
    }

    #[test]
    fn lost_segment_is_resent_and_dead_link_marks() {
        let (mut a, _) = pair();
        a.send(b"x");
        let mut now = 0;
        let mut sent = 0;
        for _ in 0..10_000 {
            let r = a.flush(now, false, &mut |_| sent += 1);
            if a.is_dead() {
                break;
            }
            now += r.next_in;
        }
        assert!(a.is_dead());
        assert_eq!(sent, DEADLINK as usize);
    }

    #[test]
    fn zero_remote_window_probes_after_7_s_then_backs_off() {
        let mut k = Kcp::new(1);
        let mut h = [0u8; OVERHEAD];
        SegmentHeader {
            conv: 1,
            cmd: CMD_WINS,
            wnd: 0,
            ..Default::default()
        }
        .encode(&mut h);
        k.input(&h, true, 0).unwrap();
        assert_eq!(k.send_capacity(), 0, "a full peer stops the writer");
        let mut wasks = Vec::new();
        let mut now = 0;
        while now <= 30_000 {
            k.flush(now, false, &mut |p| {
                if SegmentHeader::decode(p).map(|h| h.cmd) == Some(CMD_WASK) {
                    wasks.push(now);
                }
            });
            now += 100;
        }
        assert_eq!(wasks, vec![7000, 17_500]);
    }

    #[test]
    fn wask_is_answered_with_wins() {
        let mut k = Kcp::new(1);
        let mut h = [0u8; OVERHEAD];
        SegmentHeader {
            conv: 1,
            cmd: CMD_WASK,
            wnd: 5,
            ..Default::default()
        }
        .encode(&mut h);
        k.input(&h, true, 0).unwrap();
        let mut out = Vec::new();
        k.flush(0, false, &mut |p| out.extend_from_slice(p));
        let got = SegmentHeader::decode(&out).unwrap();
        assert_eq!(got.cmd, CMD_WINS);
        assert_eq!(got.wnd, 32);
    }
}
