//! The sending half of an mKCP connection, as V2Ray's `SendingWorker`: a window of numbered
//! segments resent on timeout (shortened when later segments are acknowledged), limited by
//! the peer's advertised window times V2Ray's factor of 20, optionally by loss-driven
//! congestion control.

use std::collections::VecDeque;

use super::output::Output;
use super::rtt::RoundTrip;
use super::segment::Segment;
use super::time::{before, due};

/// V2Ray multiplies its congestion window by this ("magic").
const WINDOW_FACTOR: u32 = 20;
/// Buffers kept for reuse.
const POOL: usize = 64;

struct SendSeg {
    sn: u32,
    data: Vec<u8>,
    /// When to resend (valid once sent).
    timeout: u32,
    ts: u32,
    transmit: u32,
    /// Acknowledged out of order: only waits to leave the front of the queue.
    acked: bool,
}

pub(super) struct Sender {
    queue: VecDeque<SendSeg>,
    unacked: usize,
    pub(super) next_sn: u32,
    pub(super) first_una: u32,
    /// First number beyond the peer's window.
    remote_next: u32,
    control_window: u32,
    total_in_flight: u32,
    pub(super) una_updated: bool,
    in_flight: u32,
    buffer: usize,
    congestion: bool,
    mss: usize,
    pool: Vec<Vec<u8>>,
}

pub(super) struct AckFields<'a> {
    pub(super) receiving_window: u32,
    pub(super) receiving_next: u32,
    pub(super) ts: u32,
    pub(super) numbers: &'a [u8],
}

impl Sender {
    pub(super) fn new(in_flight: u32, buffer: u32, congestion: bool, mss: usize) -> Sender {
        Sender {
            queue: VecDeque::new(),
            unacked: 0,
            next_sn: 0,
            first_una: 0,
            remote_next: 32,
            control_window: in_flight,
            total_in_flight: 0,
            una_updated: false,
            in_flight,
            buffer: buffer as usize,
            congestion,
            mss,
            pool: Vec::new(),
        }
    }

    pub(super) fn mss(&self) -> usize {
        self.mss
    }

    /// Room for more data (V2Ray accepts a push while the window holds at most its buffer
    /// size; acknowledged holes count too, so a peer cannot make the queue grow unbounded).
    pub(super) fn has_room(&self) -> bool {
        self.queue.len() <= self.buffer
    }

    pub(super) fn is_empty(&self) -> bool {
        self.unacked == 0
    }

    pub(super) fn unacked(&self) -> usize {
        self.unacked
    }

    /// Queues as much of `data` as the window takes, in segments of at most `mss` bytes; an
    /// unsent last segment is topped up first. Returns the bytes taken.
    pub(super) fn push(&mut self, mut data: &[u8]) -> usize {
        let mut taken = 0;
        if let Some(last) = self.queue.back_mut()
            && last.transmit == 0
            && !last.acked
            && last.data.len() < self.mss
        {
            let n = (self.mss - last.data.len()).min(data.len());
            last.data.extend_from_slice(&data[..n]);
            data = &data[n..];
            taken += n;
        }
        while !data.is_empty() && self.has_room() {
            let n = data.len().min(self.mss);
            let mut buf = self.pool.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(&data[..n]);
            self.queue.push_back(SendSeg {
                sn: self.next_sn,
                data: buf,
                timeout: 0,
                ts: 0,
                transmit: 0,
                acked: false,
            });
            self.unacked += 1;
            self.next_sn = self.next_sn.wrapping_add(1);
            data = &data[n..];
            taken += n;
        }
        taken
    }

    fn recycle(&mut self, seg: SendSeg) {
        if self.pool.len() < POOL {
            self.pool.push(seg.data);
        }
    }

    /// Drops everything below `una` (the peer has it all).
    pub(super) fn clear_below(&mut self, una: u32) {
        while let Some(front) = self.queue.front() {
            if !before(front.sn, una) {
                break;
            }
            if let Some(seg) = self.queue.pop_front() {
                if !seg.acked {
                    self.unacked -= 1;
                }
                self.recycle(seg);
            }
        }
        self.find_first_una();
    }

    /// Forgets every queued segment (the peer closed: nobody will read them).
    pub(super) fn discard(&mut self) {
        while let Some(seg) = self.queue.pop_front() {
            self.recycle(seg);
        }
        self.unacked = 0;
    }

    fn find_first_una(&mut self) {
        while self.queue.front().is_some_and(|s| s.acked) {
            if let Some(seg) = self.queue.pop_front() {
                self.recycle(seg);
            }
        }
        let first = self.queue.front().map_or(self.next_sn, |s| s.sn);
        if first != self.first_una {
            self.first_una = first;
            self.una_updated = true;
        }
    }

