//! The in-flight slot of one upstream attempt, released exactly once when it is dropped.
//!
//! In-flight counts are live atomics per connection, shared by every combo that uses the
//! connection and read without a message hop (behaviour §2 step 5). A `Permit` may also hold the
//! provider breaker's HALF_OPEN probe token, which it gives back on drop.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::policy::breaker::ProbeGate;

/// Live in-flight count of one connection.
#[derive(Debug, Default)]
pub struct InFlight(AtomicU32);

impl InFlight {
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
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
        in_flight.0.fetch_add(1, Ordering::Relaxed);
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
        self.in_flight.0.fetch_sub(1, Ordering::Relaxed);
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
