//! `decide` and `SelectionState` table by table: where a turn goes, what it journals, and what
//! it changes.

use std::sync::Arc;

use quotaroute_journal::{AffinityOutcome, ApiFormat, BlockReason};

use crate::admission::{Admit, Block, BreakerAdmission};
use crate::affinity::{AffinitySettings, MoveReason, Placement};
use crate::quota_share::{DrrKeys, Strategy, TargetView};
use crate::selection::{
    decide, AffinityKey, BindingChange, Candidates, ComboRules, Decided, RoutedTarget,
    SelectionRequest, SelectionState, SERVED_ELSEWHERE,
};

const NOW: u64 = 1_000_000;
const LIMITS: (usize, u64) = (1_000, 300_000);

fn targets(n: usize) -> Vec<Arc<RoutedTarget>> {
    (0..n)
        .map(|i| {
            Arc::new(RoutedTarget {
                index: u16::try_from(i).unwrap(),
                connection: format!("c{i}").into(),
                provider: "p".into(),
                model: "m".into(),
                format: ApiFormat::Openai,
                weight: 1,
            })
        })
        .collect()
}

fn views(targets: &[Arc<RoutedTarget>]) -> Vec<TargetView> {
    targets
        .iter()
        .map(|t| TargetView {
            weight: t.weight,
            exec_key: crate::exec_key::exec_key(&t.connection, &t.model).into(),
            hard_block: None,
            saturated: false,
            in_flight: 0,
            max_concurrent: None,
            degraded: false,
            pace: crate::pace::ON_PACE,
            pace_window: None,
            spend: crate::pace::ON_PACE,
        })
        .collect()
}

fn keys(targets: &[Arc<RoutedTarget>]) -> DrrKeys {
    let infos: Vec<_> = targets
        .iter()
        .map(|t| quotaroute_journal::TargetInfo {
            connection: t.connection.to_string(),
            model: t.model.to_string(),
            weight: t.weight,
        })
        .collect();
    DrrKeys::new(Strategy::QuotaShare, &infos)
}

/// Admits every candidate except those that lose their probe token.
struct Admitting {
    probe_lost: Vec<usize>,
}

impl Admit for Admitting {
    type Taken = usize;
    fn breaker(&mut self, _: usize) -> BreakerAdmission {
        BreakerAdmission::Healthy
    }
    fn connection_block(&mut self, _: usize) -> Option<Block> {
        None
    }
    fn take(&mut self, position: usize, _: BreakerAdmission) -> Result<usize, Block> {
        if self.probe_lost.contains(&position) {
            return Err((BlockReason::ProbeInFlight, Some(30_000)));
        }
        Ok(position)
    }
}

/// The names the tests' requests and combo carry, shared as the live combo shares them.
static POOL: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| "pool".into());
static REQUEST_ID: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| "r".into());
static CLIENT: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| "default".into());

fn rules() -> ComboRules<'static> {
    ComboRules {
        name: &POOL,
        generation: 3,
        strategy: Strategy::QuotaShare,
        affinity: AffinitySettings {
            enabled: true,
            min_prompt_bytes: 4096,
            ttl_ms: 300_000,
            max_groups: 1_000,
            max_lead: 0,
        },
    }
}

fn key() -> AffinityKey {
    AffinityKey {
        group: 42,
        client: "default".into(),
    }
}

/// One decision on `views` of `targets` for a request with `group`, `only` and `maker`.
fn turn(
    state: &SelectionState,
    targets: &[Arc<RoutedTarget>],
    views: &[TargetView],
    group: Option<&AffinityKey>,
    only: Option<&str>,
    maker: Option<&str>,
    admit: &mut Admitting,
) -> Option<Decided<usize>> {
    let positions: Vec<usize> = (0..targets.len()).collect();
    decide(
        &rules(),
        state,
        Candidates {
            targets,
            positions: &positions,
            views,
        },
        &SelectionRequest {
            request_id: &REQUEST_ID,
            model: &POOL,
            client: &CLIENT,
            only_connection: only,
            encrypted_maker: maker,
            group,
        },
        admit,
        NOW,
    )
}

fn admit_all() -> Admitting {
    Admitting {
        probe_lost: Vec::new(),
    }
}

fn taken(decided: &Decided<usize>) -> Option<usize> {
    decided.taken.as_ref().map(|(_, position)| *position)
}

