//! The whole router's learned state as one fold over the journal: breakers, connections and
//! DRR deficits, plus the config generations that give `RouteDecided` indices their meaning.
//!
//! This is what snapshots hold, what replay and `--state-at` rebuild, and what a restarted actor
//! is given. It applies events only — the same `apply` functions the live actors call.

use std::collections::BTreeMap;

use quotaroute_journal::{
    BreakerCounted, BreakerTransition, ConfigLoaded, Envelope, Event, PeerApplied, RouteDecided,
};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::affinity::AffinitySettings;
use crate::affinity_bindings::{AffinityBindings, ClientQuota};
use crate::breaker::BreakerState;
use crate::burn_history::BurnHistory;
use crate::cached_input::CachedInputByConnection;
use crate::connection_state::ConnectionState;
use crate::drr::DrrDeficits;
use crate::pacing_rules::{PacingFold, PacingRules};
use crate::peer_progress::PeerProgress;
use crate::quota_share::{apply_route_decided, DrrKeys};
use crate::stored_responses::ResponseBindings;
use crate::topology::recorded_targets;
use crate::unserved_apis::UnservedApis;

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
    /// Which connection holds each stored response (stored-response placement).
    pub responses: ResponseBindings,
    /// How far the cluster's shared stream was read (empty for one node).
    pub peers: PeerProgress,
    /// Conversation affinity's bindings, by combo (behaviour §10). Not part of the layout-2
    /// shape: snapshots of layout 3 append it after the rest (`crate::snapshot`).
    #[serde(skip)]
    pub affinity: BTreeMap<String, AffinityBindings>,
    /// Each connection's input and cached input tokens (behaviour §10 "Seen"), folded from
    /// `request_succeeded`. Not part of the layout-3 shape: snapshots of layout 4 append it
    /// after the affinity bindings (`crate::snapshot`).
    #[serde(skip)]
    pub cached_input: CachedInputByConnection,
    /// `affinity.max_groups` and `ttl_ms` that bound the bindings this fold keeps: the
    /// configured ones on a node (`recover_state_with`), the defaults elsewhere (replay). Not
    /// stored: it is config, not something learned.
    #[serde(skip)]
    pub affinity_limits: AffinityLimits,
    /// The recent readings and decisions the forecast measures rates from (behaviour §13).
    /// Not stored: the snapshot layout does not change; after a restart from a snapshot it
    /// refills from the events after it (`burn_history`).
    #[serde(skip)]
    pub burn: BurnHistory,
    /// The APIs providers' hosts were found not to serve (behaviour §14). Not part of the
    /// layout-6 shape: snapshots of layout 7 append it after the response owners
    /// (`crate::snapshot`).
    #[serde(skip)]
    pub unserved_apis: UnservedApis,
    /// DRR key tables resolved from `configs`, by generation and combo. Derived, never stored:
    /// resolving a combo's targets once instead of per `route_decided` keeps the fold cheap.
    #[serde(skip)]
    route_keys: RouteKeyCache,
    /// The knobs of pacing's rule per generation and each combo's demand by hour of the week
    /// (behaviour §13). Not stored: rebuilt from the events after a snapshot.
    #[serde(skip)]
    pub pacing: PacingFold,
}

/// `(max_groups, ttl_ms)` for [`RouterState::affinity_limits`], and the number of clients the
/// config names (each keeps its share of `max_groups` across the combos, behaviour §11; 0
/// counts as 1); equal to any other (config, not learned state: two folds of one journal
/// compare equal whatever config bounded them).
#[derive(Debug, Clone, Copy, Default)]
pub struct AffinityLimits(pub Option<(usize, u64)>, pub usize);

