//! Conversation affinity's placement (behaviour §10 "Where they go"): given a group's binding
//! and the §2 selection, whether the turn is held on the bound target, starts a new group,
//! or moves. A preference inside selection, never a bypass of admission: the bound target
//! goes first only while §2 would give it room (not hard-blocked, not saturated, not at cap),
//! and it still pays its DRR share through the same `apply_route_decided` as any winner.
//! Failover inside a request never comes here.
//!
//! Pure: the selection and the leads are inputs; the combo actor and `--what-if` call it.

use std::collections::HashMap;
use std::sync::Arc;

use quotaroute_journal::{AffinityOutcome, BlockReason};
use serde::{Deserialize, Serialize};

use crate::quota_share::{Selection, TargetView};
use crate::smooth_drr::Turn;

/// `[affinity]` (contract): on by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinitySettings {
    pub enabled: bool,
    pub min_prompt_bytes: usize,
    pub ttl_ms: u64,
    pub max_groups: usize,
    /// Requests a bound target may run ahead of its DRR share; 0 = 16 × Σw.
    pub max_lead: u64,
}

impl Default for AffinitySettings {
    fn default() -> Self {
        AffinitySettings {
            enabled: true,
            min_prompt_bytes: 4096,
            ttl_ms: 300_000,
            max_groups: 1_000_000,
            max_lead: 0,
        }
    }
}

/// Why a bound target could not take its group's turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveReason {
    /// Hard-blocked (§2 step 0).
    Blocked(BlockReason),
    /// Saturated while another target is not (step 1).
    Saturated,
    /// At cap or DEGRADED while another target has room (step 2).
    AtCap,
    /// Ran more than `max_lead` requests ahead of its DRR share.
    MaxLead,
    /// No longer one of the combo's targets for this request.
    Gone,
}

impl MoveReason {
    pub fn as_str(self) -> &'static str {
        match self {
            MoveReason::Blocked(reason) => reason.as_str(),
            MoveReason::Saturated => "saturated",
            MoveReason::AtCap => "at_cap",
            MoveReason::MaxLead => "max_lead",
            MoveReason::Gone => "gone",
        }
    }
}

/// What affinity did with one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// No group: §2 alone.
    None,
    /// The group's first turn (or first since it was forgotten): §2's winner binds it.
    New,
    /// The bound target goes first.
    Held,
    /// The bound target could not serve: §2 among the rest, and the group rebinds there.
    Moved(MoveReason),
}

impl Placement {
    pub fn outcome(self) -> AffinityOutcome {
        match self {
            Placement::None => AffinityOutcome::None,
            Placement::New => AffinityOutcome::New,
            Placement::Held => AffinityOutcome::Held,
            Placement::Moved(_) => AffinityOutcome::Moved,
        }
    }

    /// Whether the target that takes this turn becomes the group's binding.
    pub fn binds(self) -> bool {
        matches!(self, Placement::New | Placement::Moved(_))
    }
}

/// The affinity a request's turn follows (behaviour §10), the strongest that holds: the
/// connection storing the response it continues, then the maker of its encrypted items (both
/// hard: the turn must go there), else its conversation's group (soft: a preference inside
/// selection, only with affinity on). The node asks it to build the request, `decide` to
/// place the turn: hard before soft is stated here only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnAffinity<'a, G> {
    StoredResponse(&'a str),
    EncryptedMaker(&'a str),
    Group(G),
    None,
}

/// Which affinity a turn follows, by precedence. `group` is asked only when no hard affinity
/// holds and affinity is `enabled` (finding it reads the prompt).
pub fn turn_affinity<'a, G>(
    stored_response: Option<&'a str>,
    encrypted_maker: Option<&'a str>,
    enabled: bool,
    group: impl FnOnce() -> Option<G>,
) -> TurnAffinity<'a, G> {
    if let Some(connection) = stored_response {
        return TurnAffinity::StoredResponse(connection);
    }
    if let Some(maker) = encrypted_maker {
        return TurnAffinity::EncryptedMaker(maker);
    }
    match enabled.then(group).flatten() {
        Some(group) => TurnAffinity::Group(group),
        None => TurnAffinity::None,
    }
}

