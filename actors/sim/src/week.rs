//! The simulator's subscription week (behaviour §13): accounts of different sizes whose 5-hour
//! and weekly windows started at different times and roll from first use (`accounts.rs`), a
//! working-day load the pool carries on average with bursts above it, quiet nights and a quiet
//! weekend, requests from several clients, most of them turns of conversations — all driven
//! through a real `Router` on a `MemoryJournal` and a `ManualClock` (time jumps from arrival to
//! arrival), each upstream answer handed to the router as the node does (`readings_from_headers`
//! for the rate-limit headers, `classify` for a refusal). The same seed runs with pacing on and
//! off over the same arrivals, so the two can be compared request for request.
//!
//! It owns the week's schedule and its measures: quota left unused at resets, requests refused,
//! requests that reached a spent window, and how far served shares strayed from the paces (or,
//! unpaced, from the weights). Like `engine.rs` it sees only what an embedding program sees.
//!
//! # Invariants (letters continue `engine.rs`'s)
//! - **m** no request (first choice or failover) goes to a target whose window is spent (an
//!   upstream reading used to its limit, reset not passed) or within its reserve, in the admin
//!   state read just before, same `now`.
//! - **n** with readings stable (every target's pace within [`STABLE_PACE_RATIO`] over the
//!   stretch, nothing blocked, nothing refused), over every stretch of [`STRETCH`] decisions each
//!   target's first choices are within [`SHARE_BOUND_PP`] percentage points (§13's bound, plus
//!   what conversation affinity may hold: `max_lead` twice) of its paced share
//!   `w·pace / Σ w·pace`, taken decision by decision from the paces `route_decided` journals.

use std::sync::Arc;

use quotaroute_actors::policy::classify::{classify, UpstreamReply};
use quotaroute_actors::policy::rate_limit_headers::readings_from_headers;
use quotaroute_actors::policy::request::Step;
use quotaroute_actors::{
    AdminState, AffinityKey, AttemptResult, ClientTag, ComboSpec, ConnectionSpec, ManualClock,
    ProviderSpec, RequestEvents, RouteError, RouteRequest, Router, RouterOptions, Topology,
};
use quotaroute_journal::{
    AffinityOutcome, ApiFormat, AuthKind, Event, Journal, MemoryJournal, OutcomeClass, PacingKnobs,
    RouteDecided, WriterConfig,
};

pub mod accounts;
pub mod priming;
pub mod spare;

use accounts::{Account, Family, ResetTally, DAY_MS, FIVE_HOURS_MS, HOUR_MS, SECOND_MS, WEEK_MS};

use crate::engine::{Failure, Rng, T0};

const COMBO: &str = "pool";
const MODEL: &str = "m";
const ANTHROPIC: &str = "anthropic";
const CODEX: &str = "codex";
/// The clients sharing the pool (behaviour §11) and their weights.
const CLIENTS: [(&str, u32); 3] = [("alice", 2), ("bob", 1), ("carol", 1)];
/// Conversations each client keeps going; most requests are a turn of one.
const CONVERSATIONS: u64 = 12;
/// `affinity.max_lead` of the pool: how far a bound target may run ahead of its share.
const MAX_LEAD: u64 = 4;
/// Decisions per stretch over which shares are checked (invariant n).
pub const STRETCH: usize = 200;
/// §13: ±5 percentage points over 200 requests, plus `max_lead` twice (a stretch may open
/// with a bound target that far ahead and close with another).
pub const SHARE_BOUND_PP: f64 = 5.0 + 100.0 * 2.0 * MAX_LEAD as f64 / STRETCH as f64;
/// A target's pace counts as stable over a stretch while its largest is within this factor of
/// its smallest.
pub const STABLE_PACE_RATIO: f64 = 1.25;
/// The owner of account [`RESERVED_ACCOUNT`] keeps this share of its weekly window (§13
/// `reserve`).
const RESERVE_7D_PCT: u8 = 10;
const RESERVED_ACCOUNT: usize = 1;

