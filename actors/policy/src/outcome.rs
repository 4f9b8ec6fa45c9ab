//! What the node reports after one upstream attempt: the classified result and what was measured.
//!
//! Built by the HTTP layer (or an embedding program) from a `Classification`; consumed by the
//! connection and breaker actors. Holds no secret: messages are masked before they get here.

use std::sync::Arc;

use quotaroute_journal::{Event, OutcomeClass, RequestFailed, RequestSucceeded, Skipped};

use crate::rate_limit_headers::UsageReading;

/// The result of one upstream attempt, as the caller saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptResult {
    pub class: OutcomeClass,
    /// `None` for network errors and timeouts before headers.
    pub status: Option<u16>,
    pub error_code: Option<String>,
    /// Already masked (see `policy::classify::mask_secrets`).
    pub message: Option<String>,
    /// The upstream's reset hint as a duration from now.
    pub reset_hint_ms: Option<u64>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Input tokens read from the upstream's prompt cache, and written to it.
    pub tokens_cached: u64,
    pub tokens_cache_write: u64,
    /// Rate-limit readings from the response headers.
    pub usage: Vec<UsageReading>,
    pub stream: bool,
    /// The stream had already sent content to the client.
    pub after_first_content: bool,
    /// What the answered attempt cost its client, priced by the node (`[[prices]]`); `None`
    /// when the model has no price or nothing was answered.
    pub cost_usd: Option<f64>,
    /// The translation the attempt went through (`chat>messages`, behaviour §14); `None` when
    /// the target speaks the client's format.
    pub translated: Option<String>,
    /// The token counts are the router's estimate (a stream the client left, or one whose
    /// usage never came; behaviour §11), not the upstream's report.
    pub usage_estimated: bool,
    /// Encrypted items (behaviour §10) left out of the body this attempt sent: made by an
    /// account other than its target's.
    pub items_left_out: u32,
    /// The client's budget period after this attempt was charged, when the success's own
    /// journal event carries the charge (behaviour §11) instead of a `client_usage`.
    pub client_spend: Option<ClientSpend>,
}

/// A client's spend in its current budget period and when that period began, as the node's
/// ledger counted it after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSpend {
    /// Pico-USD (10⁻¹² USD, exact).
    pub period_spend_pusd: u64,
    /// Unix ms.
    pub period_start_ms: u64,
}

impl AttemptResult {
    /// A plain success with token counts.
    pub fn success(status: u16, tokens_in: u64, tokens_out: u64) -> Self {
        AttemptResult {
            class: OutcomeClass::Success,
            status: Some(status),
            error_code: None,
            message: None,
            reset_hint_ms: None,
            tokens_in,
            tokens_out,
            tokens_cached: 0,
            tokens_cache_write: 0,
            usage: Vec::new(),
            stream: false,
            after_first_content: false,
            cost_usd: None,
            translated: None,
            usage_estimated: false,
            items_left_out: 0,
            client_spend: None,
        }
    }

    /// A failure of the given class.
    pub fn failure(class: OutcomeClass, status: Option<u16>) -> Self {
        AttemptResult {
            class,
            status,
            error_code: None,
            message: None,
            reset_hint_ms: None,
            tokens_in: 0,
            tokens_out: 0,
            tokens_cached: 0,
            tokens_cache_write: 0,
            usage: Vec::new(),
            stream: false,
            after_first_content: false,
            cost_usd: None,
            translated: None,
            usage_estimated: false,
            items_left_out: 0,
            client_spend: None,
        }
    }

    pub fn with_reset_hint_ms(mut self, reset_hint_ms: Option<u64>) -> Self {
        self.reset_hint_ms = reset_hint_ms;
        self
    }

    pub fn with_error_code(mut self, code: impl Into<String>) -> Self {
        self.error_code = Some(code.into());
        self
    }
}

/// One attempt's result together with where it went, as the actors receive it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The request's and its combo's names, shared with the decision that made the attempt
    /// and moved into the request event (never copied per attempt).
    pub request_id: Arc<str>,
    pub combo: Arc<str>,
    /// The client that sent the request (shared with its `ClientTag`, not copied per attempt);
    /// `None` only for attempts read back from records of before journal schema 3 (and the
    /// what-if replay's assumed ones).
    pub client: Option<Arc<str>>,
    /// The target's names, shared with its `RoutedTarget`.
    pub provider: Arc<str>,
    pub connection: Arc<str>,
    pub model: Arc<str>,
    /// 1-based number of this upstream request within the client request.
    pub attempt: u32,
    pub started_at_ms: u64,
    pub latency_ms: u64,
    /// This attempt held the provider breaker's HALF_OPEN probe token.
    pub was_probe: bool,
    pub skipped: Vec<Skipped>,
    pub result: AttemptResult,
}

impl Outcome {
    /// The journal's request event for this attempt.
    pub fn request_event(&self) -> quotaroute_journal::Event {
        self.clone().into_request_event()
    }

