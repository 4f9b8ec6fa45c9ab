//! Who is who right now: the live actor refs, in-flight counters and probe gates by name.
//!
//! Read on the hot path without locks (an `ArcSwap` of immutable tables); only the supervisor
//! writes it, when actors are spawned, restarted or reloaded. In-flight counters and probe gates
//! outlive actor restarts and reloads: they count real requests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use ractor::ActorRef;
use rustc_hash::FxHashMap;

use crate::actor::messages::BreakerMsg;
use crate::actor::messages::ComboMsg;
use crate::actor::messages::ConnectionMsg;
use crate::breaker_hint::BreakerHint;
use crate::permit::{InFlight, SharedProbeGate};
use crate::policy::breaker::ProbeGate;
use crate::policy::topology::Topology;

/// One immutable generation of the tables.
///
/// The tables keyed by connection ids and provider names, which only the config names, hash
/// with FxHash (every attempt's report looks them up); `combos` and `implicit_used` keep the
/// seeded hasher, as implicit `provider/model` combos are named by what clients send.
#[derive(Clone, Default)]
pub struct Tables {
    pub topology: Arc<Option<Topology>>,
    pub combos: HashMap<String, ActorRef<ComboMsg>>,
    pub connections: FxHashMap<String, ActorRef<ConnectionMsg>>,
    pub breakers: FxHashMap<String, ActorRef<BreakerMsg>>,
    pub in_flight: FxHashMap<String, Arc<InFlight>>,
    pub gates: FxHashMap<String, SharedProbeGate>,
    /// Per provider: whether a success could change its breaker (see `breaker_hint`).
    pub breaker_hints: FxHashMap<String, Arc<BreakerHint>>,
    /// Per implicit `provider/model` combo: the tick of its last use, so the supervisor can
    /// drop the least recently used one when the table is full.
    pub implicit_used: HashMap<String, Arc<AtomicU64>>,
}

/// The shared registry.
#[derive(Default)]
pub struct Registry {
    tables: ArcSwap<Tables>,
    /// Orders uses of implicit combos (a counter, not a clock: only the order matters).
    use_ticks: AtomicU64,
    /// Conversation groups held per client across the combos (behaviour §11 shares).
    pub groups: crate::group_ledger::GroupLedger,
}

impl Registry {
    pub fn load(&self) -> arc_swap::Guard<Arc<Tables>> {
        self.tables.load()
    }

    /// The next use tick (for [`Tables::implicit_used`]).
    pub fn tick(&self) -> u64 {
        self.use_ticks.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// An owned snapshot of the tables (for work that awaits while holding it).
    pub fn load_full(&self) -> Arc<Tables> {
        self.tables.load_full()
    }

    /// Replaces the tables with `change` applied to a copy (supervisor only).
    pub fn update(&self, change: impl Fn(&mut Tables)) {
        self.tables.rcu(|current| {
            let mut next = Tables::clone(current);
            change(&mut next);
            next
        });
    }

    /// The in-flight counter of a connection, created on first use and kept forever after.
    pub fn in_flight(&self, connection: &str) -> Arc<InFlight> {
        if let Some(counter) = self.load().in_flight.get(connection) {
            return counter.clone();
        }
        let counter = Arc::new(InFlight::default());
        let mut chosen = counter.clone();
        self.tables.rcu(|current| {
            let mut next = Tables::clone(current);
            chosen = next
                .in_flight
                .entry(connection.to_string())
                .or_insert_with(|| counter.clone())
                .clone();
            next
        });
        chosen
    }

    /// The probe gate of a provider, created on first use and kept forever after.
    pub fn gate(&self, provider: &str) -> SharedProbeGate {
        if let Some(gate) = self.load().gates.get(provider) {
            return gate.clone();
        }
        let gate: SharedProbeGate = Arc::new(Mutex::new(ProbeGate::default()));
        let mut chosen = gate.clone();
        self.tables.rcu(|current| {
            let mut next = Tables::clone(current);
            chosen = next
                .gates
                .entry(provider.to_string())
                .or_insert_with(|| gate.clone())
                .clone();
            next
        });
        chosen
    }

    /// The breaker hint of a provider, created on first use and kept forever after (it must
    /// outlive breaker restarts: reporters' pending failures are counted in it).
    pub fn breaker_hint(&self, provider: &str) -> Arc<BreakerHint> {
        if let Some(hint) = self.load().breaker_hints.get(provider) {
            return hint.clone();
        }
        let hint = Arc::new(BreakerHint::default());
        let mut chosen = hint.clone();
        self.tables.rcu(|current| {
            let mut next = Tables::clone(current);
            chosen = next
                .breaker_hints
                .entry(provider.to_string())
                .or_insert_with(|| hint.clone())
                .clone();
            next
        });
        chosen
    }
}