/// How big a week is: its length, the windows per plan unit, and the demand.
#[derive(Debug, Clone, Copy)]
pub struct WeekShape {
    pub days: u64,
    /// Days run before the measured ones, under the same policy: the windows that reset in
    /// the measured days were spent by the arm being measured (its steady state), not only
    /// by whatever used them before the simulation started.
    pub warmup_days: u64,
    /// Quota units one plan unit (a Pro account) holds per 5-hour window and per week.
    pub units_5h: u64,
    pub units_7d: u64,
    /// Demand over the week, in percent of the quota the pool's weekly windows hold.
    pub load_pct: u64,
    /// Share of requests that are a turn of a conversation (behaviour §10), in percent.
    pub turns_pct: u64,
    /// The accounts' 5-hour windows (a measuring knob: the week's own is `Reported`).
    pub five_hour: FiveHour,
    /// `affinity.ttl_ms` of the pool (a measuring knob): the default 5 minutes forgets most
    /// of the week's groups between their turns; longer holds them.
    pub affinity_ttl_ms: u64,
    /// The knobs of the paced arm's rule (behaviour §13): `exponent`, `clock`, `pace_windows`.
    pub rule: PacingKnobs,
}

/// What the week's accounts do with their 5-hour windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FiveHour {
    /// As the providers do: enforced and in every answer's headers.
    Reported,
    /// Enforced, but only a 429 of a spent one says anything of it.
    Unreported,
    /// None at all (neither enforced nor reported).
    Absent,
}

impl WeekShape {
    /// The long run's week (`examples/simulate.rs --week`).
    pub const FULL: WeekShape = WeekShape {
        days: 7,
        warmup_days: 0,
        units_5h: 40,
        units_7d: 240,
        load_pct: 80,
        turns_pct: 70,
        five_hour: FiveHour::Reported,
        affinity_ttl_ms: 300_000,
        rule: DEFAULT_RULE,
    };
    /// CI's: the same week with a fifth of the quota and of the requests.
    pub const SHORT: WeekShape = WeekShape {
        days: 7,
        warmup_days: 0,
        units_5h: 8,
        units_7d: 48,
        load_pct: 80,
        turns_pct: 70,
        five_hour: FiveHour::Reported,
        affinity_ttl_ms: 300_000,
        rule: DEFAULT_RULE,
    };
}

/// The paced arm's rule unless a sweep says otherwise: `[defaults.pacing]`'s default knobs
/// (exponent 1, the wall clock, the longest window).
pub const DEFAULT_RULE: PacingKnobs = quotaroute_actors::policy::pace::DEFAULT_KNOBS;

/// Exponent 1, the wall clock, every window: the rule before its knobs (a journal without a
/// `pacing_rule`).
pub const RULE_BEFORE_KNOBS: PacingKnobs = PacingKnobs::UNJOURNALED;

/// What a week did.
#[derive(Debug, Clone, Default)]
pub struct WeekStats {
    pub seeds: u64,
    pub requests: u64,
    pub served: u64,
    /// Client requests that got no answer from any account (nothing could serve, or every
    /// attempt was refused).
    pub refused: u64,
    pub upstream_requests: u64,
    pub failovers: u64,
    /// Upstream requests that reached a spent window (answered 429).
    pub sent_to_spent: u64,
    pub unused_5h: ResetTally,
    pub unused_7d: ResetTally,
    /// Turns of a conversation held on the target their group was bound to (behaviour §10:
    /// pacing steers only the others), and all turns of conversations.
    pub held_turns: u64,
    pub group_turns: u64,
    /// Decisions made while some target's window was spent or reserved (invariant m bites).
    pub decided_beside_blocked_window: u64,
    /// Stretches checked by invariant n, and those skipped as unstable.
    pub stretches: u64,
    pub unstable_stretches: u64,
    /// The largest deviation of a target's first choices from its paced share (unpaced: its
    /// weight share), in percentage points, over the checked stretches.
    pub max_share_deviation_pp: f64,
    /// Windows primed (behaviour §13; only in a run with priming).
    pub primes: u64,
    /// Spare-class requests (behaviour §13, `spare.rs`): not in `requests`, `served` or
    /// `refused`, which count the working-day load alone.
    pub spare_requests: u64,
    pub spare_served: u64,
    pub spare_refused: u64,
    /// Quota units the spare requests used.
    pub spare_units: u64,
}

