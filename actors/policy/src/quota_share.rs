//! The selector of one request (behaviour §2 steps 0–4, and the other strategies): ordering a
//! combo's targets from a snapshot of their state. Must not mutate deficits, count in-flight or
//! evaluate blocks itself — the caller (`policy::selection::decide`, the one composition)
//! supplies [`TargetView`]s and journals the [`RouteDecided`], applied through
//! [`apply_route_decided`], the one path live and replay share.

use crate::pace::{quantum, spend_pm, ON_PACE};
use std::str::FromStr;
use std::sync::Arc;

use quotaroute_journal::event::{BlockReason, RouteDecided, TargetInfo};
use serde::{Deserialize, Serialize};

use super::drr::{DrrDeficits, RoomEntry};
use super::exec_key::exec_key;

/// How a combo orders its targets (contract: `strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Gating by buckets and concurrency, DRR, then power of two choices (§2).
    #[default]
    QuotaShare,
    /// Config order, nothing else.
    Priority,
    /// DRR with every weight taken as 1, no gating: equal turns.
    RoundRobin,
    /// DRR with the configured weights, no gating and no power of two choices.
    Weighted,
}

/// A strategy name the contract does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown strategy `{0}` (expected quota-share, priority, round-robin or weighted)")]
pub struct UnknownStrategy(pub String);

impl Strategy {
    /// The contract's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::QuotaShare => "quota-share",
            Strategy::Priority => "priority",
            Strategy::RoundRobin => "round-robin",
            Strategy::Weighted => "weighted",
        }
    }

    /// The weight a target carries in this strategy's DRR.
    pub fn drr_weight(self, configured: u32) -> u32 {
        match self {
            Strategy::RoundRobin => 1,
            _ => configured,
        }
    }
}

impl FromStr for Strategy {
    type Err = UnknownStrategy;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "quota-share" => Ok(Strategy::QuotaShare),
            "priority" => Ok(Strategy::Priority),
            "round-robin" => Ok(Strategy::RoundRobin),
            "weighted" => Ok(Strategy::Weighted),
            other => Err(UnknownStrategy(other.to_owned())),
        }
    }
}

/// What the selector knows about one target, in the combo's config order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetView {
    pub weight: u32,
    /// `connection/model`, shared with the combo's key table (no copy per decision).
    pub exec_key: Arc<str>,
    /// The first hard block found (breaker → connection → model lockout) and its remaining ms
    /// (`None` when it does not end by itself).
    pub hard_block: Option<(BlockReason, Option<u64>)>,
    /// Any of the connection's buckets for this model is saturated (§6).
    pub saturated: bool,
    /// Live in-flight requests on the target's connection.
    pub in_flight: u32,
    pub max_concurrent: Option<u32>,
    /// The provider breaker is DEGRADED.
    pub degraded: bool,
    /// Its pace in per mille (behaviour §13; [`ON_PACE`] with no reading or pacing off) and
    /// the window that set it.
    pub pace: u32,
    pub pace_window: Option<String>,
    /// The spending rule at that pace, `pace^exponent` in per mille (§13; equal to `pace`
    /// with exponent 1): what one unit of weight earns per turn.
    pub spend: u32,
}

impl TargetView {
    /// What it adds to its DRR deficit per turn under `strategy`: its DRR weight at its
    /// spending rule's value.
    pub fn quantum(&self, strategy: Strategy) -> u64 {
        quantum(strategy.drr_weight(self.weight), self.spend)
    }

    /// No room this turn: at its connection's soft cap, or on a DEGRADED provider.
    fn lacks_room(&self) -> bool {
        self.degraded || self.at_cap()
    }

    /// In-flight at or over its connection's `max_concurrent`.
    pub(crate) fn at_cap(&self) -> bool {
        self.max_concurrent.is_some_and(|cap| self.in_flight >= cap)
    }
}

/// §2 steps 1–2 before step 2's fail-open, the one "room" rule: whether eligible target `i`
/// has room this turn — not saturated (unless every eligible target is: step 1 fails open)
/// and not [lacking room](TargetView::lacks_room) (at cap, or DEGRADED).
fn room_rule<'t>(targets: &'t [TargetView], eligible: &[usize]) -> impl Fn(usize) -> bool + 't {
    let all_saturated = eligible.iter().all(|&i| targets[i].saturated);
    move |i| (all_saturated || !targets[i].saturated) && !targets[i].lacks_room()
}

