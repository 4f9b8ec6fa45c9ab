//! The whole router's learned state as one fold over the journal: breakers, connections and
//! DRR deficits, plus the config generations that give `RouteDecided` indices their meaning.
//!
//! This is what snapshots hold, what replay and `--state-at` rebuild, and what a restarted actor
//! is given. It applies events only — the same `apply` functions the live actors call.

use std::collections::BTreeMap;

use quotaroute_journal::{ConfigLoaded, Envelope, Event, RouteDecided};
use serde::{Deserialize, Serialize};

use crate::policy::breaker::BreakerState;
use crate::policy::connection_state::ConnectionState;
use crate::policy::drr::DrrDeficits;
use crate::policy::quota_share::apply_route_decided;
use crate::topology::recorded_targets;

/// How many config generations are kept to resolve `RouteDecided` indices (a decision can only
/// name the current generation or, around a reload, the one before).
const GENERATIONS_KEPT: usize = 4;

/// The fold of every journaled event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RouterState {
    /// Seq of the last envelope applied (0: none).
    pub last_seq: u64,
    /// `at_ms` of the last envelope applied.
    pub last_at_ms: u64,
    /// Recent config generations, oldest first.
    pub configs: Vec<ConfigLoaded>,
    pub breakers: BTreeMap<String, BreakerState>,
    pub connections: BTreeMap<String, ConnectionState>,
    pub deficits: BTreeMap<String, DrrDeficits>,
}

impl RouterState {
    /// The newest config generation, if any was journaled.
    pub fn config(&self) -> Option<&ConfigLoaded> {
        self.configs.last()
    }

    /// The next generation number to use for a config load.
    pub fn next_generation(&self) -> u64 {
        self.config().map_or(1, |c| c.generation + 1)
    }

    /// Applies one envelope; envelopes at or below `last_seq` are ignored, so a tail that
    /// overlaps a snapshot is harmless.
    pub fn apply_envelope(&mut self, envelope: &Envelope) {
        if envelope.seq != 0 && envelope.seq <= self.last_seq {
            return;
        }
        self.apply(envelope.at_ms, &envelope.event);
        self.last_seq = self.last_seq.max(envelope.seq);
    }

    /// Applies one event at `at_ms`.
    pub fn apply(&mut self, at_ms: u64, event: &Event) {
        self.last_at_ms = self.last_at_ms.max(at_ms);
        match event {
            Event::ConfigLoaded(config) => {
                self.configs.push(config.clone());
                if self.configs.len() > GENERATIONS_KEPT {
                    self.configs.remove(0);
                }
            }
            Event::RouteDecided(decided) => self.apply_route(decided),
            Event::BreakerCounted(e) => self.breaker_mut(&e.provider).apply(at_ms, event),
            Event::BreakerTransition(e) => self.breaker_mut(&e.provider).apply(at_ms, event),
            Event::RequestSucceeded(_)
            | Event::RequestFailed(_)
            | Event::ConnectionCooldown(_)
            | Event::ConnectionDisabled(_)
            | Event::ConnectionCleared(_)
            | Event::ModelLocked(_)
            | Event::ModelUnlocked(_)
            | Event::UsageObserved(_) => {
                if let (Some(provider), Some(connection)) = (event.provider(), event.connection()) {
                    self.connection_mut(provider, connection)
                        .apply(at_ms, event);
                }
            }
            Event::NodeStarted(_) | Event::NodeStopped(_) | Event::AdminAction(_) => {}
        }
    }

    pub fn breaker_mut(&mut self, provider: &str) -> &mut BreakerState {
        self.breakers
            .entry(provider.to_string())
            .or_insert_with(|| BreakerState::new(provider))
    }

    pub fn connection_mut(&mut self, provider: &str, connection: &str) -> &mut ConnectionState {
        self.connections
            .entry(connection.to_string())
            .or_insert_with(|| ConnectionState::new(provider, connection))
    }

    /// A breaker's state, or a fresh one.
    pub fn breaker(&self, provider: &str) -> BreakerState {
        self.breakers
            .get(provider)
            .cloned()
            .unwrap_or_else(|| BreakerState::new(provider))
    }

    /// A connection's state, or a fresh one.
    pub fn connection(&self, provider: &str, connection: &str) -> ConnectionState {
        self.connections
            .get(connection)
            .cloned()
            .unwrap_or_else(|| ConnectionState::new(provider, connection))
    }

    fn apply_route(&mut self, decided: &RouteDecided) {
        let Some(config) = self
            .configs
            .iter()
            .find(|c| c.generation == decided.generation)
        else {
            return;
        };
        let Some((strategy, targets)) = recorded_targets(config, &decided.combo) else {
            return;
        };
        apply_route_decided(
            self.deficits.entry(decided.combo.clone()).or_default(),
            strategy,
            &targets,
            decided,
        );
    }
}