    fn index_of(&self, sn: u32) -> Option<usize> {
        let base = self.queue.front()?.sn;
        let key = sn.wrapping_sub(base);
        self.queue
            .binary_search_by_key(&key, |s| s.sn.wrapping_sub(base))
            .ok()
    }

    fn ack_one(&mut self, sn: u32) -> bool {
        // Only numbers in [first_una, next_sn) can be acknowledged.
        if before(sn, self.first_una) || !before(sn, self.next_sn) {
            return false;
        }
        let Some(i) = self.index_of(sn) else {
            return false;
        };
        let Some(seg) = self.queue.get_mut(i) else {
            return false;
        };
        if seg.acked {
            return false;
        }
        seg.acked = true;
        self.unacked -= 1;
        self.total_in_flight = self.total_in_flight.saturating_sub(1);
        let data = std::mem::take(&mut seg.data);
        if self.pool.len() < POOL {
            self.pool.push(data);
        }
        if i == 0 {
            self.find_first_una();
        }
        true
    }

    /// An ack segment from the peer.
    pub(super) fn on_ack(&mut self, ack: AckFields<'_>, now: u32, rtt: &mut RoundTrip) {
        if before(self.remote_next, ack.receiving_window) {
            self.remote_next = ack.receiving_window;
        }
        self.clear_below(ack.receiving_next);
        let mut max_ack = 0u32;
        let mut max_removed = false;
        let mut any = false;
        for chunk in ack.numbers.chunks_exact(4) {
            let sn = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let removed = self.ack_one(sn);
            if !any || before(max_ack, sn) {
                max_ack = sn;
                max_removed = removed;
            }
            any = true;
        }
        if max_removed {
            let rto = rtt.timeout();
            // Segments sent before the newest acknowledged one are probably lost: resend
            // them sooner (V2Ray `HandleFastAck`).
            for seg in self.queue.iter_mut() {
                if !before(seg.sn, max_ack) {
                    break;
                }
                if !seg.acked && seg.transmit > 0 {
                    seg.timeout = seg.timeout.wrapping_sub(rto / 3);
                }
            }
            let elapsed = now.wrapping_sub(ack.ts);
            if elapsed < 10_000 {
                rtt.update(elapsed, now);
            }
        }
    }

    /// Sends what is due: new segments and timed-out ones, at most the window's worth.
    pub(super) fn flush(&mut self, now: u32, rto: u32, conv: u16, opt: u8, out: &mut Output) {
        if self.is_empty() {
            return;
        }
        let mut cwnd = self.in_flight;
        let peer = self.remote_next.wrapping_sub(self.first_una);
        if cwnd > peer {
            cwnd = peer;
        }
        if self.congestion && cwnd > self.control_window {
            cwnd = self.control_window;
        }
        let cwnd = cwnd.saturating_mul(WINDOW_FACTOR);
        let mut lost = 0u32;
        let mut sent = 0u32;
        let first_una = self.first_una;
        for seg in self.queue.iter_mut() {
            if seg.acked || (seg.transmit > 0 && !due(now, seg.timeout)) {
                continue;
            }
            if seg.transmit == 0 {
                self.total_in_flight = self.total_in_flight.saturating_add(1);
            } else {
                lost += 1;
            }
            seg.timeout = now.wrapping_add(rto);
            seg.ts = now;
            seg.transmit = seg.transmit.saturating_add(1);
            out.push(&Segment::Data {
                conv,
                opt,
                ts: seg.ts,
                sn: seg.sn,
                sending_next: first_una,
                payload: &seg.data,
            });
            sent += 1;
            // As V2Ray: the check comes after sending, so a closed window still sends one.
            if sent >= cwnd {
                break;
            }
        }
        if self.congestion && sent > 0 && self.total_in_flight != 0 && rto != 0 {
            let rate = lost.saturating_mul(100) / self.total_in_flight;
            if rate >= 15 {
                self.control_window = 3 * self.control_window / 4;
            } else if rate <= 5 {
                self.control_window += self.control_window / 4;
            }
            self.control_window = self.control_window.clamp(16, 2 * self.in_flight.max(8));
        }
    }

    /// The earliest resend deadline among sent segments, and whether unsent ones wait.
    pub(super) fn next_deadline(&self) -> (Option<u32>, bool) {
        let mut earliest: Option<u32> = None;
        let mut unsent = false;
        for seg in &self.queue {
            if seg.acked {
                continue;
            }
            if seg.transmit == 0 {
                unsent = true;
                continue;
            }
            earliest = Some(match earliest {
                Some(e) if before(e, seg.timeout) => e,
                _ => seg.timeout,
            });
        }
        (earliest, unsent)
    }
}
