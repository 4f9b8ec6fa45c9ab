//! The simulator's conversation groups (behaviour §10): multi-turn conversations sent with
//! their hint (an `AffinityKey`), requests without one, and blocks on bound targets — an
//! upstream that answers 429 for a while (model lockouts) or 503 (cooldowns) — driven through a
//! real `Router` on a `MemoryJournal` and a `ManualClock`, each decision read back from the
//! journal (`route_decided.affinity`, `affinity_bound`).
//!
//! Invariants (the name a failure reports):
//! - **ga** a held turn goes to its group's bound target, and that target is not hard-blocked
//!   (cooling, disabled, locked, breaker OPEN) in the admin state read just before, same `now`.
//! - **gb** a group moves only when its bound target cannot serve (hard-blocked in that state;
//!   this topology has no caps or limits, so never `saturated` / `at_cap`) or ran past
//!   `max_lead` (the leads mirrored from the journaled decisions with the library's own
//!   `AffinityLeads`); it moves to where the turn went. A turn served after a failover moves
//!   its group to where it was served (`affinity_bound` with reason `failover`, mirrored).
//! - **gc** request shares: over the closing window with no blocks, each connection's first
//!   choices are within the §2 bound (2) plus `max_lead` (twice: the window may open with a
//!   target that far ahead and close with another) of `N·w/Σw`.
//!
//! Self-contained beside `engine.rs` (which it uses only for `Rng`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use quotaroute_actors::policy::affinity::AffinityLeads;
use quotaroute_actors::{
    AdminState, AffinityKey, AttemptResult, ClientTag, ComboSpec, ConnectionSpec, ManualClock,
    ProviderSpec, RequestEvents, RouteRequest, Router, RouterOptions, Topology,
};
use quotaroute_journal::{
    AffinityOutcome, ApiFormat, AuthKind, Event, Journal, MemoryJournal, OutcomeClass,
    RouteDecided, WriterConfig,
};

use super::engine::{Rng, T0};

const COMBO: &str = "conv";
const MODEL: &str = "m1";
const PROVIDER: &str = "pa";
/// `affinity.max_lead` of the simulated combo, in requests (small, so it is reached).
pub const MAX_LEAD: u64 = 6;
/// Conversations a run keeps going at once.
const CONVERSATIONS: u64 = 24;
/// The closing window without blocks over which shares are checked (invariant gc).
const CLOSING_TURNS: usize = 120;

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub turns: u64,
    pub new: u64,
    pub held: u64,
    pub moved: u64,
    pub moved_blocked: u64,
    pub moved_max_lead: u64,
    pub no_group: u64,
    pub blocks: u64,
    pub unroutable: u64,
    /// Groups that followed a turn served elsewhere after a failover.
    pub followed: u64,
}

impl GroupStats {
    pub fn add(&mut self, other: &GroupStats) {
        self.turns += other.turns;
        self.new += other.new;
        self.held += other.held;
        self.moved += other.moved;
        self.moved_blocked += other.moved_blocked;
        self.moved_max_lead += other.moved_max_lead;
        self.no_group += other.no_group;
        self.blocks += other.blocks;
        self.unroutable += other.unroutable;
        self.followed += other.followed;
    }
}

/// A broken invariant: which, where, and what was seen.
#[derive(Debug, Clone)]
pub struct GroupFailure {
    pub seed: u64,
    pub turn: u64,
    pub invariant: &'static str,
    pub detail: String,
}

impl std::fmt::Display for GroupFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} turn {}: invariant {} broken: {}",
            self.seed, self.turn, self.invariant, self.detail
        )
    }
}

/// The run's topology: 4 connections of one provider, weights from the seed (equal, or one
/// heavy), one quota-share combo over them, `max_lead` = [`MAX_LEAD`].
pub fn topology(seed: u64) -> Topology {
    let weights: [u32; 4] = if seed.is_multiple_of(2) {
        [1, 1, 1, 1]
    } else {
        [3, 1, 1, 1]
    };
    let connections: Vec<ConnectionSpec> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| ConnectionSpec::new(&format!("g{i}"), PROVIDER, AuthKind::ApiKey, w))
        .collect();
    let ids: Vec<String> = connections.iter().map(|c| c.id.clone()).collect();
    let targets: Vec<(&str, &str, u32)> = ids
        .iter()
        .zip(weights)
        .map(|(id, w)| (id.as_str(), MODEL, w))
        .collect();
    let mut topology = Topology::new(
        vec![ProviderSpec::new(
            PROVIDER,
            ApiFormat::Openai,
            AuthKind::ApiKey,
        )],
        connections,
        vec![ComboSpec::quota_share(COMBO, &targets)],
        "sim-groups",
        "0",
    );
    topology.affinity.max_lead = MAX_LEAD;
    topology
}