impl WeekStats {
    pub fn add(&mut self, other: &WeekStats) {
        self.seeds += other.seeds;
        self.requests += other.requests;
        self.served += other.served;
        self.refused += other.refused;
        self.upstream_requests += other.upstream_requests;
        self.failovers += other.failovers;
        self.sent_to_spent += other.sent_to_spent;
        self.unused_5h.add(&other.unused_5h);
        self.unused_7d.add(&other.unused_7d);
        self.held_turns += other.held_turns;
        self.group_turns += other.group_turns;
        self.decided_beside_blocked_window += other.decided_beside_blocked_window;
        self.stretches += other.stretches;
        self.unstable_stretches += other.unstable_stretches;
        self.primes += other.primes;
        self.max_share_deviation_pp = self
            .max_share_deviation_pp
            .max(other.max_share_deviation_pp);
        self.spare_requests += other.spare_requests;
        self.spare_served += other.spare_served;
        self.spare_refused += other.spare_refused;
        self.spare_units += other.spare_units;
    }

    /// Forgets the warm-up's requests (the measured days count their own; requests sent to
    /// spent windows and the invariants' counts cover the whole run).
    fn start_measuring(&mut self) {
        self.requests = 0;
        self.served = 0;
        self.refused = 0;
        self.upstream_requests = 0;
        self.failovers = 0;
        self.spare_requests = 0;
        self.spare_served = 0;
        self.spare_refused = 0;
        self.spare_units = 0;
    }

    /// Every window that reset, 5-hour and weekly.
    pub fn unused_all(&self) -> ResetTally {
        let mut all = self.unused_5h;
        all.add(&self.unused_7d);
        all
    }
}

/// The warm-up's end ([`WeekShape::warmup_days`]): windows tally only the resets after it, and
/// the stats forget the requests before it, once.
struct Warmup {
    until_ms: u64,
    over: bool,
}

impl Warmup {
    fn new(accounts: &mut [Account], shape: &WeekShape) -> Self {
        let until_ms = T0 + shape.warmup_days * DAY_MS;
        for account in accounts {
            account.five_hour.tally_from_ms = until_ms;
            account.weekly.tally_from_ms = until_ms;
        }
        Warmup {
            until_ms,
            over: shape.warmup_days == 0,
        }
    }

    fn arrival(&mut self, at_ms: u64, stats: &mut WeekStats) {
        if !self.over && at_ms >= self.until_ms {
            self.over = true;
            stats.start_measuring();
        }
    }

    /// The end of the measured days.
    fn end_ms(&self, shape: &WeekShape) -> u64 {
        self.until_ms + shape.days * DAY_MS
    }
}

/// One client request of the week.
#[derive(Debug, Clone)]
struct Arrival {
    at_ms: u64,
    cost: u64,
    client: usize,
    conversation: Option<u64>,
    /// A spare-class request (`spare.rs`), not one of [`CLIENTS`]'.
    spare: bool,
}

/// The demand of hour `hour` of the week (0 = Monday 00:00) relative to a working hour's base,
/// and whether it is a burst: working hours (9–18 on weekdays) carry the base, a quarter of
/// them a burst of three times it; mornings, evenings, nights and the weekend are quiet.
fn hour_demand(hour: u64, rng: &mut Rng) -> f64 {
    let (day, hour_of_day) = ((hour / 24) % 7, hour % 24);
    if day >= 5 {
        return if (10..20).contains(&hour_of_day) {
            0.2
        } else {
            0.03
        };
    }
    match hour_of_day {
        9..=17 if rng.chance(25) => 3.0,
        9..=17 => 1.0,
        8 => 0.5,
        18..=21 => 0.3,
        _ => 0.05,
    }
}

/// The expected [`hour_demand`] summed over a week.
fn weekly_demand_hours() -> f64 {
    let working = 9.0 * (0.75 + 0.25 * 3.0);
    let weekday = working + 0.5 + 4.0 * 0.3 + 10.0 * 0.05;
    let weekend_day = 10.0 * 0.2 + 14.0 * 0.03;
    5.0 * weekday + 2.0 * weekend_day
}