impl PartialEq for AffinityLimits {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

/// Memo of [`recorded_targets`] as key tables (`None`: the combo is not in that generation).
/// Equal to any other: it is a pure function of `configs`, which the state compares itself.
/// FxHash: generations and journaled combo names only (every decision's fold looks one up).
#[derive(Debug, Clone, Default)]
struct RouteKeyCache {
    by_generation: FxHashMap<u64, FxHashMap<String, Option<DrrKeys>>>,
}

impl PartialEq for RouteKeyCache {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl RouteKeyCache {
    /// The key table of `combo` in `config`, resolved on first use.
    fn keys(
        &mut self,
        config: &ConfigLoaded,
        combo: &str,
        rules: &PacingRules,
    ) -> Option<&DrrKeys> {
        let by_combo = self.by_generation.entry(config.generation).or_default();
        if !by_combo.contains_key(combo) {
            let exponent_pm = rules.exponent_pm(config.generation, combo);
            let keys = recorded_targets(config, combo).map(|(strategy, targets)| {
                DrrKeys::new(strategy, &targets).with_exponent_pm(exponent_pm)
            });
            by_combo.insert(combo.to_owned(), keys);
        }
        by_combo.get(combo).and_then(Option::as_ref)
    }

    /// Forgets generations no longer kept.
    fn retain(&mut self, configs: &[ConfigLoaded]) {
        self.by_generation
            .retain(|generation, _| configs.iter().any(|c| c.generation == *generation));
    }
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
                // A generation number journaled again must not keep its old tables.
                self.route_keys.by_generation.remove(&config.generation);
                self.route_keys.retain(&self.configs);
            }
            Event::RouteDecided(decided) => {
                self.burn.apply(at_ms, event);
                self.pacing.count(at_ms, decided);
                self.apply_route(decided);
            }
            Event::PacingRule(rule) => {
                self.pacing.rules.apply(rule);
                // Tables resolved before the rule arrived must take its exponent.
                self.route_keys.by_generation.remove(&rule.generation);
            }
            Event::BreakerCounted(BreakerCounted { provider, .. })
            | Event::BreakerTransition(BreakerTransition { provider, .. }) => {
                // Looked up first so the per-event path does not allocate the key.
                match self.breakers.get_mut(provider) {
                    Some(breaker) => breaker.apply(at_ms, event),
                    None => self.breaker_mut(provider).apply(at_ms, event),
                }
            }
            Event::RequestSucceeded(_)
            | Event::RequestFailed(_)
            | Event::ConnectionCooldown(_)
            | Event::ConnectionDisabled(_)
            | Event::ConnectionCleared(_)
            | Event::ModelLocked(_)
            | Event::ModelUnlocked(_)
            | Event::UsageObserved(_) => {
                match event {
                    Event::RequestSucceeded(succeeded) => self.cached_input.apply(succeeded),
                    Event::UsageObserved(_) => self.burn.apply(at_ms, event),
                    _ => {}
                }
                if let (Some(provider), Some(connection)) = (event.provider(), event.connection()) {
                    match self.connections.get_mut(connection) {
                        Some(state) => state.apply(at_ms, event),
                        None => self
                            .connection_mut(provider, connection)
                            .apply(at_ms, event),
                    }
                }
            }
            Event::ResponseBound(bound) => self.responses.apply(at_ms, bound),
            Event::AffinityBound(bound) => {
                let limits = self.affinity_limits.0.unwrap_or_else(|| {
                    let settings = AffinitySettings::default();
                    (settings.max_groups, settings.ttl_ms)
                });
                // The client's node-wide share, as the live combos keep it.
                let held_elsewhere: usize = self
                    .affinity
                    .iter_mut()
                    .filter(|(combo, _)| **combo != bound.combo)
                    .map(|(_, bindings)| bindings.held_by(&bound.client))
                    .sum();
                let quota = Some(ClientQuota {
                    share: crate::affinity_bindings::share_of(limits.0, self.affinity_limits.1),
                    held_elsewhere,
                });
                match self.affinity.get_mut(&bound.combo) {
                    Some(bindings) => bindings.apply_within(at_ms, bound, limits, quota),
                    None => self
                        .affinity
                        .entry(bound.combo.clone())
                        .or_default()
                        .apply_within(at_ms, bound, limits, quota),
                }
            }
            Event::PeerApplied(applied) => self.apply_peer(applied),
            Event::NodeStarted(_)
            | Event::NodeStopped(_)
            | Event::AdminAction(_)
            | Event::JournalRecovered(_)
            | Event::CredentialRefreshed(_)
            | Event::CredentialFailed(_)
            // Clients' usage is the node's to fold (`src/clients`), not routing state.
            | Event::ClientUsage(_)
            | Event::ClientLimited(_)
            // Kept responses are the node's response store's, not routing state.
            | Event::ResponseStored(_)
            | Event::ResponseDeleted(_)
            // A prime's request is folded through its own request events; when a window was
            // primed is the node's (`prime_driver`).
            | Event::WindowPrimed(_) => {}
            Event::ApiUnserved(unserved) => self.unserved_apis.apply(at_ms, unserved),
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