#[test]
fn s10_a_new_group_binds_to_the_winner_and_its_route_decided_names_the_group() {
    let targets = targets(3);
    let views = views(&targets);
    let mut state = SelectionState::default();
    let decided = turn(
        &state,
        &targets,
        &views,
        Some(&key()),
        None,
        None,
        &mut admit_all(),
    )
    .unwrap();
    assert_eq!(decided.placement, Placement::New);
    assert_eq!(decided.route_decided.group, Some(42));
    assert_eq!(decided.route_decided.affinity, AffinityOutcome::New);
    assert_eq!(decided.route_decided.client.as_deref(), Some("default"));
    assert_eq!(taken(&decided), Some(0));
    let Some(BindingChange::Bind { bound, .. }) = &decided.changes.binding else {
        panic!("{:?}", decided.changes)
    };
    assert_eq!(
        (bound.connection.as_str(), bound.moved_from.as_ref()),
        ("c0", None)
    );
    let applied = state.apply(
        &keys(&targets),
        &decided.route_decided,
        decided.changes,
        NOW,
        LIMITS,
        |_| None,
    );
    assert!(applied.bound.is_some() && applied.groups_changed);
    assert_eq!(
        &*state.bindings.get(42, NOW, LIMITS.1).unwrap().exec_key,
        "c0/m"
    );
    assert_ne!(state.deficits, Default::default(), "the turn was paid");

    // The next turn is held on c0 although DRR now ranks c1 first, and only touches.
    let decided = turn(
        &state,
        &targets,
        &views,
        Some(&key()),
        None,
        None,
        &mut admit_all(),
    )
    .unwrap();
    assert_eq!(decided.placement, Placement::Held);
    assert_eq!(taken(&decided), Some(0));
    assert_eq!(
        decided.changes.binding,
        Some(BindingChange::Touch { group: 42 })
    );
    // Without a group the same state goes by §2 alone, and nothing binds.
    let decided = turn(&state, &targets, &views, None, None, None, &mut admit_all()).unwrap();
    assert_eq!(decided.placement, Placement::None);
    assert_eq!(taken(&decided), Some(1));
    assert_eq!(
        (decided.route_decided.group, decided.changes.binding),
        (None, None)
    );
    assert!(!decided.changes.leads);
}

#[test]
fn s10_a_blocked_binding_moves_the_group_once_with_from_and_why() {
    let targets = targets(3);
    let mut views = views(&targets);
    let mut state = SelectionState::default();
    state
        .bindings
        .bind(42, "default".into(), "c1/m".into(), NOW, LIMITS);
    views[1].hard_block = Some((BlockReason::Cooldown, Some(5_000)));
    let decided = turn(
        &state,
        &targets,
        &views,
        Some(&key()),
        None,
        None,
        &mut admit_all(),
    )
    .unwrap();
    assert_eq!(
        decided.placement,
        Placement::Moved(MoveReason::Blocked(BlockReason::Cooldown))
    );
    let Some(BindingChange::Bind { bound, .. }) = &decided.changes.binding else {
        panic!("{:?}", decided.changes)
    };
    assert_eq!(bound.moved_from.as_deref(), Some("c1/m"));
    assert_eq!(bound.reason.as_deref(), Some("cooldown"));
    assert_eq!(Some(bound.connection.as_str()), Some("c0"));
    assert_eq!(
        decided.route_decided.skipped.len(),
        1,
        "the blocked one, by name"
    );
    assert_eq!(decided.route_decided.skipped[0].connection, "c1");
}

#[test]
fn s10_a_held_turn_whose_probe_went_elsewhere_binds_where_it_went() {
    let targets = targets(3);
    let views = views(&targets);
    let mut state = SelectionState::default();
    state
        .bindings
        .bind(42, "default".into(), "c2/m".into(), NOW, LIMITS);
    let mut admit = Admitting {
        probe_lost: vec![2],
    };
    let decided = turn(
        &state,
        &targets,
        &views,
        Some(&key()),
        None,
        None,
        &mut admit,
    )
    .unwrap();
    assert_eq!(decided.placement, Placement::Held);
    assert_eq!(
        decided.route_decided.chosen,
        Some(2),
        "the held target pays"
    );
    assert_eq!(taken(&decided), Some(0));
    assert_eq!(
        decided.route_decided.skipped[0].reason,
        BlockReason::ProbeInFlight,
        "passed over, journaled"
    );
    let Some(BindingChange::Bind { bound, .. }) = &decided.changes.binding else {
        panic!("{:?}", decided.changes)
    };
    assert_eq!(
        (bound.connection.as_str(), bound.reason.as_deref()),
        ("c0", Some("probe_in_flight"))
    );
}

#[test]
fn s3_only_connection_narrows_the_candidates_and_ignores_the_group() {
    let targets = targets(3);
    let views = views(&targets);
    let state = SelectionState::default();
    let decided = turn(
        &state,
        &targets,
        &views,
        Some(&key()),
        Some("c2"),
        None,
        &mut admit_all(),
    )
    .unwrap();
    assert_eq!(decided.order, vec![2]);
    assert_eq!(decided.route_decided.order, vec![2], "config indices");
    assert_eq!(
        (decided.placement, decided.route_decided.group),
        (Placement::None, None)
    );
    assert!(turn(
        &state,
        &targets,
        &views,
        None,
        Some("c9"),
        None,
        &mut admit_all()
    )
    .is_none());
}