/// Mean cost of a request in quota units (costs are 1–3).
const MEAN_COST: f64 = 2.0;

/// The week's client requests: a pure function of the seed and the pool's weekly quota, the
/// same whether pacing is on or off.
fn arrivals(seed: u64, shape: &WeekShape, weekly_quota: u64) -> Vec<Arrival> {
    let per_hour =
        shape.load_pct as f64 / 100.0 * weekly_quota as f64 / (MEAN_COST * weekly_demand_hours());
    let mut out = Vec::new();
    for hour in 0..(shape.warmup_days + shape.days) * 24 {
        let mut rng = Rng::for_step(seed ^ 0x7eed_a11e, hour as usize);
        let expected = per_hour * hour_demand(hour, &mut rng);
        let whole = expected.floor();
        let count = whole as u64
            + u64::from(rng.next_u64() % 1_000 < ((expected - whole) * 1_000.0) as u64);
        let mut seconds: Vec<u64> = (0..count).map(|_| rng.range(0, 3_599)).collect();
        seconds.sort_unstable();
        for second in seconds {
            let client = (rng.next_u64() % CLIENTS.len() as u64) as usize;
            out.push(Arrival {
                at_ms: T0 + hour * HOUR_MS + second * SECOND_MS,
                cost: rng.range(1, 3),
                client,
                conversation: rng
                    .chance(shape.turns_pct)
                    .then(|| rng.range(0, CONVERSATIONS - 1)),
                spare: false,
            });
        }
    }
    out
}

/// The accounts of run `seed`: a Max 20, a Max 5 and a Pro, and 1–3 more of those sizes,
/// Anthropic or Codex; each weekly window started somewhere in the week before and is used
/// about as much as that share of the week at this load (from a third to 1.7 times it, capped
/// short of spent); half the 5-hour windows are running too. Starts are whole seconds.
fn accounts(seed: u64, shape: &WeekShape) -> Vec<Account> {
    let mut rng = Rng::new(seed ^ 0xacc0_0e75);
    let mut sizes = vec![20u32, 5, 1];
    for _ in 0..rng.range(1, 3) {
        sizes.push(*rng.pick(&[20, 5, 5, 1, 1]));
    }
    sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            let family = if rng.chance(50) {
                Family::Anthropic
            } else {
                Family::Codex {
                    weekly_primary: rng.chance(30),
                }
            };
            // Absent: a 5-hour window no week can spend.
            let units_5h = match shape.five_hour {
                FiveHour::Absent => shape.units_7d * 100,
                _ => shape.units_5h,
            };
            let mut account =
                Account::new(&format!("acct{i}"), size, family, units_5h, shape.units_7d);
            account.reports_five_hour = shape.five_hour == FiveHour::Reported;
            if i == RESERVED_ACCOUNT {
                account.weekly.reserve = account.weekly.capacity * u64::from(RESERVE_7D_PCT) / 100;
            }
            let elapsed_s = rng.range(HOUR_MS / SECOND_MS, (WEEK_MS - HOUR_MS) / SECOND_MS);
            let weekly = &mut account.weekly;
            weekly.started_at_ms = Some(T0 - elapsed_s * SECOND_MS);
            let share = elapsed_s as f64 * SECOND_MS as f64 / WEEK_MS as f64;
            let used = shape.load_pct as f64 / 100.0 * share * rng.range(33, 170) as f64 / 100.0;
            weekly.used = ((weekly.capacity as f64 * used) as u64).min(weekly.capacity * 97 / 100);
            if rng.chance(50) {
                let five = &mut account.five_hour;
                five.started_at_ms =
                    Some(T0 - rng.range(1, FIVE_HOURS_MS / SECOND_MS - 1) * SECOND_MS);
                five.used = five.capacity * rng.range(0, 50) / 100;
            }
            account
        })
        .collect()
}

/// The provider of `account`'s family.
fn provider_of(account: &Account) -> &'static str {
    match account.family {
        Family::Anthropic => ANTHROPIC,
        Family::Codex { .. } => CODEX,
    }
}