    /// A copy of everything learned but the tables that grow with clients' traffic: the
    /// conversation groups (up to `affinity.max_groups`, a million by default), kept only for
    /// the combos `keep_groups` names, and the stored-response bindings, left out. What the
    /// admin view, `/metrics`, the dashboard and the supervisor's spawns read: copied in time
    /// that grows with the config (connections, windows, combos), not with the traffic, since
    /// it is copied under the recorder's lock (`crate::recorder`).
    pub fn copy_without_traffic_tables(&self, keep_groups: impl Fn(&str) -> bool) -> RouterState {
        RouterState {
            last_seq: self.last_seq,
            last_at_ms: self.last_at_ms,
            configs: self.configs.clone(),
            breakers: self.breakers.clone(),
            connections: self.connections.clone(),
            deficits: self.deficits.clone(),
            responses: ResponseBindings::default(),
            peers: self.peers.clone(),
            affinity: self
                .affinity
                .iter()
                .filter(|(combo, _)| keep_groups(combo))
                .map(|(combo, bindings)| (combo.clone(), bindings.clone()))
                .collect(),
            cached_input: self.cached_input.clone(),
            affinity_limits: self.affinity_limits,
            burn: self.burn.clone(),
            unserved_apis: self.unserved_apis.clone(),
            route_keys: RouteKeyCache::default(),
            pacing: self.pacing.clone(),
        }
    }

    /// A peer's event: applied to its connection through the same merge rule as the live
    /// actor. Every journaled one was new when the tail took it (`peer_progress`: a restart
    /// re-reads only what the journal lacks), so the fold applies each as it comes, and its
    /// lane's mark moves to it.
    fn apply_peer(&mut self, applied: &PeerApplied) {
        if let Event::AffinityBound(bound) = &*applied.event {
            // Journaled only when the live combo took it (`peer_merge::merge_peer_binding`):
            // folded as a binding made when its origin made it.
            self.apply(applied.origin_at_ms, &Event::AffinityBound(bound.clone()));
            self.peers.apply(applied);
            return;
        }
        if let (Some(provider), Some(connection)) =
            (applied.event.provider(), applied.event.connection())
        {
            let admitted = match self.connections.get_mut(connection) {
                Some(state) => state.apply_peer(applied),
                None => self
                    .connection_mut(provider, connection)
                    .apply_peer(applied),
            };
            if admitted {
                self.burn.apply(applied.origin_at_ms, &applied.event);
            }
        }
        self.peers.apply(applied);
    }

    fn apply_route(&mut self, decided: &RouteDecided) {
        let Some(config) = self
            .configs
            .iter()
            .find(|c| c.generation == decided.generation)
        else {
            return;
        };
        let Some(keys) = self
            .route_keys
            .keys(config, &decided.combo, &self.pacing.rules)
        else {
            return;
        };
        let deficits = match self.deficits.get_mut(&*decided.combo) {
            Some(deficits) => deficits,
            None => self.deficits.entry(decided.combo.to_string()).or_default(),
        };
        apply_route_decided(deficits, keys, decided);
    }
}

#[cfg(test)]
mod affinity_limit_tests {
    use quotaroute_journal::AffinityBound;

