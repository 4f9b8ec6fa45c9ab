//! Property: the combo actor (a real `Router` on a manual clock) and `--what-if` with the same
//! config make the same routing decisions, turn by turn — order, room, chosen target and
//! affinity — over random pools with conversation groups of several clients in two combos,
//! bindings held to each client's share of a small `max_groups` (behaviour §11), `max_lead`,
//! saturation (`requests_5h` limits), pacing on or off (§13, paces from the upstreams'
//! readings), caps with requests held in flight, and upstreams answering 429 or 500
//! (lockouts, cooldowns, failovers whose groups follow them).
//!
//! `PROPTEST_CASES` sets the number of random cases (default 200); the bar is 10,000.

use std::sync::Arc;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use quotaroute_actors::policy::rate_limit_headers::UsageReading;
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
    /// The upstream's `5h` window as its headers tell it on every success: its limit and how
    /// long after the run's start it resets (what paces are made of, behaviour §13).
    reading: Option<(u64, u64)>,
}

/// What a random run shares across its pool: affinity's bounds, the clients sharing
/// `max_groups`, and whether quota-share spends by pace.
#[derive(Debug, Clone, Copy)]
struct Settings {
    max_lead: u64,
    /// Small, so a client's share (`max_groups / clients`) binds.
    max_groups: usize,
    /// `[[clients]]` besides `default`.
    extra_clients: usize,
    paced: bool,
}

/// One step of a random run.
#[derive(Debug, Clone)]
enum Step {
    /// A turn of conversation `group` (`None`: no group) of client `client` (mod the
    /// clients) in combo `team` or (`other`) `crew`, after `wait_ms`; `hold`: its first
    /// attempt stays in flight (when it succeeds) until a later `Finish`.
    Turn {
        wait_ms: u64,
        group: Option<u64>,
        client: usize,
        other: bool,
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
        proptest::option::of((4u64..40, 60_000u64..18_000_000)),
    )
        .prop_map(|(weight, cap, limit, reading)| Pool {
            weight,
            cap,
            limit,
            reading,
        })
}

fn settings() -> impl Strategy<Value = Settings> {
    (1u64..4, 1usize..6, 0usize..3, prop::bool::weighted(0.75)).prop_map(
        |(max_lead, max_groups, extra_clients, paced)| Settings {
            max_lead,
            max_groups,
            extra_clients,
            paced,
        },
    )
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (
            1u64..4_000,
            proptest::option::of(0u64..8),
            0usize..3,
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.25),
        )
            .prop_map(|(wait_ms, group, client, other, hold)| Step::Turn {
                wait_ms,
                group,
                client,
                other,
                hold,
            }),
        2 => (1u64..4_000).prop_map(|wait_ms| Step::Finish { wait_ms }),
        1 => (0usize..4, prop::sample::select(vec![429u16, 500]))
            .prop_map(|(connection, status)| Step::Misbehave { connection, status }),
    ]
}

/// Client `n` of a run with `extra` `[[clients]]` besides `default`.
fn client_name(n: usize, extra: usize) -> String {
    match n % (extra + 1) {
        0 => "default".to_owned(),
        i => format!("a{i}"),
    }
}