/// The pool: one provider per family, one connection per account weighted by its size (one
/// keeps a weekly reserve), one quota-share combo over them, paced or not.
fn topology(accounts: &[Account], paced: bool, shape: &WeekShape) -> Topology {
    let providers = vec![
        ProviderSpec::new(ANTHROPIC, ApiFormat::Openai, AuthKind::Oauth),
        ProviderSpec::new(CODEX, ApiFormat::Openai, AuthKind::Oauth),
    ];
    let connections: Vec<ConnectionSpec> = accounts
        .iter()
        .enumerate()
        .map(|(i, account)| {
            let provider = provider_of(account);
            let mut spec =
                ConnectionSpec::new(&account.id, provider, AuthKind::Oauth, account.size);
            if i == RESERVED_ACCOUNT {
                spec.reserve.by_window.insert("7d".into(), RESERVE_7D_PCT);
            }
            spec
        })
        .collect();
    let targets: Vec<(&str, &str, u32)> = accounts
        .iter()
        .map(|a| (a.id.as_str(), MODEL, a.size))
        .collect();
    let mut combo = ComboSpec::quota_share(COMBO, &targets);
    combo.pacing.enabled = paced;
    combo.pacing = combo.pacing.with_knobs(&shape.rule);
    let mut topology = Topology::new(providers, connections, vec![combo], "sim-week", "0");
    topology.pacing.enabled = paced;
    topology.affinity.max_lead = MAX_LEAD;
    topology.affinity.ttl_ms = shape.affinity_ttl_ms;
    topology.clients = CLIENTS.len();
    topology
}

/// One week of run `seed`.
struct Week {
    seed: u64,
    request: usize,
    clock: Arc<ManualClock>,
    router: Router,
    journal: MemoryJournal,
    accounts: Vec<Account>,
    stats: WeekStats,
    /// The paced arm's exponent: a share is `w·pace^exponent` over the sum (invariant n).
    exponent: f64,
}

/// Runs the week of `seed` with pacing on or off, checking invariants m and n.
pub async fn run_week(seed: u64, paced: bool, shape: &WeekShape) -> Result<WeekStats, Failure> {
    run_week_primed(seed, paced, shape, None).await
}

/// [`run_week`], each account's 5-hour window primed at `prime_hour` of each weekday when
/// the rule finds it due (`None`: never primed).
pub async fn run_week_primed(
    seed: u64,
    paced: bool,
    shape: &WeekShape,
    prime_hour: Option<u64>,
) -> Result<WeekStats, Failure> {
    let accounts = accounts(seed, shape);
    let weekly_quota: u64 = accounts.iter().map(|a| a.weekly.capacity).sum();
    let arrivals = arrivals(seed, shape, weekly_quota);
    run_week_over(seed, (paced, None, prime_hour), shape, accounts, &arrivals)
        .await
        .map(|(stats, _)| stats)
}