    use super::*;

    fn bound(group: u64) -> Event {
        Event::AffinityBound(AffinityBound {
            request_id: format!("r{group}"),
            combo: "pool".into(),
            group,
            client: "default".into(),
            provider: "p".into(),
            connection: "k1".into(),
            model: "m".into(),
            moved_from: None,
            reason: None,
        })
    }

    /// A restarted node folds its bindings with the configured `max_groups` and `ttl_ms`, not
    /// the defaults.
    #[test]
    fn bindings_fold_with_the_configured_limits() {
        let mut configured = RouterState {
            affinity_limits: AffinityLimits(Some((2, 3_600_000)), 0),
            ..RouterState::default()
        };
        let mut defaults = RouterState::default();
        for (i, at_ms) in [(1, 0), (2, 1_000), (3, 2_000), (4, 1_000_000)] {
            configured.apply(at_ms, &bound(i));
            defaults.apply(at_ms, &bound(i));
        }
        // max_groups 2: the two most recent; defaults keep every group within 300 s of the last.
        assert_eq!(configured.affinity["pool"].len(), 2);
        assert_eq!(defaults.affinity["pool"].len(), 1);
    }
}

#[cfg(test)]
mod pacing_rule_tests {
    use quotaroute_journal::{
        CandidatePace, ComboInfo, ComboPacing, PaceWindows, PacingClock, PacingKnobs, PacingRule,
        TargetInfo,
    };

    use super::*;

    fn config() -> Event {
        let target = |connection: &str| TargetInfo {
            connection: connection.into(),
            model: "m".into(),
            weight: 1,
        };
        Event::ConfigLoaded(ConfigLoaded {
            generation: 1,
            source: "t".into(),
            digest: "d".into(),
            providers: vec![],
            connections: vec![],
            combos: vec![ComboInfo {
                name: "pair".into(),
                strategy: "quota-share".into(),
                targets: vec![target("k1"), target("k2")],
            }],
        })
    }

    fn decided() -> Event {
        let pace = |target: u16, pace: u32| CandidatePace {
            target,
            pace,
            window: Some("5h".into()),
        };
        Event::RouteDecided(RouteDecided {
            request_id: "r1".into(),
            generation: 1,
            combo: "pair".into(),
            model: "pair".into(),
            room: vec![0, 1],
            chosen: Some(0),
            order: vec![0, 1],
            skipped: vec![],
            affinity: quotaroute_journal::AffinityOutcome::None,
            client: None,
            group: None,
            paces: vec![pace(0, 2_500), pace(1, 625)],
        })
    }

    /// Replay rebuilds a paced turn with the exponent its generation journaled: the turn's
    /// quanta are `1024 × pace²` after a `pacing_rule` of exponent 2, `1024 × pace` without one.
    #[test]
    fn the_fold_takes_a_turn_under_the_journaled_exponent() {
        let rule = Event::PacingRule(PacingRule {
            generation: 1,
            exponent_pm: 1_000,
            clock: PacingClock::Wall,
            pace_windows: PaceWindows::All,
            combos: vec![ComboPacing::new(
                "pair",
                PacingKnobs {
                    exponent_pm: 2_000,
                    ..PacingKnobs::UNJOURNALED
                },
            )],
        });
        let mut steep = RouterState::default();
        for event in [config(), rule, decided()] {
            steep.apply(0, &event);
        }
        let mut today = RouterState::default();
        for event in [config(), decided()] {
            today.apply(0, &event);
        }
        // k2 (pace 0.625, not chosen) earned 1024 × 0.625 = 640, or × 0.390625 = 400.
        assert_eq!(today.deficits["pair"].deficit("k2/m"), 640);
        assert_eq!(steep.deficits["pair"].deficit("k2/m"), 400);
        // The demand of the combo is counted as the live combo counts it.
        assert_eq!(steep.pacing.demand["pair"].by_hour.iter().sum::<u64>(), 1);
    }
}
