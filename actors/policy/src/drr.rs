//! Integer Deficit Round-Robin deficits of one combo (behaviour §2 step 3): ranking a turn and
//! applying it. Must not gate, pick by in-flight or read a clock — that is `quota_share`'s job.
//!
//! Each target adds its *quantum* per turn: `weight × pace × 1024` (behaviour §13,
//! [`crate::pace::quantum`]), so at pace 1 a deficit is in 1/1024 weight units and
//! the sequences are §2's exactly (the ranking is scale-free).
//!
//! Deficits are keyed by execution key (`connection/model`), not by target index, so they survive
//! a config reload that reorders or adds targets. [`DrrDeficits::apply_turn`] is the only mutator:
//! the live combo and the journal replay (from `RouteDecided { room, chosen }`) both call it, so
//! the rebuilt deficits equal the live ones exactly.

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxBuildHasher;
use serde::{Deserialize, Serialize};

use crate::smooth_drr::Turn;

/// How many targets a turn holds on the stack ([`DrrDeficits::rank_into`] ranks them without
/// allocating, [`DrrDeficits::apply_turn_iter`] reads its room once).
const RANKED_ON_STACK: usize = 16;

/// One target that has room this turn, as the ranking needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoomEntry<'a> {
    pub key: &'a str,
    /// What it adds to its deficit per turn (its weight at its pace).
    pub quantum: u64,
    /// Position in the combo's config; breaks ties (earlier first).
    pub config_index: usize,
}

/// The DRR deficits of one combo, by execution key. A key never seen has deficit 0.
///
/// Held in a hash map because every decision looks up each target's key (twice live, once more
/// in the recorder's fold); stored and serialized as the sorted map [`StoredDeficits`], so
/// snapshots keep their layout and order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "StoredDeficits", into = "StoredDeficits")]
pub struct DrrDeficits {
    by_key: HashMap<String, i64, FxBuildHasher>,
}

/// The serialized form of [`DrrDeficits`] (the layout snapshots have always used).
#[derive(Serialize, Deserialize)]
struct StoredDeficits {
    by_key: BTreeMap<String, i64>,
}

impl From<StoredDeficits> for DrrDeficits {
    fn from(stored: StoredDeficits) -> Self {
        DrrDeficits {
            by_key: stored.by_key.into_iter().collect(),
        }
    }
}

impl From<DrrDeficits> for StoredDeficits {
    fn from(deficits: DrrDeficits) -> Self {
        StoredDeficits {
            by_key: deficits.by_key.into_iter().collect(),
        }
    }
}

/// A quantum as a signed deficit amount.
fn signed(quantum: u64) -> i64 {
    i64::try_from(quantum).unwrap_or(i64::MAX)
}

impl DrrDeficits {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every deficit multiplied by `factor` (a snapshot written when deficits counted whole
    /// weights, read into quanta).
    pub fn scale(&mut self, factor: u64) {
        let factor = signed(factor);
        for deficit in self.by_key.values_mut() {
            *deficit = deficit.saturating_mul(factor);
        }
    }

    /// The stored deficit of `key` (0 when it never took part).
    pub fn deficit(&self, key: &str) -> i64 {
        self.by_key.get(key).copied().unwrap_or(0)
    }

    /// Every stored deficit, by execution key in key order (for the admin state).
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        let mut sorted: Vec<(&str, i64)> = self
            .by_key
            .iter()
            .map(|(key, deficit)| (key.as_str(), *deficit))
            .collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        sorted.into_iter()
    }

    /// The deficit a target brings into `turn`: within its Σw, so a target that was out of
    /// the room (and whose deficit froze under a larger Σw) cannot take a burst.
    fn entering(&self, key: &str, turn: Turn) -> i64 {
        turn.bounded(self.deficit(key))
    }