/// The week of `seed` over `arrivals`, paced or not, with `pacing.spare_margin` when given and
/// each account's 5-hour window primed at `prime_hour` of each weekday when given: its stats and its accounts at the end (each with its reset tallies and the spare units it
/// served).
async fn run_week_over(
    seed: u64,
    (paced, spare_margin, prime_hour): (bool, Option<f64>, Option<u64>),
    shape: &WeekShape,
    accounts: Vec<Account>,
    arrivals: &[Arrival],
) -> Result<(WeekStats, Vec<Account>), Failure> {
    let mut topology = topology(&accounts, paced, shape);
    if let Some(margin) = spare_margin {
        topology.pacing.spare_margin = margin;
        for combo in &mut topology.combos {
            combo.pacing.spare_margin = margin;
        }
    }
    let journal = MemoryJournal::new();
    let clock = ManualClock::new(T0);
    let router = Router::start(
        topology,
        Box::new(journal.clone()),
        RouterOptions {
            writer: WriterConfig::default(),
            snapshot_every_events: 0,
            request_events: RequestEvents::All,
            clock: clock.clone(),
        },
    )
    .await
    .map_err(|e| Failure {
        seed,
        step: 0,
        invariant: "router-starts",
        detail: e.to_string(),
    })?;
    let mut week = Week {
        seed,
        request: 0,
        clock,
        router,
        journal,
        accounts,
        stats: WeekStats {
            seeds: 1,
            ..WeekStats::default()
        },
        exponent: f64::from(shape.rule.exponent_pm) / 1_000.0,
    };
    let mut warmup = Warmup::new(&mut week.accounts, shape);
    let mut priming = prime_hour.map(|hour| {
        priming::Priming::new(shape.warmup_days + shape.days, hour, week.accounts.len())
    });
    for (index, arrival) in arrivals.iter().enumerate() {
        warmup.arrival(arrival.at_ms, &mut week.stats);
        week.request = index;
        if let Some(priming) = &mut priming {
            priming.before(arrival.at_ms, &mut week).await?;
        }
        week.serve(arrival).await?;
    }
    let end_ms = warmup.end_ms(shape);
    for account in &mut week.accounts {
        account.roll(end_ms);
        week.stats.unused_5h.add(&account.five_hour.tally);
        week.stats.unused_7d.add(&account.weekly.tally);
        week.stats.sent_to_spent += account.sent_to_spent;
    }
    week.check_shares().await?;
    let _ = week.router.shutdown("end of the week").await;
    Ok((week.stats, week.accounts))
}

impl Week {
    fn fail(&self, invariant: &'static str, detail: String) -> Failure {
        Failure {
            seed: self.seed,
            step: self.request,
            invariant,
            detail,
        }
    }

    async fn read(&self) -> Result<AdminState, Failure> {
        self.router
            .settle()
            .await
            .map_err(|e| self.fail("router-responds", format!("settle: {e}")))?;
        self.router
            .state()
            .await
            .map_err(|e| self.fail("router-responds", format!("state: {e}")))
    }

    /// One client request: routed, each attempt answered by its account and reported, failed
    /// over while the plan says so.
    async fn serve(&mut self, arrival: &Arrival) -> Result<(), Failure> {
        if arrival.spare {
            return self.serve_spare(arrival).await;
        }
        self.clock.set(arrival.at_ms);
        let now = arrival.at_ms;
        self.stats.requests += 1;
        let (client, client_weight) = CLIENTS[arrival.client];
        let client = Arc::<str>::from(client);
        let request = RouteRequest {
            request_id: format!("w{}-{}", self.seed, self.request).into(),
            model: COMBO.into(),
            format: ApiFormat::Openai,
            translatable: false,
            cannot_carry: Vec::new(),
            only_connection: None,
            encrypted_maker: None,
            affinity: arrival.conversation.map(|group| AffinityKey {
                group: group * CLIENTS.len() as u64 + arrival.client as u64,
                client: client.clone(),
            }),
            client: ClientTag {
                id: client,
                weight: client_weight,
                class: Default::default(),
            },
        };
        let before = self.read().await?;
        if before
            .connections
            .iter()
            .any(|c| window_block(&before, &c.id, now).is_some())
        {
            self.stats.decided_beside_blocked_window += 1;
        }
        let mut decision = match self.router.route(request).await {
            Ok(decision) => decision,
            Err(RouteError::NoTarget(_)) => {
                self.stats.refused += 1;
                return Ok(());
            }
            Err(other) => return Err(self.fail("route-succeeds-or-no-target", other.to_string())),
        };
        let mut state = before;
        loop {
            let Some(target) = decision.current() else {
                return Err(self.fail("a-routed-has-target", "no current target".into()));
            };
            let (connection, model) = (target.connection.to_string(), target.model.to_string());
            // (m) No request to a spent or reserved window.
            if let Some(window) = window_block(&state, &connection, now) {
                return Err(self.fail(
                    "m:no-request-to-a-spent-or-reserved-window",
                    format!(
                        "attempt {} went to {connection}: {window}",
                        decision.attempt()
                    ),
                ));
            }
            self.stats.upstream_requests += 1;
            let Some(account) = self.accounts.iter_mut().find(|a| a.id == connection) else {
                return Err(self.fail("a-routed-has-target", format!("no account {connection}")));
            };
            let result =
                attempt_result(account.answer(arrival.cost, now), &model, arrival.cost, now);
            let class = result.class;
            if !decision.report_applied(result).await {
                return Err(self.fail("report-has-attempt", "no attempt in progress".into()));
            }
            if class == OutcomeClass::Success {
                self.stats.served += 1;
                return Ok(());
            }
            if decision.next_step(class, false, true) != Step::Failover {
                break;
            }
            state = self.read().await?;
            match decision.failover().await {
                Ok(Some(_)) => self.stats.failovers += 1,
                Ok(None) => break,
                Err(e) => return Err(self.fail("router-responds", format!("failover: {e}"))),
            }
        }
        self.stats.refused += 1;
        Ok(())
    }