#[test]
fn s10_encrypted_items_go_to_their_maker_and_bind_nothing() {
    let targets = targets(3);
    let mut views = views(&targets);
    let state = SelectionState::default();
    let decided = turn(
        &state,
        &targets,
        &views,
        Some(&key()),
        None,
        Some("c1"),
        &mut admit_all(),
    )
    .unwrap();
    assert_eq!(decided.placement, Placement::Held);
    assert_eq!(taken(&decided), Some(1));
    assert_eq!(
        (decided.route_decided.group, &decided.changes.binding),
        (None, &None)
    );
    // A maker that cannot serve (saturated, or at its cap while others have room): the turn
    // goes by §2 among the rest and binds nothing.
    views[1].saturated = true;
    views[2].max_concurrent = Some(1);
    views[2].in_flight = 1;
    for (maker, reason) in [("c1", MoveReason::Saturated), ("c2", MoveReason::AtCap)] {
        let decided = turn(
            &state,
            &targets,
            &views,
            Some(&key()),
            None,
            Some(maker),
            &mut admit_all(),
        )
        .unwrap();
        assert_eq!(decided.placement, Placement::Moved(reason), "{maker}");
        assert_eq!(taken(&decided), Some(0), "{maker}");
        assert_eq!(decided.changes.binding, None);
    }
}

#[test]
fn s10_a_turn_served_after_a_failover_moves_its_group_there() {
    let targets = targets(3);
    let mut state = SelectionState::default();
    assert_eq!(
        state.served("r", "pool", &key(), &targets[1], NOW, LIMITS),
        None,
        "an unbound group is not bound by a failover"
    );
    state
        .bindings
        .bind(42, "default".into(), "c0/m".into(), NOW, LIMITS);
    assert_eq!(
        state.served("r", "pool", &key(), &targets[0], NOW, LIMITS),
        None,
        "served on its binding: nothing to move"
    );
    let bound = state
        .served("r", "pool", &key(), &targets[2], NOW + 1, LIMITS)
        .unwrap();
    assert_eq!(
        (
            bound.connection.as_str(),
            bound.moved_from.as_deref(),
            bound.reason.as_deref()
        ),
        ("c2", Some("c0/m"), Some(SERVED_ELSEWHERE))
    );
    assert_eq!(
        &*state.bindings.get(42, NOW + 1, LIMITS.1).unwrap().exec_key,
        "c2/m"
    );
}

/// The live combo keeps selection's lists from one decision to the next (`decide_with`): each
/// decision is still exactly the one `decide` makes afresh — nothing of the one before (its
/// blocked, its room, its order) is carried into the next.
#[test]
fn a_reused_scratch_decides_as_a_fresh_one() {
    let targets = targets(5);
    let state = SelectionState::default();
    let mut scratch = crate::quota_share::SelectScratch::default();
    // Each case: which targets are hard-blocked, which saturated, which at capacity.
    let cases: [(&[usize], &[usize], &[usize]); 6] = [
        (&[0, 3], &[1], &[]),
        (&[], &[], &[]),
        (&[1, 2, 4], &[], &[0]),
        (&[], &[0, 1, 2, 3, 4], &[]),
        (&[0, 1, 2, 3, 4], &[], &[]),
        (&[2], &[], &[3, 4]),
    ];
    for (blocked, saturated, full) in cases.iter().chain(cases.iter().rev()) {
        let mut views = views(&targets);
        for &i in *blocked {
            views[i].hard_block = Some((BlockReason::Cooldown, Some(5)));
        }
        for &i in *saturated {
            views[i].saturated = true;
        }
        for &i in *full {
            views[i].max_concurrent = Some(1);
            views[i].in_flight = 1;
        }
        let positions: Vec<usize> = (0..targets.len()).collect();
        let candidates = Candidates {
            targets: &targets,
            positions: &positions,
            views: &views,
        };
        let request = SelectionRequest {
            request_id: &REQUEST_ID,
            model: &POOL,
            client: &CLIENT,
            only_connection: None,
            encrypted_maker: None,
            group: None,
        };
        let fresh = decide(
            &rules(),
            &state,
            candidates,
            &request,
            &mut admit_all(),
            NOW,
        );
        let reused = crate::selection::decide_with(
            &rules(),
            &state,
            candidates,
            &request,
            &mut admit_all(),
            NOW,
            &mut scratch,
        );
        assert_eq!(
            format!("{reused:?}"),
            format!("{fresh:?}"),
            "blocked {blocked:?}, saturated {saturated:?}, full {full:?}"
        );
    }
}