/// Behaviour §11's "every target is at cap", by selection's own room rule: no target that is
/// not hard-blocked has room, and one of them would have room once a slot of its own is
/// released (unsaturated, not DEGRADED, at its cap). The fair queue waits then instead of
/// failing open; with no room and nothing a release could change (every target DEGRADED or
/// saturated, or none unblocked), waiting gains nothing and §2 fails open at once.
pub fn pool_full(targets: &[TargetView]) -> bool {
    let eligible: Vec<usize> = (0..targets.len())
        .filter(|&i| targets[i].hard_block.is_none())
        .collect();
    let has_room = room_rule(targets, &eligible);
    if eligible.iter().any(|&i| has_room(i)) {
        return false;
    }
    let all_saturated = eligible.iter().all(|&i| targets[i].saturated);
    eligible.iter().any(|&i| {
        let target = &targets[i];
        (all_saturated || !target.saturated) && !target.degraded && target.at_cap()
    })
}

/// The outcome of one selection. All indices point into the combo's targets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// Winner → rest with room → at cap → saturated. Empty only when all are hard-blocked.
    pub order: Vec<usize>,
    /// The targets that took part in DRR this turn, in config order.
    pub room: Vec<usize>,
    /// The target that pays for the turn (the head of `order`).
    pub chosen: Option<usize>,
    /// Hard-blocked targets, in config order.
    pub skipped: Vec<(usize, BlockReason, Option<u64>)>,
}

/// Orders `targets` for one request. Pure: reads `deficits`, never changes them.
pub fn select(strategy: Strategy, targets: &[TargetView], deficits: &DrrDeficits) -> Selection {
    let mut scratch = SelectScratch::default();
    select_into(strategy, targets, deficits, &mut scratch);
    scratch.selection
}

/// A [`Selection`] and the list of eligible targets selection needs, kept by a caller that
/// selects again and again (the live combo) so each selection reuses their lists. What a
/// selection was is never read back: [`select_into`] clears it first.
#[derive(Debug, Clone, Default)]
pub struct SelectScratch {
    pub selection: Selection,
    eligible: Vec<usize>,
}

/// [`select`] into `scratch.selection`, reusing its lists. The same selection as [`select`].
pub fn select_into(
    strategy: Strategy,
    targets: &[TargetView],
    deficits: &DrrDeficits,
    scratch: &mut SelectScratch,
) {
    let SelectScratch {
        selection,
        eligible,
    } = scratch;
    let Selection {
        order,
        room,
        chosen,
        skipped,
    } = selection;
    order.clear();
    room.clear();
    skipped.clear();
    eligible.clear();
    // Step 0: hard blocks leave the list.
    for (index, target) in targets.iter().enumerate() {
        match target.hard_block {
            Some((reason, remaining_ms)) => skipped.push((index, reason, remaining_ms)),
            None => eligible.push(index),
        }
    }

    *chosen = match strategy {
        Strategy::Priority => {
            order.extend_from_slice(eligible);
            order.first().copied()
        }
        Strategy::RoundRobin | Strategy::Weighted => {
            drr_order_into(strategy, targets, deficits, eligible, order);
            room.extend_from_slice(eligible);
            order.first().copied()
        }
        Strategy::QuotaShare => quota_share(targets, deficits, eligible, order, room),
    };
}

