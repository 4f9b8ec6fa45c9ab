//! The deterministic simulator's engine: a seeded schedule of client requests, upstream
//! outcomes, held (in-flight) decisions, clock jumps, admin actions and restarts, driven
//! through a real `Router` on a `MemoryJournal` and a `ManualClock`, with invariants from
//! `behaviour.md` checked after every step.
//!
//! It owns the schedule (a pure function of the seed and the step index, so any subset of
//! steps replays the same way), the invariant checks and the shrinking of a failing run. It
//! must not reach into the library's internals: it sees only what an embedding program sees
//! (`Router`, `Decision`, `AdminState`, the actors' own state for restart checks). Shared by
//! `tests/simulate.rs` (short runs) and `examples/simulate.rs` (long runs) through `#[path]`,
//! so the library stays unchanged.
//!
//! # Invariants (the letter is the name a failure reports)
//! - **a** a routed or failed-over target is not hard-blocked (breaker OPEN, HALF_OPEN with a
//!   probe held, cooling, disabled, locked) in the admin state read just before, same `now`.
//! - **b** a lock's end never moves earlier and a lock never vanishes before its end, except
//!   by an admin clear.
//! - **c** per connection, in-flight = decisions the simulator holds open (0 when none).
//! - **d** NoTarget is 429 iff every block is a lockout or cooldown, else 503; **d'** each
//!   blocked entry matches the state (reason, remaining) and `retry_after_ms` is the earliest.
//! - **e** a restart (clean, or crash right after a flush; with or without snapshots) recovers
//!   the live admin state and every actor's own state exactly.
//! - **f** NoTarget only when every target of the combo is blocked.
//! - **g** at most `half_open_probes` fresh probes per provider.
//! - **h** DRR over a stable window: counts within 2 of N·w/Σw, deficits account exactly.
//! - **i** each report applies the §4/§5 table exactly (cooldown, disable, lockout, breaker).
//! - **j** a reload keeps what was learned, clears auth-disabled connections.
//! - **k** each target at most once per client request.
//! - **l** the decided order: only unblocked targets, all free ones, room before at-cap, P2C.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use quotaroute_actors::policy::classify::rules;
use quotaroute_actors::policy::request::Step;
use quotaroute_actors::{
    AdminState, AttemptResult, Clock, ComboSpec, ConnectionSpec, Decision, ManualClock,
    ProviderSpec, RequestEvents, RouteError, RouteRequest, Router, RouterOptions, Topology,
};
use quotaroute_journal::{
    ApiFormat, AuthKind, BlockReason, MemoryJournal, OutcomeClass, WriterConfig,
};

/// Where simulated time starts (any fixed Unix ms).
pub const T0: u64 = 1_764_000_000_000;
/// Behaviour §5 defaults the checks rely on.
const HALF_OPEN_PROBES: usize = 1;
const PROBE_TIMEOUT_MS: u64 = 30_000;
/// At most this many decisions held open at once.
const MAX_HELD: usize = 8;
const MODELS: [&str; 2] = ["m1", "m2"];
const PROVIDERS: [&str; 2] = ["pa", "pb"];

/// SplitMix64: tiny, fast, and the same on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The generator for step `index` of run `seed`: independent of every other step, so a
    /// step does the same thing whichever steps ran before it.
    pub fn for_step(seed: u64, index: usize) -> Self {
        let mut rng = Rng(seed ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
        rng.next_u64();
        rng
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `pct`/100.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.next_u64() % 100 < pct
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next_u64() % items.len() as u64) as usize]
    }
}

/// An invariant that did not hold.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub step: usize,
    pub invariant: &'static str,
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} step {}: invariant {} failed: {}",
            self.seed, self.step, self.invariant, self.detail
        )
    }
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub steps: u64,
    pub requests: u64,
    pub routed: u64,
    pub no_target_429: u64,
    pub no_target_503: u64,
    pub upstream_requests: u64,
    pub failovers: u64,
    pub held: u64,
    pub restarts: u64,
    pub crashes: u64,
    pub admin_actions: u64,
    pub clock_jumps: u64,
    pub fair_windows: u64,
    pub reloads: u64,
    /// Coverage: steps that ended with a provider in this phase, or with any connection
    /// cooling / disabled / holding a lockout; attempts that held a HALF_OPEN probe.
    pub seen_degraded: u64,
    pub seen_open: u64,
    pub seen_half_open: u64,
    pub seen_cooldown: u64,
    pub seen_disabled: u64,
    pub seen_lockout: u64,
    pub probes: u64,
    pub by_class: BTreeMap<&'static str, u64>,
}

impl Stats {
    pub fn add(&mut self, other: &Stats) {
        self.steps += other.steps;
        self.requests += other.requests;
        self.routed += other.routed;
        self.no_target_429 += other.no_target_429;
        self.no_target_503 += other.no_target_503;
        self.upstream_requests += other.upstream_requests;
        self.failovers += other.failovers;
        self.held += other.held;
        self.restarts += other.restarts;
        self.crashes += other.crashes;
        self.admin_actions += other.admin_actions;
        self.clock_jumps += other.clock_jumps;
        self.fair_windows += other.fair_windows;
        self.reloads += other.reloads;
        self.seen_degraded += other.seen_degraded;
        self.seen_open += other.seen_open;
        self.seen_half_open += other.seen_half_open;
        self.seen_cooldown += other.seen_cooldown;
        self.seen_disabled += other.seen_disabled;
        self.seen_lockout += other.seen_lockout;
        self.probes += other.probes;
        for (class, n) in &other.by_class {
            *self.by_class.entry(class).or_default() += n;
        }
    }
}

/// The topology of run `seed`: 2 providers (`pa` api-key, `pb` oauth), 6–9 connections of
/// weight 1–3, 3 quota-share combos; the connections of combo `capped` have `max_concurrent`.
pub fn topology(seed: u64) -> Topology {
    topology_with(seed, &mut Rng::new(seed), "0")
}

/// The topology of run `seed` with weights and caps drawn from `rng` (a reload's new config:
/// same providers, connections and combos, other weights, caps and `capped` models).
fn topology_with(seed: u64, rng: &mut Rng, digest: &str) -> Topology {
    let providers = vec![
        ProviderSpec::new(PROVIDERS[0], ApiFormat::Openai, AuthKind::ApiKey),
        ProviderSpec::new(PROVIDERS[1], ApiFormat::Openai, AuthKind::Oauth),
    ];
    let n = Rng::new(seed).range(6, 9) as usize;
    rng.next_u64();
    let mut connections = Vec::new();
    for i in 0..n {
        // Alternate so each provider has at least three connections (enough to open a breaker).
        let provider = PROVIDERS[i % 2];
        let auth = if i % 2 == 0 {
            AuthKind::ApiKey
        } else {
            AuthKind::Oauth
        };
        let weight = rng.range(1, 3) as u32;
        connections.push(ConnectionSpec::new(
            &format!("c{i}"),
            provider,
            auth,
            weight,
        ));
    }
    let ids: Vec<(String, u32)> = connections
        .iter()
        .map(|c| (c.id.clone(), c.weight))
        .collect();
    let all: Vec<(&str, &str, u32)> = ids.iter().map(|(id, w)| (id.as_str(), "m1", *w)).collect();
    let split: Vec<(&str, &str, u32)> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 2)
        .map(|(_, (id, w))| (id.as_str(), "m2", *w))
        .collect();
    let capped_ids: Vec<usize> = (0..n).filter(|i| i % 2 == 0 || *i == 1).take(4).collect();
    let capped: Vec<(&str, &str, u32)> = capped_ids
        .iter()
        .map(|&i| {
            (
                ids[i].0.as_str(),
                *rng.pick(&MODELS),
                rng.range(1, 3) as u32,
            )
        })
        .collect();
    for &i in &capped_ids {
        connections[i].max_concurrent = Some(rng.range(1, 2) as u32);
    }
    let combos = vec![
        ComboSpec::quota_share("all", &all),
        ComboSpec::quota_share("split", &split),
        ComboSpec::quota_share("capped", &capped),
    ];
    Topology::new(providers, connections, combos, "sim", digest)
}