/// One decision as the journal tells it.
#[derive(Debug, Clone)]
struct Seen {
    decided: RouteDecided,
    /// `affinity_bound` of this request: (connection, moved_from, reason).
    bound: Option<(String, Option<String>, Option<String>)>,
}

struct Run {
    seed: u64,
    router: Router,
    journal: MemoryJournal,
    clock: Arc<ManualClock>,
    next_seq: u64,
    /// Index → connection of the combo's targets, and their weights.
    targets: Vec<(String, u32)>,
    /// Each group's bound connection, as the journal's `affinity_bound` left it.
    bound: HashMap<u64, String>,
    leads: AffinityLeads,
    /// Connections whose upstream misbehaves now: 429 (lockout) or 503 (cooldown).
    failing: BTreeMap<String, u16>,
    turn: u64,
    stats: GroupStats,
}

/// Runs `turns` turns of seed `seed` (plus the closing window), checking every invariant.
pub async fn run(seed: u64, turns: usize) -> Result<GroupStats, GroupFailure> {
    let topology = topology(seed);
    let journal = MemoryJournal::new();
    let clock = ManualClock::new(T0);
    let router = Router::start(
        topology.clone(),
        Box::new(journal.clone()),
        RouterOptions {
            writer: WriterConfig::default(),
            snapshot_every_events: 0,
            request_events: RequestEvents::All,
            clock: clock.clone(),
        },
    )
    .await
    .unwrap_or_else(|e| panic!("router starts: {e}"));
    let targets = topology.combos[0]
        .targets
        .iter()
        .map(|t| (t.connection.clone(), t.weight))
        .collect();
    let mut run = Run {
        seed,
        router,
        journal,
        clock,
        next_seq: 0,
        targets,
        bound: HashMap::new(),
        leads: AffinityLeads::default(),
        failing: BTreeMap::new(),
        turn: 0,
        stats: GroupStats::default(),
    };
    let mut rng = Rng::new(seed ^ 0x6a09_e667_f3bc_c908);
    for _ in 0..turns {
        run.step(&mut rng, true).await?;
    }
    // The closing window: blocks lifted and expired, then every turn counted.
    run.failing.clear();
    run.clock.advance(3_600_000);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..CLOSING_TURNS {
        if let Some(chosen) = run.step(&mut rng, false).await? {
            *counts.entry(chosen).or_default() += 1;
        }
    }
    run.check_shares(&counts)?;
    let _ = run.router.shutdown("end of run").await;
    Ok(run.stats)
}

impl Run {
    fn fail(&self, invariant: &'static str, detail: String) -> GroupFailure {
        GroupFailure {
            seed: self.seed,
            turn: self.turn,
            invariant,
            detail,
        }
    }

    async fn read(&self) -> Result<AdminState, GroupFailure> {
        self.router
            .settle()
            .await
            .map_err(|e| self.fail("router-responds", e.to_string()))?;
        self.router
            .state()
            .await
            .map_err(|e| self.fail("router-responds", e.to_string()))
    }