fn config_of(pool: &[Pool], settings: Settings) -> Config {
    let mut text = String::from(
        "[server]\napi_keys = [\"k\"]\n[[providers]]\nname = \"p\"\nformat = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    );
    text.push_str(&format!(
        "[affinity]\nmax_lead = {}\nmax_groups = {}\n[defaults.pacing]\nenabled = {}\n",
        settings.max_lead, settings.max_groups, settings.paced
    ));
    for i in 1..=settings.extra_clients {
        text.push_str(&format!("[[clients]]\nid = \"a{i}\"\nkey = \"key-{i}\"\n"));
    }
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
    // Two combos over the same connections: a client's groups in one count against its
    // share in the other.
    for (name, model) in [("team", "m"), ("crew", "n")] {
        text.push_str(&format!("[[combos]]\nname = \"{name}\"\ntargets = ["));
        for (i, c) in pool.iter().enumerate() {
            text.push_str(&format!(
                "{{ connection = \"c{i}\", model = \"{model}\", weight = {} }},",
                c.weight
            ));
        }
        text.push_str("]\n");
    }
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
    /// Decisions with a candidate off pace (pace ≠ 1).
    paced: u64,
    /// New groups a client's share did not let this combo keep, or that cost the client its
    /// least recently used group here (`affinity_bound`s beyond the share's room).
    share_bound: u64,
}

/// Runs `steps` on a live router over `pool`, then `--what-if` with the same config on its
/// journal: the report, and what the run exercised.
fn run(pool: &[Pool], settings: Settings, steps: &[Step]) -> (WhatIfReport, Coverage) {
    let config = config_of(pool, settings);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let journal = MemoryJournal::new();
    runtime.block_on(drive(
        &config,
        &journal,
        pool,
        settings.extra_clients,
        steps,
    ));
    let mut what_if = WhatIf::new(config, "the node's own");
    let mut coverage = Coverage::default();
    let share = quotaroute_actors::policy::affinity_bindings::share_of(
        settings.max_groups,
        settings.extra_clients + 1,
    );
    // Per client, the groups it has bound (a rough count: a group bound once more than its
    // share means the share decided something).
    let mut bound: std::collections::HashMap<String, std::collections::BTreeSet<(String, u64)>> =
        std::collections::HashMap::new();
    for envelope in journal.read_from(0) {
        let envelope: Envelope = envelope.unwrap();
        match &envelope.event {
            Event::RouteDecided(d) => {
                coverage.decisions += 1;
                coverage.held += u64::from(d.affinity == AffinityOutcome::Held);
                coverage.moved += u64::from(d.affinity == AffinityOutcome::Moved);
                coverage.out_of_room += u64::from(d.room.len() < d.order.len());
                coverage.unroutable += u64::from(d.chosen.is_none());
                coverage.paced += u64::from(!d.paces.is_empty());
            }
            Event::AffinityBound(b) => {
                coverage.followed += u64::from(b.reason.as_deref() == Some("failover"));
                let groups = bound.entry(b.client.clone()).or_default();
                groups.insert((b.combo.clone(), b.group));
                coverage.share_bound +=
                    u64::from(groups.len() > share && share < settings.max_groups);
            }
            _ => {}
        }
        what_if.observe(&envelope);
    }
    (what_if.finish(), coverage)
}

/// A success of connection `index`, with its `5h` reading when its upstream gives one
/// (`served`: its successes so far, this one included).
fn success_on(pool: &[Pool], index: usize, served: u64) -> AttemptResult {
    let mut result = AttemptResult::success(200, 10, 10);
    if let Some((limit, resets_in_ms)) = pool[index].reading {
        result.usage.push(UsageReading {
            window: "5h".into(),
            used: served.min(limit),
            limit,
            resets_at_ms: Some(T0 + resets_in_ms),
        });
    }
    result
}

async fn drive(
    config: &Config,
    journal: &MemoryJournal,
    pool: &[Pool],
    extra_clients: usize,
    steps: &[Step],
) {
    let connections = pool.len();
    let mut served = vec![0u64; connections];
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
    // Each held decision with its connection's index.
    let mut held: Vec<(Decision, usize)> = Vec::new();
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
                    let (mut decision, index) = held.remove(0);
                    served[index] += 1;
                    decision.report(success_on(pool, index, served[index]));
                }
            }
            Step::Turn {
                wait_ms,
                group,
                client,
                other,
                hold,
            } => {
                clock.advance(wait_ms);
                let client_index = client % (extra_clients + 1);
                let client: Arc<str> = Arc::from(client_name(client_index, extra_clients));
                let request = RouteRequest {
                    request_id: format!("r{n}").into(),
                    model: if other { "crew" } else { "team" }.into(),
                    format: ApiFormat::Openai,
                    only_connection: None,
                    encrypted_maker: None,
                    translatable: false,
                    cannot_carry: Vec::new(),
                    // Each client's conversations are its own.
                    affinity: group.map(|group| AffinityKey {
                        group: group + 100 * client_index as u64,
                        client: client.clone(),
                    }),
                    client: ClientTag {
                        id: client,
                        weight: 1,
                        class: Default::default(),
                    },
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
                            held.push((decision, index));
                            break;
                        }
                        None => {
                            served[index] += 1;
                            success_on(pool, index, served[index])
                        }
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
    for (mut decision, index) in held {
        served[index] += 1;
        decision.report(success_on(pool, index, served[index]));
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
        settings in settings(),
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let (report, coverage) = run(&pool, settings, &steps);
        prop_assert_eq!(report.requests_replayed, coverage.decisions);
        prop_assert_eq!(report.decisions_differing, 0, "{:?}", report.differences);
    }
}

/// The generator reaches what the property is about: held and moved turns, groups following
/// a failover, targets out of room, requests nothing could serve, clients' shares of groups
/// binding and candidates off pace.
#[test]
fn the_random_runs_reach_bindings_moves_failovers_and_full_targets() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (
        proptest::collection::vec(pool(), 2..5),
        settings(),
        proptest::collection::vec(step(), 20..40),
    );
    let mut total = Coverage::default();
    for _ in 0..40 {
        let (pool, settings, steps) = strategy.new_tree(&mut runner).unwrap().current();
        let (report, coverage) = run(&pool, settings, &steps);
        assert_eq!(report.decisions_differing, 0, "{:?}", report.differences);
        total.decisions += coverage.decisions;
        total.held += coverage.held;
        total.moved += coverage.moved;
        total.followed += coverage.followed;
        total.out_of_room += coverage.out_of_room;
        total.unroutable += coverage.unroutable;
        total.paced += coverage.paced;
        total.share_bound += coverage.share_bound;
    }
    eprintln!("{total:?}");
    assert!(
        total.held > 0
            && total.moved > 0
            && total.followed > 0
            && total.out_of_room > 0
            && total.paced > 0
            && total.share_bound > 0,
        "{total:?}"
    );
}