/// Places one turn. `bound` is the group's binding (`None`: a new group), as an index into
/// `targets` (`Some(None)`: its target is not among them); `lead_exceeded` says the bound
/// target ran past `max_lead`. A held turn is moved to the head of `selection.order` and made
/// `chosen`, so it pays the DRR turn; otherwise the selection is left as §2 made it.
pub fn place(
    bound: Option<Option<usize>>,
    lead_exceeded: bool,
    targets: &[TargetView],
    selection: &mut Selection,
) -> Placement {
    let Some(bound) = bound else {
        return Placement::New;
    };
    let Some(bound) = bound.filter(|&i| i < targets.len()) else {
        return Placement::Moved(MoveReason::Gone);
    };
    if let Some((reason, _)) = targets[bound].hard_block {
        return Placement::Moved(MoveReason::Blocked(reason));
    }
    if selection.chosen == Some(bound) {
        // §2 picked it anyway: nothing to steer, and its lead cannot grow by its own turn.
        return Placement::Held;
    }
    if let Err(reason) = room_for(bound, targets, selection) {
        return Placement::Moved(reason);
    }
    if lead_exceeded {
        return Placement::Moved(MoveReason::MaxLead);
    }
    if let Some(at) = selection.order.iter().position(|&i| i == bound) {
        selection.order.remove(at);
    }
    selection.order.insert(0, bound);
    selection.chosen = Some(bound);
    Placement::Held
}

/// Whether §2 gives `target` room this turn (it is among the targets with room, or, for a
/// strategy without a room list, not saturated); else why not.
fn room_for(
    target: usize,
    targets: &[TargetView],
    selection: &Selection,
) -> Result<(), MoveReason> {
    let has_room = if selection.room.is_empty() {
        // Strategies without a room list (priority): eligible is enough.
        !targets[target].saturated
    } else {
        selection.room.contains(&target)
    };
    match (has_room, targets[target].saturated) {
        (true, _) => Ok(()),
        (false, true) => Err(MoveReason::Saturated),
        (false, false) => Err(MoveReason::AtCap),
    }
}

/// Places a turn whose account is fixed by its encrypted items (behaviour §10 "Encrypted
/// items"): `maker` goes first while it can serve — not hard-blocked, with room by §2's own
/// rule (not saturated) and below its own `max_concurrent` — and pays its DRR share; no
/// `max_lead`, no binding to keep. Every path passes the connections' caps (behaviour §11): a
/// maker at its cap is waited for in the combo's queue when it has `queue_ms` (the combo's
/// `must_wait`), and otherwise — or past `queue_ms` — the turn moves, §2's order standing, and
/// the target it reaches leaves out the items it cannot read. When every target is at cap
/// (§2's fail-open) such turns are spread by DRR like any other rather than piled on the
/// maker. `None`: the maker is not among `targets` (the turn moves).
pub fn place_hard(
    maker: Option<usize>,
    targets: &[TargetView],
    selection: &mut Selection,
) -> Placement {
    let Some(maker) = maker.filter(|&i| i < targets.len()) else {
        return Placement::Moved(MoveReason::Gone);
    };
    if let Some((reason, _)) = targets[maker].hard_block {
        return Placement::Moved(MoveReason::Blocked(reason));
    }
    if selection.chosen != Some(maker) {
        if let Err(reason) = room_for(maker, targets, selection) {
            return Placement::Moved(reason);
        }
        if targets[maker].at_cap() {
            return Placement::Moved(MoveReason::AtCap);
        }
    }
    if let Some(at) = selection.order.iter().position(|&i| i == maker) {
        selection.order.remove(at);
    }
    selection.order.insert(0, maker);
    selection.chosen = Some(maker);
    Placement::Held
}

/// How far each target of a combo ran ahead of its DRR share, in requests × Σw: every turn,
/// each target with room gives up its weight and the one chosen gains Σw (what DRR itself
/// does, but unclamped above, so a long run of held turns shows). Kept beside the deficits;
/// not journaled (a restart forgets leads, which only delays a rebind).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AffinityLeads {
    by_key: HashMap<Arc<str>, i64>,
}

impl AffinityLeads {
    /// Applies one decided turn: `room` as (key, weight), `chosen` the key that paid.
    pub fn apply_turn<'k>(
        &mut self,
        room: impl Iterator<Item = (&'k Arc<str>, u32)> + Clone,
        chosen: Option<&Arc<str>>,
    ) {
        let Some(chosen) = chosen else {
            return;
        };
        let turn = Turn::of(room.clone().map(|(_, w)| i64::from(w)));
        for (key, weight) in room {
            let lead = match self.by_key.get_mut(key) {
                Some(lead) => lead,
                None => self.by_key.entry(key.clone()).or_insert(0),
            };
            // Not banking credit: a target under its share may catch up by Σw at most.
            *lead = turn.lead_given(*lead, i64::from(weight));
        }
        match self.by_key.get_mut(chosen) {
            Some(lead) => *lead = turn.lead_won(*lead),
            None => {
                self.by_key.insert(chosen.clone(), turn.lead_won(0));
            }
        }
    }

