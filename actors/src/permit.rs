//! The in-flight slot of one upstream attempt, released exactly once when it is dropped.
//!
//! In-flight counts are live atomics per connection, shared by every combo that uses the
//! connection and read without a message hop (behaviour §2 step 5). A `Permit` may also hold the
//! provider breaker's HALF_OPEN probe token, which it gives back on drop.
//!
//! A combo whose requests wait for a full pool (behaviour §11) *watches* the in-flight counts
//! of its targets: a release then calls the watchers, which wake the combo. While nobody
//! watches, a release costs one more load of a counter on the same cache line and nothing
//! else; the watcher list is only locked when someone waits.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::policy::breaker::ProbeGate;

/// Called when an in-flight slot is released (from the dropping thread: it must only signal).
pub type ReleaseWatcher = Arc<dyn Fn() + Send + Sync>;

/// Live in-flight count of one connection.
#[derive(Default)]
pub struct InFlight {
    count: AtomicU32,
    /// How many watchers `watchers` holds: the release path reads only this while it is 0.
    watched: AtomicU32,
    /// The combos waiting for a slot here, by a key of the watcher's choosing.
    watchers: Mutex<Vec<(u64, ReleaseWatcher)>>,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("count", &self.get())
            .field("watched", &self.watched.load(Ordering::Relaxed))
            .finish()
    }
}

impl InFlight {
    pub fn get(&self) -> u32 {
        self.count.load(Ordering::Relaxed)
    }

    /// Calls `watcher` on every release until [`InFlight::unwatch`]`(key)`. Replaces an earlier
    /// watcher of the same key. A release that happens while this runs may or may not call it:
    /// read [`InFlight::get`] after watching (the order of the two is sequentially consistent,
    /// so a release is either seen in the count or calls the watcher).
    pub fn watch(&self, key: u64, watcher: ReleaseWatcher) {
        let Ok(mut watchers) = self.watchers.lock() else {
            return;
        };
        watchers.retain(|(k, _)| *k != key);
        watchers.push((key, watcher));
        self.watched.store(watchers.len() as u32, Ordering::SeqCst);
    }

    /// Stops calling `key`'s watcher.
    pub fn unwatch(&self, key: u64) {
        let Ok(mut watchers) = self.watchers.lock() else {
            return;
        };
        watchers.retain(|(k, _)| *k != key);
        self.watched.store(watchers.len() as u32, Ordering::SeqCst);
    }

    fn release(&self) {
        // SeqCst pairs with `watch`: on x86 both are the instructions a relaxed decrement and
        // load already are (a locked sub, a plain load).
        self.count.fetch_sub(1, Ordering::SeqCst);
        if self.watched.load(Ordering::SeqCst) == 0 {
            return;
        }
        let watchers: Vec<ReleaseWatcher> = match self.watchers.lock() {
            Ok(watchers) => watchers.iter().map(|(_, w)| w.clone()).collect(),
            Err(_) => return,
        };
        for watcher in watchers {
            watcher();
        }
    }
}

/// A provider's HALF_OPEN probe tokens, shared by every combo routing to it.
pub type SharedProbeGate = Arc<Mutex<ProbeGate>>;

/// Holds one in-flight slot (and maybe a probe token) until dropped.
#[derive(Debug)]
pub struct Permit {
    in_flight: Arc<InFlight>,
    probe: Option<(SharedProbeGate, u64)>,
}

impl Permit {
    /// Takes a slot on `in_flight` at once.
    pub fn acquire(in_flight: Arc<InFlight>) -> Self {
        in_flight.count.fetch_add(1, Ordering::Relaxed);
        Permit {
            in_flight,
            probe: None,
        }
    }

    /// Marks this permit as holding the probe token taken at `taken_at_ms`.
    pub fn with_probe(mut self, gate: SharedProbeGate, taken_at_ms: u64) -> Self {
        self.probe = Some((gate, taken_at_ms));
        self
    }

    pub fn is_probe(&self) -> bool {
        self.probe.is_some()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.in_flight.release();
        if let Some((gate, taken_at_ms)) = self.probe.take() {
            if let Ok(mut gate) = gate.lock() {
                gate.release(taken_at_ms);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s2_step5_permit_releases_exactly_once_on_drop() {
        let in_flight = Arc::new(InFlight::default());
        let a = Permit::acquire(in_flight.clone());
        let b = Permit::acquire(in_flight.clone());
        assert_eq!(in_flight.get(), 2);
        drop(a);
        assert_eq!(in_flight.get(), 1);
        drop(b);
        assert_eq!(in_flight.get(), 0);
    }

    #[test]
    fn s11_a_release_calls_the_watchers_until_they_unwatch() {
        use std::sync::atomic::AtomicUsize;
        let in_flight = Arc::new(InFlight::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        drop(Permit::acquire(in_flight.clone()));
        in_flight.watch(
            7,
            Arc::new(move || {
                counted.fetch_add(1, Ordering::Relaxed);
            }),
        );
        drop(Permit::acquire(in_flight.clone()));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        in_flight.unwatch(7);
        drop(Permit::acquire(in_flight.clone()));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert_eq!(in_flight.get(), 0);
    }

    #[test]
    fn s2_step5_permit_released_when_its_task_panics() {
        let in_flight = Arc::new(InFlight::default());
        let moved = in_flight.clone();
        let joined = std::thread::spawn(move || {
            let _permit = Permit::acquire(moved);
            panic!("request handler panicked");
        })
        .join();
        assert!(joined.is_err());
        assert_eq!(in_flight.get(), 0);
    }
}
