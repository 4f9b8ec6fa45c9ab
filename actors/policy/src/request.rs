//! One request's life, pure (behaviour §3, §7; admission, §2 step 0, is `admission`'s):
//! what follows each attempt (stream, deliver, fail over or give up) under the attempt budget
//! and `max_upstream_requests`, the answer when nothing could be tried or the tries ran out,
//! the hold, and what an attempt's class tells its breaker.
//!
//! The combo actor, `Decision`, the node's try loop (which then only does I/O) and
//! `replay --what-if` all call these functions; none of them keeps a copy of a rule.

use quotaroute_journal::{BlockReason, OutcomeClass, Skipped};

use crate::classify::rules;

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

/// Which answer nothing-could-serve is (behaviour §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnroutableKind {
    /// Every block is a lockout or a cooldown: 429 `all_targets_locked`.
    AllLimited,
    /// Anything else (an open breaker, a disabled key, no target at all): 503
    /// `no_available_target`.
    NoneAvailable,
    /// A spare-class request that some target refused as `no_spare` (behaviour §13): 429
    /// `no_spare_quota`, retry when spare quota is next forecast.
    NoSpareQuota,
}

/// Nothing could serve (behaviour §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unroutable {
    pub kind: UnroutableKind,
    /// The kind's status: 429 or 503.
    pub status: u16,
    /// Until the earliest finite unblock, if any block ends by itself.
    pub retry_after_ms: Option<u64>,
    pub blocked: Vec<Skipped>,
    pub hold_ms: u64,
}

/// Behaviour §7: 429 iff every block is a lockout or cooldown (a spent or reserved window,
/// §13, counts as a lockout), else 503; retry after the earliest finite unblock. A spare
/// request that a target refused for want of spare quota is 429 `no_spare_quota` (§13). A target that
/// cannot carry the request (§14) is listed but decides neither: the targets that could
/// carry it do.
pub fn unroutable(blocked: Vec<Skipped>, hold_ms: u64) -> Unroutable {
    let all_lockout_or_cooldown = blocked.iter().all(|s| {
        matches!(
            s.reason,
            BlockReason::Cooldown
                | BlockReason::RateLimited
                | BlockReason::NotFound
                | BlockReason::QuotaExhausted
                | BlockReason::Reserved
                | BlockReason::CannotCarry
        )
    });
    let retry_after_ms = blocked.iter().filter_map(|s| s.remaining_ms).min();
    let no_spare = blocked.iter().any(|s| s.reason == BlockReason::NoSpare);
    let kind = if no_spare {
        UnroutableKind::NoSpareQuota
    } else if all_lockout_or_cooldown && !blocked.is_empty() {
        UnroutableKind::AllLimited
    } else {
        UnroutableKind::NoneAvailable
    };
    Unroutable {
        kind,
        status: match kind {
            UnroutableKind::AllLimited | UnroutableKind::NoSpareQuota => 429,
            UnroutableKind::NoneAvailable => 503,
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

    /// One more upstream request to the target in progress (the same target again with a
    /// refreshed credential after a 401): not an attempt of the client's, but it spends
    /// `max_upstream_requests`. False, and nothing counted, when that budget is spent.
    pub fn same_target_again(&mut self) -> bool {
        if self.upstream_requests >= self.max_upstream_requests {
            return false;
        }
        self.upstream_requests += 1;
        true
    }
}

/// The last failed attempt of a request, as the answer needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastAttempt {
    /// The upstream answered with this status.
    Status(u16),
    /// No usable answer (timeout, network, undecodable body): its class.
    Class(OutcomeClass),
    /// A whole body over the router's bound (a `server_error`).
    TooLarge,
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
    /// 502 `upstream_too_large`.
    UpstreamTooLarge,
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
        Some(LastAttempt::TooLarge) => FinalAnswer::UpstreamTooLarge,
        Some(LastAttempt::Class(_)) => FinalAnswer::UpstreamError(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_same_target_retry_spends_upstream_requests_not_attempts() {
        let mut plan = RequestPlan::new(3, 2);
        assert!(plan.same_target_again());
        assert_eq!(plan.upstream_requests(), 2);
        assert!(!plan.same_target_again(), "the upstream budget is spent");
        assert_eq!(plan.upstream_requests(), 2);
        // One counted failure of three allowed, but no upstream request left: give up.
        assert_eq!(
            plan.after_attempt(OutcomeClass::ServerError, false, true),
            Step::GiveUp
        );
        // With upstream requests left, the retry cost no attempt: one failure of two fails over.
        let mut plan = RequestPlan::new(2, 8);
        assert!(plan.same_target_again());
        assert_eq!(
            plan.after_attempt(OutcomeClass::ServerError, false, true),
            Step::Failover
        );
    }

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
    fn s13_a_spare_request_refused_for_want_of_spare_quota_is_429_no_spare_quota() {
        let refused = unroutable(
            vec![
                skipped(BlockReason::NoSpare, Some(7_200_000)),
                skipped(BlockReason::NoSpare, Some(3_600_000)),
                skipped(BlockReason::BreakerOpen, Some(9_000)),
            ],
            0,
        );
        assert_eq!(refused.kind, UnroutableKind::NoSpareQuota);
        assert_eq!((refused.status, refused.retry_after_ms), (429, Some(9_000)));
        let never = unroutable(vec![skipped(BlockReason::NoSpare, None)], 0);
        assert_eq!((never.status, never.retry_after_ms), (429, None));
    }

    #[test]
    fn s14_a_target_that_cannot_carry_is_listed_but_the_others_decide_the_status() {
        let limited = unroutable(
            vec![
                skipped(BlockReason::CannotCarry, None),
                skipped(BlockReason::RateLimited, Some(3_000)),
            ],
            0,
        );
        assert_eq!((limited.status, limited.retry_after_ms), (429, Some(3_000)));
        assert_eq!(limited.blocked[0].reason.as_str(), "cannot_carry");
        let open = unroutable(
            vec![
                skipped(BlockReason::CannotCarry, None),
                skipped(BlockReason::BreakerOpen, Some(9_000)),
            ],
            0,
        );
        assert_eq!(open.status, 503);
    }

    #[test]
    fn hold_waits_only_when_the_unblock_is_within_hold_ms() {
        let blocked = |retry, hold| Unroutable {
            kind: UnroutableKind::AllLimited,
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
}
