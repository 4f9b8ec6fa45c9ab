//! The deterministic simulator's engine: a seeded schedule of client requests, upstream
//! outcomes, held (in-flight) decisions, clock jumps, admin actions and restarts, driven
//! through a real `Router` on a `MemoryJournal` and a `ManualClock`, with invariants from
//! `behaviour.md` checked after every step.
//!
//! It owns the schedule (a pure function of the seed and the step index, so any subset of
//! steps replays the same way) and the shrinking of a failing run; the invariant checks are
//! in `invariants.rs`, a child module. It
//! must not reach into the library's internals: it sees only what an embedding program sees
//! (`Router`, `Decision`, `AdminState`, the actors' own state for restart checks). Used by
//! `actors/tests/simulate.rs` (short runs) and `actors/examples/simulate.rs` (long runs).
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
//! - **m**, **n** (pacing, behaviour §13) are the subscription week's, in `week.rs`: no request
//!   to a spent or reserved window; with readings stable, shares follow the paces.

mod invariants;

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
            request_id: format!("s{}-{}", self.seed, self.step).into(),
            model: combo.clone().into(),
            format: ApiFormat::Openai,
            translatable: false,
            cannot_carry: Vec::new(),
            only_connection: None,
            encrypted_maker: None,
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
