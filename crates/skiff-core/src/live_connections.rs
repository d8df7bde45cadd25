//! Connections being served now, per inbound and per user: what an operator watches to see
//! who is on a server (the metrics endpoint's `skiff_inbound_connections_open` and
//! `skiff_user_connections_open`). Xray has no such counter; its online maps count IPs.
//!
//! A connection holds a [`LiveGuard`] for its inbound from accept to close, and one for its
//! user from authentication to close; dropping a guard takes the connection away. Counting
//! is one atomic add each way. Finding a user's count takes one lock (an inbound's count is
//! looked up once, when the inbound is built). Entries stay once created, as the traffic
//! counters do, so memory is bounded by the inbounds and users ever seen.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One live count.
#[derive(Debug, Default)]
pub struct LiveCount(AtomicU64);

impl LiveCount {
    /// Counts a connection until the guard is dropped.
    pub fn enter(self: &Arc<Self>) -> LiveGuard {
        self.0.fetch_add(1, Ordering::Relaxed);
        LiveGuard(self.clone())
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A connection's place in a [`LiveCount`].
#[derive(Debug)]
pub struct LiveGuard(Arc<LiveCount>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::Relaxed);
    }
}

type Table = Mutex<HashMap<Arc<str>, Arc<LiveCount>>>;

/// The live counts by inbound tag and by user email.
#[derive(Debug, Default)]
pub struct LiveConnections {
    inbounds: Table,
    users: Table,
}

fn lock(table: &Table) -> MutexGuard<'_, HashMap<Arc<str>, Arc<LiveCount>>> {
    table
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn entry(table: &Table, name: &str) -> Arc<LiveCount> {
    let mut map = lock(table);
    if let Some(count) = map.get(name) {
        return count.clone();
    }
    let count = Arc::new(LiveCount::default());
    map.insert(Arc::from(name), count.clone());
    count
}

/// The counts `keep` accepts, sorted by name.
fn read(table: &Table, keep: impl Fn(u64) -> bool) -> Vec<(Arc<str>, u64)> {
    let mut all: Vec<(Arc<str>, u64)> = lock(table)
        .iter()
        .map(|(name, count)| (name, count.get()))
        .filter(|(_, n)| keep(*n))
        .map(|(name, n)| (name.clone(), n))
        .collect();
    all.sort_unstable();
    all
}

impl LiveConnections {
    /// The count of inbound `tag` (kept by the inbound, which enters it per connection).
    pub fn inbound(&self, tag: &str) -> Arc<LiveCount> {
        entry(&self.inbounds, tag)
    }

    /// Counts a connection of user `email` until the guard is dropped.
    pub fn enter_user(&self, email: &str) -> LiveGuard {
        entry(&self.users, email).enter()
    }

    /// Every inbound's count, by tag.
    pub fn inbounds(&self) -> Vec<(Arc<str>, u64)> {
        read(&self.inbounds, |_| true)
    }

    /// The users with connections now, by email (a user with none is left out, so that a
    /// scrape of a server with many users stays short).
    pub fn users_connected(&self) -> Vec<(Arc<str>, u64)> {
        read(&self.users, |n| n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_count_while_held() {
        let live = LiveConnections::default();
        let inbound = live.inbound("in");
        let a = inbound.enter();
        let b = live.inbound("in").enter();
        let user = live.enter_user("a@x");
        assert_eq!(live.inbounds(), vec![(Arc::from("in"), 2)]);
        assert_eq!(live.users_connected(), vec![(Arc::from("a@x"), 1)]);
        drop((a, user));
        assert_eq!(live.inbounds(), vec![(Arc::from("in"), 1)]);
        assert!(live.users_connected().is_empty());
        drop(b);
        assert_eq!(inbound.get(), 0);
    }
}
