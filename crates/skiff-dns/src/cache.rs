//! Answers kept for their TTL, per server, name and record type. Sans-IO: the caller passes
//! the time, so expiry is tested without sleeping. Bounded: a full cache first forgets what
//! has expired, then what expires soonest.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Enough for a busy proxy's working set; each entry is a name and a few addresses.
pub const DEFAULT_CAPACITY: usize = 4096;

/// A TTL above this is cut to it, so a server cannot pin an answer for days.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    server: usize,
    name: Box<str>,
    v6: bool,
}

#[derive(Debug)]
struct Entry {
    ips: Vec<IpAddr>,
    expires: Instant,
}

#[derive(Debug)]
pub struct Cache {
    capacity: usize,
    map: Mutex<HashMap<Key, Entry>>,
}

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache {
            capacity: capacity.max(1),
            map: Mutex::new(HashMap::new()),
        }
    }

    pub fn get(&self, server: usize, name: &str, v6: bool, now: Instant) -> Option<Vec<IpAddr>> {
        let key = Key {
            server,
            name: name.into(),
            v6,
        };
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&key) {
            Some(e) if e.expires > now => Some(e.ips.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Keeps `ips` for `ttl` seconds (an empty answer too: RFC 2308's negative caching, the
    /// TTL then coming from the SOA); a zero TTL is not kept.
    pub fn insert(
        &self,
        server: usize,
        name: &str,
        v6: bool,
        ips: &[IpAddr],
        ttl: u32,
        now: Instant,
    ) {
        if ttl == 0 {
            return;
        }
        let ttl = Duration::from_secs(ttl.into()).min(MAX_TTL);
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.capacity {
            map.retain(|_, e| e.expires > now);
        }
        if map.len() >= self.capacity
            && let Some(soonest) = map
                .iter()
                .min_by_key(|(_, e)| e.expires)
                .map(|(k, _)| k.clone())
        {
            map.remove(&soonest);
        }
        map.insert(
            Key {
                server,
                name: name.into(),
                v6,
            },
            Entry {
                ips: ips.to_vec(),
                expires: now + ttl,
            },
        );
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_with_their_ttl_and_the_size_is_bounded() {
        let cache = Cache::new(3);
        let t0 = Instant::now();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        cache.insert(0, "a.test", false, &[ip], 10, t0);
        assert_eq!(
            cache.get(0, "a.test", false, t0 + Duration::from_secs(9)),
            Some(vec![ip])
        );
        assert_eq!(cache.get(0, "a.test", true, t0), None);
        assert_eq!(cache.get(1, "a.test", false, t0), None);
        assert_eq!(
            cache.get(0, "a.test", false, t0 + Duration::from_secs(10)),
            None
        );
        cache.insert(0, "zero.test", false, &[ip], 0, t0);
        assert!(cache.is_empty());
        for (i, ttl) in [50, 20, 30, 40].into_iter().enumerate() {
            cache.insert(0, &format!("n{i}.test"), false, &[ip], ttl, t0);
        }
        assert_eq!(cache.len(), 3);
        // The one expiring soonest (n1, 20 s) made room.
        assert_eq!(cache.get(0, "n1.test", false, t0), None);
        assert!(cache.get(0, "n0.test", false, t0).is_some());
        // A week-long TTL is cut to a day.
        cache.insert(0, "long.test", false, &[ip], 7 * 86_400, t0);
        assert_eq!(cache.get(0, "long.test", false, t0 + MAX_TTL), None);
    }
}