    /// One turn (and now and then a change of which upstreams misbehave); returns the
    /// connection the turn's first choice went to.
    async fn step(&mut self, rng: &mut Rng, blocks: bool) -> Result<Option<String>, GroupFailure> {
        self.turn += 1;
        self.clock.advance(rng.range(0, 1_500));
        if blocks && rng.chance(4) {
            let (connection, _) = rng.pick(&self.targets).clone();
            if self.failing.remove(&connection).is_none() {
                self.failing
                    .insert(connection, *rng.pick(&[429u16, 429, 503]));
                self.stats.blocks += 1;
            }
        }
        if rng.chance(2) {
            // Lockouts and cooldowns run out.
            self.clock.advance(rng.range(30_000, 300_000));
        }
        let group = (!rng.chance(10)).then(|| rng.range(0, CONVERSATIONS - 1));
        let before = self.read().await?;
        let request_id = format!("g{}-{}", self.seed, self.turn);
        let request = RouteRequest {
            request_id: request_id.clone().into(),
            model: COMBO.into(),
            format: ApiFormat::Openai,
            translatable: false,
            cannot_carry: Vec::new(),
            only_connection: None,
            encrypted_maker: None,
            affinity: group.map(|group| AffinityKey {
                group,
                client: Arc::from("default"),
            }),
            client: ClientTag::default(),
        };
        self.stats.turns += 1;
        let mut decision = match self.router.route(request).await {
            Ok(decision) => decision,
            Err(_) => {
                self.stats.unroutable += 1;
                self.absorb(&request_id, group).await?;
                return Ok(None);
            }
        };
        let first = decision.current().map(|t| t.connection.to_string());
        self.absorb_and_check(&request_id, group, &before).await?;
        // The attempts: a failing upstream answers its failure; failover ignores affinity.
        while let Some(connection) = decision.current().map(|t| t.connection.to_string()) {
            let result = match self.failing.get(&connection) {
                Some(429) => AttemptResult::failure(OutcomeClass::RateLimited, Some(429)),
                Some(_) => AttemptResult::failure(OutcomeClass::ServerError, Some(503)),
                None => AttemptResult::success(200, 100, 10),
            };
            let class = result.class;
            decision.report_applied(result).await;
            if decision.next_step(class, false, true)
                != quotaroute_actors::policy::request::Step::Failover
            {
                break;
            }
            match decision.failover().await {
                Ok(Some(_)) => {}
                _ => break,
            }
        }
        drop(decision);
        Ok(first)
    }

    /// The new journal events, by request: `route_decided` and `affinity_bound`.
    async fn new_events(&mut self) -> Result<BTreeMap<String, Seen>, GroupFailure> {
        self.router
            .flush()
            .await
            .map_err(|e| self.fail("router-responds", e.to_string()))?;
        let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
        let mut bound = Vec::new();
        for envelope in self.journal.read_from(self.next_seq) {
            let Ok(envelope) = envelope else { continue };
            self.next_seq = envelope.seq + 1;
            match envelope.event {
                Event::RouteDecided(decided) => {
                    seen.insert(
                        decided.request_id.to_string(),
                        Seen {
                            decided,
                            bound: None,
                        },
                    );
                }
                Event::AffinityBound(b) => bound.push(b),
                _ => {}
            }
        }
        for b in bound {
            match seen.get_mut(&b.request_id) {
                Some(s) => {
                    s.bound = Some((b.connection.clone(), b.moved_from.clone(), b.reason.clone()))
                }
                // An earlier turn served after a failover: its group followed it there.
                None => {
                    self.bound.insert(b.group, b.connection.clone());
                    self.stats.followed += 1;
                }
            }
        }
        Ok(seen)
    }

    /// Mirrors the leads and bindings from a decision (no checks: an unroutable turn).
    async fn absorb(&mut self, request_id: &str, group: Option<u64>) -> Result<(), GroupFailure> {
        let mut seen = self.new_events().await?;
        if let Some(s) = seen.remove(request_id) {
            self.mirror(&s, group);
        }
        Ok(())
    }

    fn exec_keys(&self) -> Vec<Arc<str>> {
        self.targets
            .iter()
            .map(|(c, _)| Arc::from(format!("{c}/{MODEL}")))
            .collect()
    }

    fn mirror(&mut self, seen: &Seen, group: Option<u64>) {
        let keys = self.exec_keys();
        let room: Vec<(&Arc<str>, u32)> = seen
            .decided
            .room
            .iter()
            .filter_map(|&i| {
                let i = usize::from(i);
                Some((keys.get(i)?, self.targets.get(i)?.1))
            })
            .collect();
        let chosen = seen.decided.chosen.and_then(|i| keys.get(usize::from(i)));
        // The combo keeps leads over the turns of groups only (what a binding can skew).
        if group.is_some() {
            self.leads.apply_turn(room.into_iter(), chosen);
        }
        if let (Some(group), Some((connection, _, _))) = (group, &seen.bound) {
            self.bound.insert(group, connection.clone());
        }
    }

    fn room_weight(&self, decided: &RouteDecided) -> u32 {
        decided
            .room
            .iter()
            .filter_map(|&i| self.targets.get(usize::from(i)).map(|t| t.1))
            .sum()
    }

