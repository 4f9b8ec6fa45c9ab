//! A routing decision as a request holds it: the ordered targets, the permit of the attempt in
//! progress, and the means to report each attempt and fail over to the next target.
//!
//! Reports are `cast`s to the connection's and the provider's actors; a failure's report also
//! waits for both to have applied it (read-your-writes). Dropping the decision (client abort,
//! panic) releases the held permit without reporting anything.

use std::sync::{Arc, OnceLock};

use quotaroute_journal::{AffinityOutcome, OutcomeClass, Skipped};
use ractor::{ActorRef, RpcReplyPort};

use crate::actor::messages::{
    AcquireRequest, AffinityKey, BreakerMsg, BreakerSignal, ComboMsg, ConnectionMsg, RoutedTarget,
    ServedTurn,
};
use crate::clock::SharedClock;
use crate::permit::Permit;
use crate::policy::classify::rules;
use crate::policy::failover_cursor::FailoverCursor;
use crate::policy::outcome::{AttemptResult, Outcome};
use crate::policy::request::{breaker_signal, RequestPlan, Step};
use crate::registry::Registry;
use crate::RouterError;

/// The longest a failure's report waits for the actors to apply it; past it the request goes
/// on (a wedged actor must not hold a request beyond its deadline).
pub const APPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The longest a request waits on one actor `call` (a route, a failover, an admin read): a
/// wedged actor then gives the client a clear 503, not a hang.
pub const ROUTE_CALL_TIMEOUT_MS: u64 = 5_000;

/// The longest an operator's call waits on one actor (a clear, a reset, a pushed reading, a
/// state read): a wedged actor gives the admin API a clear error, not a hang.
pub const ADMIN_CALL_TIMEOUT_MS: u64 = 5_000;

/// The longest a call that waits on the journal or a whole fold may take (a flush on a slow
/// disk, the recorder's folded state, a reload that re-reads it).
pub const JOURNAL_CALL_TIMEOUT_MS: u64 = 30_000;

/// The attempt in progress.
#[derive(Debug)]
struct CurrentAttempt {
    position: usize,
    permit: Permit,
    started_at_ms: u64,
}

/// One client request's route through a combo.
pub struct Decision {
    /// The request's id and the model it asked for (its combo), shared with the request and
    /// moved into each attempt's outcome by a clone of the pointer.
    pub request_id: Arc<str>,
    pub combo: Arc<str>,
    /// Every target of the combo, shared with it.
    all: Arc<[Arc<RoutedTarget>]>,
    /// The decided order (positions in `all`), the targets a failover may still take, the
    /// attempt budget and what follows each attempt (`policy::failover_cursor`).
    route: FailoverCursor,
    /// The order as targets, built on the first `targets()` call only.
    ordered: OnceLock<Vec<Arc<RoutedTarget>>>,
    current: Option<CurrentAttempt>,
    skipped: Vec<Skipped>,
    /// A committed stream's attempt, reported when the stream ends.
    stream_result: Option<AttemptResult>,
    combo_ref: ActorRef<ComboMsg>,
    registry: Arc<Registry>,
    clock: SharedClock,
    /// How long the request waited in the combo's queue for its permit (behaviour §11).
    queue_wait_ms: u64,
    /// How conversation affinity placed the first target (behaviour §10).
    affinity: AffinityOutcome,
    /// The client that sent the request (its `ClientTag` id), named by every attempt's event.
    client: Arc<str>,
    /// The conversation the first target was placed for (behaviour §10), and that target's
    /// position: a success elsewhere (a failover) tells the combo, so the binding follows.
    group: Option<(AffinityKey, usize)>,
}

impl std::fmt::Debug for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decision")
            .field("request_id", &self.request_id)
            .field("combo", &self.combo)
            .field("order", &self.targets())
            .field("current", &self.current)
            .field("plan", self.route.plan())
            .finish_non_exhaustive()
    }
}