    /// (n) Over each stretch of decisions with stable readings, first choices follow the
    /// paced shares; the largest deviation seen goes to the stats either way.
    async fn check_shares(&mut self) -> Result<(), Failure> {
        self.router
            .flush()
            .await
            .map_err(|e| self.fail("router-responds", format!("flush: {e}")))?;
        let weights: Vec<u32> = self.accounts.iter().map(|a| a.size).collect();
        let decided: Vec<RouteDecided> = self
            .journal
            .read_from(0)
            .filter_map(|envelope| match envelope.ok()?.event {
                Event::RouteDecided(decided) => Some(decided),
                _ => None,
            })
            .collect();
        for decided in &decided {
            if decided.group.is_some() {
                self.stats.group_turns += 1;
            }
            if decided.affinity == AffinityOutcome::Held {
                self.stats.held_turns += 1;
            }
        }
        let mut stretch: Vec<&RouteDecided> = Vec::with_capacity(STRETCH);
        for decided in &decided {
            // A stretch keeps one set of targets with room (nothing blocked or unblocked
            // within it) and every decision of it chose one.
            let same_room = stretch
                .first()
                .is_none_or(|first| first.room == decided.room);
            if decided.chosen.is_none() || !same_room {
                stretch.clear();
            }
            if decided.chosen.is_none() {
                continue;
            }
            stretch.push(decided);
            if stretch.len() < STRETCH {
                continue;
            }
            match share_deviation(&stretch, &weights, self.exponent) {
                None => self.stats.unstable_stretches += 1,
                Some((target, deviation_pp)) => {
                    self.stats.stretches += 1;
                    self.stats.max_share_deviation_pp =
                        self.stats.max_share_deviation_pp.max(deviation_pp);
                    if deviation_pp > SHARE_BOUND_PP {
                        return Err(self.fail(
                            "n:shares-follow-the-paces",
                            format!(
                                "target {target} strayed {deviation_pp:.1} pp from its paced \
                                 share over {STRETCH} decisions ending with {}",
                                stretch[STRETCH - 1].request_id
                            ),
                        ));
                    }
                }
            }
            stretch.clear();
        }
        Ok(())
    }
}

/// The pace each target had in a decision, per mille (unlisted: on pace).
fn paces_of(decided: &RouteDecided, targets: usize) -> Vec<f64> {
    let mut paces = vec![1_000.0; targets];
    for pace in &decided.paces {
        if let Some(slot) = paces.get_mut(usize::from(pace.target)) {
            *slot = f64::from(pace.pace);
        }
    }
    paces
}