    /// Ranks the targets with room: largest `deficit + w` first, ties by earlier config index.
    /// Returns their `config_index` values in rank order. Does not change anything.
    pub fn rank(&self, room: &[RoomEntry<'_>]) -> Vec<usize> {
        let mut ranked = Vec::with_capacity(room.len());
        self.rank_into(room.iter().copied(), &mut ranked);
        ranked
    }

    /// [`DrrDeficits::rank`] over any re-iterable room, appending to `out` (no list of entries
    /// to build first).
    pub fn rank_into<'k, I>(&self, room: I, out: &mut Vec<usize>)
    where
        I: Iterator<Item = RoomEntry<'k>> + Clone,
    {
        let turn = Turn::of(room.clone().map(|entry| signed(entry.quantum)));
        let credits = room.map(|entry| {
            let credit = self
                .entering(entry.key, turn)
                .saturating_add(signed(entry.quantum));
            (credit, entry.config_index)
        });
        // A combo's room fits on the stack; a longer one is ranked in a list of its own.
        let mut on_stack = [(0i64, 0usize); RANKED_ON_STACK];
        let mut filled = 0;
        let mut rest = Vec::new();
        for entry in credits {
            match on_stack.get_mut(filled) {
                Some(slot) if rest.is_empty() => {
                    *slot = entry;
                    filled += 1;
                }
                _ => {
                    if rest.is_empty() {
                        rest.extend_from_slice(&on_stack[..filled]);
                    }
                    rest.push(entry);
                }
            }
        }
        let ranked = if rest.is_empty() {
            &mut on_stack[..filled]
        } else {
            &mut rest[..]
        };
        // Largest credit first; on equal credit the earlier config index first. Config
        // indices are distinct, so no two entries compare equal and an unstable sort is exact.
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        out.extend(ranked.iter().map(|&(_, index)| index));
    }

    /// Applies one turn: every target in `room` adds its quantum, the `chosen` one pays the
    /// sum, and all of them are clamped to [−Σ, +Σ]. `chosen: None` (nothing served) or a chosen key
    /// outside the room (a strategy without DRR) changes nothing: no turn was taken.
    pub fn apply_turn(&mut self, room: &[(&str, u64)], chosen: Option<&str>) {
        self.apply_turn_iter(room.iter().copied(), chosen);
    }

    /// [`DrrDeficits::apply_turn`] over any re-iterable room, so callers holding the keys
    /// elsewhere (a combo's key table) need not collect them first. Updates stored deficits in
    /// place; a key is allocated only the first time it takes part. A turn reads its room three
    /// times (the chosen one in it, Σw, each step), so a combo's room is read once onto the
    /// stack (its quanta worked out once); a longer one is read as it is.
    pub fn apply_turn_iter<'k, I>(&mut self, room: I, chosen: Option<&str>)
    where
        I: Iterator<Item = (&'k str, u64)> + Clone,
    {
        if chosen.is_none() {
            return;
        }
        let mut on_stack = [("", 0u64); RANKED_ON_STACK];
        let mut filled = 0;
        for entry in room.clone() {
            match on_stack.get_mut(filled) {
                Some(slot) => *slot = entry,
                None => return self.apply_read_turn(room, chosen),
            }
            filled += 1;
        }
        self.apply_read_turn(on_stack[..filled].iter().copied(), chosen);
    }

    /// [`DrrDeficits::apply_turn_iter`] over a room cheap to read again.
    fn apply_read_turn<'k, I>(&mut self, room: I, chosen: Option<&str>)
    where
        I: Iterator<Item = (&'k str, u64)> + Clone,
    {
        let Some(chosen) = chosen else {
            return;
        };
        if !room.clone().any(|(key, _)| key == chosen) {
            return;
        }
        let turn = Turn::of(room.clone().map(|(_, quantum)| signed(quantum)));
        // One step of the turn for a key entering with `stored` (bounded first, as `entering`).
        let step = |key: &str, stored: i64, quantum: u64| {
            turn.credit_after(turn.bounded(stored), signed(quantum), key == chosen)
        };
        for (key, quantum) in room {
            // Entries are applied in order, so a key listed twice sees its first update. One
            // lookup per key; the key is allocated only the first time it takes part.
            match self.by_key.get_mut(key) {
                Some(stored) => *stored = step(key, *stored, quantum),
                None => {
                    self.by_key.insert(key.to_owned(), step(key, 0, quantum));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs `turns` stable decisions and returns the chosen config indices.
    fn run(weights: &[u32], turns: usize) -> Vec<usize> {
        let keys: Vec<String> = (0..weights.len()).map(|i| format!("c{i}/m")).collect();
        let mut deficits = DrrDeficits::new();
        let mut picks = Vec::with_capacity(turns);
        for _ in 0..turns {
            let room: Vec<RoomEntry<'_>> = keys
                .iter()
                .zip(weights)
                .enumerate()
                .map(|(config_index, (key, weight))| RoomEntry {
                    key,
                    quantum: u64::from(*weight),
                    config_index,
                })
                .collect();
            let winner = deficits.rank(&room)[0];
            let turn: Vec<(&str, u64)> = room.iter().map(|e| (e.key, e.quantum)).collect();
            deficits.apply_turn(&turn, Some(&keys[winner]));
            picks.push(winner);
        }
        picks
    }

    #[test]
    fn s2_step3_weights_2_1_give_h_l_h_h_l_h() {
        assert_eq!(run(&[2, 1], 6), vec![0, 1, 0, 0, 1, 0]);
    }

    #[test]
    fn s2_step3_equal_weights_alternate_in_config_order() {
        assert_eq!(run(&[1, 1, 1], 6), vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn s2_step3_rank_uses_deficit_plus_weight() {
        // Stored deficits tie at 0, so the heavier target ranks first on deficit + w.
        let deficits = DrrDeficits::new();
        let room = [
            RoomEntry {
                key: "a/m",
                quantum: 1,
                config_index: 0,
            },
            RoomEntry {
                key: "b/m",
                quantum: 3,
                config_index: 1,
            },
        ];
        assert_eq!(deficits.rank(&room), vec![1, 0]);
    }

    #[test]
    fn s2_step3_ties_rank_earlier_config_first() {
        let deficits = DrrDeficits::new();
        let room = [
            RoomEntry {
                key: "b/m",
                quantum: 2,
                config_index: 3,
            },
            RoomEntry {
                key: "a/m",
                quantum: 2,
                config_index: 1,
            },
        ];
        assert_eq!(deficits.rank(&room), vec![1, 3]);
    }

    #[test]
    fn s2_step3_chosen_pays_sum_of_weights_others_gain_weight() {
        let mut deficits = DrrDeficits::new();
        deficits.apply_turn(&[("a/m", 2), ("b/m", 1)], Some("a/m"));
        assert_eq!(deficits.deficit("a/m"), 2 - 3);
        assert_eq!(deficits.deficit("b/m"), 1);
    }

    #[test]
    fn s2_step3_failover_or_no_choice_leaves_deficits_alone() {
        let mut deficits = DrrDeficits::new();
        deficits.apply_turn(&[("a/m", 2), ("b/m", 1)], Some("a/m"));
        let before = deficits.clone();
        deficits.apply_turn(&[("a/m", 2), ("b/m", 1)], None);
        deficits.apply_turn(&[("a/m", 2), ("b/m", 1)], Some("z/m"));
        assert_eq!(deficits, before);
    }

    #[test]
    fn s2_step3_targets_outside_the_room_keep_their_deficit() {
        let mut deficits = DrrDeficits::new();
        deficits.apply_turn(&[("a/m", 1), ("b/m", 1)], Some("a/m"));
        assert_eq!(deficits.deficit("b/m"), 1);
        deficits.apply_turn(&[("a/m", 1), ("c/m", 1)], Some("c/m"));
        assert_eq!(deficits.deficit("b/m"), 1);
    }

    #[test]
    fn s2_step3_returning_target_is_clamped_to_current_sum() {
        // b froze at +12 under a large Σw; back in a room of Σw = 2 it counts as +2 at most.
        let mut deficits = DrrDeficits::new();
        deficits.by_key.insert("b/m".into(), 12);
        let room = [
            RoomEntry {
                key: "b/m",
                quantum: 1,
                config_index: 0,
            },
            RoomEntry {
                key: "c/m",
                quantum: 1,
                config_index: 1,
            },
        ];
        assert_eq!(deficits.rank(&room), vec![0, 1]);
        deficits.apply_turn(&[("b/m", 1), ("c/m", 1)], Some("b/m"));
        // Enters at min(12, 2) = 2, adds 1, pays 2.
        assert_eq!(deficits.deficit("b/m"), 1);
        // Unclamped, b would now take about six turns in a row; clamped, it alternates.
        let mut picks = Vec::new();
        for _ in 0..4 {
            let winner = deficits.rank(&room)[0];
            deficits.apply_turn(&[("b/m", 1), ("c/m", 1)], Some(room[winner].key));
            picks.push(winner);
        }
        assert_eq!(picks, vec![0, 1, 0, 1]);
    }

    #[test]
    fn s8_deficits_round_trip_through_serde() {
        let mut deficits = DrrDeficits::new();
        deficits.apply_turn(&[("a/m", 2), ("b/m", 1)], Some("b/m"));
        let json = serde_json::to_string(&deficits).unwrap();
        let back: DrrDeficits = serde_json::from_str(&json).unwrap();
        assert_eq!(back, deficits);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// §2 step 3: with a stable set, each count is within 1 of N·w/Σw.
        #[test]
        fn s2_step3_fairness_within_one(
            weights in prop::collection::vec(1u32..=10, 1..=6),
            turns in 1usize..300,
        ) {
            let picks = run(&weights, turns);
            let total: i64 = weights.iter().map(|w| i64::from(*w)).sum();
            for (index, weight) in weights.iter().enumerate() {
                let count = picks.iter().filter(|p| **p == index).count() as i64;
                let ideal_times_total = turns as i64 * i64::from(*weight);
                prop_assert!(
                    (count * total - ideal_times_total).abs() <= total,
                    "target {index} w={weight} got {count} of {turns}"
                );
            }
        }

        /// Deficits stay within [−Σw, +Σw] whatever the room does.
        #[test]
        fn s2_step3_deficits_stay_clamped(
            turns in prop::collection::vec(
                (prop::collection::vec((0usize..4, 1u32..=5), 1..=4), 0usize..4),
                1..60,
            ),
        ) {
            let keys = ["a/m", "b/m", "c/m", "d/m"];
            let mut deficits = DrrDeficits::new();
            for (room, chosen) in turns {
                let mut seen = std::collections::BTreeSet::new();
                let room: Vec<(&str, u64)> = room
                    .into_iter()
                    .filter(|(k, _)| seen.insert(*k))
                    .map(|(k, w)| (keys[k], u64::from(w)))
                    .collect();
                let total: i64 = room.iter().map(|(_, w)| *w as i64).sum();
                let chosen = room[chosen % room.len()].0;
                deficits.apply_turn(&room, Some(chosen));
                for (key, _) in &room {
                    prop_assert!(deficits.deficit(key).abs() <= total);
                }
            }
        }
    }

    /// The ranking as a list of its own (how it was ranked before the stack), to compare with.
    fn ranked_in_a_list(deficits: &DrrDeficits, room: &[RoomEntry<'_>]) -> Vec<usize> {
        let turn = Turn::of(room.iter().map(|entry| signed(entry.quantum)));
        let mut ranked: Vec<(i64, usize)> = room
            .iter()
            .map(|entry| {
                let credit = deficits
                    .entering(entry.key, turn)
                    .saturating_add(signed(entry.quantum));
                (credit, entry.config_index)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        ranked.into_iter().map(|(_, index)| index).collect()
    }

    proptest! {
        /// Rooms that fit on the stack and rooms past it rank as one list would rank them,
        /// after turns that left the deficits apart.
        #[test]
        fn rooms_on_and_past_the_stack_rank_as_a_list(
            weights in prop::collection::vec(1u64..6, 1..(3 * RANKED_ON_STACK)),
            winners in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let keys: Vec<String> = (0..weights.len()).map(|i| format!("c{i}/m")).collect();
            let room: Vec<RoomEntry<'_>> = keys
                .iter()
                .zip(&weights)
                .enumerate()
                .map(|(config_index, (key, &quantum))| RoomEntry { key, quantum, config_index })
                .collect();
            let turn: Vec<(&str, u64)> = room.iter().map(|e| (e.key, e.quantum)).collect();
            let mut deficits = DrrDeficits::new();
            for winner in &winners {
                deficits.apply_turn(&turn, Some(&keys[winner.index(keys.len())]));
            }
            prop_assert_eq!(deficits.rank(&room), ranked_in_a_list(&deficits, &room));
        }
    }
}
