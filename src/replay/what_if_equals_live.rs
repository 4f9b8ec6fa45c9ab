//! Property: the combo actor (a real `Router` on a manual clock) and `--what-if` with the same
//! config make the same routing decisions, turn by turn — order, room, chosen target and
//! affinity — over random pools with conversation groups, bindings, `max_lead`, saturation
//! (`requests_5h` limits), caps with requests held in flight, and upstreams answering 429 or
//! 500 (lockouts, cooldowns, failovers whose groups follow them).
//!
//! `PROPTEST_CASES` sets the number of random cases (default 200); the bar is 10,000.

use std::sync::Arc;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use quotaroute_actors::{
    AffinityKey, AttemptResult, ClientTag, Decision, ManualClock, RequestEvents, RouteRequest,
    Router, RouterOptions,
};
use quotaroute_journal::{
    AffinityOutcome, ApiFormat, Envelope, Event, Journal, MemoryJournal, OutcomeClass, WriterConfig,
};

use crate::config::topology::topology;
use crate::config::Config;
use crate::replay::what_if::{WhatIf, WhatIfReport};

const T0: u64 = 1_764_000_000_000;

/// One connection of a random pool.
#[derive(Debug, Clone)]
struct Pool {
    weight: u32,
    cap: Option<u32>,
    /// `requests_5h`: saturates after this many successes.
    limit: Option<u64>,
}

/// One step of a random run.
#[derive(Debug, Clone)]
enum Step {
    /// A turn of conversation `group` (`None`: no group), after `wait_ms`; `hold`: its first
    /// attempt stays in flight (when it succeeds) until a later `Finish`.
    Turn {
        wait_ms: u64,
        group: Option<u64>,
        hold: bool,
    },
    /// The oldest request held in flight succeeds.
    Finish { wait_ms: u64 },
    /// Connection `n` (mod the pool) starts (or stops) answering `status`.
    Misbehave { connection: usize, status: u16 },
}

fn pool() -> impl Strategy<Value = Pool> {
    (
        1u32..4,
        proptest::option::of(1u32..3),
        proptest::option::of(2u64..8),
    )
        .prop_map(|(weight, cap, limit)| Pool { weight, cap, limit })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1u64..4_000, proptest::option::of(0u64..5), prop::bool::weighted(0.25))
            .prop_map(|(wait_ms, group, hold)| Step::Turn { wait_ms, group, hold }),
        2 => (1u64..4_000).prop_map(|wait_ms| Step::Finish { wait_ms }),
        1 => (0usize..4, prop::sample::select(vec![429u16, 500]))
            .prop_map(|(connection, status)| Step::Misbehave { connection, status }),
    ]
}

