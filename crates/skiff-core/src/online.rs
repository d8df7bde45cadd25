//! Which client IPs a user is connected from right now: Xray's online maps
//! (`policy.levels.N.statsUserOnline`, read through `GetStatsOnline`, `GetStatsOnlineIpList`,
//! `GetAllOnlineUsers` and `GetUsersStats`).
//!
//! Xray (since 26.3) counts references: a connection adds its source IP once it knows the
//! user, and takes it away when it ends; an IP whose last connection ended is gone at once,
//! so there is nothing to expire and no sweeper. Connections from `127.0.0.1` and `::1` are
//! not counted at all (Xray skips its own host). An entry remembers when a connection from
//! that IP last arrived (Unix seconds), which is what the IP list reports.
//!
//! Here the reference is an [`OnlineGuard`] the connection holds: one lock to take it, one
//! to drop it, nothing in between. A map holds one entry per distinct IP with live
//! connections; the maps themselves, one per user seen, stay (as Xray's do) with a count of 0.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug)]
struct Entry {
    connections: u64,
    last_seen: i64,
}

/// One user's online IPs.
#[derive(Debug, Default)]
pub struct OnlineMap {
    entries: Mutex<HashMap<IpAddr, Entry>>,
    /// Distinct IPs, readable without the lock.
    count: AtomicUsize,
}

/// A connection's place in an [`OnlineMap`]; dropping it releases the place.
#[derive(Debug)]
pub struct OnlineGuard {
    map: Arc<OnlineMap>,
    ip: IpAddr,
}

impl Drop for OnlineGuard {
    fn drop(&mut self) {
        self.map.release(self.ip);
    }
}

impl OnlineMap {
    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a connection from `ip` until the guard is dropped; None (nothing counted) for
    /// `127.0.0.1` and `::1`, which Xray leaves out.
    pub fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<OnlineGuard> {
        let ip = ip.to_canonical();
        if ip == IpAddr::from([127, 0, 0, 1]) || ip == IpAddr::from(std::net::Ipv6Addr::LOCALHOST) {
            return None;
        }
        let now = unix_now();
        let mut entries = self.lock();
        let entry = entries.entry(ip).or_insert_with(|| {
            self.count.fetch_add(1, Ordering::Relaxed);
            Entry {
                connections: 0,
                last_seen: now,
            }
        });
        entry.connections += 1;
        entry.last_seen = now;
        Some(OnlineGuard {
            map: self.clone(),
            ip,
        })
    }

    fn release(&self, ip: IpAddr) {
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(&ip) {
            entry.connections -= 1;
            if entry.connections == 0 {
                entries.remove(&ip);
                self.count.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// How many distinct IPs have live connections.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Each online IP as Xray writes it (`1.2.3.4`, `[2001:db8::1]`) with the Unix second a
    /// connection from it last arrived, sorted by IP.
    pub fn ips(&self) -> Vec<(String, i64)> {
        let entries = self.lock();
        let mut ips: Vec<(IpAddr, i64)> =
            entries.iter().map(|(ip, e)| (*ip, e.last_seen)).collect();
        drop(entries);
        ips.sort();
        ips.into_iter()
            .map(|(ip, seen)| (xray_ip(ip), seen))
            .collect()
    }
}

/// Xray's text for a source address: IPv6 in brackets.
fn xray_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The online maps by Xray's names (`user>>>EMAIL>>>online`), created on a user's first
/// connection and kept.
#[derive(Debug, Default)]
pub struct OnlineMaps {
    maps: Mutex<HashMap<String, Arc<OnlineMap>>>,
}

impl OnlineMaps {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<OnlineMap>>> {
        self.maps
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The map named `user>>>EMAIL>>>online`, created on first use. Once per connection.
    pub fn of_user(&self, email: &str) -> Arc<OnlineMap> {
        let name = format!("user>>>{email}>>>online");
        self.lock().entry(name).or_default().clone()
    }

    /// The map with this full name, if a connection has created it.
    pub fn find(&self, name: &str) -> Option<Arc<OnlineMap>> {
        self.lock().get(name).cloned()
    }

    /// Every map with its name, sorted by name.
    pub fn all(&self) -> Vec<(String, Arc<OnlineMap>)> {
        let mut all: Vec<_> = self
            .lock()
            .iter()
            .map(|(name, map)| (name.clone(), map.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn online_ips_are_counted_by_connection() {
        let maps = OnlineMaps::default();
        let map = maps.of_user("a@x");
        let first = map.enter(ip("127.0.0.2")).unwrap();
        let second = map.enter(ip("127.0.0.2")).unwrap();
        let other = map.enter(ip("::ffff:10.0.0.1")).unwrap();
        let v6 = map.enter(ip("2001:db8::1")).unwrap();
        assert_eq!(map.count(), 3);
        let names: Vec<String> = map.ips().into_iter().map(|(ip, _)| ip).collect();
        assert_eq!(names, ["10.0.0.1", "127.0.0.2", "[2001:db8::1]"]);
        drop(first);
        assert_eq!(map.count(), 3);
        drop((second, other, v6));
        assert_eq!(map.count(), 0);
        assert!(map.ips().is_empty());
        // The map itself stays, as Xray's does.
        assert!(maps.find("user>>>a@x>>>online").is_some());
        assert_eq!(maps.all().len(), 1);
    }

    #[test]
    fn the_own_host_is_left_out() {
        let map = Arc::new(OnlineMap::default());
        assert!(map.enter(ip("127.0.0.1")).is_none());
        assert!(map.enter(ip("::1")).is_none());
        assert!(map.enter(ip("::ffff:127.0.0.1")).is_none());
        assert_eq!(map.count(), 0);
    }
}
