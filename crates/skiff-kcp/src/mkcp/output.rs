//! Segments packed into packets: a segment joins the current packet while it fits in the
//! space the MTU leaves after the header and seal, else it starts the next packet. (V2Ray
//! sends one segment per packet; its reader takes several.)

use std::collections::VecDeque;

use super::segment::Segment;

/// Spare packet buffers kept for reuse.
const SPARE: usize = 64;

pub(super) struct Output {
    current: Vec<u8>,
    max: usize,
    ready: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
}

impl Output {
    /// `max`: most segment bytes in one packet.
    pub(super) fn new(max: usize) -> Output {
        Output {
            current: Vec::new(),
            max,
            ready: VecDeque::new(),
            spare: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, segment: &Segment<'_>) {
        if !self.current.is_empty() && self.current.len() + segment.encoded_len() > self.max {
            self.finish();
        }
        segment.encode(&mut self.current);
    }

    fn finish(&mut self) {
        if self.current.is_empty() {
            return;
        }
        let next = self.spare.pop().unwrap_or_default();
        self.ready
            .push_back(std::mem::replace(&mut self.current, next));
    }

    /// The next packet's segments, if any; give the buffer back with [`Output::recycle`].
    pub(super) fn pop(&mut self) -> Option<Vec<u8>> {
        self.finish();
        self.ready.pop_front()
    }

    pub(super) fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < SPARE {
            buf.clear();
            self.spare.push(buf);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.current.is_empty() && self.ready.is_empty()
    }
}