/// Steps 1–4 over the eligible targets, into `order` and `room` (both empty): the chosen one.
/// Groups are kept as predicates over `eligible` (config order) rather than partitioned into
/// lists of their own.
fn quota_share(
    targets: &[TargetView],
    deficits: &DrrDeficits,
    eligible: &[usize],
    order: &mut Vec<usize>,
    room: &mut Vec<usize>,
) -> Option<usize> {
    // Step 1: saturated targets go to the tail; all saturated → all eligible (fail-open).
    let all_saturated = eligible.iter().all(|i| targets[*i].saturated);
    let unsaturated = |i: usize| all_saturated || !targets[i].saturated;

    // Step 2: at cap or degraded go behind those with room; none with room → all have room.
    let has_room = room_rule(targets, eligible);
    let none_with_room = !eligible.iter().any(|&i| has_room(i));
    let with_room = |i: usize| unsaturated(i) && (none_with_room || has_room(i));
    room.extend(eligible.iter().copied().filter(|&i| with_room(i)));

    // Step 3: DRR over the targets with room.
    drr_order_into(Strategy::QuotaShare, targets, deficits, room, order);

    // Step 4: power of two choices — the runner-up wins only on strictly fewer in-flight.
    if let [first, second, ..] = order[..] {
        if targets[second].in_flight < targets[first].in_flight {
            order.swap(0, 1);
        }
    }

    let chosen = order.first().copied();
    // Then those at cap, then the saturated, each in config order.
    let at_cap = |i: usize| unsaturated(i) && !with_room(i);
    order.extend(eligible.iter().copied().filter(|&i| at_cap(i)));
    order.extend(eligible.iter().copied().filter(|&i| !unsaturated(i)));
    chosen
}

/// The DRR ranking of `indices` (config indices, in config order).
#[cfg(test)]
fn drr_order(
    strategy: Strategy,
    targets: &[TargetView],
    deficits: &DrrDeficits,
    indices: &[usize],
) -> Vec<usize> {
    let mut order = Vec::with_capacity(indices.len());
    drr_order_into(strategy, targets, deficits, indices, &mut order);
    order
}

/// Appends the DRR ranking of `indices` (config indices, in config order) to `order`.
fn drr_order_into(
    strategy: Strategy,
    targets: &[TargetView],
    deficits: &DrrDeficits,
    indices: &[usize],
    order: &mut Vec<usize>,
) {
    let entries = indices.iter().map(|index| RoomEntry {
        key: &targets[*index].exec_key,
        quantum: targets[*index].quantum(strategy),
        config_index: *index,
    });
    deficits.rank_into(entries, order);
}

/// A combo's targets as its DRR turn needs them — execution key and DRR weight by config
/// index — resolved once per config generation (live: per combo setup; replay: cached per
/// generation and combo), so applying a decision neither formats nor allocates.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrrKeys {
    keys: Arc<[(Arc<str>, u32)]>,
    /// The pacing exponent in force, per mille (§13; 1000 = proportional).
    exponent_pm: u32,
}

impl DrrKeys {
    /// The key table of `targets` (the combo's config, in order) under `strategy`.
    pub fn new(strategy: Strategy, targets: &[TargetInfo]) -> Self {
        DrrKeys {
            keys: targets
                .iter()
                .map(|target| {
                    (
                        Arc::from(exec_key(&target.connection, &target.model)),
                        strategy.drr_weight(target.weight),
                    )
                })
                .collect(),
            exponent_pm: ON_PACE,
        }
    }

    /// The same table under the pacing exponent `exponent_pm` (per mille), as a
    /// `pacing_rule` or the combo's settings give it.
    pub fn with_exponent_pm(mut self, exponent_pm: u32) -> Self {
        self.exponent_pm = exponent_pm;
        self
    }

    /// The execution key of config index `index`.
    pub fn key(&self, index: usize) -> Option<&Arc<str>> {
        self.keys.get(index).map(|(key, _)| key)
    }

    /// Key and DRR weight of a journaled index, the key shared; `None` outside the table.
    pub fn weighted(&self, index: u16) -> Option<(&Arc<str>, u32)> {
        self.keys
            .get(usize::from(index))
            .map(|(key, weight)| (key, *weight))
    }

    /// Key and DRR weight of a journaled index; `None` outside the table.
    fn entry(&self, index: u16) -> Option<(&str, u32)> {
        self.keys
            .get(usize::from(index))
            .map(|(key, weight)| (&**key, *weight))
    }
}