    /// The attempt a journaled request event recorded at `at_ms`, for running a journal
    /// through the policy again (replay's what-if); `None` for other events. The inverse of
    /// [`Outcome::into_request_event`] except `was_probe`, which the journal does not keep.
    pub fn from_request_event(event: &Event, at_ms: u64) -> Option<Outcome> {
        let (ids, latency_ms, skipped, client, result) = match event {
            Event::RequestSucceeded(e) => (
                (
                    &e.request_id,
                    &e.combo,
                    &e.provider,
                    &e.connection,
                    &e.model,
                    e.attempt,
                ),
                e.latency_ms,
                &e.skipped,
                &e.client,
                AttemptResult {
                    stream: e.stream,
                    tokens_cached: e.tokens_cached,
                    tokens_cache_write: e.tokens_cache_write,
                    cost_usd: e.cost_usd,
                    translated: e.translated.clone(),
                    usage_estimated: e.usage_estimated,
                    items_left_out: e.items_left_out,
                    client_spend: e.period_spend_pusd.zip(e.period_start_ms).map(
                        |(period_spend_pusd, period_start_ms)| ClientSpend {
                            period_spend_pusd,
                            period_start_ms,
                        },
                    ),
                    ..AttemptResult::success(e.status, e.tokens_in, e.tokens_out)
                },
            ),
            Event::RequestFailed(e) => (
                (
                    &e.request_id,
                    &e.combo,
                    &e.provider,
                    &e.connection,
                    &e.model,
                    e.attempt,
                ),
                e.latency_ms,
                &e.skipped,
                &e.client,
                AttemptResult {
                    error_code: e.error_code.clone(),
                    message: e.message.clone(),
                    reset_hint_ms: e.reset_hint_ms,
                    stream: e.stream,
                    after_first_content: e.after_first_content,
                    translated: e.translated.clone(),
                    ..AttemptResult::failure(e.class, e.status)
                },
            ),
            _ => return None,
        };
        let (request_id, combo, provider, connection, model, attempt) = ids;
        Some(Outcome {
            request_id: request_id.clone(),
            combo: combo.clone(),
            client: client.clone(),
            provider: provider.clone(),
            connection: connection.clone(),
            model: model.clone(),
            attempt,
            started_at_ms: at_ms.saturating_sub(latency_ms),
            latency_ms,
            was_probe: false,
            skipped: skipped.clone(),
            result,
        })
    }

    /// [`Outcome::request_event`], moving the strings instead of copying them.
    pub fn into_request_event(self) -> quotaroute_journal::Event {
        let r = self.result;
        if r.class == OutcomeClass::Success {
            quotaroute_journal::Event::RequestSucceeded(RequestSucceeded {
                request_id: self.request_id,
                combo: self.combo,
                provider: self.provider,
                connection: self.connection,
                model: self.model,
                status: r.status.unwrap_or(200),
                attempt: self.attempt,
                latency_ms: self.latency_ms,
                tokens_in: r.tokens_in,
                tokens_out: r.tokens_out,
                stream: r.stream,
                skipped: self.skipped,
                tokens_cached: r.tokens_cached,
                tokens_cache_write: r.tokens_cache_write,
                client: self.client,
                cost_usd: r.cost_usd,
                items_left_out: r.items_left_out,
                translated: r.translated,
                usage_estimated: r.usage_estimated,
                period_spend_pusd: r.client_spend.map(|spend| spend.period_spend_pusd),
                period_start_ms: r.client_spend.map(|spend| spend.period_start_ms),
            })
        } else {
            quotaroute_journal::Event::RequestFailed(RequestFailed {
                request_id: self.request_id,
                combo: self.combo,
                provider: self.provider,
                connection: self.connection,
                model: self.model,
                status: r.status,
                class: r.class,
                error_code: r.error_code,
                message: r.message,
                attempt: self.attempt,
                latency_ms: self.latency_ms,
                reset_hint_ms: r.reset_hint_ms,
                stream: r.stream,
                after_first_content: r.after_first_content,
                skipped: self.skipped,
                client: self.client,
                translated: r.translated,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use quotaroute_journal::testkit::{failed, succeeded};

    use super::*;

    #[test]
    fn a_request_event_turns_back_into_the_outcome_it_came_from() {
        let mut failure = failed("p", "k1", "m", Some(429), OutcomeClass::RateLimited);
        if let Event::RequestFailed(e) = &mut failure {
            e.error_code = Some("rate_limit_exceeded".into());
            e.reset_hint_ms = Some(6_000);
            e.after_first_content = true;
        }
        for event in [succeeded("p", "k1", "m", 10, 20), failure] {
            let outcome = Outcome::from_request_event(&event, 5_000).unwrap();
            assert_eq!(outcome.started_at_ms, 5_000 - outcome.latency_ms);
            assert_eq!(outcome.into_request_event(), event);
        }
        assert!(Outcome::from_request_event(
            &Event::NodeStopped(quotaroute_journal::NodeStopped {
                reason: "test".into(),
                uptime_ms: 1,
            }),
            0
        )
        .is_none());
    }
}
