//! A value many readers take a snapshot of per connection and a rare writer replaces whole:
//! an inbound's user table, which Xray's API (add/remove user) changes while connections are
//! authenticated against it. A reader pays one uncontended read lock and an `Arc` clone; it
//! keeps its snapshot as long as it likes, unaffected by later writes.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

pub struct Swap<T> {
    current: RwLock<Arc<T>>,
    /// Serialises writers, so that two updates computed from the same snapshot cannot lose
    /// one of them; the new value is computed outside `current`'s write lock.
    writer: Mutex<()>,
}

impl<T> Swap<T> {
    pub fn new(value: T) -> Swap<T> {
        Swap {
            current: RwLock::new(Arc::new(value)),
            writer: Mutex::new(()),
        }
    }

    /// The current value.
    pub fn load(&self) -> Arc<T> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the value with `change(current)` when that is `Ok`; readers see either the
    /// old value or the new one, never a mix.
    pub fn update<E>(&self, change: impl FnOnce(&T) -> Result<T, E>) -> Result<(), E> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let next = Arc::new(change(&self.load())?);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = next;
        Ok(())
    }
}

impl<T: Default> Default for Swap<T> {
    fn default() -> Swap<T> {
        Swap::new(T::default())
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Swap<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.load().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_outlives_updates_and_a_failed_update_changes_nothing() {
        let swap = Swap::new(vec![1]);
        let before = swap.load();
        swap.update(|v| Ok::<_, ()>([v.as_slice(), &[2]].concat()))
            .unwrap();
        assert_eq!(*before, vec![1]);
        assert_eq!(*swap.load(), vec![1, 2]);
        assert_eq!(swap.update(|_| Err("no")), Err("no"));
        assert_eq!(*swap.load(), vec![1, 2]);
    }
}