/// One upstream answer as the simulated upstream gives it (behaviour §4's table).
fn draw_result(rng: &mut Rng) -> AttemptResult {
    let roll = rng.range(0, 99);
    match roll {
        0..=49 => AttemptResult::success(200, rng.range(1, 500), rng.range(1, 500)),
        50..=61 => {
            let hint = if rng.chance(70) {
                Some(rng.range(100, 120_000))
            } else {
                None
            };
            AttemptResult::failure(OutcomeClass::RateLimited, Some(429)).with_reset_hint_ms(hint)
        }
        62..=64 => {
            // 429 naming a usage limit, its reset ≥ 1 h away; or a 403 naming quota, no reset.
            if rng.chance(50) {
                AttemptResult::failure(OutcomeClass::QuotaExhausted, Some(429))
                    .with_reset_hint_ms(Some(rng.range(3_600_000, 3 * 3_600_000)))
            } else {
                AttemptResult::failure(OutcomeClass::QuotaExhausted, Some(403))
            }
        }
        65..=68 => AttemptResult::failure(OutcomeClass::ModelUnavailable, Some(404)),
        69..=70 => AttemptResult::failure(OutcomeClass::AuthFailed, Some(401)),
        71..=72 => {
            if rng.chance(50) {
                AttemptResult::failure(OutcomeClass::Billing, Some(402))
            } else {
                AttemptResult::failure(OutcomeClass::Billing, Some(429))
                    .with_error_code("insufficient_quota")
            }
        }
        73 => AttemptResult::failure(OutcomeClass::Forbidden, Some(403)),
        74..=87 => {
            let status = *rng.pick(&[500, 502, 503, 504, 529]);
            let hint = if rng.chance(15) {
                Some(rng.range(1_000, 60_000))
            } else {
                None
            };
            AttemptResult::failure(OutcomeClass::ServerError, Some(status)).with_reset_hint_ms(hint)
        }
        88..=92 => {
            let status = if rng.chance(30) { Some(408) } else { None };
            AttemptResult::failure(OutcomeClass::Timeout, status)
        }
        93..=97 => AttemptResult::failure(OutcomeClass::Network, None),
        _ => AttemptResult::failure(OutcomeClass::ClientError, Some(400)),
    }
}

/// A failing upstream's answer: server errors, timeouts, connection failures.
fn draw_outage_result(rng: &mut Rng) -> AttemptResult {
    match rng.range(0, 9) {
        0..=5 => AttemptResult::failure(
            OutcomeClass::ServerError,
            Some(*rng.pick(&[500, 502, 503, 529])),
        ),
        6..=7 => AttemptResult::failure(OutcomeClass::Timeout, None),
        _ => AttemptResult::failure(OutcomeClass::Network, None),
    }
}

/// §3: whether an attempt of this class is followed by a try of the next target, and whether
/// `max_attempts` counts it: the one table (`policy::classify::rules`).
fn fails_over(class: OutcomeClass) -> bool {
    rules(class).fails_over
}

fn counts_as_attempt(class: OutcomeClass) -> bool {
    rules(class).counts_as_attempt
}

/// A decision the simulator holds open across steps (a slow upstream).
struct Held {
    decision: Decision,
    connection: String,
    provider: String,
    probe: bool,
    started_ms: u64,
    /// Failures so far that count against `max_attempts`.
    counted: u32,
    /// `connection/model` of every attempt so far.
    tried: Vec<(String, String)>,
}

/// §7: reasons that make an all-blocked answer a 429.
fn is_lockout_or_cooldown(reason: BlockReason) -> bool {
    matches!(
        reason,
        BlockReason::RateLimited
            | BlockReason::NotFound
            | BlockReason::QuotaExhausted
            | BlockReason::Cooldown
    )
}

/// One actor's own state, for comparing a live router with a restarted one.
#[derive(Debug, PartialEq)]
enum ActorState {
    Connection(Box<quotaroute_actors::policy::connection_state::ConnectionState>),
    Breaker(Box<quotaroute_actors::policy::breaker::BreakerState>),
    Deficits(quotaroute_actors::policy::drr::DrrDeficits),
}

/// One running simulation.
pub struct Sim {
    seed: u64,
    topology: Topology,
    journal: MemoryJournal,
    clock: Arc<ManualClock>,
    router: Option<Router>,
    held: Vec<Held>,
    /// Lock ends (`connection/model` → until ms) as last read.
    lock_ends: BTreeMap<(String, String), u64>,
    /// Locks an admin cleared during the current step.
    cleared: BTreeSet<(String, String)>,
    /// When each connection's latest cooldown was set, as the simulator saw it.
    cooldown_set_at: BTreeMap<String, u64>,
    /// When the latest HALF_OPEN probe of each provider was taken.
    last_probe_ms: BTreeMap<String, u64>,
    step: usize,
    /// The provider whose upstream is failing during this step, if any.
    outage: Option<&'static str>,
    pub stats: Stats,
}

/// Steps come in blocks of 60; in some blocks one provider's upstream fails most requests for
/// the first 50 steps while the clock crawls, so its breaker degrades, opens, half-opens and
/// probes. A pure function of the seed and the step index, like the rest of the schedule.
fn outage(seed: u64, index: usize) -> Option<&'static str> {
    let mut rng = Rng::for_step(seed ^ 0x0000_7a6e_5eed, index / 60);
    if index % 60 < 50 && rng.chance(50) {
        Some(*rng.pick(&PROVIDERS))
    } else {
        None
    }
}

impl Sim {
    pub async fn new(seed: u64) -> Self {
        let topology = topology(seed);
        let journal = MemoryJournal::new();
        let clock = ManualClock::new(T0);
        let router = start(seed, &topology, &journal, &clock).await;
        Sim {
            seed,
            topology,
            journal,
            clock,
            router: Some(router),
            held: Vec::new(),
            lock_ends: BTreeMap::new(),
            cleared: BTreeSet::new(),
            cooldown_set_at: BTreeMap::new(),
            last_probe_ms: BTreeMap::new(),
            step: 0,
            outage: None,
            stats: Stats::default(),
        }
    }

