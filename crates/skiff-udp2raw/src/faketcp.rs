//! How udp2raw moves its fake TCP sequence numbers (`--seq-mode`), as a small state machine
//! with no clock and no randomness of its own.
//!
//! Handshake: the client's SYN has a random seq and ack (timestamps echo 0); the server's
//! SYN-ACK acks `seq + 1`; the client then sends its handshake on `seq + 1` acking the
//! server's `seq + 1`, and each side acks `peer seq + payload length`. After that, for a
//! segment carrying data (not SYN, ACK set):
//!
//! | mode | after sending n bytes | after receiving n bytes at `s` |
//! |---|---|---|
//! | 0 | seq unchanged | ack = max(ack, s + n) |
//! | 1 | seq += n | as 0 |
//! | 2 | seq += n one time in five (random) | as 0 |
//! | 3 (default) | seq += n; back to the peer's ack when more than a window (40960 << 5) ahead, or after 3 duplicate acks | ack = s + n only when s == ack |
//! | 4 | as 3 with a window of 40960 | as 3 |
//!
//! Every received timestamp becomes the TSecr of what is sent next.

use crate::MAX_DATA_LEN;
use crate::headers::{TcpHeader, WINDOW_BASE, WSCALE};

/// Fake TCP sequence state of one connection end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeqState {
    /// `--seq-mode`, 0..=4 (3 by default).
    pub mode: u8,
    /// Next sequence number to send.
    pub seq: u32,
    /// Acknowledgement number to send.
    pub ack_seq: u32,
    /// TSecr to send: the peer's last TSval.
    pub ts_ecr: u32,
    /// The peer's last acknowledgement number.
    pub peer_ack: u32,
    /// How many times in a row the peer repeated `peer_ack`.
    pub dup_acks: u32,
}

/// `a` is after `b` in sequence space.
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl SeqState {
    /// udp2raw's default, `--seq-mode 3`.
    pub fn new(seq: u32, ack_seq: u32) -> SeqState {
        SeqState {
            mode: 3,
            seq,
            ack_seq,
            ..SeqState::default()
        }
    }

    /// Call after sending a non-SYN ACK segment carrying `len` bytes; `random` is only read
    /// in mode 2.
    pub fn on_sent(&mut self, len: usize, random: u32) {
        if len == 0 {
            return;
        }
        let len = len as u32;
        match self.mode {
            0 => {}
            1 => self.seq = self.seq.wrapping_add(len),
            2 => {
                if random % 5 == 3 {
                    self.seq = self.seq.wrapping_add(len);
                }
            }
            _ => {
                self.seq = self.seq.wrapping_add(len);
                let window = if self.mode == 3 {
                    u32::from(WINDOW_BASE) << WSCALE
                } else {
                    u32::from(WINDOW_BASE)
                };
                if after(
                    self.seq.wrapping_add(MAX_DATA_LEN as u32),
                    self.peer_ack.wrapping_add(window),
                ) {
                    self.seq = self.peer_ack;
                }
                if self.dup_acks >= 3 {
                    self.dup_acks = 0;
                    self.seq = self.peer_ack;
                }
                if after(self.peer_ack, self.seq) {
                    self.seq = self.peer_ack;
                }
            }
        }
    }

    /// Call for every accepted received segment (`len` payload bytes).
    pub fn on_received(&mut self, h: &TcpHeader, len: usize) {
        if h.ack_seq == self.peer_ack {
            self.dup_acks = self.dup_acks.saturating_add(1);
        } else {
            self.dup_acks = 0;
        }
        self.peer_ack = h.ack_seq;
        if let Some((ts, _)) = h.timestamps {
            self.ts_ecr = ts;
        }
        if h.syn || !h.ack || len == 0 {
            return;
        }
        let end = h.seq.wrapping_add(len as u32);
        match self.mode {
            0..=2 => {
                if after(end, self.ack_seq) {
                    self.ack_seq = end;
                }
            }
            _ => {
                if h.seq == self.ack_seq {
                    self.ack_seq = end;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_3_advances_and_acks_in_order() {
        let mut a = SeqState::new(1000, 5000);
        a.peer_ack = 1000;
        a.on_sent(100, 0);
        assert_eq!(a.seq, 1100);
        let h = TcpHeader {
            seq: 5000,
            ack_seq: 1100,
            ack: true,
            ..TcpHeader::default()
        };
        a.on_received(&h, 50);
        assert_eq!(a.ack_seq, 5050);
        // Out of order: not acked in mode 3.
        let h = TcpHeader {
            seq: 6000,
            ack_seq: 1100,
            ack: true,
            ..TcpHeader::default()
        };
        a.on_received(&h, 50);
        assert_eq!(a.ack_seq, 5050);
    }

    #[test]
    fn mode_0_keeps_seq() {
        let mut a = SeqState {
            mode: 0,
            seq: 1,
            ..SeqState::default()
        };
        a.on_sent(100, 0);
        assert_eq!(a.seq, 1);
    }
}