impl Decision {
    #[expect(
        clippy::too_many_arguments,
        reason = "each argument is one input the rule reads; a struct of them would only rename them"
    )]
    pub(crate) fn new(
        request_id: Arc<str>,
        combo: Arc<str>,
        all: Arc<[Arc<RoutedTarget>]>,
        order: Vec<usize>,
        position: usize,
        permit: Permit,
        skipped: Vec<Skipped>,
        limits: (u32, u32),
        combo_ref: ActorRef<ComboMsg>,
        registry: Arc<Registry>,
        clock: SharedClock,
        started_at_ms: u64,
    ) -> Self {
        Decision {
            request_id,
            combo,
            all,
            route: FailoverCursor::new(order, position, limits),
            ordered: OnceLock::new(),
            current: Some(CurrentAttempt {
                position,
                permit,
                started_at_ms,
            }),
            skipped,
            stream_result: None,
            combo_ref,
            registry,
            clock,
            queue_wait_ms: 0,
            affinity: AffinityOutcome::None,
            client: crate::ClientTag::default_client().id,
            group: None,
        }
    }

    /// The conversation the decision placed (its first target at the held position).
    pub(crate) fn with_group(mut self, group: Option<AffinityKey>) -> Self {
        self.group = group.zip(self.current.as_ref().map(|c| c.position));
        self
    }

    pub(crate) fn with_client(mut self, client: Arc<str>) -> Self {
        self.client = client;
        self
    }

    /// The client the request belongs to.
    pub fn client(&self) -> &str {
        &self.client
    }

    pub(crate) fn with_affinity(mut self, affinity: AffinityOutcome) -> Self {
        self.affinity = affinity;
        self
    }

    /// How conversation affinity placed the first target: `none`, `new`, `held` or `moved`.
    pub fn affinity(&self) -> AffinityOutcome {
        self.affinity
    }

    pub(crate) fn with_queue_wait_ms(mut self, queue_wait_ms: u64) -> Self {
        self.queue_wait_ms = queue_wait_ms;
        self
    }

    /// How long the request waited for a permit in the combo's queue (0: it did not queue).
    pub fn queue_wait_ms(&self) -> u64 {
        self.queue_wait_ms
    }

    /// The ordered targets: winner → rest with room → at cap → saturated.
    pub fn targets(&self) -> &[Arc<RoutedTarget>] {
        self.ordered.get_or_init(|| {
            self.route
                .order()
                .iter()
                .filter_map(|&i| self.all.get(i).cloned())
                .collect()
        })
    }

    /// The target at `position` in the decided order.
    fn at(&self, position: usize) -> Option<&Arc<RoutedTarget>> {
        self.route
            .order()
            .get(position)
            .and_then(|&i| self.all.get(i))
    }

    /// The target of the attempt in progress.
    pub fn current(&self) -> Option<&RoutedTarget> {
        self.current
            .as_ref()
            .and_then(|c| self.at(c.position))
            .map(|t| t.as_ref())
    }

    /// The 1-based number of the attempt in progress (= upstream requests so far).
    pub fn attempt(&self) -> u32 {
        self.route.plan().upstream_requests()
    }

    /// Counts one more upstream request to the target in progress (the same target again,
    /// e.g. with a refreshed credential after a 401): not a new attempt, but it spends the
    /// `max_upstream_requests` budget. False, and nothing counted, when that is spent or no
    /// attempt is in progress.
    pub fn retry_current(&mut self) -> bool {
        self.current.is_some() && self.route.plan_mut().same_target_again()
    }

    /// Whether the attempt in progress holds its provider's HALF_OPEN probe token.
    pub fn is_probe(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.permit.is_probe())
    }

    /// The one place what follows an attempt is decided (behaviour §3, by
    /// [`RequestPlan::after_attempt`]): the attempt in progress ended with `result`
    /// (`committed_stream`: it began a stream the client now reads). Reports it — waiting for
    /// its actors to apply it when the request may try again ([`rules`]`.report_waits`) — and
    /// returns the step. A committed stream's report waits for the stream's end
    /// ([`Decision::take_stream_result`]). `time_left`: the request's deadline has not passed.
    /// `delivered` runs on the result, before its report, only when the step is
    /// [`Step::Deliver`]: where the node bills the client for the answer it delivers.
    pub async fn after_attempt(
        &mut self,
        mut result: AttemptResult,
        committed_stream: bool,
        time_left: bool,
        delivered: impl FnOnce(&mut AttemptResult),
    ) -> Step {
        let step = self
            .route
            .plan_mut()
            .after_attempt(result.class, committed_stream, time_left);
        if step == Step::Deliver {
            delivered(&mut result);
        }
        match step {
            Step::Stream => self.stream_result = Some(result),
            _ if rules(result.class).report_waits() => {
                self.report_applied(result).await;
            }
            _ => {
                self.report(result);
            }
        }
        step
    }

    /// The attempt of a committed stream, for its report when the stream ends.
    pub fn take_stream_result(&mut self) -> Option<AttemptResult> {
        self.stream_result.take()
    }

    /// What the plan says of an attempt of `class`, without reporting anything (for embedders
    /// that report themselves; the node uses [`Decision::after_attempt`]).
    pub fn next_step(&mut self, class: OutcomeClass, streaming: bool, time_left: bool) -> Step {
        self.route
            .plan_mut()
            .after_attempt(class, streaming, time_left)
    }

    /// The request's attempt budget and where it stands.
    pub fn plan(&self) -> &RequestPlan {
        self.route.plan()
    }

    /// Targets passed over so far, with why.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Reports the attempt in progress and releases its permit, fire-and-forget. Returns
    /// false when no attempt was in progress. For successes, and where nothing can wait (a
    /// stream dropped by its client).
    pub fn report(&mut self, result: AttemptResult) -> bool {
        self.send_report(result, false).is_some()
    }

    /// Reports the attempt in progress and, when it failed, waits (at most
    /// [`APPLY_TIMEOUT`]) until its connection and breaker have applied it and pushed the
    /// result to the combos: the request's next try, and the client's next request, route on
    /// state that already knows this failure (behaviour §3, read-your-writes). Successes are
    /// not waited for.
    pub async fn report_applied(&mut self, result: AttemptResult) -> bool {
        let waits_for_apply = rules(result.class).report_waits();
        let Some(waits) = self.send_report(result, waits_for_apply) else {
            return false;
        };
        let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
        for applied in waits {
            if tokio::time::timeout_at(deadline, applied).await.is_err() {
                tracing::warn!(
                    request_id = %self.request_id,
                    "an actor did not apply a failure within {APPLY_TIMEOUT:?}; routing on"
                );
                break;
            }
        }
        true
    }

    /// Sends the attempt's outcome to its connection and its signal to its breaker; with
    /// `acknowledged`, returns what to await for each to have applied it.
    fn send_report(
        &mut self,
        result: AttemptResult,
        acknowledged: bool,
    ) -> Option<Vec<ractor::concurrency::OneshotReceiver<()>>> {
        let current = self.current.take()?;
        let target = self.at(current.position)?.clone();
        let mut waits = Vec::new();
        let mut ack = || {
            acknowledged.then(|| {
                let (port, applied) = ractor::concurrency::oneshot();
                waits.push(applied);
                RpcReplyPort::from(port)
            })
        };
        let now_ms = self.clock.now_ms();
        let was_probe = current.permit.is_probe();
        let outcome = Outcome {
            request_id: self.request_id.clone(),
            combo: self.combo.clone(),
            client: Some(self.client.clone()),
            provider: target.provider.clone(),
            connection: target.connection.clone(),
            model: target.model.clone(),
            attempt: self.route.plan().upstream_requests(),
            started_at_ms: current.started_at_ms,
            latency_ms: now_ms.saturating_sub(current.started_at_ms),
            was_probe,
            skipped: self.skipped.clone(),
            result,
        };
        let tables = self.registry.load();
        // Whether the breaker counts this outcome, and as what; the signal itself (a copy of
        // the connection's name) is written only when it is sent.
        let counted = breaker_signal(outcome.result.class);
        if let (Some(failure), Some(breaker)) = (counted, tables.breakers.get(&*target.provider)) {
            let hint = tables.breaker_hints.get(&*target.provider);
            // A success on a CLOSED breaker with nothing counted changes nothing; the hint says
            // so without a message (see `breaker_hint` for why this never loses a signal).
            let skip = !failure && hint.is_some_and(|hint| hint.success_is_noop());
            let signal = (!skip).then(|| BreakerSignal::of(&outcome)).flatten();
            if let Some(signal) = signal {
                if let (true, Some(hint)) = (failure, hint) {
                    hint.failure_sent();
                }
                let sent = breaker.cast(BreakerMsg::Signal(signal, ack()));
                if let (true, Err(_), Some(hint)) = (failure, sent, hint) {
                    hint.failure_done();
                }
            }
        }
        let served = outcome.result.class == OutcomeClass::Success;
        if let Some(connection) = tables.connections.get(&*target.connection) {
            let _ = connection.cast(ConnectionMsg::Outcome(Box::new(outcome), ack()));
        }
        if let Some((key, first)) = self.group.as_ref().filter(|_| served) {
            if *first != current.position {
                let _ = self.combo_ref.cast(ComboMsg::Served(Box::new(ServedTurn {
                    request_id: self.request_id.clone(),
                    key: key.clone(),
                    target: target.clone(),
                })));
            }
        }
        drop(current.permit);
        Some(waits)
    }

    /// Fails over: takes the next target in order that is still unblocked (re-checked now),
    /// skipping the blocked ones. `Ok(None)` when none is left.
    pub async fn failover(&mut self) -> Result<Option<&RoutedTarget>, RouterError> {
        self.current = None;
        if self.route.untried().is_empty() {
            return Ok(None);
        }
        let candidates: Vec<Arc<RoutedTarget>> = self
            .route
            .untried()
            .iter()
            .filter_map(|&i| self.all.get(i).cloned())
            .collect();
        let acquired = ractor::call_t!(
            self.combo_ref,
            ComboMsg::Acquire,
            ROUTE_CALL_TIMEOUT_MS,
            AcquireRequest { candidates }
        )
        .map_err(|e| RouterError::Actor(e.to_string()))?;
        self.skipped.extend(acquired.skipped);
        let (offset, permit) = acquired.taken.unzip();
        match (self.route.took(offset), permit) {
            (Some(position), Some(permit)) => {
                self.current = Some(CurrentAttempt {
                    position,
                    permit,
                    started_at_ms: self.clock.now_ms(),
                });
                Ok(self.at(position).map(|t| t.as_ref()))
            }
            _ => Ok(None),
        }
    }
}
