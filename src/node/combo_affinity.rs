//! Each combo's affinity hit rate since the node started (behaviour §10): how many routed turns
//! affinity held on their account, placed new, or moved, and the input tokens of the
//! successes served for the combo with the share the upstream read from its prompt cache.
//! Relaxed atomics bumped on the request path and read by `/admin/state`, the dashboard's
//! `state` event and `/metrics` (`quotaroute_affinity_turns_total{combo,outcome}`). Live
//! counters only: nothing here is journaled, so the journal's fold and snapshot are untouched.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use metrics::{counter, Counter};
use quotaroute_journal::AffinityOutcome;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Combos counted at once: the configured ones plus the implicit `provider/model` ones the
/// router made (they exist only for configured providers and the models their connections
/// serve); a combo first routed past this bound is not counted.
const MAX_COMBOS: usize = 4096;

/// One combo's counters.
pub struct ComboAffinity {
    held: AtomicU64,
    new: AtomicU64,
    moved: AtomicU64,
    input_tokens: AtomicU64,
    cached_input_tokens: AtomicU64,
    /// `quotaroute_affinity_turns_total` for held, new and moved, registered once per combo.
    turns: [Counter; 3],
}

impl std::fmt::Debug for ComboAffinity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComboAffinity").finish_non_exhaustive()
    }
}

impl ComboAffinity {
    fn register(combo: &str) -> Self {
        let turns = ["held", "new", "moved"].map(|outcome| {
            counter!(
                "quotaroute_affinity_turns_total",
                "combo" => combo.to_owned(),
                "outcome" => outcome
            )
        });
        ComboAffinity {
            held: AtomicU64::new(0),
            new: AtomicU64::new(0),
            moved: AtomicU64::new(0),
            input_tokens: AtomicU64::new(0),
            cached_input_tokens: AtomicU64::new(0),
            turns,
        }
    }

    /// One routing decision's affinity outcome (`None`: affinity did not apply, not a turn).
    pub fn turn(&self, outcome: AffinityOutcome) {
        let (count, index) = match outcome {
            AffinityOutcome::Held => (&self.held, 0),
            AffinityOutcome::New => (&self.new, 1),
            AffinityOutcome::Moved => (&self.moved, 2),
            AffinityOutcome::None => return,
        };
        count.fetch_add(1, Relaxed);
        if let Some(counter) = self.turns.get(index) {
            counter.increment(1);
        }
    }

    /// One success's input tokens (`tokens_in` includes the `cached` ones).
    pub fn served(&self, tokens_in: u64, cached: u64) {
        self.input_tokens.fetch_add(tokens_in, Relaxed);
        self.cached_input_tokens
            .fetch_add(cached.min(tokens_in), Relaxed);
    }

    fn view(&self, combo: &str) -> ComboAffinityView {
        let input_tokens = self.input_tokens.load(Relaxed);
        let cached_input_tokens = self.cached_input_tokens.load(Relaxed);
        ComboAffinityView {
            combo: combo.to_owned(),
            held: self.held.load(Relaxed),
            new: self.new.load(Relaxed),
            moved: self.moved.load(Relaxed),
            input_tokens,
            cached_input_tokens,
            cached_share: (input_tokens > 0)
                .then(|| cached_input_tokens as f64 / input_tokens as f64),
        }
    }
}

/// What `/admin/state`'s `affinity` list holds for one combo.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComboAffinityView {
    pub combo: String,
    pub held: u64,
    pub new: u64,
    pub moved: u64,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    /// `cached_input_tokens / input_tokens`; `None` before any input.
    pub cached_share: Option<f64>,
}

/// Combo name → its counters; an entry is made the first time the router routes the combo
/// (a successful routing decision: the combo exists).
#[derive(Default)]
pub struct AffinityTable {
    combos: RwLock<FxHashMap<Box<str>, Arc<ComboAffinity>>>,
}

impl AffinityTable {
    /// `combo`'s counters, made on first use (a read lock and an `Arc` clone after that).
    pub fn of(&self, combo: &str) -> Option<Arc<ComboAffinity>> {
        if let Some(found) = self.combos.read().ok()?.get(combo) {
            return Some(Arc::clone(found));
        }
        let mut combos = self.combos.write().ok()?;
        if let Some(found) = combos.get(combo) {
            return Some(Arc::clone(found));
        }
        if combos.len() >= MAX_COMBOS {
            return None;
        }
        let made = Arc::new(ComboAffinity::register(combo));
        combos.insert(combo.into(), Arc::clone(&made));
        Some(made)
    }

    /// One routing decision for `combo`: its entry made if it has none, so the combo's input
    /// counts from its first request even when affinity does not apply to it.
    pub fn turn(&self, combo: &str, outcome: AffinityOutcome) {
        if let Ok(combos) = self.combos.read() {
            if let Some(counters) = combos.get(combo) {
                counters.turn(outcome);
                return;
            }
        }
        if let Some(counters) = self.of(combo) {
            counters.turn(outcome);
        }
    }

    /// One success served for `combo` (only combos already routed are counted).
    pub fn served(&self, combo: &str, tokens_in: u64, cached: u64) {
        if let Ok(combos) = self.combos.read() {
            if let Some(counters) = combos.get(combo) {
                counters.served(tokens_in, cached);
            }
        }
    }

    /// Every counted combo, by name.
    pub fn views(&self) -> Vec<ComboAffinityView> {
        let Ok(combos) = self.combos.read() else {
            return Vec::new();
        };
        let mut views: Vec<ComboAffinityView> = combos
            .iter()
            .map(|(name, counters)| counters.view(name))
            .collect();
        views.sort_by(|a, b| a.combo.cmp(&b.combo));
        views
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_and_cached_share_per_combo() {
        let table = AffinityTable::default();
        table.turn("team", AffinityOutcome::New);
        table.turn("team", AffinityOutcome::Held);
        table.turn("team", AffinityOutcome::Held);
        table.turn("team", AffinityOutcome::None);
        table.turn("duo", AffinityOutcome::Moved);
        table.served("team", 1000, 750);
        table.served("team", 1000, 0);
        table.served("unrouted", 10, 10);
        let views = table.views();
        assert_eq!(views.len(), 2);
        let duo = &views[0];
        assert_eq!((duo.held, duo.new, duo.moved), (0, 0, 1));
        assert_eq!(duo.cached_share, None);
        let team = &views[1];
        assert_eq!((team.held, team.new, team.moved), (2, 1, 0));
        assert_eq!((team.input_tokens, team.cached_input_tokens), (2000, 750));
        assert_eq!(team.cached_share, Some(0.375));
    }

    #[test]
    fn a_combo_routed_without_affinity_counts_its_input_and_no_turn() {
        let table = AffinityTable::default();
        table.turn("team", AffinityOutcome::None);
        table.served("team", 100, 40);
        let views = table.views();
        assert_eq!(views.len(), 1);
        let team = &views[0];
        assert_eq!((team.held, team.new, team.moved), (0, 0, 0));
        assert_eq!(team.cached_share, Some(0.4));
    }
}