    /// Whether `key` is more than `max_lead` requests (0 = 16 × Σw) ahead, for a combo whose
    /// targets with room weigh `total` (Σw).
    pub fn exceeded(&self, key: &str, max_lead: u64, total: u32) -> bool {
        let total = i64::from(total.max(1));
        let limit = match max_lead {
            0 => 16 * total,
            n => i64::try_from(n).unwrap_or(i64::MAX),
        };
        self.by_key
            .get(key)
            .is_some_and(|lead| *lead > limit.saturating_mul(total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drr::DrrDeficits;
    use crate::quota_share::{select, Strategy};

    fn view(i: usize) -> TargetView {
        TargetView {
            weight: 1,
            exec_key: format!("c{i}/m").into(),
            hard_block: None,
            saturated: false,
            in_flight: 0,
            max_concurrent: None,
            degraded: false,
            pace: crate::pace::ON_PACE,
            pace_window: None,
            spend: crate::pace::ON_PACE,
        }
    }

    fn views(n: usize) -> Vec<TargetView> {
        (0..n).map(view).collect()
    }

    /// One row: the targets as §2 sees them, the binding, the lead; what placement says and
    /// which target goes first.
    struct Row {
        name: &'static str,
        targets: Vec<TargetView>,
        bound: Option<Option<usize>>,
        lead_exceeded: bool,
        placement: Placement,
        first: usize,
    }

    #[test]
    fn s10_the_maker_of_encrypted_items_goes_first_while_it_can_serve() {
        let deficits = DrrDeficits::default();
        let mut targets = views(3);
        for maker in [0, 1, 2] {
            let mut selection = select(Strategy::QuotaShare, &targets, &deficits);
            assert_eq!(
                place_hard(Some(maker), &targets, &mut selection),
                Placement::Held
            );
            assert_eq!(selection.order[0], maker);
            assert_eq!(selection.chosen, Some(maker));
            assert_eq!(selection.order.len(), 3, "each target once");
        }
        // Saturated or at its cap while others have room: the turn moves (§11: every path
        // passes `max_concurrent`), §2's order standing.
        targets[1].saturated = true;
        targets[2].max_concurrent = Some(1);
        targets[2].in_flight = 1;
        for (maker, reason) in [(1, MoveReason::Saturated), (2, MoveReason::AtCap)] {
            let mut selection = select(Strategy::QuotaShare, &targets, &deficits);
            let before = selection.order.clone();
            assert_eq!(
                place_hard(Some(maker), &targets, &mut selection),
                Placement::Moved(reason)
            );
            assert_eq!(selection.order, before);
            assert_ne!(selection.order[0], maker);
        }
        // Every target at cap (§2's fail-open): the turn is not piled on its maker; §2's
        // order (DRR over all) stands, whoever it picks.
        let mut full = views(3);
        for target in &mut full {
            target.max_concurrent = Some(1);
            target.in_flight = 1;
        }
        let mut selection = select(Strategy::QuotaShare, &full, &deficits);
        let before = selection.order.clone();
        let maker = *before.last().unwrap();
        assert_eq!(
            place_hard(Some(maker), &full, &mut selection),
            Placement::Moved(MoveReason::AtCap)
        );
        assert_eq!(selection.order, before);
        // §2's own pick is held as it is.
        assert_eq!(
            place_hard(Some(before[0]), &full, &mut selection),
            Placement::Held
        );
        targets[2].hard_block = Some((BlockReason::RateLimited, Some(3_600_000)));
        let mut selection = select(Strategy::QuotaShare, &targets, &deficits);
        let before = selection.order.clone();
        assert_eq!(
            place_hard(Some(2), &targets, &mut selection),
            Placement::Moved(MoveReason::Blocked(BlockReason::RateLimited))
        );
        assert_eq!(selection.order, before, "§2's order stands");
        assert_eq!(
            place_hard(None, &targets, &mut selection),
            Placement::Moved(MoveReason::Gone)
        );
    }

    #[test]
    fn placement_table() {
        let deficits = DrrDeficits::default();
        let blocked = |i: usize| {
            let mut v = views(3);
            v[i].hard_block = Some((BlockReason::Cooldown, Some(1_000)));
            v
        };
        let saturated = |i: usize| {
            let mut v = views(3);
            v[i].saturated = true;
            v
        };
        let at_cap = |i: usize| {
            let mut v = views(3);
            v[i].max_concurrent = Some(1);
            v[i].in_flight = 1;
            v
        };
        let rows = [
            Row {
                name: "a new group takes §2's winner",
                targets: views(3),
                bound: None,
                lead_exceeded: false,
                placement: Placement::New,
                first: 0,
            },
            Row {
                name: "a bound target with room goes first",
                targets: views(3),
                bound: Some(Some(2)),
                lead_exceeded: false,
                placement: Placement::Held,
                first: 2,
            },
            Row {
                name: "a hard-blocked bound target is never used",
                targets: blocked(2),
                bound: Some(Some(2)),
                lead_exceeded: false,
                placement: Placement::Moved(MoveReason::Blocked(BlockReason::Cooldown)),
                first: 0,
            },
            Row {
                name: "a saturated bound target moves the group",
                targets: saturated(1),
                bound: Some(Some(1)),
                lead_exceeded: false,
                placement: Placement::Moved(MoveReason::Saturated),
                first: 0,
            },
            Row {
                name: "a bound target at cap moves the group",
                targets: at_cap(1),
                bound: Some(Some(1)),
                lead_exceeded: false,
                placement: Placement::Moved(MoveReason::AtCap),
                first: 0,
            },
            Row {
                name: "a bound target too far ahead moves the group",
                targets: views(3),
                bound: Some(Some(1)),
                lead_exceeded: true,
                placement: Placement::Moved(MoveReason::MaxLead),
                first: 0,
            },
            Row {
                name: "a target gone from the combo moves the group",
                targets: views(3),
                bound: Some(None),
                lead_exceeded: false,
                placement: Placement::Moved(MoveReason::Gone),
                first: 0,
            },
            Row {
                name: "§2's own winner is held even past its lead",
                targets: views(3),
                bound: Some(Some(0)),
                lead_exceeded: true,
                placement: Placement::Held,
                first: 0,
            },
        ];
        for row in rows {
            let mut selection = select(Strategy::QuotaShare, &row.targets, &deficits);
            let room = selection.room.clone();
            let placement = place(row.bound, row.lead_exceeded, &row.targets, &mut selection);
            assert_eq!(placement, row.placement, "{}", row.name);
            assert_eq!(selection.order[0], row.first, "{}", row.name);
            assert_eq!(selection.chosen, Some(row.first), "{}", row.name);
            assert_eq!(selection.room, room, "{}: room is §2's", row.name);
            let mut sorted = selection.order.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), selection.order.len(), "{}", row.name);
        }
    }

    #[test]
    fn leads_grow_with_held_turns_and_are_bounded_below() {
        let keys: Vec<Arc<str>> = (0..4).map(|i| Arc::from(format!("c{i}/m"))).collect();
        let room = || keys.iter().map(|k| (k, 1u32));
        let mut leads = AffinityLeads::default();
        // Each turn target 0 takes puts it 3/4 of a request (3 in units of 1/Σw) ahead; the
        // default bound is 16 × Σw = 64 requests = 256 units.
        for _ in 0..85 {
            leads.apply_turn(room(), Some(&keys[0]));
        }
        assert!(!leads.exceeded("c0/m", 0, 4), "255 units are within 256");
        leads.apply_turn(room(), Some(&keys[0]));
        assert!(leads.exceeded("c0/m", 0, 4));
        assert!(!leads.exceeded("c1/m", 0, 4));
        assert!(leads.by_key["c1/m"] >= -4, "no banked credit");
        assert!(leads.exceeded("c0/m", 10, 4));
    }

    #[test]
    fn hard_affinities_come_before_the_group() {
        use TurnAffinity::{EncryptedMaker, Group, StoredResponse};
        let asked = std::cell::Cell::new(0);
        let group = || {
            asked.set(asked.get() + 1);
            Some(7u64)
        };
        let rows = [
            // (stored response, maker, affinity on, followed)
            (Some("a"), Some("b"), true, StoredResponse("a")),
            (Some("a"), None, true, StoredResponse("a")),
            (None, Some("b"), true, EncryptedMaker("b")),
            (None, Some("b"), false, EncryptedMaker("b")),
            (None, None, true, Group(7)),
            (None, None, false, TurnAffinity::None),
        ];
        for (stored, maker, enabled, followed) in rows {
            assert_eq!(turn_affinity(stored, maker, enabled, group), followed);
        }
        assert_eq!(asked.get(), 1, "the group is found only when it counts");
        assert_eq!(
            turn_affinity::<u64>(None, None, true, || None),
            TurnAffinity::None
        );
    }
}
