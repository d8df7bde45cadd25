//! The session table of a UDP server that tells its peers apart itself (the kcptun server by
//! source address, the mKCP listener by address and conv), with the caps that keep a flood of
//! forged sources or conversation IDs from costing unbounded memory:
//!
//! * sessions in total, and per source IP (one host can use any number of ports and convs);
//! * datagrams queued per session, and bytes queued across all sessions: every queued
//!   datagram is an exact-size copy counted against one shared budget until it is dropped.
//!
//! Past a cap the datagram is dropped, as a full socket buffer would drop it; KCP resends.
//! Sessions end on their own (dead link, keepalive timeout); their slots are reclaimed the
//! next time a cap is reached.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

/// How much one UDP session table may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Sessions at once.
    pub sessions: usize,
    /// Sessions at once from one IP address.
    pub per_source: usize,
    /// Datagrams queued for one session before it has read them.
    pub queue: usize,
    /// Bytes queued across all sessions.
    pub queued_bytes: usize,
}

impl Limits {
    /// The kcptun server's: a kcptun client multiplexes all its streams over `--conn`
    /// sessions (default 1), so 64 per address leaves room for a NAT full of clients. Each
    /// session's own buffers are bounded by its windows and smux buffer; the queues add at
    /// most 16 MiB in total however many sources send.
    pub const KCPTUN_SERVER: Limits = Limits {
        sessions: 4096,
        per_source: 64,
        queue: 1024,
        queued_bytes: 16 << 20,
    };

    /// The mKCP listener's: V2Ray opens one mKCP connection (one conv) per proxied
    /// connection, so a browser behind one address needs hundreds.
    pub const MKCP_SERVER: Limits = Limits {
        per_source: 512,
        ..Limits::KCPTUN_SERVER
    };
}

/// A datagram waiting in a session's queue, counted against the table's byte budget until it
/// is dropped (read or discarded with the queue).
pub struct Queued {
    bytes: Box<[u8]>,
    budget: Arc<AtomicUsize>,
}

impl Deref for Queued {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.budget.fetch_sub(self.bytes.len(), Ordering::Relaxed);
    }
}

struct Entry {
    tx: mpsc::Sender<Queued>,
    source: IpAddr,
}

/// Live sessions by key, with the counts the caps need.
pub struct SessionTable<K> {
    limits: Limits,
    peers: HashMap<K, Entry>,
    per_source: HashMap<IpAddr, usize>,
    budget: Arc<AtomicUsize>,
}

impl<K: Hash + Eq> SessionTable<K> {
    pub fn new(limits: Limits) -> SessionTable<K> {
        SessionTable {
            limits,
            peers: HashMap::new(),
            per_source: HashMap::new(),
            budget: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Hands `data` to the live session `key`; false if there is none (it may have ended).
    /// A full queue or an exhausted byte budget drops the datagram (still true).
    pub fn deliver(&mut self, key: &K, data: &[u8]) -> bool {
        let Some(entry) = self.peers.get(key) else {
            return false;
        };
        if entry.tx.is_closed() {
            self.remove(key);
            return false;
        }
        // A full queue drops the datagram before it is copied: a flood costs no allocation.
        if entry.tx.capacity() > 0
            && let Some(queued) = self.copy(data)
        {
            let _ = entry.tx.try_send(queued);
        }
        true
    }

    /// Whether a new session from `source` fits; reclaims the slots of ended sessions first
    /// when a cap is reached.
    pub fn admit(&mut self, source: IpAddr) -> bool {
        if !self.fits(source) {
            self.reclaim();
        }
        self.fits(source)
    }

    /// Registers a session admitted with [`SessionTable::admit`] and queues its first
    /// datagram; the session task reads the returned queue.
    pub fn insert(&mut self, key: K, source: IpAddr, first: &[u8]) -> mpsc::Receiver<Queued> {
        let (tx, rx) = mpsc::channel(self.limits.queue.max(1));
        if let Some(queued) = self.copy(first) {
            let _ = tx.try_send(queued);
        }
        if let Some(old) = self.peers.insert(key, Entry { tx, source }) {
            self.release(old.source);
        }
        *self.per_source.entry(source).or_insert(0) += 1;
        rx
    }

    /// Sessions in the table (ended ones count until reclaimed).
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Bytes queued right now across all sessions.
    pub fn queued_bytes(&self) -> usize {
        self.budget.load(Ordering::Relaxed)
    }

    fn fits(&self, source: IpAddr) -> bool {
        self.peers.len() < self.limits.sessions
            && self.per_source.get(&source).copied().unwrap_or(0) < self.limits.per_source
    }

    fn copy(&self, data: &[u8]) -> Option<Queued> {
        let taken = self.budget.fetch_add(data.len(), Ordering::Relaxed);
        let queued = Queued {
            bytes: data.into(),
            budget: Arc::clone(&self.budget),
        };
        // Over budget: dropping `queued` gives the bytes back.
        (taken + data.len() <= self.limits.queued_bytes).then_some(queued)
    }

    fn reclaim(&mut self) {
        let ended: Vec<IpAddr> = self
            .peers
            .values()
            .filter(|e| e.tx.is_closed())
            .map(|e| e.source)
            .collect();
        if ended.is_empty() {
            return;
        }
        self.peers.retain(|_, e| !e.tx.is_closed());
        for source in ended {
            self.release(source);
        }
    }

    fn remove(&mut self, key: &K) {
        if let Some(old) = self.peers.remove(key) {
            self.release(old.source);
        }
    }

    fn release(&mut self, source: IpAddr) {
        if let Some(n) = self.per_source.get_mut(&source) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_source.remove(&source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    const SMALL: Limits = Limits {
        sessions: 6,
        per_source: 3,
        queue: 4,
        queued_bytes: 1000,
    };

    #[test]
    fn caps_sessions_per_source_and_in_total() {
        let mut table = SessionTable::new(SMALL);
        let mut queues = Vec::new();
        for key in 0..10u32 {
            if table.admit(ip(1)) {
                queues.push(table.insert(key, ip(1), b"x"));
            }
        }
        assert_eq!(table.len(), 3, "one source is held to per_source");
        for key in 10..20u32 {
            let source = ip(2 + (key % 3) as u8);
            if table.admit(source) {
                queues.push(table.insert(key, source, b"x"));
            }
        }
        assert_eq!(table.len(), 6, "all sources together are held to sessions");
        // Ended sessions give their slots back.
        queues.truncate(1);
        assert!(table.admit(ip(1)));
        assert!(
            table.len() <= 1,
            "closed queues reclaimed, {} left",
            table.len()
        );
    }

    #[test]
    fn queues_are_bounded_in_count_and_bytes() {
        let mut table = SessionTable::new(SMALL);
        let mut rx = table.insert(1u32, ip(1), &[0; 100]);
        for _ in 0..10 {
            assert!(table.deliver(&1, &[0; 100]));
        }
        assert_eq!(
            table.queued_bytes(),
            400,
            "the queue holds `queue` datagrams"
        );
        let mut other = table.insert(2u32, ip(2), &[0; 400]);
        assert!(table.deliver(&2, &[0; 400]));
        assert!(
            table.queued_bytes() <= SMALL.queued_bytes,
            "the byte budget binds"
        );
        while rx.try_recv().is_ok() {}
        while other.try_recv().is_ok() {}
        assert_eq!(
            table.queued_bytes(),
            0,
            "read datagrams give their bytes back"
        );
        drop(rx);
        assert!(
            !table.deliver(&1, b"late"),
            "a session whose task ended takes nothing"
        );
        assert_eq!(table.queued_bytes(), 0);
    }
}
