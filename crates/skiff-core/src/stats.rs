//! Live byte counters. The relay bumps them as bytes move (spliced or copied), so a reader
//! sees a connection's traffic while it is still open, not only when it ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::online::OnlineMaps;

/// One named counter, shared between the registry and the connections feeding it.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    /// The value, leaving zero behind in the same step (Xray's `reset`): bytes counted while
    /// it is read are in either this reading or the next, never lost.
    pub fn take(&self) -> u64 {
        self.0.swap(0, Ordering::Relaxed)
    }
}

/// Counters by Xray's names: `inbound>>>TAG>>>traffic>>>uplink`, `user>>>EMAIL>>>traffic>>>downlink`…
/// plus Skiff's own `relay>>>spliced` / `relay>>>copied`, which show which path moved bytes.
#[derive(Debug, Default)]
pub struct Stats {
    counters: Mutex<HashMap<String, Arc<Counter>>>,
    /// Bumped whenever a counter is created: a reader that keeps something per counter (the
    /// metrics endpoint's label text) knows when to look again.
    generation: AtomicU64,
    spliced: Arc<Counter>,
    copied: Arc<Counter>,
    online: OnlineMaps,
    handshake_failures: crate::HandshakeFailures,
    live: crate::live_connections::LiveConnections,
}

impl Stats {
    pub fn new() -> Arc<Stats> {
        Arc::new(Stats::default())
    }

    /// The counter with this name, created on first use. Called once per connection setup,
    /// never per packet.
    pub fn counter(&self, name: &str) -> Arc<Counter> {
        let mut map = self
            .counters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(counter) = map.get(name) {
            return counter.clone();
        }
        self.generation.fetch_add(1, Ordering::Relaxed);
        map.entry(name.to_owned()).or_default().clone()
    }

    /// Changes whenever a counter has been created since the last reading.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Hands `read` every counter Xray also has, by name, in no particular order: for a
    /// reader that keeps the counters themselves (see [`Stats::generation`]).
    pub fn visit_counters<R>(
        &self,
        read: impl FnOnce(&mut dyn Iterator<Item = (&str, &Arc<Counter>)>) -> R,
    ) -> R {
        let map = self
            .counters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        read(&mut map.iter().map(|(name, c)| (name.as_str(), c)))
    }

    /// The counter with this name when `listed` (the policy asks for it: the API and the
    /// metrics show it), else one of its own that nothing lists, so that the connection's
    /// path is the same either way.
    pub fn counter_if(&self, listed: bool, name: &str) -> Arc<Counter> {
        if listed {
            self.counter(name)
        } else {
            Arc::default()
        }
    }

    pub fn get(&self, name: &str) -> Option<u64> {
        let map = self
            .counters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.get(name).map(|c| c.get())
    }

    /// The named counter, if anything has created it.
    pub fn find(&self, name: &str) -> Option<Arc<Counter>> {
        let map = self
            .counters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.get(name).cloned()
    }

    /// The counters Xray also has (by Xray's names, so not `relay>>>…`) whose name contains
    /// `pattern`, sorted by name.
    pub fn matching(&self, pattern: &str) -> Vec<(String, Arc<Counter>)> {
        let map = self
            .counters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut found: Vec<_> = map
            .iter()
            .filter(|(name, _)| name.contains(pattern))
            .map(|(name, c)| (name.clone(), c.clone()))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }

    /// Hands `read` every counter Xray also has (not `relay>>>…`) with its value, in no
    /// particular order, without copying names: for a reader that walks them all (the metrics
    /// endpoint). New counters wait for `read` to return, so it should not block.
    pub fn visit<R>(&self, read: impl FnOnce(&mut dyn Iterator<Item = (&str, u64)>) -> R) -> R {
        let map = self
            .counters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        read(&mut map.iter().map(|(name, c)| (name.as_str(), c.get())))
    }

    /// Every counter and its value, sorted by name.
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        let map = self
            .counters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut all: Vec<_> = map.iter().map(|(k, v)| (k.clone(), v.get())).collect();
        all.push(("relay>>>spliced".into(), self.spliced.get()));
        all.push(("relay>>>copied".into(), self.copied.get()));
        all.sort();
        all
    }

    /// The users' online IPs (`statsUserOnline`), beside the counters as in Xray's manager.
    pub fn online(&self) -> &OnlineMaps {
        &self.online
    }

    /// Bytes the relay moved with splice(2), all connections together.
    pub fn spliced(&self) -> &Arc<Counter> {
        &self.spliced
    }

    /// Bytes the relay moved through user-space buffers.
    pub fn copied(&self) -> &Arc<Counter> {
        &self.copied
    }

    /// Inbound handshakes that failed, by why (for the metrics endpoint; not Xray counters).
    pub fn handshake_failures(&self) -> &crate::HandshakeFailures {
        &self.handshake_failures
    }

    /// Connections being served now, by inbound and by user.
    pub fn live(&self) -> &crate::live_connections::LiveConnections {
        &self.live
    }
}

/// The counters one direction of one connection feeds: a handful of shared atomics.
#[derive(Clone, Debug, Default)]
pub struct DirectionCounters {
    targets: Vec<Arc<Counter>>,
}

impl DirectionCounters {
    pub fn new(targets: Vec<Arc<Counter>>) -> DirectionCounters {
        DirectionCounters { targets }
    }

    pub fn add(&self, n: u64) {
        for c in &self.targets {
            c.add(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_shared_by_name() {
        let stats = Stats::new();
        let a = stats.counter("inbound>>>in>>>traffic>>>uplink");
        let dir = DirectionCounters::new(vec![a.clone(), stats.copied().clone()]);
        dir.add(5);
        dir.add(7);
        assert_eq!(stats.get("inbound>>>in>>>traffic>>>uplink"), Some(12));
        assert_eq!(stats.copied().get(), 12);
        assert!(
            stats
                .snapshot()
                .iter()
                .any(|(k, v)| k == "relay>>>copied" && *v == 12)
        );
    }
}
