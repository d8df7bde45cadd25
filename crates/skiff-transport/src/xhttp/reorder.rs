//! The reassembly of packet-up uploads (sans-IO): packets arrive as separate requests, possibly
//! on separate connections, each numbered; the tunnel reads them in number order. Xray keeps
//! them in a heap bounded by `scMaxBufferedPosts` (transport/internet/splithttp/upload_queue.go);
//! here the window is explicit, so a number far ahead, a repeat or an old one is refused at
//! once instead of growing the buffer.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;

/// How far ahead of the window a number may be and still wait for the window to move, in
/// windows. Beyond it the packet is refused at once: no honest client gets that far ahead.
const WAIT_WINDOWS: u64 = 4;

/// What to do with a packet numbered `seq` now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// It fits in the window: read its body and push it.
    Accept,
    /// Ahead of the window, but not absurdly: wait for the reader to make room.
    Wait,
    Refuse(PushError),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushError {
    /// Already buffered, or already read.
    Duplicate(u64),
    /// So far ahead of the next expected number that it can only be hostile.
    TooFarAhead { seq: u64, next: u64 },
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Duplicate(seq) => write!(f, "duplicate packet {seq}"),
            PushError::TooFarAhead { seq, next } => {
                write!(f, "packet {seq} is too far ahead of {next}")
            }
        }
    }
}

/// The reassembly buffer of one session.
#[derive(Debug)]
pub struct Reorder {
    next: u64,
    buffered: BTreeMap<u64, Bytes>,
    window: u64,
}

impl Reorder {
    /// `window`: `scMaxBufferedPosts`, how many packets may wait (at least 1).
    pub fn new(window: usize) -> Self {
        Reorder {
            next: 0,
            buffered: BTreeMap::new(),
            window: window.max(1) as u64,
        }
    }

    /// The number the reader expects next.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Packets waiting for an earlier one.
    pub fn buffered(&self) -> usize {
        self.buffered.len()
    }

    pub fn admit(&self, seq: u64) -> Admission {
        if seq < self.next || self.buffered.contains_key(&seq) {
            return Admission::Refuse(PushError::Duplicate(seq));
        }
        let ahead = seq - self.next;
        if ahead < self.window {
            Admission::Accept
        } else if ahead < self.window.saturating_mul(WAIT_WINDOWS) {
            Admission::Wait
        } else {
            Admission::Refuse(PushError::TooFarAhead {
                seq,
                next: self.next,
            })
        }
    }

    /// Stores a packet [`admit`](Self::admit) accepted; anything else is refused again.
    pub fn push(&mut self, seq: u64, data: Bytes) -> Result<(), PushError> {
        match self.admit(seq) {
            Admission::Accept => {
                self.buffered.insert(seq, data);
                Ok(())
            }
            Admission::Wait => Err(PushError::TooFarAhead {
                seq,
                next: self.next,
            }),
            Admission::Refuse(e) => Err(e),
        }
    }

    /// The next packet in order, if it has arrived.
    pub fn pop(&mut self) -> Option<Bytes> {
        let data = self.buffered.remove(&self.next)?;
        self.next += 1;
        Some(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reorders_and_refuses() {
        let mut r = Reorder::new(4);
        r.push(1, Bytes::from_static(b"b")).unwrap();
        assert_eq!(r.pop(), None);
        r.push(0, Bytes::from_static(b"a")).unwrap();
        assert_eq!(r.pop().as_deref(), Some(&b"a"[..]));
        assert_eq!(r.pop().as_deref(), Some(&b"b"[..]));
        assert_eq!(r.admit(1), Admission::Refuse(PushError::Duplicate(1)));
        r.push(3, Bytes::new()).unwrap();
        assert_eq!(r.admit(3), Admission::Refuse(PushError::Duplicate(3)));
        assert_eq!(r.admit(6), Admission::Wait);
        assert!(matches!(
            r.admit(u64::MAX),
            Admission::Refuse(PushError::TooFarAhead { .. })
        ));
    }

    proptest! {
        /// Any arrival order of 0..24 (under WAIT_WINDOWS windows ahead) is read back in
        /// order, and the buffer never holds more than the window.
        #[test]
        fn any_order_in_window(order in Just((0u64..24).collect::<Vec<_>>()).prop_shuffle(), window in 6usize..32) {
            let mut r = Reorder::new(window);
            let mut pending: Vec<u64> = order;
            let mut out = Vec::new();
            let mut rounds = 0;
            while !pending.is_empty() && rounds < 10_000 {
                rounds += 1;
                let seq = pending.remove(0);
                match r.admit(seq) {
                    Admission::Accept => r.push(seq, Bytes::from(seq.to_be_bytes().to_vec())).unwrap(),
                    Admission::Wait => pending.push(seq),
                    Admission::Refuse(e) => prop_assert!(false, "refused {e}"),
                }
                prop_assert!(r.buffered() <= window);
                while let Some(d) = r.pop() {
                    out.push(u64::from_be_bytes(d[..].try_into().unwrap()));
                }
            }
            prop_assert_eq!(out, (0u64..24).collect::<Vec<_>>());
        }

        #[test]
        fn arbitrary_pushes_stay_bounded(seqs in proptest::collection::vec(any::<u64>(), 0..200), window in 1usize..16) {
            let mut r = Reorder::new(window);
            for s in seqs {
                let _ = r.push(s, Bytes::new());
                prop_assert!(r.buffered() <= window);
                let _ = r.pop();
            }
        }
    }
}
