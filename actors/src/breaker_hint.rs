//! The breaker hint: a provider-wide pair of atomics that lets `Decision::report` skip casting a
//! success to the breaker actor when that success could not change anything. The breaker actor
//! publishes; reporters only read it and count the failures they send. Holds no breaker state
//! and decides nothing itself — the breaker actor stays the only owner of the breaker.
//!
//! # Why a skipped success is never a lost one
//! A success changes a breaker only when it is not CLOSED or has counted failures
//! ([`BreakerState::success_is_noop`]). The actor publishes that predicate after handling every
//! message (`quiet`), and every reporter increments `pending_failures` *before* casting a
//! failure, which the actor decrements only *after* publishing the state that failure produced.
//! A reporter skips its success only when it reads `pending_failures == 0` and then `quiet`
//! (all `SeqCst`). So:
//! - a failure that happened before the success (the same request's earlier attempt, or any
//!   failure whose increment the reporter can see) is either still counted in
//!   `pending_failures` — the success is sent — or already handled, and `quiet` then reflects a
//!   state at or after it: skipping equals the success arriving at that point, where it does
//!   nothing;
//! - a failure whose increment the reporter cannot see yet is concurrent with the success: the
//!   order in which the two would have reached the mailbox was not determined anyway, and the
//!   skip equals the success arriving first.
//!
//! A failure cast to an actor that died keeps `pending_failures` above zero (when the cast
//! itself fails it is given back): that only disables the shortcut, it never skips wrongly.
//!
//! [`BreakerState::success_is_noop`]: crate::policy::breaker::BreakerState::success_is_noop

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One provider's hint, shared by its breaker actor (across restarts) and every reporter.
#[derive(Debug, Default)]
pub struct BreakerHint {
    /// The breaker actor's last published state takes successes as no-ops. Starts false, so
    /// nothing is skipped before the actor has published once.
    quiet: AtomicBool,
    /// Failure signals cast but not yet handled by the breaker actor.
    pending_failures: AtomicU64,
}

impl BreakerHint {
    /// Reporter: a failure signal is about to be cast.
    pub fn failure_sent(&self) {
        self.pending_failures.fetch_add(1, Ordering::SeqCst);
    }

    /// Reporter (when the cast failed) or breaker actor (after publishing the state the
    /// failure produced): one failure signal is done.
    pub fn failure_done(&self) {
        // Saturating: a stray extra call must not wrap the count to "always pending" forever.
        let _ = self
            .pending_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Breaker actor: whether a success on its current state would change nothing.
    pub fn publish(&self, quiet: bool) {
        self.quiet.store(quiet, Ordering::SeqCst);
    }

    /// Reporter: a success may be left unsent (see the module docs for why this is safe).
    pub fn success_is_noop(&self) -> bool {
        self.pending_failures.load(Ordering::SeqCst) == 0 && self.quiet.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s5_hint_skips_only_when_published_quiet_and_no_failure_pending() {
        let hint = BreakerHint::default();
        assert!(!hint.success_is_noop(), "nothing published yet");
        hint.publish(true);
        assert!(hint.success_is_noop());
        hint.failure_sent();
        assert!(!hint.success_is_noop(), "a failure is on its way");
        hint.publish(false);
        hint.failure_done();
        assert!(!hint.success_is_noop(), "the failure was counted");
        hint.publish(true);
        assert!(hint.success_is_noop());
    }

    #[test]
    fn s5_hint_pending_count_never_wraps() {
        let hint = BreakerHint::default();
        hint.publish(true);
        hint.failure_done();
        assert!(hint.success_is_noop());
        hint.failure_sent();
        hint.failure_sent();
        hint.failure_done();
        assert!(!hint.success_is_noop());
        hint.failure_done();
        assert!(hint.success_is_noop());
    }
}
