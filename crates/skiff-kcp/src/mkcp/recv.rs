//! The receiving half of an mKCP connection, as V2Ray's `ReceivingWorker`: a window of
//! `window` segments ahead of the reader (anything beyond it is dropped unacknowledged), and
//! an ack list resent every max(RTO/2, 20 ms) until the peer's `sendingNext` passes it.

use std::collections::VecDeque;

use super::output::Output;
use super::segment::{ACK_LIMIT, Segment};
use super::time::{before, due};

const POOL: usize = 64;

struct AckEntry {
    sn: u32,
    ts: u32,
    /// When to send it (again); None = now.
    next: Option<u32>,
}

pub(super) struct Receiver {
    /// Slot i holds segment `next + i`.
    slots: VecDeque<Option<Vec<u8>>>,
    /// The segment being read, from `read_pos`.
    reading: Vec<u8>,
    read_pos: usize,
    pub(super) next: u32,
    window: u32,
    acks: Vec<AckEntry>,
    dirty: bool,
    /// `next` when the window was last advertised.
    advertised: u32,
    pool: Vec<Vec<u8>>,
}

impl Receiver {
    pub(super) fn new(window: u32) -> Receiver {
        Receiver {
            slots: VecDeque::new(),
            reading: Vec::new(),
            read_pos: 0,
            next: 0,
            window,
            acks: Vec::new(),
            dirty: false,
            advertised: 0,
            pool: Vec::new(),
        }
    }

    /// A data segment from the peer.
    pub(super) fn on_data(&mut self, sn: u32, ts: u32, sending_next: u32, payload: &[u8]) {
        let index = sn.wrapping_sub(self.next);
        if index >= self.window {
            return;
        }
        self.clear_acks(sending_next);
        // Bounded: a peer that never advances its sendingNext cannot grow the list.
        if self.acks.len() >= 2 * self.window as usize + ACK_LIMIT {
            self.acks.remove(0);
        }
        self.acks.push(AckEntry { sn, ts, next: None });
        self.dirty = true;
        let index = index as usize;
        while self.slots.len() <= index {
            self.slots.push_back(None);
        }
        if let Some(slot) = self.slots.get_mut(index)
            && slot.is_none()
        {
            let mut buf = self.pool.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(payload);
            *slot = Some(buf);
        }
    }

    /// The peer has our acks up to `sending_next`: stop resending those.
    pub(super) fn clear_acks(&mut self, sending_next: u32) {
        let before_len = self.acks.len();
        self.acks.retain(|a| !before(a.sn, sending_next));
        if self.acks.len() != before_len {
            self.dirty = true;
        }
    }

    pub(super) fn readable(&self) -> bool {
        self.read_pos < self.reading.len() || matches!(self.slots.front(), Some(Some(_)))
    }

    /// Copies in-order data into `buf`.
    pub(super) fn read(&mut self, buf: &mut [u8]) -> usize {
        let mut n = 0;
        while n < buf.len() {
            if self.read_pos < self.reading.len() {
                let take = (self.reading.len() - self.read_pos).min(buf.len() - n);
                buf[n..n + take]
                    .copy_from_slice(&self.reading[self.read_pos..self.read_pos + take]);
                self.read_pos += take;
                n += take;
                continue;
            }
            if !matches!(self.slots.front(), Some(Some(_))) {
                break;
            }
            let Some(Some(next)) = self.slots.pop_front() else {
                break;
            };
            let done = std::mem::replace(&mut self.reading, next);
            if self.pool.len() < POOL {
                self.pool.push(done);
            }
            self.read_pos = 0;
            self.next = self.next.wrapping_add(1);
        }
        // Tell the peer about a window that opened by half since we last did.
        if self.next.wrapping_sub(self.advertised) >= self.window / 2 {
            self.dirty = true;
        }
        n
    }

    /// Forgets buffered data (the reading side closed).
    pub(super) fn discard(&mut self) {
        self.slots.clear();
        self.reading = Vec::new();
        self.read_pos = 0;
        self.pool.clear();
    }

    pub(super) fn has_acks(&self) -> bool {
        !self.acks.is_empty()
    }

    /// Sends due acks (and, with them, others not yet due), or a bare window update.
    pub(super) fn flush(&mut self, now: u32, rto: u32, conv: u16, opt: u8, out: &mut Output) {
        let interval = (rto / 2).max(20);
        let mut numbers: Vec<u8> = Vec::new();
        let mut ts = 0u32;
        let mut candidates: Vec<u32> = Vec::new();
        let receiving_window = self.next.wrapping_add(self.window);
        for i in 0..self.acks.len() {
            let entry = &mut self.acks[i];
            if let Some(at) = entry.next
                && !due(now, at)
            {
                if candidates.len() < ACK_LIMIT {
                    candidates.push(entry.sn);
                }
                continue;
            }
            numbers.extend_from_slice(&entry.sn.to_be_bytes());
            if !before(entry.ts, ts) {
                ts = entry.ts;
            }
            entry.next = Some(now.wrapping_add(interval));
            if numbers.len() == 4 * ACK_LIMIT {
                out.push(&Segment::Ack {
                    conv,
                    opt,
                    receiving_window,
                    receiving_next: self.next,
                    ts,
                    numbers: &numbers,
                });
                numbers.clear();
                self.dirty = false;
                self.advertised = self.next;
            }
        }
        if self.dirty || !numbers.is_empty() {
            for sn in candidates {
                if numbers.len() >= 4 * ACK_LIMIT {
                    break;
                }
                numbers.extend_from_slice(&sn.to_be_bytes());
            }
            out.push(&Segment::Ack {
                conv,
                opt,
                receiving_window,
                receiving_next: self.next,
                ts,
                numbers: &numbers,
            });
            self.dirty = false;
            self.advertised = self.next;
        }
    }

    /// The earliest ack resend deadline, or `Some(now)`-like urgency when acks wait unsent.
    pub(super) fn next_deadline(&self) -> Option<Option<u32>> {
        if self.dirty {
            return Some(None);
        }
        let mut earliest: Option<u32> = None;
        for a in &self.acks {
            let Some(at) = a.next else {
                return Some(None);
            };
            earliest = Some(match earliest {
                Some(e) if before(e, at) => e,
                _ => at,
            });
        }
        earliest.map(Some)
    }
}
