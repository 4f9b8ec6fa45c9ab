//! The request path's whole tracing API. [`RequestSpan`] is the server span of one client
//! request; [`AttemptSpan`] the client span of one upstream request under it. Both are handles
//! (`None` inside when tracing is off or the trace is not sampled: every call is then a branch
//! and nothing is allocated); a span ends when its last handle is dropped, so an attempt that
//! streams ends with its stream and the request ends after its last attempt. What each span
//! records is set through these methods only, and only from ids, statuses, classes and counts.

use std::sync::{Arc, Mutex};

use http::header::{HeaderMap, HeaderName};
use quotaroute_actors::RoutedTarget;
use quotaroute_journal::{AffinityOutcome, OutcomeClass};

use crate::telemetry::answer_usage::AnswerUsage;
use crate::telemetry::finished::{ErrorType, FinishedSpan, Role};
use crate::telemetry::key_value::AttributeBlock;
use crate::telemetry::trace_context::{self, RemoteParent, SpanId, TraceId};
use crate::telemetry::tracer::{now_unix_ns, Tracer};
use crate::wire::stream_watch::StreamUsage;
use crate::wire::usage::TokenCounts;

const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static(trace_context::TRACEPARENT);

/// The server span of one client request (cheap to clone: a handle).
#[derive(Clone, Default)]
pub struct RequestSpan(Option<Arc<RequestActive>>);

/// The client span of one upstream request (cheap to clone: a handle).
#[derive(Clone, Default)]
pub struct AttemptSpan(Option<Arc<AttemptActive>>);

struct RequestActive {
    tracer: Arc<Tracer>,
    trace_id: TraceId,
    span_id: SpanId,
    parent: Option<SpanId>,
    /// When the request arrived; its Unix time is read at the end (one wall-clock read for
    /// both ends, and a duration no wall-clock step can bend).
    started: std::time::Instant,
    operation: &'static str,
    request_model: Arc<str>,
    state: Mutex<RequestState>,
}

#[derive(Default)]
struct RequestState {
    /// Who sent it (behaviour §11) and how affinity placed it (§10), once routed.
    client: Option<Arc<str>>,
    affinity: Option<AffinityOutcome>,
    status: Option<u16>,
    attempts: Option<u64>,
    /// The model the serving target was asked for (`x-quotaroute-model`).
    routed_model: Option<Arc<str>>,
    /// The last attempt's class and, from the serving one, its usage.
    last_class: Option<OutcomeClass>,
    usage: AnswerUsage,
}

struct AttemptActive {
    request: Arc<RequestActive>,
    span_id: SpanId,
    start_unix_ns: u64,
    model: Arc<str>,
    connection: Arc<str>,
    provider: Arc<AttributeBlock>,
    state: Mutex<AttemptState>,
}

#[derive(Default)]
struct AttemptState {
    status: Option<u16>,
    class: Option<OutcomeClass>,
    usage: AnswerUsage,
}

impl RequestSpan {
    /// A span that records nothing.
    pub fn off() -> Self {
        RequestSpan(None)
    }

    /// The span of a request that arrived at `started` asking `operation` (a GenAI operation
    /// name) of `model`, child of the client's `traceparent` when it sent one. Off when
    /// `tracer` is `None` or the trace is not sampled.
    pub fn start(
        tracer: Option<&Arc<Tracer>>,
        headers: &HeaderMap,
        operation: &'static str,
        model: &str,
        started: std::time::Instant,
    ) -> Self {
        let Some(tracer) = tracer else {
            return RequestSpan(None);
        };
        let parent: Option<RemoteParent> = headers
            .get(&TRACEPARENT_HEADER)
            .and_then(trace_context::parse_traceparent);
        let trace_id = parent.map_or_else(TraceId::random, |parent| parent.trace_id);
        if !tracer.sampler.sampled(parent.as_ref(), trace_id) {
            return RequestSpan(None);
        }
        RequestSpan(Some(Arc::new(RequestActive {
            tracer: tracer.clone(),
            trace_id,
            span_id: SpanId::random(),
            parent: parent.map(|parent| parent.span_id),
            started,
            operation,
            request_model: Arc::from(model),
            state: Mutex::default(),
        })))
    }

    /// A child span for one upstream request to `target`, whose provider's attributes are
    /// `provider` ([`provider_attributes`](crate::telemetry::finished::provider_attributes)),
    /// starting now.
    pub fn attempt(&self, target: &RoutedTarget, provider: &Arc<AttributeBlock>) -> AttemptSpan {
        let Some(request) = &self.0 else {
            return AttemptSpan(None);
        };
        AttemptSpan(Some(Arc::new(AttemptActive {
            request: request.clone(),
            span_id: SpanId::random(),
            start_unix_ns: now_unix_ns(),
            model: target.model.clone(),
            connection: target.connection.clone(),
            provider: provider.clone(),
            state: Mutex::default(),
        })))
    }

    /// Records who sent the request and how conversation affinity placed it.
    pub fn routed(&self, client: &Arc<str>, affinity: AffinityOutcome) {
        if let Some(request) = &self.0 {
            if let Ok(mut state) = request.state.lock() {
                state.client = Some(client.clone());
                state.affinity = Some(affinity);
            }
        }
    }