/// The target that strayed most from its paced share over `stretch` (decisions with one
/// set of targets with room; a share is `w·pace^exponent` over the sum among them) and by how
/// many percentage points; `None` when some target's pace moved more than
/// [`STABLE_PACE_RATIO`].
fn share_deviation(
    stretch: &[&RouteDecided],
    weights: &[u32],
    exponent: f64,
) -> Option<(usize, f64)> {
    let room: Vec<usize> = stretch
        .first()?
        .room
        .iter()
        .map(|&i| usize::from(i))
        .collect();
    let n = weights.len();
    let mut lowest = vec![f64::MAX; n];
    let mut highest = vec![0.0f64; n];
    let mut expected = vec![0.0f64; n];
    let mut chosen = vec![0u64; n];
    for decided in stretch {
        let paces = paces_of(decided, n);
        let spend = |i: usize| (paces[i] / 1_000.0).powf(exponent) * f64::from(weights[i]);
        let total: f64 = room.iter().map(|&i| spend(i)).sum();
        for &i in &room {
            lowest[i] = lowest[i].min(paces[i]);
            highest[i] = highest[i].max(paces[i]);
            expected[i] += spend(i) / total;
        }
        if let Some(slot) = decided.chosen.and_then(|c| chosen.get_mut(usize::from(c))) {
            *slot += 1;
        }
    }
    // Stable as the rule sees it: its value moves within the ratio (pace^exponent).
    let stable_ratio = STABLE_PACE_RATIO.powf(1.0 / exponent.max(1.0));
    if room.iter().any(|&i| highest[i] > lowest[i] * stable_ratio) {
        return None;
    }
    let len = stretch.len() as f64;
    room.iter()
        .map(|&i| (i, 100.0 * (chosen[i] as f64 - expected[i]).abs() / len))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// A window of `connection` that blocks it in `state` at `now`: spent (used to its limit,
/// reset not passed) or within its reserve.
fn window_block(state: &AdminState, connection: &str, now: u64) -> Option<String> {
    let c = state.connections.iter().find(|c| c.id == connection)?;
    c.buckets
        .iter()
        .filter(|b| b.resets_at_ms.is_none_or(|reset| reset > now))
        .find(|b| b.reserved || b.used >= b.limit)
        .map(|b| {
            let why = if b.reserved { "reserved" } else { "spent" };
            format!("{} {why}: {} of {} used", b.window, b.used, b.limit)
        })
}

/// What the node reports for one answer: its readings from the headers, and for a failure
/// the class, code, message and reset hint the one classifier gives.
fn attempt_result(answer: accounts::Answer, model: &str, cost: u64, now: u64) -> AttemptResult {
    let usage = readings_from_headers(&answer.headers, model, now);
    let mut result = if (200..300).contains(&answer.status) {
        AttemptResult::success(answer.status, cost * 1_000, cost * 100)
    } else {
        let classification = classify(
            &UpstreamReply {
                status: Some(answer.status),
                headers: &answer.headers,
                body: &answer.body,
                transport: None,
                format: ApiFormat::Openai,
            },
            now,
        );
        let mut result = AttemptResult::failure(classification.class, Some(answer.status));
        result.error_code = classification.error_code;
        result.message = classification.message;
        result.reset_hint_ms = classification.reset_hint_ms;
        result
    };
    result.usage = usage;
    result
}

/// A reference, not a router: the same week served by an oracle that knows every window and
/// sends each request to the account whose weekly window resets first among those with
/// quota left (earliest deadline first, the best any spending order can do for the weekly
/// windows). Returns the stats its accounts tally.
pub fn oracle_week(seed: u64, shape: &WeekShape) -> WeekStats {
    let mut accounts = accounts(seed, shape);
    let weekly_quota: u64 = accounts.iter().map(|a| a.weekly.capacity).sum();
    let mut stats = WeekStats {
        seeds: 1,
        ..WeekStats::default()
    };
    let mut warmup = Warmup::new(&mut accounts, shape);
    for arrival in arrivals(seed, shape, weekly_quota) {
        warmup.arrival(arrival.at_ms, &mut stats);
        stats.requests += 1;
        let now = arrival.at_ms;
        for account in &mut accounts {
            account.roll(now);
        }
        let first = accounts
            .iter_mut()
            .filter(|a| {
                a.weekly.used + a.weekly.reserve < a.weekly.capacity && !a.five_hour.spent()
            })
            .min_by_key(|a| a.weekly.resets_at_ms().unwrap_or(now + WEEK_MS));
        match first {
            Some(account) => {
                account.answer(arrival.cost, now);
                stats.served += 1;
                stats.upstream_requests += 1;
            }
            None => stats.refused += 1,
        }
    }
    for account in &mut accounts {
        account.roll(warmup.end_ms(shape));
        stats.unused_5h.add(&account.five_hour.tally);
        stats.unused_7d.add(&account.weekly.tally);
    }
    stats
}