    async fn absorb_and_check(
        &mut self,
        request_id: &str,
        group: Option<u64>,
        before: &AdminState,
    ) -> Result<(), GroupFailure> {
        let mut seen = self.new_events().await?;
        let Some(s) = seen.remove(request_id) else {
            return Err(self.fail("journaled", format!("no route_decided for {request_id}")));
        };
        let chosen = s
            .decided
            .chosen
            .and_then(|i| self.targets.get(usize::from(i)))
            .map(|t| t.0.clone());
        let previous = group.and_then(|g| self.bound.get(&g).cloned());
        match s.decided.affinity {
            AffinityOutcome::None => {
                self.stats.no_group += 1;
                if group.is_some() {
                    return Err(self.fail("ga", "a turn with a hint had no group".into()));
                }
            }
            AffinityOutcome::New => self.stats.new += 1,
            AffinityOutcome::Held => {
                self.stats.held += 1;
                // (ga) held on its binding, never on a hard-blocked target.
                if chosen.is_none() || chosen != previous {
                    return Err(self.fail(
                        "ga:held-on-its-binding",
                        format!("held on {chosen:?}, bound to {previous:?}"),
                    ));
                }
                if let Some(block) = chosen.as_deref().and_then(|c| hard_block(before, c)) {
                    return Err(self.fail(
                        "ga:held-never-hard-blocked",
                        format!("held on {chosen:?} while {block}"),
                    ));
                }
            }
            AffinityOutcome::Moved => {
                self.stats.moved += 1;
                let Some((to, from, reason)) = &s.bound else {
                    return Err(self.fail("gb", "moved without affinity_bound".into()));
                };
                let from_connection = from
                    .as_deref()
                    .and_then(|f| f.split('/').next())
                    .map(str::to_string);
                if from_connection != previous || Some(to) != chosen.as_ref() {
                    return Err(self.fail(
                        "gb:moves-from-its-binding-to-where-it-went",
                        format!("moved {from:?} → {to}, bound {previous:?}, chosen {chosen:?}"),
                    ));
                }
                let old = previous.clone().unwrap_or_default();
                let reason = reason.as_deref().unwrap_or("-");
                if reason == "max_lead" {
                    self.stats.moved_max_lead += 1;
                    let total = self.room_weight(&s.decided);
                    if !self
                        .leads
                        .exceeded(&format!("{old}/{MODEL}"), MAX_LEAD, total)
                    {
                        return Err(self.fail(
                            "gb:moves-only-past-max-lead",
                            format!("moved off {old} for max_lead, which it had not passed"),
                        ));
                    }
                } else {
                    self.stats.moved_blocked += 1;
                    if hard_block(before, &old).is_none() && !breaker_probing(before, &old) {
                        return Err(self.fail(
                            "gb:moves-only-when-it-cannot-serve",
                            format!("moved off {old} ({reason}) which could serve"),
                        ));
                    }
                }
            }
        }
        self.mirror(&s, group);
        Ok(())
    }

    /// (gc) Over the closing window, shares within the §2 bound plus `max_lead`.
    fn check_shares(&self, counts: &BTreeMap<String, u64>) -> Result<(), GroupFailure> {
        let n: u64 = counts.values().sum();
        let total: u64 = self.targets.iter().map(|t| u64::from(t.1)).sum();
        for (connection, weight) in &self.targets {
            let got = counts.get(connection).copied().unwrap_or(0) as f64;
            let want = n as f64 * f64::from(*weight) / total as f64;
            let bound = 2.0 + 2.0 * MAX_LEAD as f64;
            if (got - want).abs() > bound {
                return Err(self.fail(
                    "gc:shares-within-bound-plus-max-lead",
                    format!("{connection}: {got} of {n}, share {want:.1} ± {bound}: {counts:?}"),
                ));
            }
        }
        Ok(())
    }
}

/// The connection's provider breaker is HALF_OPEN: hard-blocked once its probe is taken.
fn breaker_probing(state: &AdminState, connection: &str) -> bool {
    state
        .connections
        .iter()
        .find(|c| c.id == connection)
        .and_then(|c| state.providers.iter().find(|p| p.name == c.provider))
        .is_some_and(|p| p.breaker == "HALF_OPEN")
}

/// Why `connection` (serving [`MODEL`]) is hard-blocked in `state`, if it is.
fn hard_block(state: &AdminState, connection: &str) -> Option<String> {
    let c = state.connections.iter().find(|c| c.id == connection)?;
    if c.cooldown_remaining_ms > 0 {
        return Some(format!("cooling {} ms", c.cooldown_remaining_ms));
    }
    if c.disabled.is_some() {
        return Some("disabled".into());
    }
    if c.lockouts.iter().any(|l| l.model == MODEL) {
        return Some("locked".into());
    }
    let provider = state.providers.iter().find(|p| p.name == c.provider)?;
    (provider.breaker == "OPEN").then(|| "breaker OPEN".into())
}
