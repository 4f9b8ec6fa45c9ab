//! A client's configured limits and its usage state, and the one decision on them: may this
//! request go ahead now (behaviour §11)? Pure: `(state, limits, now) → decision`.
//!
//! Token limits and budgets cannot know a request's cost before the upstream answers: a request
//! is admitted while the window (or the period's spend) is *below* its limit, and what it used
//! is counted when it ends. So a limit may be overshot by what the requests in flight when it
//! was crossed use, at most `in_flight_cap` requests (`max_concurrent`, or
//! [`IMPLICIT_MAX_CONCURRENT`] when a token limit or budget is set without one). A budget
//! also counts the running cost of the client's streams (`running_pusd`, before they are
//! charged): it refuses new requests once spend and running cost reach it, and a stream that
//! finds its client's budget reached stops (`over_budget`), so streams overshoot it only by
//! what was already on its way.

use super::calendar;
use super::key_digest::KeyDigest;
use super::window::BinnedWindow;
use crate::window::WindowShape;

/// What the shared counters say of one client before a request: `Err` names the limit the
/// whole cluster has spent and how long until it may free.
pub type SharedVerdict = Result<(), (LimitKind, Option<u64>)>;

/// The in-flight cap of a client with a token limit or budget and no `max_concurrent`: it
/// bounds how far the limit can be overshot (docs/clients.md).
pub const IMPLICIT_MAX_CONCURRENT: u32 = 64;

/// `Retry-After` of a client at its `max_concurrent` (a slot frees when a request ends).
pub const CONCURRENCY_RETRY_MS: u64 = 1_000;

/// One `[[clients]]` entry (or `server.api_keys` as client `default`), validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    pub id: String,
    /// Share of a full pool (≥ 1).
    pub weight: u32,
    /// Digests of its keys (only `default` has several: one per `server.api_keys` entry).
    pub key_digests: Vec<KeyDigest>,
    pub limits: ClientLimits,
    /// Behaviour §13: `class` (normal, or spare) and whether it may mark single requests spare
    /// with `x-quotaroute-class: spare`.
    pub class: super::class::RequestClass,
    pub allow_spare_header: bool,
}

/// `budget_period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BudgetPeriod {
    Day,
    #[default]
    Month,
}

impl BudgetPeriod {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Month => "month",
        }
    }

    /// `[start, end)` of the period holding `now_ms` (UTC).
    pub fn bounds(self, now_ms: u64) -> (u64, u64) {
        match self {
            BudgetPeriod::Day => calendar::day_bounds(now_ms),
            BudgetPeriod::Month => calendar::month_bounds(now_ms),
        }
    }
}

/// A client's limits; `None` = no limit.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientLimits {
    pub max_concurrent: Option<u32>,
    pub requests_per_min: Option<u64>,
    pub tokens_per_min: Option<u64>,
    pub tokens_per_day: Option<u64>,
    /// In pico-USD (10⁻¹² USD), so spend compares exactly.
    pub budget_pusd: Option<u64>,
    pub budget_period: BudgetPeriod,
    /// Combos (model names as the client sends them) it may use; `None` = all.
    pub models: Option<Vec<String>>,
}

impl ClientLimits {
    /// The most requests it may have in flight.
    pub fn in_flight_cap(&self) -> Option<u32> {
        self.max_concurrent.or_else(|| {
            (self.tokens_per_min.is_some()
                || self.tokens_per_day.is_some()
                || self.budget_pusd.is_some())
            .then_some(IMPLICIT_MAX_CONCURRENT)
        })
    }

    /// Each limit counted in a sliding window, with its config field's value and its window's
    /// shape, in the order admission checks them: the one table of "client limit ↔ config
    /// field" that admission, the ledger's view and the cluster's leases all read.
    pub fn each_window(&self) -> [WindowLimit; 3] {
        [
            WindowLimit {
                kind: LimitKind::RequestsPerMin,
                limit: self.requests_per_min,
                shape: WindowShape::PER_MINUTE,
            },
            WindowLimit {
                kind: LimitKind::TokensPerMin,
                limit: self.tokens_per_min,
                shape: WindowShape::PER_MINUTE,
            },
            WindowLimit {
                kind: LimitKind::TokensPerDay,
                limit: self.tokens_per_day,
                shape: WindowShape::PER_DAY,
            },
        ]
    }
}