    /// Records the client's answer: its status, how many upstream requests it took (its
    /// `x-quotaroute-attempts`) and the model the last one asked for (`x-quotaroute-model`),
    /// handed over as the node set them rather than read back from the headers. Hands the
    /// answer back.
    pub fn answered<B>(
        &self,
        response: http::Response<B>,
        attempts: u32,
        routed_model: Option<&Arc<str>>,
    ) -> http::Response<B> {
        if let Some(request) = &self.0 {
            if let Ok(mut state) = request.state.lock() {
                state.status = Some(response.status().as_u16());
                state.attempts = Some(u64::from(attempts));
                // The served answer's own model, when its attempt ended with one, is the one
                // the span carries: the routed model is kept only for want of it.
                if state.usage.model.is_none() {
                    state.routed_model = routed_model.cloned();
                }
            }
        }
        response
    }
}

impl AttemptSpan {
    /// Sets this attempt's `traceparent` on the upstream request (replacing the client's).
    pub fn inject(&self, headers: &mut HeaderMap) {
        if let Some(attempt) = &self.0 {
            if let Some(value) =
                trace_context::traceparent(attempt.request.trace_id, attempt.span_id)
            {
                headers.insert(TRACEPARENT_HEADER, value);
            }
        }
    }

    /// The upstream's status.
    pub fn status(&self, status: u16) {
        self.with_state(|state| state.status = Some(status));
    }

    /// How the attempt was classified (behaviour §4).
    pub fn class(&self, class: OutcomeClass) {
        self.with_state(|state| state.class = Some(class));
    }

    /// The whole answer's model and token counts, as the node's one parse of it read them.
    pub fn answer(
        &self,
        model: Option<&serde_json::value::RawValue>,
        counts: Option<&TokenCounts>,
    ) {
        if self.0.is_some() {
            let usage = AnswerUsage::of(model, counts);
            self.with_state(|state| state.usage = usage);
        }
    }

    /// A relayed stream ended: with `failure` when it broke after commit.
    pub fn stream_ended(&self, failure: Option<OutcomeClass>, usage: &StreamUsage) {
        self.with_state(|state| {
            state.class = Some(failure.unwrap_or(OutcomeClass::Success));
            state.usage.input_tokens = Some(usage.tokens_in);
            state.usage.output_tokens = Some(usage.tokens_out);
        });
    }

    fn with_state(&self, change: impl FnOnce(&mut AttemptState)) {
        if let Some(attempt) = &self.0 {
            if let Ok(mut state) = attempt.state.lock() {
                change(&mut state);
            }
        }
    }
}

impl Drop for AttemptActive {
    fn drop(&mut self) {
        let state = self.state.get_mut().map(std::mem::take).unwrap_or_default();
        let request = &self.request;
        let failed = state
            .class
            .is_some_and(|class| class != OutcomeClass::Success);
        let error = state
            .class
            .filter(|_| failed)
            .map(|class| ErrorType::Class(class.as_str()));
        if let Ok(mut rollup) = request.state.lock() {
            rollup.last_class = state.class;
            if state.class == Some(OutcomeClass::Success) {
                rollup.usage = state.usage.clone();
            }
        }
        request.tracer.submit(FinishedSpan {
            trace_id: request.trace_id,
            span_id: self.span_id,
            parent: Some(request.span_id),
            remote_parent: false,
            operation: request.operation,
            model: self.model.clone(),
            start_unix_ns: self.start_unix_ns,
            end_unix_ns: now_unix_ns(),
            usage: state.usage,
            status: state.status,
            error,
            role: Role::Attempt {
                connection: self.connection.clone(),
                provider: self.provider.clone(),
            },
        });
    }
}

impl Drop for RequestActive {
    fn drop(&mut self) {
        let mut state = self.state.get_mut().map(std::mem::take).unwrap_or_default();
        if state.usage.model.is_none() {
            state.usage.model = state.routed_model.take();
        }
        // The last attempt's class when it failed (a stream that broke after commit answered
        // 200); else, for an error answer, its status.
        let error = match (state.last_class, state.status) {
            (Some(class), _) if class != OutcomeClass::Success => {
                Some(ErrorType::Class(class.as_str()))
            }
            (_, Some(status)) if status >= 400 => Some(ErrorType::Status(status)),
            _ => None,
        };
        let end_unix_ns = now_unix_ns();
        let lasted = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(0);
        self.tracer.submit(FinishedSpan {
            trace_id: self.trace_id,
            span_id: self.span_id,
            parent: self.parent,
            remote_parent: self.parent.is_some(),
            operation: self.operation,
            model: self.request_model.clone(),
            start_unix_ns: end_unix_ns.saturating_sub(lasted),
            end_unix_ns,
            usage: state.usage,
            status: state.status,
            error,
            role: Role::Request {
                client: state.client,
                affinity: state.affinity.unwrap_or_default().as_str(),
                attempts: state.attempts,
            },
        });
    }
}
