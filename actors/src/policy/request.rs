//! One request's life, pure (behaviour §2 step 0, §3, §7): whether a target is admitted now,
//! what follows each attempt (stream, deliver, fail over or give up) under the attempt budget
//! and `max_upstream_requests`, the answer when nothing could be tried or the tries ran out,
//! the hold, and what an attempt's class tells its breaker.
//!
//! The combo actor, `Decision`, the node's try loop (which then only does I/O) and
//! `replay --what-if` all call these functions; none of them keeps a copy of a rule.

use quotaroute_journal::{BlockReason, BreakerPhase, OutcomeClass, Skipped};

use crate::policy::breaker::{BreakerSettings, BreakerState, ProbeGate};
use crate::policy::classify::rules;
use crate::policy::cooldown::ConnectionHealth;
use crate::policy::lockout::ModelLockouts;

/// A hard block: why, and for how long if it ends by itself.
pub type Block = (BlockReason, Option<u64>);

/// The breaker's verdict on routing to its provider now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerAdmission {
    /// CLOSED: route normally.
    Healthy,
    /// DEGRADED: route, but after healthy targets.
    Degraded,
    /// HALF_OPEN with a free probe token: route, taking the token.
    Probe,
    /// OPEN, or HALF_OPEN with every token taken.
    Blocked(BlockReason, Option<u64>),
}

/// The breaker's verdict at `now`. `gate` is the provider's probe tokens (`None`: unknown, so
/// HALF_OPEN admits no probe).
pub fn breaker_admission(
    state: &BreakerState,
    settings: &BreakerSettings,
    gate: Option<&ProbeGate>,
    now_ms: u64,
) -> BreakerAdmission {
    match state.phase_at(now_ms, settings) {
        BreakerPhase::Closed => BreakerAdmission::Healthy,
        BreakerPhase::Degraded => BreakerAdmission::Degraded,
        BreakerPhase::Open => BreakerAdmission::Blocked(
            BlockReason::BreakerOpen,
            state
                .open_until_ms()
                .map(|until| until.saturating_sub(now_ms)),
        ),
        BreakerPhase::HalfOpen => match gate {
            Some(gate) if gate.available_at(now_ms, settings) => BreakerAdmission::Probe,
            Some(gate) => BreakerAdmission::Blocked(
                BlockReason::ProbeInFlight,
                gate.next_free_in(now_ms, settings),
            ),
            None => BreakerAdmission::Blocked(BlockReason::ProbeInFlight, None),
        },
    }
}

/// A connection's own block on `model` at `now`: cooldown or disabled first, then the model's
/// lockout.
pub fn connection_block(
    health: &ConnectionHealth,
    lockouts: &ModelLockouts,
    model: &str,
    now_ms: u64,
) -> Option<Block> {
    if let Some(block) = health.block_at(now_ms) {
        return Some(block);
    }
    lockouts
        .block_at(model, now_ms)
        .map(|(reason, remaining)| (reason, Some(remaining)))
}

/// Behaviour §2 step 0 for one target, in order breaker → connection → model lockout.
/// `connection` is evaluated only when the breaker lets the target through.
pub fn admission(
    breaker: BreakerAdmission,
    connection: impl FnOnce() -> Option<Block>,
) -> Option<Block> {
    match breaker {
        BreakerAdmission::Blocked(reason, remaining) => Some((reason, remaining)),
        _ => connection(),
    }
}

/// What an attempt of `class` tells its provider's breaker: `Some(true)` a failure,
/// `Some(false)` a success, `None` nothing (behaviour §4's breaker column).
pub fn breaker_signal(class: OutcomeClass) -> Option<bool> {
    let class_rules = rules(class);
    if class_rules.trips_breaker {
        Some(true)
    } else if class_rules.counts_as_breaker_success {
        Some(false)
    } else {
        None
    }
}