/// One of a client's windowed limits (see [`ClientLimits::each_window`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowLimit {
    pub kind: LimitKind,
    /// The configured value; `None` = no limit.
    pub limit: Option<u64>,
    pub shape: WindowShape,
}

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    Models,
    MaxConcurrent,
    RequestsPerMin,
    TokensPerMin,
    TokensPerDay,
    Budget,
}

impl LimitKind {
    pub const ALL: [LimitKind; 6] = [
        LimitKind::Models,
        LimitKind::MaxConcurrent,
        LimitKind::RequestsPerMin,
        LimitKind::TokensPerMin,
        LimitKind::TokensPerDay,
        LimitKind::Budget,
    ];

    /// The config key of the limit (`client_limited.limit`, the metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Models => "models",
            LimitKind::MaxConcurrent => "max_concurrent",
            LimitKind::RequestsPerMin => "requests_per_min",
            LimitKind::TokensPerMin => "tokens_per_min",
            LimitKind::TokensPerDay => "tokens_per_day",
            LimitKind::Budget => "budget_usd",
        }
    }
}

/// A refused request: which limit, until when, and whether this refusal is the transition into
/// limited (the one that is journaled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub limit: LimitKind,
    /// `None` for `models` (it never frees by itself).
    pub retry_after_ms: Option<u64>,
    pub newly_limited: bool,
}

/// What a client used: its in-flight count, its windows and its period's spend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientState {
    pub in_flight: u32,
    pub requests_min: BinnedWindow,
    pub tokens_min: BinnedWindow,
    pub tokens_day: BinnedWindow,
    /// Start of the budget period `spend_pusd` belongs to.
    pub period_start_ms: u64,
    pub spend_pusd: u64,
    /// The limit it was last refused by, until it is admitted again.
    pub limited: Option<LimitKind>,
    /// What its streams in flight have used so far and not been charged yet, priced (an
    /// estimate while their usage has not come): counted against the budget until charged.
    pub running_pusd: u64,
}

impl Default for ClientState {
    fn default() -> Self {
        let [requests_min, tokens_min, tokens_day] = ClientLimits::default()
            .each_window()
            .map(|window| BinnedWindow::new(window.shape));
        ClientState {
            in_flight: 0,
            requests_min,
            tokens_min,
            tokens_day,
            period_start_ms: 0,
            spend_pusd: 0,
            limited: None,
            running_pusd: 0,
        }
    }
}

impl ClientState {
    /// What a windowed limit counts in (`None`: `kind` is not windowed).
    pub fn window(&self, kind: LimitKind) -> Option<&BinnedWindow> {
        match kind {
            LimitKind::RequestsPerMin => Some(&self.requests_min),
            LimitKind::TokensPerMin => Some(&self.tokens_min),
            LimitKind::TokensPerDay => Some(&self.tokens_day),
            LimitKind::Models | LimitKind::MaxConcurrent | LimitKind::Budget => None,
        }
    }

    /// The spend of the period holding `now_ms` (0 once the period it was counted in ended).
    pub fn spend_at(&self, period: BudgetPeriod, now_ms: u64) -> u64 {
        if period.bounds(now_ms).0 == self.period_start_ms {
            self.spend_pusd
        } else {
            0
        }
    }

    /// Admits a request for `combo` at `now_ms` (counting it in flight and in
    /// `requests_per_min`), or says which limit refuses it. A refusal changes nothing but the
    /// "limited" mark.
    pub fn admit(
        &mut self,
        limits: &ClientLimits,
        combo: &str,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        self.admit_shared(limits, combo, now_ms, Ok(()))
    }