    fn router(&self) -> &Router {
        // Only `restart` takes it out, and puts a new one back before returning.
        self.router.as_ref().unwrap_or_else(|| unreachable!())
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    fn fail(&self, invariant: &'static str, detail: String) -> Failure {
        Failure {
            seed: self.seed,
            step: self.step,
            invariant,
            detail,
        }
    }

    /// Settles the actors and reads the admin state at the current clock value.
    async fn read(&self) -> Result<AdminState, Failure> {
        self.router()
            .settle()
            .await
            .map_err(|e| self.fail("router-responds", format!("settle: {e}")))?;
        self.router()
            .state()
            .await
            .map_err(|e| self.fail("router-responds", format!("state: {e}")))
    }

    /// Runs step `index` of the schedule, then checks the invariants.
    pub async fn step(&mut self, index: usize) -> Result<(), Failure> {
        self.step = index;
        self.cleared.clear();
        let mut rng = Rng::for_step(self.seed, index);
        self.outage = outage(self.seed, index);
        let roll = rng.range(0, 99);
        match roll {
            0..=54 => self.request(&mut rng).await?,
            55..=69 => self.release(&mut rng).await?,
            // Mostly a crawl; now and then past a breaker's reset, so it half-opens and probes.
            70..=84 if self.outage.is_some() => {
                let by = if rng.chance(25) {
                    rng.range(25_000, 70_000)
                } else {
                    rng.range(0, 3_000)
                };
                self.clock.advance(by);
            }
            70..=84 => self.jump(&mut rng),
            85..=93 => self.admin(&mut rng).await?,
            94..=95 => self.fair_window().await?,
            96 => self.reload(&mut rng).await?,
            _ => self.restart(&mut rng).await?,
        }
        self.stats.steps += 1;
        self.check().await
    }

    async fn request(&mut self, rng: &mut Rng) -> Result<(), Failure> {
        self.clock.advance(rng.range(0, 200));
        let combo = rng.pick(&["all", "split", "capped"]).to_string();
        let before = self.read().await?;
        let now = self.now();
        self.stats.requests += 1;
        let request = RouteRequest {
            request_id: format!("s{}-{}", self.seed, self.step),
            model: combo.clone(),
            format: ApiFormat::Openai,
            translatable: false,
            only_connection: None,
            affinity: None,
            client: quotaroute_actors::ClientTag::default(),
        };
        match self.router().route(request).await {
            Ok(decision) => {
                self.stats.routed += 1;
                self.stats.upstream_requests += 1;
                let held = self.held_from(decision, now)?;
                self.stats.probes += u64::from(held.probe);
                if held.probe {
                    self.last_probe_ms.insert(held.provider.clone(), now);
                }
                if held.probe {
                    self.last_probe_ms.insert(held.provider.clone(), now);
                }
                self.check_not_blocked(&before, &held, "route")?;
                self.check_order(&before, &combo, &held)?;
                let hold_pct = if self.outage.is_some() { 40 } else { 20 };
                if self.held.len() < MAX_HELD && rng.chance(hold_pct) {
                    self.stats.held += 1;
                    self.held.push(held);
                } else {
                    self.attempts(held, rng).await?;
                }
            }
            Err(RouteError::NoTarget(unroutable)) => {
                let all_soft = unroutable
                    .blocked
                    .iter()
                    .all(|b| is_lockout_or_cooldown(b.reason));
                let expected = if all_soft { 429 } else { 503 };
                if unroutable.status != expected {
                    return Err(self.fail(
                        "d:429-iff-lockout-or-cooldown",
                        format!(
                            "status {} but expected {expected}; blocked {:?}",
                            unroutable.status, unroutable.blocked
                        ),
                    ));
                }
                if unroutable.status == 429 {
                    self.stats.no_target_429 += 1;
                } else {
                    self.stats.no_target_503 += 1;
                }
                self.check_all_blocked(&before, &combo, &unroutable.blocked)?;
                self.check_blocked_agrees(&before, &unroutable)?;
            }
            Err(other) => {
                return Err(self.fail("route-succeeds-or-no-target", format!("{other}")));
            }
        }
        Ok(())
    }

    fn held_from(&self, decision: Decision, now: u64) -> Result<Held, Failure> {
        let Some(target) = decision.current() else {
            return Err(self.fail(
                "a-routed-has-target",
                "a routed decision has no current target".into(),
            ));
        };
        Ok(Held {
            tried: vec![(target.connection.to_string(), target.model.to_string())],
            connection: target.connection.to_string(),
            provider: target.provider.to_string(),
            probe: decision.is_probe(),
            started_ms: now,
            counted: 0,
            decision,
        })
    }

    /// Drives a decision to its end: report each attempt (read-your-writes), fail over while
    /// the class says so and the budgets allow.
    async fn attempts(&mut self, mut held: Held, rng: &mut Rng) -> Result<(), Failure> {
        loop {
            let pre = self.read().await?;
            let target = held
                .decision
                .current()
                .map(|t| t.model.to_string())
                .unwrap_or_default();
            let result = if self.outage == Some(held.provider.as_str()) && rng.chance(90) {
                draw_outage_result(rng)
            } else {
                draw_result(rng)
            };
            let class = result.class;
            *self.stats.by_class.entry(class.as_str()).or_default() += 1;
            if !held.decision.report_applied(result.clone()).await {
                return Err(self.fail(
                    "report-has-attempt",
                    "report_applied found no attempt in progress".into(),
                ));
            }
            let post = self.read().await?;
            self.check_report(&pre, &post, &held, &target, &result)?;
            if counts_as_attempt(class) {
                held.counted += 1;
            }
            let step = held.decision.next_step(class, false, true);
            // (l) The plan fails over exactly while the class fails over and both budgets
            // have room (§3), checked against this engine's own count.
            let budget = held.decision.plan();
            let room = held.counted < budget.max_attempts
                && held.decision.attempt() < budget.max_upstream_requests;
            if (step == Step::Failover) != (fails_over(class) && room) {
                return Err(self.fail(
                    "l:failover-within-budget",
                    format!(
                        "class {} after {} counted failures and {} upstream requests: {step:?}",
                        class.as_str(),
                        held.counted,
                        held.decision.attempt()
                    ),
                ));
            }
            if step != Step::Failover {
                return Ok(());
            }
            let before = post;
            let now = self.now();
            let next = held
                .decision
                .failover()
                .await
                .map_err(|e| self.fail("router-responds", format!("failover: {e}")))?
                .map(|t| {
                    (
                        t.connection.to_string(),
                        t.provider.to_string(),
                        t.model.to_string(),
                    )
                });
            let Some((connection, provider, model)) = next else {
                return Ok(());
            };
            // (k) Each target at most once per client request (§3).
            let key = (connection.clone(), model);
            if held.tried.contains(&key) {
                return Err(self.fail(
                    "k:each-target-once-per-request",
                    format!(
                        "failover chose {}/{} again; tried {:?}",
                        key.0, key.1, held.tried
                    ),
                ));
            }
            held.tried.push(key);
            self.stats.failovers += 1;
            self.stats.upstream_requests += 1;
            held.connection = connection;
            held.provider = provider;
            held.probe = held.decision.is_probe();
            self.stats.probes += u64::from(held.probe);
            if held.probe {
                self.last_probe_ms.insert(held.provider.clone(), now);
            }
            held.started_ms = now;
            self.check_not_blocked(&before, &held, "failover")?;
        }
    }

    async fn release(&mut self, rng: &mut Rng) -> Result<(), Failure> {
        if self.held.is_empty() {
            self.clock.advance(rng.range(0, 1_000));
            return Ok(());
        }
        self.clock.advance(rng.range(0, 5_000));
        let i = (rng.next_u64() % self.held.len() as u64) as usize;
        let held = self.held.swap_remove(i);
        if rng.chance(15) {
            // The client went away: the permit is released, nothing is reported.
            drop(held);
            return Ok(());
        }
        self.attempts(held, rng).await
    }

    fn jump(&mut self, rng: &mut Rng) {
        self.stats.clock_jumps += 1;
        // Now and then the wall clock is stepped back (an NTP correction): nothing may break.
        if rng.chance(10) {
            let back = rng.range(1, 2_000);
            self.clock.set(self.now().saturating_sub(back));
            return;
        }
        let by = match rng.range(0, 99) {
            0..=49 => rng.range(0, 5_000),
            50..=84 => rng.range(5_000, 300_000),
            _ => rng.range(300_000, 3 * 3_600_000),
        };
        self.clock.advance(by);
    }

    async fn admin(&mut self, rng: &mut Rng) -> Result<(), Failure> {
        self.stats.admin_actions += 1;
        let state = self.read().await?;
        match rng.range(0, 2) {
            0 => {
                let locks = state.lockouts();
                let (connection, model) = if !locks.is_empty() && rng.chance(80) {
                    let lock = rng.pick(&locks);
                    (lock.connection.clone(), lock.model.clone())
                } else {
                    let c = rng.pick(&self.topology.connections).id.clone();
                    (c, rng.pick(&MODELS).to_string())
                };
                self.cleared.insert((connection.clone(), model.clone()));
                self.router()
                    .clear_lockout(&connection, &model)
                    .await
                    .map_err(|e| self.fail("router-responds", format!("clear_lockout: {e}")))?;
            }
            1 => {
                let provider = rng.pick(&PROVIDERS);
                self.router()
                    .reset_breaker(provider)
                    .await
                    .map_err(|e| self.fail("router-responds", format!("reset_breaker: {e}")))?;
            }
            _ => {
                let connection = rng.pick(&self.topology.connections).id.clone();
                self.cooldown_set_at.remove(&connection);
                self.router()
                    .clear_connection(&connection)
                    .await
                    .map_err(|e| self.fail("router-responds", format!("clear_connection: {e}")))?;
            }
        }
        Ok(())
    }

    /// (j) A reload with new weights and caps keeps everything learned, except that
    /// auth-disabled connections are cleared (behaviour §4), and keeps in-flight counts.
    async fn reload(&mut self, rng: &mut Rng) -> Result<(), Failure> {
        self.stats.reloads += 1;
        let topology = topology_with(self.seed, rng, &format!("reload-{}", self.step));
        let pre = self.read().await?;
        self.router()
            .reload(topology.clone())
            .await
            .map_err(|e| self.fail("router-responds", format!("reload: {e}")))?;
        self.topology = topology;
        let post = self.read().await?;
        if pre.providers != post.providers {
            return Err(self.fail("j:reload-keeps-learned-state", diff(&pre, &post)));
        }
        for (a, b) in pre.connections.iter().zip(&post.connections) {
            let auth_disabled = a.disabled.as_ref().is_some_and(|d| d.reason == "auth");
            let want = if auth_disabled {
                self.cooldown_set_at.remove(&a.id);
                quotaroute_actors::admin_state::ConnectionAdminState {
                    cooldown_remaining_ms: 0,
                    cooldown_level: 0,
                    disabled: None,
                    ..a.clone()
                }
            } else {
                a.clone()
            };
            if &want != b {
                return Err(self.fail(
                    "j:reload-keeps-learned-state",
                    format!("connection before {a:?} after {b:?}"),
                ));
            }
        }
        Ok(())
    }

    /// (e) A restart on the same journal and clock recovers exactly the live state: either a
    /// clean stop, or a crash right after a flush (a new node on what the crash leaves,
    /// without `node_stopped`).
    async fn restart(&mut self, rng: &mut Rng) -> Result<(), Failure> {
        self.stats.restarts += 1;
        // The clients of held requests see the node go away.
        self.held.clear();
        let live = self.read().await?;
        let live_actors = self.actor_states().await?;
        let Some(router) = self.router.take() else {
            return Err(self.fail("router-responds", "no router".into()));
        };
        if rng.chance(50) {
            if let Err(e) = router.shutdown("simulated restart").await {
                return Err(self.fail("e:restart-equals-live", format!("shutdown: {e}")));
            }
        } else {
            self.stats.crashes += 1;
            if let Err(e) = router.flush().await {
                return Err(self.fail("e:restart-equals-live", format!("flush: {e}")));
            }
            let survivor = self.journal.after_crash();
            // The crashed node's actors are stopped; what it writes from here goes to the
            // abandoned journal.
            let _ = router.shutdown("crashed").await;
            self.journal = survivor;
        }
        self.router = Some(start(self.seed, &self.topology, &self.journal, &self.clock).await);
        let recovered = self.read().await?;
        if recovered != live {
            return Err(self.fail("e:restart-equals-live", diff(&live, &recovered)));
        }
        let recovered_actors = self.actor_states().await?;
        for (a, b) in live_actors.iter().zip(&recovered_actors) {
            if a != b {
                return Err(self.fail(
                    "e:restart-equals-live",
                    format!("actor state live {a:?} recovered {b:?}"),
                ));
            }
        }
        Ok(())
    }

    /// Every actor's own state (connections, breakers, combo deficits), each with its name;
    /// compared by value (deficits live in a hash map, so their `Debug` order is not stable).
    async fn actor_states(&self) -> Result<Vec<(String, ActorState)>, Failure> {
        let router = self.router();
        let responds =
            |e: quotaroute_actors::RouterError| self.fail("router-responds", format!("{e}"));
        let mut out = Vec::new();
        for c in &self.topology.connections {
            let state = router
                .live_connection_state(&c.id)
                .await
                .map_err(responds)?;
            out.push((c.id.clone(), ActorState::Connection(Box::new(state))));
        }
        for p in PROVIDERS {
            let state = router.live_breaker_state(p).await.map_err(responds)?;
            out.push((p.to_string(), ActorState::Breaker(Box::new(state))));
        }
        for combo in &self.topology.combos {
            let state = router.combo_deficits(&combo.name).await.map_err(responds)?;
            out.push((combo.name.clone(), ActorState::Deficits(state)));
        }
        Ok(out)
    }

    /// (i) One report applies behaviour §4/§5 exactly, as the admin state shows it before and
    /// after (same clock value): the connection column (cooldown `base·2^level` or the
    /// `Retry-After`, capped; not escalated while cooling or for a request sent before the
    /// cooldown; a success resets the level; auth disables for good, billing for `billing_ms`),
    /// the lockout column (the upstream reset exactly, else `base·2^(n−1)` capped, quota 1 h
    /// doubling to 24 h; never shortened), and the breaker column (classes that do not trip it
    /// leave it alone; a probe's failure re-opens it one cycle up; a late non-probe success
    /// does not close an OPEN breaker).
    fn check_report(
        &mut self,
        pre: &AdminState,
        post: &AdminState,
        held: &Held,
        model: &str,
        result: &AttemptResult,
    ) -> Result<(), Failure> {
        let now = self.now();
        let class = result.class;
        let conn = |state: &AdminState| {
            state
                .connections
                .iter()
                .find(|c| c.id == held.connection)
                .cloned()
        };
        let (Some(before), Some(after)) = (conn(pre), conn(post)) else {
            return Err(self.fail("i:report-applies-the-table", "connection missing".into()));
        };
        let spec = self.topology.connection(&held.connection).cloned();
        let Some(spec) = spec else {
            return Err(self.fail("i:report-applies-the-table", "connection missing".into()));
        };
        let bad = |what: String| {
            Failure {
            seed: self.seed,
            step: self.step,
            invariant: "i:report-applies-the-table",
            detail: format!(
                "{} on {}/{model} (sent at {}, now {now}): {what}; before {before:?}; after {after:?}",
                class.as_str(),
                held.connection,
                held.started_ms
            ),
        }
        };
        // Connection column.
        let cooling = before.cooldown_remaining_ms > 0;
        match class {
            OutcomeClass::Timeout | OutcomeClass::ServerError | OutcomeClass::Network => {
                let sent_before = self
                    .cooldown_set_at
                    .get(&held.connection)
                    .is_some_and(|&set| held.started_ms < set);
                if cooling || sent_before {
                    if after.cooldown_remaining_ms != before.cooldown_remaining_ms
                        || after.cooldown_level != before.cooldown_level
                    {
                        return Err(bad(format!(
                            "escalated a cooldown (cooling {cooling}, sent before it {sent_before})"
                        )));
                    }
                } else {
                    let level = before.cooldown_level.min(spec.cooldown.max_level);
                    let want = match result.reset_hint_ms {
                        Some(hint) => hint.min(spec.cooldown.max_ms),
                        None => spec.cooldown.backoff_ms(level),
                    };
                    if after.cooldown_remaining_ms != want || after.cooldown_level != level + 1 {
                        return Err(bad(format!(
                            "expected a cooldown of {want} ms at level {}",
                            level + 1
                        )));
                    }
                    self.cooldown_set_at.insert(held.connection.clone(), now);
                }
            }
            OutcomeClass::Success if after.cooldown_level != 0 => {
                return Err(bad("a success did not reset the cooldown level".into()));
            }
            OutcomeClass::AuthFailed | OutcomeClass::Forbidden => {
                let ok = after
                    .disabled
                    .as_ref()
                    .is_some_and(|d| d.reason == "auth" && d.remaining_ms.is_none());
                if !ok {
                    return Err(bad("expected disabled for auth until cleared".into()));
                }
            }
            OutcomeClass::Billing => {
                let want = match &before.disabled {
                    None => Some(spec.lockout.billing_ms),
                    Some(d) => d.remaining_ms,
                };
                let reason = before.disabled.as_ref().map_or("billing", |d| d.reason);
                let ok = after
                    .disabled
                    .as_ref()
                    .is_some_and(|d| d.reason == reason && d.remaining_ms == want);
                if !ok {
                    return Err(bad(format!("expected disabled ({reason}) for {want:?} ms")));
                }
            }
            _ => {}
        }
        if !matches!(
            class,
            OutcomeClass::AuthFailed | OutcomeClass::Forbidden | OutcomeClass::Billing
        ) && after.disabled != before.disabled
            && class != OutcomeClass::Success
        {
            return Err(bad("the disabled state changed".into()));
        }
        // Lockout column.
        let lock = |c: &quotaroute_actors::admin_state::ConnectionAdminState| {
            c.lockouts.iter().find(|l| l.model == model).cloned()
        };
        let (lock_before, lock_after) = (lock(&before), lock(&after));
        let reason = match class {
            OutcomeClass::RateLimited => Some("rate_limited"),
            OutcomeClass::ModelUnavailable => Some("not_found"),
            OutcomeClass::QuotaExhausted => Some("quota_exhausted"),
            _ => None,
        };
        let remaining_before = lock_before.as_ref().map_or(0, |l| l.remaining_ms);
        match (reason, &lock_after) {
            (Some(_), None) => return Err(bad("expected a lockout".into())),
            (Some(reason), Some(after_lock)) if after_lock.remaining_ms != remaining_before => {
                let s = &spec.lockout;
                let ok = after_lock.reason == reason
                    && match (result.reset_hint_ms, reason) {
                        (Some(hint), _) => after_lock.remaining_ms == hint.min(s.max_upstream_ms),
                        (None, "quota_exhausted") => {
                            let r = after_lock.remaining_ms;
                            r >= s.quota_ms
                                && r <= s.quota_max_ms
                                && (r == s.quota_max_ms
                                    || (r % s.quota_ms == 0 && (r / s.quota_ms).is_power_of_two()))
                        }
                        (None, _) => {
                            let reason = if reason == "rate_limited" {
                                quotaroute_journal::LockReason::RateLimited
                            } else {
                                quotaroute_journal::LockReason::NotFound
                            };
                            after_lock.remaining_ms
                                == s.backoff_ms(reason, after_lock.failure_count)
                        }
                    };
                if !ok || after_lock.remaining_ms < remaining_before {
                    return Err(bad("the new lock's duration is not the table's".into()));
                }
            }
            (None, _) if class != OutcomeClass::Success => {
                let same = match (&lock_before, &lock_after) {
                    (None, None) => true,
                    (Some(a), Some(b)) => a.remaining_ms == b.remaining_ms,
                    _ => false,
                };
                if !same {
                    return Err(bad("a class that does not lock changed the lock".into()));
                }
            }
            _ => {}
        }
        // Breaker column.
        let breaker = |state: &AdminState| {
            state
                .providers
                .iter()
                .find(|p| p.name == held.provider)
                .cloned()
        };
        let (Some(b0), Some(b1)) = (breaker(pre), breaker(post)) else {
            return Err(bad("provider missing".into()));
        };
        let trips = counts_as_attempt(class);
        let fresh_probe = held.probe && now < held.started_ms + PROBE_TIMEOUT_MS;
        if !trips && class != OutcomeClass::Success && b0 != b1 {
            return Err(bad(format!("the breaker changed: {b0:?} → {b1:?}")));
        }
        if trips
            && fresh_probe
            && b0.breaker == "HALF_OPEN"
            && (b1.breaker != "OPEN" || b1.cycles != b0.cycles + 1)
        {
            return Err(bad(format!(
                "a failed probe should re-open the breaker one cycle up: {b0:?} → {b1:?}"
            )));
        }
        if class == OutcomeClass::Success
            && fresh_probe
            && b0.breaker == "HALF_OPEN"
            && (b1.breaker != "CLOSED" || b1.cycles != 0)
        {
            return Err(bad(format!(
                "a successful probe should close the breaker: {b0:?} → {b1:?}"
            )));
        }
        if class == OutcomeClass::Success
            && !held.probe
            && matches!(b0.breaker, "OPEN" | "HALF_OPEN")
            && b1.breaker != b0.breaker
        {
            return Err(bad(format!(
                "a non-probe success moved an {} breaker: {b0:?} → {b1:?}",
                b0.breaker
            )));
        }
        Ok(())
    }

    /// (l) The decided order (§2): only unblocked targets, every target free in the state read
    /// before is in it (a HALF_OPEN provider's may be left out: its probe may be out), those
    /// with room (in-flight under `max_concurrent`, breaker not DEGRADED) before those without
    /// unless none has room, and the winner has no more in-flight than the runner-up (P2C).
    fn check_order(&self, before: &AdminState, combo: &str, held: &Held) -> Result<(), Failure> {
        let targets = held.decision.targets();
        let provider_of = |connection: &str| {
            self.topology
                .connection(connection)
                .map(|c| c.provider.clone())
                .unwrap_or_default()
        };
        let in_flight = |connection: &str| {
            before
                .connections
                .iter()
                .find(|c| c.id == connection)
                .map_or(0, |c| c.in_flight)
        };
        let has_room = |connection: &str| {
            let capped = self
                .topology
                .connection(connection)
                .and_then(|c| c.max_concurrent)
                .is_some_and(|cap| in_flight(connection) >= cap);
            let provider = provider_of(connection);
            let degraded = before
                .providers
                .iter()
                .any(|p| p.name == provider && p.breaker == "DEGRADED");
            !capped && !degraded
        };
        let listed: Vec<(String, String)> = targets
            .iter()
            .map(|t| (t.connection.to_string(), t.model.to_string()))
            .collect();
        for (connection, model) in &listed {
            if let Some(why) =
                self.block_of(before, connection, &provider_of(connection), model, true)
            {
                return Err(self.fail(
                    "l:order-is-the-spec-order",
                    format!("order {listed:?} lists {connection}/{model}, which was {why}"),
                ));
            }
        }
        if let Some(spec) = self.topology.combo(combo) {
            for t in &spec.targets {
                let provider = provider_of(&t.connection);
                let half_open = before
                    .providers
                    .iter()
                    .any(|p| p.name == provider && p.breaker == "HALF_OPEN")
                    && self.probe_out(&provider);
                let free = self
                    .block_of(before, &t.connection, &provider, &t.model, true)
                    .is_none();
                if free && !half_open && !listed.contains(&(t.connection.clone(), t.model.clone()))
                {
                    return Err(self.fail(
                        "l:order-is-the-spec-order",
                        format!(
                            "order {listed:?} leaves out {}/{}, which was free",
                            t.connection, t.model
                        ),
                    ));
                }
            }
        }
        let room: Vec<bool> = listed.iter().map(|(c, _)| has_room(c)).collect();
        if room.iter().any(|&r| r) && room.windows(2).any(|w| !w[0] && w[1]) {
            return Err(self.fail(
                "l:order-is-the-spec-order",
                format!(
                    "order {listed:?} puts a target without room before one with room ({room:?})"
                ),
            ));
        }
        if let [(first, _), (second, _), ..] = &listed[..] {
            let both_room = room.first() == Some(&true) && room.get(1) == Some(&true)
                || room.iter().all(|&r| !r);
            if both_room && in_flight(first) > in_flight(second) {
                return Err(self.fail(
                    "l:order-is-the-spec-order",
                    format!(
                        "P2C: winner {first} has {} in flight, runner-up {second} {}",
                        in_flight(first),
                        in_flight(second)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether a HALF_OPEN probe of `provider` may still hold its token: one was taken within
    /// `probe_timeout_ms` (held, settled or abandoned).
    fn probe_out(&self, provider: &str) -> bool {
        self.last_probe_ms
            .get(provider)
            .is_some_and(|&at| self.now() < at + PROBE_TIMEOUT_MS)
    }

    /// (a) The target just taken is not hard-blocked in the state read just before, at the
    /// same clock value.
    fn check_not_blocked(&self, before: &AdminState, held: &Held, at: &str) -> Result<(), Failure> {
        let Some(target) = held.decision.current() else {
            return Ok(());
        };
        let model = target.model.to_string();
        if let Some(why) = self.block_of(before, &held.connection, &held.provider, &model, true) {
            return Err(self.fail(
                "a:routed-target-not-hard-blocked",
                format!(
                    "{at} chose {}/{model} (provider {}) which was {why}",
                    held.connection, held.provider
                ),
            ));
        }
        Ok(())
    }

    /// Why `connection/model` is hard-blocked in `state`, if it is. With `strict`, a HALF_OPEN
    /// provider whose probe the simulator holds counts as blocked.
    fn block_of(
        &self,
        state: &AdminState,
        connection: &str,
        provider: &str,
        model: &str,
        strict: bool,
    ) -> Option<String> {
        let now = self.now();
        if let Some(p) = state.providers.iter().find(|p| p.name == provider) {
            if p.breaker == "OPEN" {
                return Some(format!(
                    "behind an OPEN breaker ({:?} ms left)",
                    p.retry_after_ms
                ));
            }
            if p.breaker == "HALF_OPEN" && strict {
                let probes = self
                    .held
                    .iter()
                    .filter(|h| {
                        h.provider == provider && h.probe && now < h.started_ms + PROBE_TIMEOUT_MS
                    })
                    .count();
                if probes >= HALF_OPEN_PROBES {
                    return Some("HALF_OPEN with its probe taken".into());
                }
            }
        }
        let c = state.connections.iter().find(|c| c.id == connection)?;
        if c.cooldown_remaining_ms > 0 {
            return Some(format!(
                "cooling down ({} ms left)",
                c.cooldown_remaining_ms
            ));
        }
        if let Some(d) = &c.disabled {
            return Some(format!(
                "disabled ({}, {:?} ms left)",
                d.reason, d.remaining_ms
            ));
        }
        if let Some(lock) = c.lockouts.iter().find(|l| l.model == model) {
            return Some(format!(
                "locked ({}, {} ms left)",
                lock.reason, lock.remaining_ms
            ));
        }
        None
    }

    /// (f) NoTarget only when every target of the combo is hard-blocked in the state read
    /// just before (a HALF_OPEN provider may have its probe out), and every blocked entry
    /// names a target of the combo.
    fn check_all_blocked(
        &self,
        before: &AdminState,
        combo: &str,
        blocked: &[quotaroute_journal::Skipped],
    ) -> Result<(), Failure> {
        let Some(spec) = self.topology.combo(combo) else {
            return Ok(());
        };
        for target in &spec.targets {
            let provider = self
                .topology
                .connection(&target.connection)
                .map(|c| c.provider.clone())
                .unwrap_or_default();
            let half_open = before
                .providers
                .iter()
                .any(|p| p.name == provider && p.breaker == "HALF_OPEN")
                && self.probe_out(&provider);
            if !half_open
                && self
                    .block_of(before, &target.connection, &provider, &target.model, false)
                    .is_none()
            {
                return Err(self.fail(
                    "f:no-target-only-when-all-blocked",
                    format!(
                        "combo {combo} answered NoTarget but {}/{} was free; blocked {blocked:?}",
                        target.connection, target.model
                    ),
                ));
            }
        }
        for b in blocked {
            if !spec
                .targets
                .iter()
                .any(|t| t.connection == b.connection && t.model == b.model)
            {
                return Err(self.fail(
                    "f:no-target-only-when-all-blocked",
                    format!("blocked entry {b:?} is not a target of {combo}"),
                ));
            }
        }
        Ok(())
    }

    /// (d') Each entry of a NoTarget's `blocked` list agrees with the admin state read just
    /// before (same reason, same remaining time), and `retry_after_ms` is the earliest finite
    /// unblock among them.
    fn check_blocked_agrees(
        &self,
        before: &AdminState,
        unroutable: &quotaroute_actors::Unroutable,
    ) -> Result<(), Failure> {
        for b in &unroutable.blocked {
            let connection = before.connections.iter().find(|c| c.id == b.connection);
            let provider =
                connection.and_then(|c| before.providers.iter().find(|p| p.name == c.provider));
            let agrees = match b.reason {
                BlockReason::BreakerOpen => provider
                    .is_some_and(|p| p.breaker == "OPEN" && p.retry_after_ms == b.remaining_ms),
                // And a probe was really taken within `probe_timeout_ms` (no stuck HALF_OPEN).
                BlockReason::ProbeInFlight => provider.is_some_and(|p| {
                    p.breaker == "HALF_OPEN"
                        && self
                            .last_probe_ms
                            .get(&p.name)
                            .is_some_and(|&at| self.now() < at + PROBE_TIMEOUT_MS)
                }),
                BlockReason::Cooldown => connection.is_some_and(|c| {
                    c.cooldown_remaining_ms > 0 && Some(c.cooldown_remaining_ms) == b.remaining_ms
                }),
                BlockReason::DisabledAuth | BlockReason::DisabledBilling => {
                    let reason = if b.reason == BlockReason::DisabledAuth {
                        "auth"
                    } else {
                        "billing"
                    };
                    // A billing disable reports when the connection is routable again, so a
                    // cooldown outlasting it counts.
                    connection.is_some_and(|c| {
                        c.disabled.as_ref().is_some_and(|d| {
                            d.reason == reason
                                && d.remaining_ms.map(|r| r.max(c.cooldown_remaining_ms))
                                    == b.remaining_ms
                        })
                    })
                }
                BlockReason::RateLimited | BlockReason::NotFound | BlockReason::QuotaExhausted => {
                    connection.is_some_and(|c| {
                        c.lockouts.iter().any(|l| {
                            l.model == b.model
                                && l.reason == b.reason.as_str()
                                && Some(l.remaining_ms) == b.remaining_ms
                        })
                    })
                }
            };
            if !agrees {
                return Err(self.fail(
                    "d':blocked-list-agrees-with-state",
                    format!(
                        "blocked entry {b:?} but the state showed provider {provider:?}, connection {connection:?}"
                    ),
                ));
            }
        }
        let earliest = unroutable
            .blocked
            .iter()
            .filter_map(|b| b.remaining_ms)
            .min();
        if unroutable.retry_after_ms != earliest {
            return Err(self.fail(
                "d':blocked-list-agrees-with-state",
                format!(
                    "retry_after_ms {:?} but the earliest finite unblock is {earliest:?}",
                    unroutable.retry_after_ms
                ),
            ));
        }
        Ok(())
    }

    /// (h) DRR fairness over a stable window (§2 step 3): when nothing is held, every target
    /// of combo `all` is free and every breaker CLOSED, 2·Σw decisions all answered with a
    /// success serve each target within 2 of N·w/Σw (deficits start anywhere in [−Σw, +Σw],
    /// so the bound of a fresh start, 1, widens by one), and the deficits account exactly:
    /// count·Σw = clamp(d(0), ±Σw) − d(N) + N·w for every target.
    async fn fair_window(&mut self) -> Result<(), Failure> {
        // An operator heals everything first: held requests are abandoned, breakers reset,
        // connections and lockouts cleared.
        self.held.clear();
        let state = self.read().await?;
        for provider in PROVIDERS {
            self.router()
                .reset_breaker(provider)
                .await
                .map_err(|e| self.fail("router-responds", format!("reset_breaker: {e}")))?;
        }
        self.cooldown_set_at.clear();
        for c in &state.connections {
            self.router()
                .clear_connection(&c.id)
                .await
                .map_err(|e| self.fail("router-responds", format!("clear_connection: {e}")))?;
            for lock in &c.lockouts {
                self.cleared
                    .insert((lock.connection.clone(), lock.model.clone()));
                self.router()
                    .clear_lockout(&lock.connection, &lock.model)
                    .await
                    .map_err(|e| self.fail("router-responds", format!("clear_lockout: {e}")))?;
            }
        }
        let before = self.read().await?;
        if let Some(p) = before.providers.iter().find(|p| p.breaker != "CLOSED") {
            return Err(self.fail(
                "h:drr-fair-over-stable-window",
                format!("after reset_breaker, provider {} is {}", p.name, p.breaker),
            ));
        }
        let Some(spec) = self.topology.combo("all").cloned() else {
            return Ok(());
        };
        for t in &spec.targets {
            let provider = self
                .topology
                .connection(&t.connection)
                .map(|c| c.provider.clone())
                .unwrap_or_default();
            if self
                .block_of(&before, &t.connection, &provider, &t.model, true)
                .is_some()
            {
                return Err(self.fail(
                    "h:drr-fair-over-stable-window",
                    format!(
                        "after clearing everything, {}/{} is still blocked",
                        t.connection, t.model
                    ),
                ));
            }
        }
        let deficits = |state: &AdminState| -> Vec<i64> {
            state
                .combos
                .iter()
                .find(|c| c.name == "all")
                .map(|c| c.targets.iter().map(|t| t.deficit).collect())
                .unwrap_or_default()
        };
        let d0 = deficits(&before);
        let total: i64 = spec.targets.iter().map(|t| i64::from(t.weight)).sum();
        let n = 2 * total;
        let mut counts = vec![0i64; spec.targets.len()];
        for i in 0..n {
            let request = RouteRequest {
                request_id: format!("s{}-{}-fair{i}", self.seed, self.step),
                model: "all".into(),
                format: ApiFormat::Openai,
                translatable: false,
                only_connection: None,
                affinity: None,
                client: quotaroute_actors::ClientTag::default(),
            };
            let mut decision =
                self.router().route(request).await.map_err(|e| {
                    self.fail("h:drr-fair-over-stable-window", format!("route: {e}"))
                })?;
            let index = decision.current().map(|t| usize::from(t.index));
            if let Some(count) = index.and_then(|i| counts.get_mut(i)) {
                *count += 1;
            }
            decision
                .report_applied(AttemptResult::success(200, 1, 1))
                .await;
            self.stats.routed += 1;
            self.stats.upstream_requests += 1;
        }
        let after = self.read().await?;
        let d1 = deficits(&after);
        for (i, t) in spec.targets.iter().enumerate() {
            let w = i64::from(t.weight);
            let count = counts[i];
            if (count * total - n * w).abs() > 2 * total {
                return Err(self.fail(
                    "h:drr-fair-over-stable-window",
                    format!(
                        "{} (w {w}) served {count} of {n} (Σw {total}); counts {counts:?}",
                        t.connection
                    ),
                ));
            }
            if let (Some(a), Some(b)) = (d0.get(i), d1.get(i)) {
                // The admin view shows the stored deficit; a turn uses it clamped to the
                // current Σw (after a reload that lowered Σw the two differ).
                let a = (*a).clamp(-total, total);
                if count * total != a - b + n * w {
                    return Err(self.fail(
                        "h:drr-fair-over-stable-window",
                        format!(
                            "{}: served {count}, deficit {a} → {b}, w {w}, Σw {total}, N {n}: \
                             count·Σw ≠ d(0) − d(N) + N·w",
                            t.connection
                        ),
                    ));
                }
            }
        }
        self.stats.fair_windows += 1;
        Ok(())
    }

    /// The invariants checked after every step: (b), (c), (g).
    async fn check(&mut self) -> Result<(), Failure> {
        let state = self.read().await?;
        let now = self.now();
        let phase = |name: &str| state.providers.iter().any(|p| p.breaker == name);
        self.stats.seen_degraded += u64::from(phase("DEGRADED"));
        self.stats.seen_open += u64::from(phase("OPEN"));
        self.stats.seen_half_open += u64::from(phase("HALF_OPEN"));
        let any = |f: &dyn Fn(&quotaroute_actors::admin_state::ConnectionAdminState) -> bool| {
            u64::from(state.connections.iter().any(f))
        };
        self.stats.seen_cooldown += any(&|c| c.cooldown_remaining_ms > 0);
        self.stats.seen_disabled += any(&|c| c.disabled.is_some());
        self.stats.seen_lockout += any(&|c| !c.lockouts.is_empty());
        // (c) In-flight counts equal the decisions held open, per connection.
        let mut expected: BTreeMap<&str, u32> = BTreeMap::new();
        for held in &self.held {
            *expected.entry(held.connection.as_str()).or_default() += 1;
        }
        for c in &state.connections {
            let want = expected.get(c.id.as_str()).copied().unwrap_or(0);
            if c.in_flight != want {
                return Err(self.fail(
                    "c:in-flight-equals-held",
                    format!(
                        "connection {} has in_flight {} but the simulator holds {want} ({} held in all)",
                        c.id,
                        c.in_flight,
                        self.held.len()
                    ),
                ));
            }
        }
        // (b) A lock's end never moves earlier, and a lock never vanishes before its end,
        // except by an admin clear.
        let mut ends = BTreeMap::new();
        for lock in state.lockouts() {
            ends.insert(
                (lock.connection.clone(), lock.model.clone()),
                now + lock.remaining_ms,
            );
        }
        for (key, &before) in &self.lock_ends {
            if self.cleared.contains(key) {
                continue;
            }
            match ends.get(key) {
                Some(&after) if after < before => {
                    return Err(self.fail(
                        "b:lock-end-never-earlier",
                        format!(
                            "lock {}/{} ended at {before}, now ends at {after} (now {now})",
                            key.0, key.1
                        ),
                    ))
                }
                None if before > now => {
                    return Err(self.fail(
                        "b:lock-end-never-earlier",
                        format!(
                            "lock {}/{} vanished {} ms before its end",
                            key.0,
                            key.1,
                            before - now
                        ),
                    ))
                }
                _ => {}
            }
        }
        self.lock_ends = ends;
        // (g) HALF_OPEN admits at most `half_open_probes` probes at a time.
        for provider in PROVIDERS {
            let probes = self
                .held
                .iter()
                .filter(|h| {
                    h.provider == provider && h.probe && now < h.started_ms + PROBE_TIMEOUT_MS
                })
                .count();
            if probes > HALF_OPEN_PROBES {
                return Err(self.fail(
                    "g:half-open-probes-bounded",
                    format!("provider {provider} has {probes} probes in flight"),
                ));
            }
        }
        Ok(())
    }

    /// Ends the run: releases held decisions and stops the router.
    pub async fn finish(mut self) -> Result<Stats, Failure> {
        self.held.clear();
        if let Some(router) = self.router.take() {
            router
                .shutdown("simulation done")
                .await
                .map_err(|e| self.fail("router-responds", format!("shutdown: {e}")))?;
        }
        Ok(self.stats)
    }
}

/// Snapshot every this many events in run `seed`: never, often, or now and then, so restarts
/// recover from the journal alone, from a snapshot and a short tail, or a long one.
fn snapshot_every(seed: u64) -> u64 {
    [0, 7, 100][(seed % 3) as usize]
}

async fn start(
    seed: u64,
    topology: &Topology,
    journal: &MemoryJournal,
    clock: &Arc<ManualClock>,
) -> Router {
    Router::start(
        topology.clone(),
        Box::new(journal.clone()),
        RouterOptions {
            writer: WriterConfig::default(),
            snapshot_every_events: snapshot_every(seed),
            request_events: RequestEvents::All,
            clock: clock.clone(),
        },
    )
    .await
    .unwrap_or_else(|e| panic!("router starts: {e}"))
}

/// The first difference between two admin states, for a failure message.
fn diff(live: &AdminState, recovered: &AdminState) -> String {
    for (a, b) in live.providers.iter().zip(&recovered.providers) {
        if a != b {
            return format!("provider live {a:?} recovered {b:?}");
        }
    }
    for (a, b) in live.connections.iter().zip(&recovered.connections) {
        if a != b {
            return format!("connection live {a:?} recovered {b:?}");
        }
    }
    for (a, b) in live.combos.iter().zip(&recovered.combos) {
        if a != b {
            return format!("combo live {a:?} recovered {b:?}");
        }
    }
    "states differ in length".into()
}

/// Runs the given steps of run `seed` (in order) and checks every invariant after each.
pub async fn run_steps(seed: u64, steps: &[usize]) -> Result<Stats, Failure> {
    let mut sim = Sim::new(seed).await;
    for &index in steps {
        sim.step(index).await?;
    }
    sim.finish().await
}

/// Runs steps `0..steps` of run `seed`.
pub async fn run(seed: u64, steps: usize) -> Result<Stats, Failure> {
    let all: Vec<usize> = (0..steps).collect();
    run_steps(seed, &all).await
}

/// The smallest set of steps found that still fails with the same invariant: the prefix up to
/// the failing step, then chunks of it removed while the failure remains.
pub async fn shrink(failure: &Failure) -> Vec<usize> {
    let mut steps: Vec<usize> = (0..=failure.step).collect();
    let still_fails = |result: &Result<Stats, Failure>| matches!(result, Err(f) if f.invariant == failure.invariant);
    let mut chunk = steps.len().div_ceil(2).max(1);
    loop {
        let mut start = 0;
        while start < steps.len() {
            let end = (start + chunk).min(steps.len());
            let candidate: Vec<usize> = steps[..start]
                .iter()
                .chain(&steps[end..])
                .copied()
                .collect();
            if !candidate.is_empty() && still_fails(&run_steps(failure.seed, &candidate).await) {
                steps = candidate;
            } else {
                start = end;
            }
        }
        if chunk == 1 {
            return steps;
        }
        chunk = chunk.div_ceil(2);
    }
}