/// Nothing could serve (behaviour §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unroutable {
    /// 429 when every block is a lockout or cooldown, else 503.
    pub status: u16,
    /// Until the earliest finite unblock, if any block ends by itself.
    pub retry_after_ms: Option<u64>,
    pub blocked: Vec<Skipped>,
    pub hold_ms: u64,
}

/// Behaviour §7: 429 iff every block is a lockout or cooldown, else 503; retry after the
/// earliest finite unblock.
pub fn unroutable(blocked: Vec<Skipped>, hold_ms: u64) -> Unroutable {
    let all_lockout_or_cooldown = blocked.iter().all(|s| {
        matches!(
            s.reason,
            BlockReason::Cooldown
                | BlockReason::RateLimited
                | BlockReason::NotFound
                | BlockReason::QuotaExhausted
        )
    });
    let retry_after_ms = blocked.iter().filter_map(|s| s.remaining_ms).min();
    Unroutable {
        status: if all_lockout_or_cooldown && !blocked.is_empty() {
            429
        } else {
            503
        },
        retry_after_ms,
        blocked,
        hold_ms,
    }
}

/// The combo's hold (`hold_ms`): how long to wait before routing again when nothing can serve,
/// or `None` to answer now. `waited_ms` is how long this request has held already.
pub fn hold_wait_ms(unroutable: &Unroutable, waited_ms: u64) -> Option<u64> {
    let wait_ms = unroutable.retry_after_ms?;
    (unroutable.hold_ms > 0 && waited_ms.saturating_add(wait_ms) <= unroutable.hold_ms)
        .then_some(wait_ms.max(1))
}

/// What follows one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The attempt serves a stream: relay it.
    Stream,
    /// The attempt's answer goes to the client as it is: a success, or a client error (which
    /// never fails over).
    Deliver,
    /// Try the next unblocked target.
    Failover,
    /// No more tries: answer with [`final_answer`].
    GiveUp,
}

/// One request's attempt budget and where it stands (behaviour §3): at most `max_attempts`
/// failures that count as attempts, at most `max_upstream_requests` upstream requests in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPlan {
    pub max_attempts: u32,
    pub max_upstream_requests: u32,
    counted_failures: u32,
    upstream_requests: u32,
}

impl RequestPlan {
    /// The plan of a request whose first attempt is about to be sent.
    pub fn new(max_attempts: u32, max_upstream_requests: u32) -> Self {
        RequestPlan {
            max_attempts,
            max_upstream_requests,
            counted_failures: 0,
            upstream_requests: 1,
        }
    }

    /// Upstream requests sent so far, the one in progress included.
    pub fn upstream_requests(&self) -> u32 {
        self.upstream_requests
    }

    /// What follows an attempt of `class`. `streaming`: the attempt began a stream.
    /// `time_left`: the request's deadline has not passed (a try now would time out at once and
    /// charge an innocent connection).
    pub fn after_attempt(&mut self, class: OutcomeClass, streaming: bool, time_left: bool) -> Step {
        let class_rules = rules(class);
        if !class_rules.fails_over {
            return if streaming && class == OutcomeClass::Success {
                Step::Stream
            } else {
                Step::Deliver
            };
        }
        if class_rules.counts_as_attempt {
            self.counted_failures += 1;
        }
        if !time_left
            || self.counted_failures >= self.max_attempts
            || self.upstream_requests >= self.max_upstream_requests
        {
            return Step::GiveUp;
        }
        Step::Failover
    }

    /// The next attempt was sent (after [`Step::Failover`] found a target).
    pub fn attempt_sent(&mut self) {
        self.upstream_requests += 1;
    }
}

/// The last failed attempt of a request, as the answer needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastAttempt {
    /// The upstream answered with this status.
    Status(u16),
    /// No usable answer (timeout, network, undecodable body): its class.
    Class(OutcomeClass),
}