fn config_of(pool: &[Pool], max_lead: u64) -> Config {
    let mut text = String::from(
        "[server]\napi_keys = [\"k\"]\n[[providers]]\nname = \"p\"\nformat = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    );
    text.push_str(&format!("[affinity]\nmax_lead = {max_lead}\n"));
    for (i, c) in pool.iter().enumerate() {
        text.push_str(&format!(
            "[[connections]]\nid = \"c{i}\"\nprovider = \"p\"\napi_key = \"x\"\nweight = {}\n",
            c.weight
        ));
        if let Some(cap) = c.cap {
            text.push_str(&format!("max_concurrent = {cap}\n"));
        }
        if let Some(limit) = c.limit {
            text.push_str(&format!("[connections.limits]\nrequests_5h = {limit}\n"));
        }
    }
    text.push_str("[[combos]]\nname = \"team\"\ntargets = [");
    for (i, c) in pool.iter().enumerate() {
        text.push_str(&format!(
            "{{ connection = \"c{i}\", model = \"m\", weight = {} }},",
            c.weight
        ));
    }
    text.push_str("]\n");
    crate::config::parse(&text, "case.toml", &|_| None).unwrap()
}

/// What a run exercised (summed over cases by the coverage test).
#[derive(Debug, Default, Clone, Copy)]
struct Coverage {
    decisions: u64,
    held: u64,
    moved: u64,
    followed: u64,
    out_of_room: u64,
    unroutable: u64,
}

/// Runs `steps` on a live router over `pool`, then `--what-if` with the same config on its
/// journal: the report, and what the run exercised.
fn run(pool: &[Pool], max_lead: u64, steps: &[Step]) -> (WhatIfReport, Coverage) {
    let config = config_of(pool, max_lead);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let journal = MemoryJournal::new();
    runtime.block_on(drive(&config, &journal, pool.len(), steps));
    let mut what_if = WhatIf::new(config, "the node's own");
    let mut coverage = Coverage::default();
    for envelope in journal.read_from(0) {
        let envelope: Envelope = envelope.unwrap();
        match &envelope.event {
            Event::RouteDecided(d) => {
                coverage.decisions += 1;
                coverage.held += u64::from(d.affinity == AffinityOutcome::Held);
                coverage.moved += u64::from(d.affinity == AffinityOutcome::Moved);
                coverage.out_of_room += u64::from(d.room.len() < d.order.len());
                coverage.unroutable += u64::from(d.chosen.is_none());
            }
            Event::AffinityBound(b) => {
                coverage.followed += u64::from(b.reason.as_deref() == Some("failover"));
            }
            _ => {}
        }
        what_if.observe(&envelope);
    }
    (what_if.finish(), coverage)
}

async fn drive(config: &Config, journal: &MemoryJournal, connections: usize, steps: &[Step]) {
    let clock = ManualClock::new(T0);
    let router = Router::start(
        topology(config, ""),
        Box::new(journal.clone()),
        RouterOptions {
            writer: WriterConfig::default(),
            snapshot_every_events: 0,
            request_events: RequestEvents::All,
            clock: clock.clone(),
        },
    )
    .await
    .unwrap();
    let mut failing: Vec<Option<u16>> = vec![None; connections];
    let mut held: Vec<Decision> = Vec::new();
    for (n, step) in steps.iter().enumerate() {
        // Never two things at one instant: the what-if orders ties completions first.
        clock.advance(1);
        match *step {
            Step::Misbehave { connection, status } => {
                let slot = &mut failing[connection % connections];
                *slot = if slot.is_some() { None } else { Some(status) };
            }
            Step::Finish { wait_ms } => {
                clock.advance(wait_ms);
                if !held.is_empty() {
                    let mut decision = held.remove(0);
                    decision.report(AttemptResult::success(200, 10, 10));
                }
            }
            Step::Turn {
                wait_ms,
                group,
                hold,
            } => {
                clock.advance(wait_ms);
                let request = RouteRequest {
                    request_id: format!("r{n}"),
                    model: "team".into(),
                    format: ApiFormat::Openai,
                    only_connection: None,
                    encrypted_maker: None,
                    translatable: false,
                    cannot_carry: Vec::new(),
                    affinity: group.map(|group| AffinityKey {
                        group,
                        client: Arc::from("default"),
                    }),
                    client: ClientTag::default(),
                };
                let Ok(mut decision) = router.route(request).await else {
                    continue;
                };
                // Attempts: a misbehaving upstream answers its failure, failing over.
                while let Some(connection) = decision.current().map(|t| t.connection.to_string()) {
                    let index: usize = connection[1..].parse().unwrap();
                    let result = match failing[index] {
                        Some(429) => AttemptResult::failure(OutcomeClass::RateLimited, Some(429)),
                        Some(_) => AttemptResult::failure(OutcomeClass::ServerError, Some(500)),
                        None if hold => {
                            held.push(decision);
                            break;
                        }
                        None => AttemptResult::success(200, 10, 10),
                    };
                    let class = result.class;
                    decision.report_applied(result).await;
                    if decision.next_step(class, false, true)
                        != quotaroute_actors::policy::request::Step::Failover
                    {
                        break;
                    }
                    if !matches!(decision.failover().await, Ok(Some(_))) {
                        break;
                    }
                }
            }
        }
        router.settle().await.unwrap();
    }
    // Whatever is still in flight ends now, as the journal will say.
    clock.advance(1);
    for mut decision in held {
        decision.report(AttemptResult::success(200, 10, 10));
    }
    router.settle().await.unwrap();
    router.flush().await.unwrap();
    let _ = router.shutdown("end of case").await;
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Turn by turn, `--what-if` with the node's own config decides as the combo actor did.
    #[test]
    fn what_if_decides_as_the_combo_actor_turn_by_turn(
        pool in proptest::collection::vec(pool(), 2..5),
        max_lead in 1u64..4,
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let (report, coverage) = run(&pool, max_lead, &steps);
        prop_assert_eq!(report.requests_replayed, coverage.decisions);
        prop_assert_eq!(report.decisions_differing, 0, "{:?}", report.differences);
    }
}

/// The generator reaches what the property is about: held and moved turns, groups following
/// a failover, targets out of room, requests nothing could serve.
#[test]
fn the_random_runs_reach_bindings_moves_failovers_and_full_targets() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (
        proptest::collection::vec(pool(), 2..5),
        1u64..4,
        proptest::collection::vec(step(), 20..40),
    );
    let mut total = Coverage::default();
    for _ in 0..40 {
        let (pool, max_lead, steps) = strategy.new_tree(&mut runner).unwrap().current();
        let (report, coverage) = run(&pool, max_lead, &steps);
        assert_eq!(report.decisions_differing, 0, "{:?}", report.differences);
        total.decisions += coverage.decisions;
        total.held += coverage.held;
        total.moved += coverage.moved;
        total.followed += coverage.followed;
        total.out_of_room += coverage.out_of_room;
        total.unroutable += coverage.unroutable;
    }
    eprintln!("{total:?}");
    assert!(
        total.held > 0 && total.moved > 0 && total.followed > 0 && total.out_of_room > 0,
        "{total:?}"
    );
}