/// Applies one journaled decision to the combo's deficits — live right after journaling it,
/// and in replay: the one function both run, so replay equals live by construction. Each
/// target in the room adds its weight at the spending rule's value of the pace the decision
/// journaled for it (§13; on pace when it lists none). Indices outside `keys` are ignored.
pub fn apply_route_decided(deficits: &mut DrrDeficits, keys: &DrrKeys, decided: &RouteDecided) {
    let exponent = f64::from(keys.exponent_pm) / 1_000.0;
    let pace_of = |index: u16| {
        decided
            .paces
            .iter()
            .find(|candidate| candidate.target == index)
            .map_or(ON_PACE, |candidate| spend_pm(candidate.pace, exponent))
    };
    let room = decided.room.iter().filter_map(|i| {
        keys.entry(*i)
            .map(|(key, weight)| (key, quantum(weight, pace_of(*i))))
    });
    let chosen = decided
        .chosen
        .and_then(|i| keys.entry(i))
        .map(|(key, _)| key);
    deficits.apply_turn_iter(room, chosen);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop, prop_assert, prop_assert_eq, proptest, ProptestConfig};

    fn view(i: usize) -> TargetView {
        TargetView {
            weight: 1,
            exec_key: format!("c{i}/m").into(),
            hard_block: None,
            saturated: false,
            in_flight: 0,
            max_concurrent: None,
            degraded: false,
            pace: ON_PACE,
            pace_window: None,
            spend: ON_PACE,
        }
    }

    fn views(n: usize) -> Vec<TargetView> {
        (0..n).map(view).collect()
    }

    fn infos(targets: &[TargetView]) -> Vec<TargetInfo> {
        targets
            .iter()
            .map(|t| {
                let (connection, model) = t.exec_key.split_once('/').unwrap();
                TargetInfo {
                    connection: connection.into(),
                    model: model.into(),
                    weight: t.weight,
                }
            })
            .collect()
    }

    /// The journal record of a selection, as `selection::decide` writes it (indices are
    /// config indices here: every target is a candidate).
    fn route_decided(
        selection: &Selection,
        request_id: &str,
        targets: &[TargetInfo],
    ) -> RouteDecided {
        let index = |i: usize| u16::try_from(i).unwrap();
        RouteDecided {
            request_id: request_id.to_owned().into(),
            generation: 1,
            combo: "combo".into(),
            model: "m".into(),
            room: selection.room.iter().map(|i| index(*i)).collect(),
            chosen: selection.chosen.map(index),
            order: selection.order.iter().map(|i| index(*i)).collect(),
            affinity: quotaroute_journal::AffinityOutcome::None,
            client: None,
            skipped: selection
                .skipped
                .iter()
                .map(|(i, reason, remaining_ms)| quotaroute_journal::Skipped {
                    connection: targets[*i].connection.clone(),
                    model: targets[*i].model.clone(),
                    reason: *reason,
                    remaining_ms: *remaining_ms,
                })
                .collect(),
            group: None,
            paces: Vec::new(),
        }
    }

    /// One full turn as the combo actor does it: select, journal, apply.
    fn turn(strategy: Strategy, targets: &[TargetView], deficits: &mut DrrDeficits) -> Selection {
        let selection = select(strategy, targets, deficits);
        let decided = route_decided(&selection, "r", &infos(targets));
        apply_route_decided(deficits, &DrrKeys::new(strategy, &infos(targets)), &decided);
        selection
    }

    /// Behaviour §13 "What it guarantees": two equal-weight targets with paces 2.5 and 0.625
    /// split p1^e : p2^e within ±5 points over 200 requests — exponent 2: 94 : 6; exponent 1
    /// (today's rule): 80 : 20. Each turn journals the raw paces and the DRR turn is applied
    /// from the journal record under the exponent in force, as live and replay do.
    #[test]
    fn s13_exponent_two_splits_94_6_and_exponent_one_keeps_80_20() {
        for (exponent, expected_first) in [(2.0, 94.1), (1.0, 80.0)] {
            let mut targets = views(2);
            for (target, pace) in targets.iter_mut().zip([2_500, 625]) {
                target.pace = pace;
                target.spend = spend_pm(pace, exponent);
            }
            let infos = infos(&targets);
            let exponent_pm = (exponent * 1_000.0) as u32;
            let keys = DrrKeys::new(Strategy::QuotaShare, &infos).with_exponent_pm(exponent_pm);
            let mut deficits = DrrDeficits::new();
            let mut first = 0;
            for _ in 0..200 {
                let selection = select(Strategy::QuotaShare, &targets, &deficits);
                let mut decided = route_decided(&selection, "r", &infos);
                decided.paces = [2_500, 625]
                    .iter()
                    .enumerate()
                    .map(|(i, pace)| quotaroute_journal::CandidatePace {
                        target: i as u16,
                        pace: *pace,
                        window: Some("5h".into()),
                    })
                    .collect();
                apply_route_decided(&mut deficits, &keys, &decided);
                first += usize::from(selection.chosen == Some(0));
            }
            let share = first as f64 / 2.0;
            assert!(
                (share - expected_first).abs() <= 5.0,
                "exponent {exponent}: {first} of 200 to the pace-2.5 target"
            );
        }
        assert_eq!(spend_pm(2_500, 2.0), 6_250);
        assert_eq!(spend_pm(625, 2.0), 391);
        assert_eq!(spend_pm(625, 1.0), 625);
    }

    #[test]
    fn s2_strategy_names_parse_and_print() {
        for name in ["quota-share", "priority", "round-robin", "weighted"] {
            let strategy: Strategy = name.parse().unwrap();
            assert_eq!(strategy.as_str(), name);
            assert_eq!(
                serde_json::to_string(&strategy).unwrap(),
                format!("\"{name}\"")
            );
        }
        assert_eq!(
            "fastest".parse::<Strategy>(),
            Err(UnknownStrategy("fastest".into()))
        );
    }

    #[test]
    fn s2_step0_hard_blocks_are_removed_and_listed() {
        let mut targets = views(3);
        targets[0].hard_block = Some((BlockReason::Cooldown, Some(3_000)));
        targets[2].hard_block = Some((BlockReason::DisabledAuth, None));
        let selection = select(Strategy::QuotaShare, &targets, &DrrDeficits::new());
        assert_eq!(selection.order, vec![1]);
        assert_eq!(selection.chosen, Some(1));
        assert_eq!(
            selection.skipped,
            vec![
                (0, BlockReason::Cooldown, Some(3_000)),
                (2, BlockReason::DisabledAuth, None)
            ]
        );
    }

    #[test]
    fn s2_step0_all_hard_blocked_gives_empty_order_for_every_strategy() {
        let mut targets = views(2);
        for target in &mut targets {
            target.hard_block = Some((BlockReason::RateLimited, Some(1_000)));
        }
        for strategy in [
            Strategy::QuotaShare,
            Strategy::Priority,
            Strategy::RoundRobin,
            Strategy::Weighted,
        ] {
            let selection = select(strategy, &targets, &DrrDeficits::new());
            assert!(selection.order.is_empty(), "{strategy:?}");
            assert_eq!(selection.chosen, None);
            assert_eq!(selection.skipped.len(), 2);
        }
    }

    #[test]
    fn s2_step1_saturated_move_to_tail() {
        let mut targets = views(3);
        targets[0].saturated = true;
        let selection = select(Strategy::QuotaShare, &targets, &DrrDeficits::new());
        assert_eq!(selection.order, vec![1, 2, 0]);
        assert_eq!(selection.room, vec![1, 2]);
    }

    #[test]
    fn s2_step1_all_saturated_fail_open() {
        let mut targets = views(2);
        targets[0].saturated = true;
        targets[1].saturated = true;
        let selection = select(Strategy::QuotaShare, &targets, &DrrDeficits::new());
        assert_eq!(selection.order, vec![0, 1]);
        assert_eq!(selection.room, vec![0, 1]);
        assert_eq!(selection.chosen, Some(0));
    }

    #[test]
    fn s2_step2_at_cap_and_degraded_move_behind_room() {
        // Table: (in_flight, max_concurrent, degraded) per target → expected order.
        type Case = (Vec<(u32, Option<u32>, bool)>, Vec<usize>);
        let cases: Vec<Case> = vec![
            (vec![(8, Some(8), false), (0, None, false)], vec![1, 0]),
            (vec![(9, Some(8), false), (7, Some(8), false)], vec![1, 0]),
            (vec![(0, None, true), (0, None, false)], vec![1, 0]),
            (vec![(1, Some(1), false), (1, None, true)], vec![0, 1]), // none has room: fail-open
        ];
        for (rows, expected) in cases {
            let targets: Vec<TargetView> = rows
                .iter()
                .enumerate()
                .map(|(i, (in_flight, max_concurrent, degraded))| TargetView {
                    in_flight: *in_flight,
                    max_concurrent: *max_concurrent,
                    degraded: *degraded,
                    ..view(i)
                })
                .collect();
            let selection = select(Strategy::QuotaShare, &targets, &DrrDeficits::new());
            assert_eq!(selection.order, expected, "{rows:?}");
        }
    }

    #[test]
    fn s2_step2_order_is_winner_room_at_cap_saturated() {
        let mut targets = views(4);
        targets[0].saturated = true;
        targets[1].in_flight = 2;
        targets[1].max_concurrent = Some(2);
        let selection = select(Strategy::QuotaShare, &targets, &DrrDeficits::new());
        assert_eq!(selection.order, vec![2, 3, 1, 0]);
        assert_eq!(selection.room, vec![2, 3]);
    }

    #[test]
    fn s2_step3_weights_2_1_give_h_l_h_h_l_h() {
        let mut targets = views(2);
        targets[0].weight = 2;
        let mut deficits = DrrDeficits::new();
        let chosen: Vec<Option<usize>> = (0..6)
            .map(|_| turn(Strategy::QuotaShare, &targets, &mut deficits).chosen)
            .collect();
        let expected = [0, 1, 0, 0, 1, 0].map(Some);
        assert_eq!(chosen, expected);
    }

    #[test]
    fn s2_step4_p2c_runner_up_wins_on_strictly_fewer_in_flight() {
        let mut targets = views(3);
        targets[0].in_flight = 3;
        targets[1].in_flight = 2;
        let selection = select(Strategy::QuotaShare, &targets, &DrrDeficits::new());
        assert_eq!(selection.chosen, Some(1));
        assert_eq!(selection.order, vec![1, 0, 2]);
    }

    #[test]
    fn s2_step4_p2c_ties_keep_drr_winner() {
        let mut targets = views(3);
        targets[0].in_flight = 2;
        targets[1].in_flight = 2;
        targets[2].in_flight = 0; // third in DRR order: never considered by p2c
        let selection = select(Strategy::QuotaShare, &targets, &DrrDeficits::new());
        assert_eq!(selection.chosen, Some(0));
        assert_eq!(selection.order, vec![0, 1, 2]);
    }

    #[test]
    fn s2_step4_p2c_winner_pays_the_turn() {
        let mut targets = views(2);
        targets[0].in_flight = 1;
        let mut deficits = DrrDeficits::new();
        turn(Strategy::QuotaShare, &targets, &mut deficits);
        // In quanta: a weight is 1024 at pace 1.
        assert_eq!(deficits.deficit("c1/m"), 1024 - 2048);
        assert_eq!(deficits.deficit("c0/m"), 1024);
    }

    #[test]
    fn s2_priority_is_config_order_without_drr() {
        let mut targets = views(3);
        targets[0].saturated = true;
        targets[1].in_flight = 5;
        targets[1].max_concurrent = Some(1);
        let mut deficits = DrrDeficits::new();
        let selection = turn(Strategy::Priority, &targets, &mut deficits);
        assert_eq!(selection.order, vec![0, 1, 2]);
        assert_eq!(selection.chosen, Some(0));
        assert!(selection.room.is_empty());
        assert_eq!(deficits, DrrDeficits::new());
    }

    #[test]
    fn s2_round_robin_gives_equal_turns_whatever_the_weights() {
        let mut targets = views(2);
        targets[0].weight = 5;
        let mut deficits = DrrDeficits::new();
        let chosen: Vec<Option<usize>> = (0..4)
            .map(|_| turn(Strategy::RoundRobin, &targets, &mut deficits).chosen)
            .collect();
        assert_eq!(chosen, [0, 1, 0, 1].map(Some));
    }

    #[test]
    fn s2_weighted_ignores_gating_and_p2c() {
        let mut targets = views(2);
        targets[0].weight = 2;
        targets[0].saturated = true;
        targets[0].in_flight = 9;
        targets[0].max_concurrent = Some(1);
        let mut deficits = DrrDeficits::new();
        let chosen: Vec<Option<usize>> = (0..3)
            .map(|_| turn(Strategy::Weighted, &targets, &mut deficits).chosen)
            .collect();
        assert_eq!(chosen, [0, 1, 0].map(Some));
    }

    #[test]
    fn s8_route_decided_replay_rebuilds_live_deficits() {
        let mut targets = views(3);
        targets[1].weight = 3;
        let mut live = DrrDeficits::new();
        let mut journal = Vec::new();
        for step in 0..20u32 {
            targets[2].saturated = step % 3 == 0;
            targets[0].in_flight = step % 2;
            let selection = select(Strategy::QuotaShare, &targets, &live);
            let decided = route_decided(&selection, "r", &infos(&targets));
            let keys = DrrKeys::new(Strategy::QuotaShare, &infos(&targets));
            apply_route_decided(&mut live, &keys, &decided);
            journal.push(decided);
        }
        let mut replayed = DrrDeficits::new();
        for decided in &journal {
            let keys = DrrKeys::new(Strategy::QuotaShare, &infos(&targets));
            apply_route_decided(&mut replayed, &keys, decided);
        }
        assert_eq!(replayed, live);
        assert_ne!(live, DrrDeficits::new());
    }

    #[test]
    fn s11_the_pool_is_full_by_selections_own_room_rule() {
        // Per target: (saturated, in_flight, max_concurrent, degraded, hard-blocked).
        type Case = (
            &'static str,
            Vec<(bool, u32, Option<u32>, bool, bool)>,
            bool,
        );
        let cases: Vec<Case> = vec![
            (
                "one below its cap is room",
                vec![
                    (false, 1, Some(1), false, false),
                    (false, 0, Some(1), false, false),
                ],
                false,
            ),
            (
                "every one at its cap",
                vec![
                    (false, 1, Some(1), false, false),
                    (false, 2, Some(2), false, false),
                ],
                true,
            ),
            (
                "a DEGRADED one below its cap is no room",
                vec![
                    (false, 1, Some(1), false, false),
                    (false, 0, None, true, false),
                ],
                true,
            ),
            (
                "a saturated one below its cap is no room while another is not",
                vec![
                    (false, 1, Some(1), false, false),
                    (true, 0, None, false, false),
                ],
                true,
            ),
            (
                "every one saturated: step 1 fails open",
                vec![
                    (true, 1, Some(1), false, false),
                    (true, 0, Some(1), false, false),
                ],
                false,
            ),
            (
                "no room but nothing a release changes: §2 fails open now",
                vec![
                    (false, 0, None, true, false),
                    (true, 1, Some(1), false, false),
                ],
                false,
            ),
            (
                "the hard-blocked do not count",
                vec![
                    (false, 1, Some(1), false, false),
                    (false, 0, None, false, true),
                ],
                true,
            ),
            (
                "none unblocked is §7's, not full",
                vec![(false, 0, None, false, true)],
                false,
            ),
            (
                "no cap anywhere is never full",
                vec![(false, 9, None, false, false)],
                false,
            ),
        ];
        for (name, rows, full) in cases {
            let targets: Vec<TargetView> = rows
                .iter()
                .enumerate()
                .map(
                    |(i, &(saturated, in_flight, max_concurrent, degraded, blocked))| TargetView {
                        saturated,
                        in_flight,
                        max_concurrent,
                        degraded,
                        hard_block: blocked.then_some((BlockReason::Cooldown, Some(1))),
                        ..view(i)
                    },
                )
                .collect();
            assert_eq!(pool_full(&targets), full, "{name}");
        }
    }

    /// (weight, hard-blocked, saturated, in_flight, max_concurrent, degraded).
    type Row = (u32, bool, bool, u32, Option<u32>, bool);

    fn arb_target() -> impl proptest::strategy::Strategy<Value = Row> {
        (
            1u32..=4,
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.3),
            0u32..4,
            prop::option::of(1u32..4),
            prop::bool::weighted(0.2),
        )
    }

    fn build(rows: &[Row]) -> Vec<TargetView> {
        rows.iter()
            .enumerate()
            .map(
                |(i, (weight, blocked, saturated, in_flight, max_concurrent, degraded))| {
                    TargetView {
                        weight: *weight,
                        hard_block: blocked.then_some((BlockReason::Cooldown, Some(1))),
                        saturated: *saturated,
                        in_flight: *in_flight,
                        max_concurrent: *max_concurrent,
                        degraded: *degraded,
                        ..view(i)
                    }
                },
            )
            .collect()
    }

    fn arb_strategy() -> impl proptest::strategy::Strategy<Value = super::Strategy> {
        prop::sample::select(vec![
            super::Strategy::QuotaShare,
            super::Strategy::Priority,
            super::Strategy::RoundRobin,
            super::Strategy::Weighted,
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Selection is never empty unless every target is hard-blocked, and is a permutation
        /// of the unblocked targets headed by `chosen`.
        #[test]
        fn s2_selection_never_empty_unless_all_hard_blocked(
            rows in prop::collection::vec(arb_target(), 1..8),
            strategy in arb_strategy(),
            warmup in 0usize..5,
        ) {
            let targets = build(&rows);
            let mut deficits = DrrDeficits::new();
            for _ in 0..warmup {
                turn(strategy, &targets, &mut deficits);
            }
            let selection = select(strategy, &targets, &deficits);
            let unblocked: Vec<usize> =
                (0..targets.len()).filter(|i| targets[*i].hard_block.is_none()).collect();
            let mut sorted = selection.order.clone();
            sorted.sort_unstable();
            prop_assert_eq!(&sorted, &unblocked);
            prop_assert_eq!(selection.chosen, selection.order.first().copied());
            prop_assert_eq!(selection.skipped.len() + selection.order.len(), targets.len());
        }

        /// A scratch reused from one selection to the next (the live combo's) selects exactly
        /// as a fresh one: nothing of the selection before is carried into the next.
        #[test]
        fn a_reused_scratch_selects_as_a_fresh_one(
            turns in prop::collection::vec(
                (prop::collection::vec(arb_target(), 1..8), arb_strategy()),
                1..6,
            ),
        ) {
            let mut scratch = SelectScratch::default();
            let mut deficits = DrrDeficits::new();
            for (rows, strategy) in &turns {
                let targets = build(rows);
                select_into(*strategy, &targets, &deficits, &mut scratch);
                let fresh = turn(*strategy, &targets, &mut deficits);
                prop_assert_eq!(&scratch.selection, &fresh);
            }
        }

        /// Under quota-share, no saturated target precedes an unsaturated one.
        #[test]
        fn s2_step1_saturated_never_precede_unsaturated(
            rows in prop::collection::vec(arb_target(), 1..8),
        ) {
            let targets = build(&rows);
            let selection = select(super::Strategy::QuotaShare, &targets, &DrrDeficits::new());
            let first_saturated = selection.order.iter().position(|i| targets[*i].saturated);
            if let Some(position) = first_saturated {
                prop_assert!(selection.order[position..].iter().all(|i| targets[*i].saturated));
            }
        }

        /// p2c swaps the DRR winner only for a runner-up with strictly fewer in-flight.
        #[test]
        fn s2_step4_p2c_only_swaps_on_strictly_fewer_in_flight(
            rows in prop::collection::vec(arb_target(), 1..8),
            warmup in 0usize..5,
        ) {
            let targets = build(&rows);
            let mut deficits = DrrDeficits::new();
            for _ in 0..warmup {
                turn(super::Strategy::QuotaShare, &targets, &mut deficits);
            }
            let selection = select(super::Strategy::QuotaShare, &targets, &deficits);
            let drr = drr_order(super::Strategy::QuotaShare, &targets, &deficits, &selection.room);
            prop_assert_eq!(selection.order.len() >= drr.len(), true);
            if drr.len() >= 2 && selection.chosen != Some(drr[0]) {
                prop_assert_eq!(selection.chosen, Some(drr[1]));
                prop_assert!(targets[drr[1]].in_flight < targets[drr[0]].in_flight);
            } else if let Some(first) = drr.first() {
                prop_assert_eq!(selection.chosen, Some(*first));
            }
        }
    }
}