/// The client's answer when the tries ran out (behaviour §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalAnswer {
    /// The last upstream answer, passed through with this status (529 becomes 503).
    PassThrough(u16),
    /// 404 `model_not_found`: the model is not available on any target tried.
    ModelNotFound,
    /// 504 `upstream_timeout`.
    UpstreamTimeout,
    /// 502 `upstream_error`, for an upstream status or a failure without one.
    UpstreamError(Option<u16>),
    /// 503 `no_available_target`: nothing could be tried at all.
    NoTargetTried,
}

/// The answer after the last failure (`None`: no target was tried).
pub fn final_answer(last: Option<LastAttempt>) -> FinalAnswer {
    match last {
        None => FinalAnswer::NoTargetTried,
        Some(LastAttempt::Status(status)) => match status {
            429 | 500 | 502 | 503 | 504 => FinalAnswer::PassThrough(status),
            529 => FinalAnswer::PassThrough(503),
            400 | 404 => FinalAnswer::ModelNotFound,
            408 => FinalAnswer::UpstreamTimeout,
            code => FinalAnswer::UpstreamError(Some(code)),
        },
        Some(LastAttempt::Class(OutcomeClass::Timeout)) => FinalAnswer::UpstreamTimeout,
        Some(LastAttempt::Class(_)) => FinalAnswer::UpstreamError(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(reason: BlockReason, remaining_ms: Option<u64>) -> Skipped {
        Skipped {
            connection: "k1".to_string(),
            model: "m".to_string(),
            reason,
            remaining_ms,
        }
    }

    #[test]
    fn s7_all_lockouts_or_cooldowns_is_429_else_503() {
        let locked = unroutable(
            vec![
                skipped(BlockReason::RateLimited, Some(3_000)),
                skipped(BlockReason::Cooldown, Some(1_000)),
            ],
            0,
        );
        assert_eq!((locked.status, locked.retry_after_ms), (429, Some(1_000)));
        let mixed = unroutable(
            vec![
                skipped(BlockReason::RateLimited, Some(3_000)),
                skipped(BlockReason::BreakerOpen, Some(9_000)),
            ],
            0,
        );
        assert_eq!(mixed.status, 503);
        let disabled = unroutable(vec![skipped(BlockReason::DisabledAuth, None)], 0);
        assert_eq!((disabled.status, disabled.retry_after_ms), (503, None));
        assert_eq!(unroutable(Vec::new(), 0).status, 503);
    }

    #[test]
    fn hold_waits_only_when_the_unblock_is_within_hold_ms() {
        let blocked = |retry, hold| Unroutable {
            status: 429,
            retry_after_ms: retry,
            blocked: Vec::new(),
            hold_ms: hold,
        };
        assert_eq!(hold_wait_ms(&blocked(Some(400), 1_000), 0), Some(400));
        assert_eq!(hold_wait_ms(&blocked(Some(400), 1_000), 700), None);
        assert_eq!(hold_wait_ms(&blocked(Some(0), 1_000), 0), Some(1));
        assert_eq!(hold_wait_ms(&blocked(None, 1_000), 0), None);
        assert_eq!(hold_wait_ms(&blocked(Some(400), 0), 0), None);
    }

    #[test]
    fn s3_counted_failures_end_at_max_attempts_quick_ones_at_max_upstream_requests() {
        let mut plan = RequestPlan::new(3, 8);
        assert_eq!(
            plan.after_attempt(OutcomeClass::ServerError, false, true),
            Step::Failover
        );
        plan.attempt_sent();
        assert_eq!(
            plan.after_attempt(OutcomeClass::Timeout, false, true),
            Step::Failover
        );
        plan.attempt_sent();
        assert_eq!(
            plan.after_attempt(OutcomeClass::Network, false, true),
            Step::GiveUp
        );

        // 429s do not count as attempts: only the upstream-request cap ends them.
        let mut plan = RequestPlan::new(3, 4);
        let mut steps = Vec::new();
        for _ in 0..4 {
            let step = plan.after_attempt(OutcomeClass::RateLimited, false, true);
            steps.push(step);
            if step == Step::Failover {
                plan.attempt_sent();
            }
        }
        assert_eq!(
            steps,
            [Step::Failover, Step::Failover, Step::Failover, Step::GiveUp]
        );
        assert_eq!(plan.upstream_requests(), 4);
    }

    #[test]
    fn s3_success_and_client_errors_never_fail_over_and_no_time_left_gives_up() {
        let mut plan = RequestPlan::new(3, 8);
        assert_eq!(
            plan.after_attempt(OutcomeClass::Success, true, true),
            Step::Stream
        );
        assert_eq!(
            plan.after_attempt(OutcomeClass::Success, false, true),
            Step::Deliver
        );
        assert_eq!(
            plan.after_attempt(OutcomeClass::ClientError, true, true),
            Step::Deliver
        );
        assert_eq!(
            plan.after_attempt(OutcomeClass::ServerError, false, false),
            Step::GiveUp
        );
    }

    #[test]
    fn s7_final_answers() {
        assert_eq!(final_answer(None), FinalAnswer::NoTargetTried);
        for status in [429, 500, 502, 503, 504] {
            assert_eq!(
                final_answer(Some(LastAttempt::Status(status))),
                FinalAnswer::PassThrough(status)
            );
        }
        assert_eq!(
            final_answer(Some(LastAttempt::Status(529))),
            FinalAnswer::PassThrough(503)
        );
        assert_eq!(
            final_answer(Some(LastAttempt::Status(404))),
            FinalAnswer::ModelNotFound
        );
        assert_eq!(
            final_answer(Some(LastAttempt::Status(408))),
            FinalAnswer::UpstreamTimeout
        );
        assert_eq!(
            final_answer(Some(LastAttempt::Status(401))),
            FinalAnswer::UpstreamError(Some(401))
        );
        assert_eq!(
            final_answer(Some(LastAttempt::Class(OutcomeClass::Timeout))),
            FinalAnswer::UpstreamTimeout
        );
        assert_eq!(
            final_answer(Some(LastAttempt::Class(OutcomeClass::Network))),
            FinalAnswer::UpstreamError(None)
        );
    }

    #[test]
    fn breaker_signals_follow_the_class_table() {
        assert_eq!(breaker_signal(OutcomeClass::ServerError), Some(true));
        assert_eq!(breaker_signal(OutcomeClass::Success), Some(false));
        assert_eq!(breaker_signal(OutcomeClass::RateLimited), None);
        assert_eq!(breaker_signal(OutcomeClass::AuthFailed), None);
    }

    #[test]
    fn half_open_without_a_free_token_blocks() {
        let settings = BreakerSettings::default();
        let mut state = BreakerState::new("p");
        // Trip the breaker open, then let its reset pass: HALF_OPEN.
        let mut now = 1_000_000;
        for i in 0..(settings.open_at + 2) {
            let events = state.on_outcome("p", &format!("k{i}"), true, now, false, now, &settings);
            for event in &events {
                state.apply(now, event);
            }
            now += 1;
        }
        assert!(matches!(
            breaker_admission(&state, &settings, None, now),
            BreakerAdmission::Blocked(BlockReason::BreakerOpen, _)
        ));
        now += 3_600_000;
        assert_eq!(state.phase_at(now, &settings), BreakerPhase::HalfOpen);
        let mut gate = ProbeGate::default();
        assert_eq!(
            breaker_admission(&state, &settings, Some(&gate), now),
            BreakerAdmission::Probe
        );
        while gate.try_take(now, &settings) {}
        assert!(matches!(
            breaker_admission(&state, &settings, Some(&gate), now),
            BreakerAdmission::Blocked(BlockReason::ProbeInFlight, Some(_))
        ));
    }
}