    /// [`ClientState::admit`] with what the cluster's counters say (`shared`, see
    /// `clients::shared`): this node's own limits first, then the cluster's; either refusal
    /// goes through the same "limited" transition.
    pub fn admit_shared(
        &mut self,
        limits: &ClientLimits,
        combo: &str,
        now_ms: u64,
        shared: SharedVerdict,
    ) -> Result<(), Refusal> {
        if let Err((limit, retry_after_ms)) = self.check(limits, combo, now_ms).and(shared) {
            let newly_limited = self.limited != Some(limit);
            self.limited = Some(limit);
            return Err(Refusal {
                limit,
                retry_after_ms,
                newly_limited,
            });
        }
        self.limited = None;
        self.in_flight += 1;
        self.requests_min.add(now_ms, 1);
        Ok(())
    }

    fn check(
        &self,
        limits: &ClientLimits,
        combo: &str,
        now_ms: u64,
    ) -> Result<(), (LimitKind, Option<u64>)> {
        if let Some(models) = &limits.models {
            if !models.iter().any(|model| model == combo) {
                return Err((LimitKind::Models, None));
            }
        }
        match self.holding_limit(limits, now_ms) {
            Some(held) => Err(held),
            None => Ok(()),
        }
    }

    /// The limit that would refuse a request for a model it may use at `now_ms`, and when it
    /// frees (`None`: it is not limited now). What the dashboard shows as "limited".
    pub fn holding_limit(
        &self,
        limits: &ClientLimits,
        now_ms: u64,
    ) -> Option<(LimitKind, Option<u64>)> {
        if let Some(cap) = limits.in_flight_cap() {
            if self.in_flight >= cap {
                return Some((LimitKind::MaxConcurrent, Some(CONCURRENCY_RETRY_MS)));
            }
        }
        for WindowLimit { kind, limit, .. } in limits.each_window() {
            if let (Some(limit), Some(window)) = (limit, self.window(kind)) {
                let frees_in = window.frees_in_ms(now_ms, limit);
                if frees_in > 0 {
                    return Some((kind, Some(frees_in)));
                }
            }
        }
        if let Some(budget) = limits.budget_pusd {
            if self.over_budget(budget, limits.budget_period, now_ms) {
                let (_, end) = limits.budget_period.bounds(now_ms);
                return Some((LimitKind::Budget, Some(end.saturating_sub(now_ms).max(1))));
            }
        }
        None
    }

    /// Whether the period's spend and the running cost of its streams reach `budget`.
    pub fn over_budget(&self, budget: u64, period: BudgetPeriod, now_ms: u64) -> bool {
        self.spend_at(period, now_ms)
            .saturating_add(self.running_pusd)
            >= budget
    }

    /// One stream's running cost moved from `before` to `after` (pico-USD, not charged yet).
    pub fn run(&mut self, before: u64, after: u64) {
        self.running_pusd = self
            .running_pusd
            .saturating_sub(before)
            .saturating_add(after);
    }

    /// An admin cleared the client (`POST /admin/clients/{id}/reset`) at `now_ms`: its windows
    /// and the current period's spend start again from 0; its requests in flight (and their
    /// running cost) stay counted.
    pub fn reset(&mut self, period: BudgetPeriod, now_ms: u64) {
        *self = ClientState {
            in_flight: self.in_flight,
            running_pusd: self.running_pusd,
            period_start_ms: period.bounds(now_ms).0,
            ..ClientState::default()
        };
    }

    /// A request admitted earlier ended.
    pub fn finish(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Counts what a request used (tokens, and cost in pico-USD) at `now_ms`; returns the
    /// period's spend after it and the period's start.
    pub fn record(
        &mut self,
        period: BudgetPeriod,
        now_ms: u64,
        tokens: u64,
        cost_pusd: u64,
    ) -> (u64, u64) {
        self.tokens_min.add(now_ms, tokens);
        self.tokens_day.add(now_ms, tokens);
        let start = period.bounds(now_ms).0;
        if start != self.period_start_ms {
            self.period_start_ms = start;
            self.spend_pusd = 0;
        }
        self.spend_pusd = self.spend_pusd.saturating_add(cost_pusd);
        (self.spend_pusd, start)
    }

    /// Folds a journaled `client_usage` back in (restart): its tokens into the windows, and the
    /// period's spend from the event's running total when that period is the current one.
    pub fn fold(
        &mut self,
        period: BudgetPeriod,
        at_ms: u64,
        tokens: u64,
        period_start_ms: u64,
        period_spend_pusd: u64,
    ) {
        self.tokens_min.add(at_ms, tokens);
        self.tokens_day.add(at_ms, tokens);
        if period.bounds(at_ms).0 == period_start_ms && period_start_ms >= self.period_start_ms {
            self.period_start_ms = period_start_ms;
            self.spend_pusd = period_spend_pusd;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_796_166_000_000; // 2026-12-01T23:00:00Z

    #[test]
    fn requests_per_min_refuses_until_the_oldest_bin_leaves() {
        let limits = ClientLimits {
            requests_per_min: Some(2),
            ..ClientLimits::default()
        };
        let mut state = ClientState::default();
        assert!(state.admit(&limits, "team", NOW).is_ok());
        state.finish();
        assert!(state.admit(&limits, "team", NOW + 1_000).is_ok());
        state.finish();
        let refusal = state.admit(&limits, "team", NOW + 2_000).unwrap_err();
        assert_eq!(refusal.limit, LimitKind::RequestsPerMin);
        assert!(refusal.newly_limited);
        assert_eq!(refusal.retry_after_ms, Some(58_000));
        // A second refusal is not a new transition; the refused ones are not counted.
        let again = state.admit(&limits, "team", NOW + 3_000).unwrap_err();
        assert!(!again.newly_limited);
        assert_eq!(state.requests_min.used(NOW + 3_000), 2);
        assert!(state.admit(&limits, "team", NOW + 60_000).is_ok());
        assert_eq!(state.limited, None);
    }

    #[test]
    fn a_cluster_refusal_is_a_transition_and_counts_nothing() {
        let limits = ClientLimits {
            requests_per_min: Some(100),
            ..ClientLimits::default()
        };
        let mut state = ClientState::default();
        let shared = Err((LimitKind::RequestsPerMin, Some(5_000)));
        let refusal = state
            .admit_shared(&limits, "team", NOW, shared)
            .unwrap_err();
        assert_eq!(refusal.limit, LimitKind::RequestsPerMin);
        assert_eq!(refusal.retry_after_ms, Some(5_000));
        assert!(refusal.newly_limited);
        assert!(
            !state
                .admit_shared(&limits, "team", NOW, shared)
                .unwrap_err()
                .newly_limited
        );
        assert_eq!((state.in_flight, state.requests_min.used(NOW)), (0, 0));
        // The node's own limits come first: a model it may not use is refused as such.
        let only = ClientLimits {
            models: Some(vec!["team".into()]),
            ..limits.clone()
        };
        let refusal = state.admit_shared(&only, "other", NOW, shared).unwrap_err();
        assert_eq!(refusal.limit, LimitKind::Models);
        assert!(state.admit_shared(&limits, "team", NOW, Ok(())).is_ok());
        assert_eq!(state.requests_min.used(NOW), 1);
    }

    #[test]
    fn max_concurrent_counts_in_flight() {
        let limits = ClientLimits {
            max_concurrent: Some(1),
            ..ClientLimits::default()
        };
        let mut state = ClientState::default();
        assert!(state.admit(&limits, "team", NOW).is_ok());
        assert_eq!(
            state.admit(&limits, "team", NOW).unwrap_err().limit,
            LimitKind::MaxConcurrent
        );
        state.finish();
        assert!(state.admit(&limits, "team", NOW).is_ok());
    }

    #[test]
    fn budget_stops_after_the_request_that_crossed_it_until_the_period_ends() {
        let limits = ClientLimits {
            budget_pusd: Some(1_000),
            budget_period: BudgetPeriod::Day,
            ..ClientLimits::default()
        };
        let mut state = ClientState::default();
        assert!(state.admit(&limits, "team", NOW).is_ok());
        state.record(BudgetPeriod::Day, NOW, 10, 999);
        state.finish();
        // Below the budget: admitted, and this one crosses it.
        assert!(state.admit(&limits, "team", NOW).is_ok());
        state.record(BudgetPeriod::Day, NOW, 10, 500);
        state.finish();
        let refusal = state.admit(&limits, "team", NOW).unwrap_err();
        assert_eq!(refusal.limit, LimitKind::Budget);
        assert_eq!(refusal.retry_after_ms, Some(3_600_000)); // midnight UTC
        assert!(state.admit(&limits, "team", NOW + 3_600_000).is_ok());
        assert_eq!(state.spend_at(BudgetPeriod::Day, NOW + 3_600_000), 0);
    }

    #[test]
    fn token_limits_admit_below_and_refuse_at_the_limit() {
        let limits = ClientLimits {
            tokens_per_min: Some(100),
            tokens_per_day: Some(150),
            ..ClientLimits::default()
        };
        assert_eq!(limits.in_flight_cap(), Some(IMPLICIT_MAX_CONCURRENT));
        let mut state = ClientState::default();
        assert!(state.admit(&limits, "team", NOW).is_ok());
        state.record(BudgetPeriod::Month, NOW, 120, 0);
        state.finish();
        let refusal = state.admit(&limits, "team", NOW).unwrap_err();
        assert_eq!(refusal.limit, LimitKind::TokensPerMin);
        assert!(state.admit(&limits, "team", NOW + 60_000).is_ok());
        state.record(BudgetPeriod::Month, NOW + 60_000, 40, 0);
        state.finish();
        assert_eq!(
            state
                .admit(&limits, "team", NOW + 61_000)
                .unwrap_err()
                .limit,
            LimitKind::TokensPerDay
        );
    }

    #[test]
    fn models_refuses_other_combos_for_good() {
        let limits = ClientLimits {
            models: Some(vec!["team".into()]),
            ..ClientLimits::default()
        };
        let mut state = ClientState::default();
        assert!(state.admit(&limits, "team", NOW).is_ok());
        let refusal = state.admit(&limits, "other", NOW).unwrap_err();
        assert_eq!(refusal.limit, LimitKind::Models);
        assert_eq!(refusal.retry_after_ms, None);
    }

    #[test]
    fn holding_limit_says_which_limit_refuses_now_and_frees_with_the_window() {
        let limits = ClientLimits {
            requests_per_min: Some(1),
            models: Some(vec!["team".into()]),
            ..ClientLimits::default()
        };
        let mut state = ClientState::default();
        assert_eq!(state.holding_limit(&limits, NOW), None);
        assert!(state.admit(&limits, "team", NOW).is_ok());
        state.finish();
        // A refusal by `models` is per model: what holds the client is its window.
        assert_eq!(
            state.admit(&limits, "other", NOW).unwrap_err().limit,
            LimitKind::Models
        );
        let (limit, retry_after_ms) = state.holding_limit(&limits, NOW + 1_000).unwrap();
        assert_eq!(limit, LimitKind::RequestsPerMin);
        let retry_after_ms = retry_after_ms.unwrap();
        assert!(
            retry_after_ms > 0 && retry_after_ms <= 60_000,
            "{retry_after_ms}"
        );
        assert_eq!(state.holding_limit(&limits, NOW + 61_000), None);

        let budget = ClientLimits {
            budget_pusd: Some(10),
            ..ClientLimits::default()
        };
        let mut spent = ClientState::default();
        spent.record(BudgetPeriod::Month, NOW, 5, 10);
        let (limit, retry_after_ms) = spent.holding_limit(&budget, NOW).unwrap();
        assert_eq!(limit, LimitKind::Budget);
        assert_eq!(
            retry_after_ms,
            Some(BudgetPeriod::Month.bounds(NOW).1 - NOW)
        );
    }

    #[test]
    fn folding_takes_the_newest_running_total_of_the_current_period() {
        let mut state = ClientState::default();
        let (start, _) = BudgetPeriod::Month.bounds(NOW);
        state.fold(BudgetPeriod::Month, NOW - 10, 5, start, 700);
        state.fold(BudgetPeriod::Month, NOW - 5, 5, start, 900);
        assert_eq!(state.spend_at(BudgetPeriod::Month, NOW), 900);
        assert_eq!(state.tokens_day.used(NOW), 10);
    }
}
