//! Streams: hold the client's response until the upstream produced its first content event
//! (failing over cleanly before that), then relay event by event, byte for byte, counting
//! usage; after commit an upstream break becomes one final SSE error event in the client's
//! protocol (behaviour §3). Every relayed byte passes the one mask (`upstream_mask`): the
//! connection's key is masked in every event and an upstream error event is masked like an
//! error body, whole events at a time, so a key split across reads is caught too.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use quotaroute_actors::policy::classify::{
    failure_class, AttemptFailure, BodyFailure, TransportFailure,
};
use quotaroute_actors::{AttemptResult, Decision};
use quotaroute_journal::OutcomeClass;
use tokio::time::Instant;

use crate::credentials::Echoes;
use crate::node::client_gate::ChargeRecord;
use crate::telemetry::AttemptSpan;
use crate::upstream::body::{BodyError, UpstreamBody};
use crate::wire::item_seal::ItemSealer;
use crate::wire::sse::{SseEvent, SseParser};
use crate::wire::stream_error::{anthropic_stream_error, gemini_stream_error, openai_stream_error};
use crate::wire::stream_watch::{matters_after_commit, EventMeaning, StreamFormat, StreamUsage};
use crate::wire::translate::StreamTranslator;
use crate::wire::upstream_mask::{mask_exact, mask_sse_event};
use crate::wire::usage::TokenCounts;

use super::stream_drain::{self, DrainBounds};
use super::usage_charge;

/// How a stream began.
pub enum StreamStart {
    /// Content arrived (or the stream ended cleanly): forward `buffered`, then relay the rest.
    Committed(Box<CommittedStream>),
    /// No content before a failure: the try failed over cleanly. `failure`: what went wrong
    /// when it was not the upstream's own error event.
    Failed {
        class: OutcomeClass,
        failure: Option<AttemptFailure>,
        message: String,
    },
}

/// A stream past its first content.
pub struct CommittedStream {
    pub buffered: Vec<Bytes>,
    body: UpstreamBody,
    parser: SseParser,
    pub usage: StreamUsage,
    /// The upstream already ended (a short stream that finished before we committed).
    finished: bool,
    format: StreamFormat,
    withhold_usage_only: bool,
    /// `stream_idle_timeout_ms`: the longest silence after commit too.
    idle: Duration,
    /// The id of the stored response a Responses stream announced (`response.created`).
    pub response_id: Option<String>,
    /// The keys this try sent upstream, masked out of everything relayed.
    echoes: Echoes,
    /// telemetry: the attempt's span, which ends when the relay does.
    pub trace: AttemptSpan,
    /// Writes the upstream's events in the client's protocol when the target speaks the other
    /// format (behaviour §14); `None`: relayed byte for byte.
    translator: Option<StreamTranslator>,
    /// Seals the encrypted items a Responses stream hands out (behaviour §10) with the
    /// connection that made them; `None`: events go byte for byte.
    pub sealer: Option<ItemSealer>,
}

impl StreamStart {
    /// A start that failed with `failure` (its class by the one classifier).
    fn failed(failure: AttemptFailure, message: impl Into<String>) -> StreamStart {
        StreamStart::Failed {
            class: failure_class(failure),
            failure: Some(failure),
            message: message.into(),
        }
    }
}

/// The clocks of one streaming try (behaviour §3).
#[derive(Debug, Clone, Copy)]
pub struct StreamTiming {
    /// The upstream's first response event must arrive by then (`first_token_timeout_ms`
    /// from when the try was sent).
    pub first_event_by: Instant,
    /// The longest silence between upstream bytes (`stream_idle_timeout_ms`).
    pub idle: Duration,
    /// `request_timeout_ms` of the client's request.
    pub deadline: Instant,
}

impl StreamTiming {
    /// How long the next read may wait, and what it means when it does not come.
    fn next_wait(&self, begun: bool, last_activity: Instant) -> (Instant, &'static str) {
        let silence = last_activity + self.idle;
        let (by, why) = if begun || silence < self.first_event_by {
            (
                silence,
                "the upstream was silent for stream_idle_timeout_ms",
            )
        } else {
            (
                self.first_event_by,
                "no response event within first_token_timeout_ms",
            )
        };
        if self.deadline <= by {
            (self.deadline, "request_timeout_ms passed")
        } else {
            (by, why)
        }
    }
}

/// What the client gets of `event`: its own bytes, or its translation (possibly nothing).
fn client_bytes(translator: &mut Option<StreamTranslator>, event: SseEvent) -> Option<Bytes> {
    match translator {
        None => Some(event.raw),
        Some(translator) => {
            let mut out = BytesMut::new();
            translator.event(&event, &mut out);
            (!out.is_empty()).then(|| out.freeze())
        }
    }
}

/// Reads events until the first content, an error, or a timeout of `timing`. Once the
/// upstream's answer has begun (any event), only silence and the request's deadline end the
/// wait: a reasoning model may think for minutes before its first delta. `format` is the
/// upstream's: the commit rule reads its events before any `translator` writes them.
pub async fn open(
    mut body: UpstreamBody,
    format: StreamFormat,
    withhold_usage_only: bool,
    timing: StreamTiming,
    echoes: Echoes,
    translator: Option<StreamTranslator>,
) -> StreamStart {
    let mut opening = Opening {
        parser: SseParser::new(),
        usage: StreamUsage::default(),
        buffered: Vec::new(),
        events: Vec::new(),
        begun: false,
        ended_cleanly: false,
        response_id: None,
        format,
        withhold_usage_only,
        translator,
    };
    let mut last_activity = Instant::now();
    loop {
        let (wait_until, why) = timing.next_wait(opening.begun, last_activity);
        let data = match tokio::time::timeout_at(wait_until, body.next_data()).await {
            Err(_) => {
                return StreamStart::failed(
                    AttemptFailure::Transport(TransportFailure::Timeout),
                    why,
                )
            }
            Ok(None) => return opening.at_end(body, timing.idle, echoes),
            Ok(Some(Err(BodyError::Decode(error)))) => {
                return StreamStart::failed(
                    AttemptFailure::Body(BodyFailure::Undecodable),
                    format!("unreadable event stream: {error}"),
                )
            }
            Ok(Some(Err(BodyError::Transport(error)))) => {
                return StreamStart::failed(
                    AttemptFailure::Transport(TransportFailure::Reset),
                    format!("stream broke before content: {error}"),
                )
            }
            Ok(Some(Ok(data))) => data,
        };
        last_activity = Instant::now();
        match opening.read(&data) {
            Err(failed) => return failed,
            Ok(true) => return opening.commit(body, false, timing.idle, echoes),
            Ok(false) => {}
        }
    }
}

/// What [`open`] has read of a stream before its first content.
struct Opening {
    parser: SseParser,
    usage: StreamUsage,
    /// What the client gets once the stream commits.
    buffered: Vec<Bytes>,
    events: Vec<SseEvent>,
    /// The upstream's answer has begun (any event).
    begun: bool,
    /// The stream's own end was seen (`[DONE]`, `message_stop`, a Responses stream's
    /// `response.completed` with its usage): a body that then ends is a clean, complete answer
    /// even without content (a Responses compaction streams no delta).
    ended_cleanly: bool,
    response_id: Option<String>,
    format: StreamFormat,
    withhold_usage_only: bool,
    translator: Option<StreamTranslator>,
}

impl Opening {
    /// Feeds `data`: true once content arrived (commit), the start's failure on an error event
    /// or unreadable bytes.
    fn read(&mut self, data: &[u8]) -> Result<bool, StreamStart> {
        let format = self.format;
        if let Err(error) = self.parser.feed(data, &mut self.events) {
            return Err(StreamStart::failed(
                AttemptFailure::Body(BodyFailure::UnreadableEvents),
                format!("unreadable event stream: {error}"),
            ));
        }
        let mut committed = false;
        for event in self.events.drain(..) {
            self.begun |= event.event.is_some() || !event.data.is_empty();
            if format == StreamFormat::OpenAiResponses && self.response_id.is_none() {
                self.response_id = created_response_id(&event);
            }
            let meaning = self.usage.observe(format, &event);
            self.ended_cleanly |= matches!(meaning, EventMeaning::Done)
                || (format == StreamFormat::OpenAiResponses
                    && matches!(meaning, EventMeaning::Usage { .. }));
            match meaning {
                EventMeaning::Content => {
                    committed = true;
                    self.usage.count_content(format, &event);
                    self.buffered
                        .extend(client_bytes(&mut self.translator, event));
                }
                EventMeaning::Error { class, message } => {
                    return Err(StreamStart::Failed {
                        class,
                        failure: None,
                        message,
                    })
                }
                EventMeaning::Garbage => {
                    return Err(StreamStart::failed(
                        AttemptFailure::Body(BodyFailure::UnreadableEvents),
                        "unreadable event in a 2xx stream",
                    ))
                }
                EventMeaning::UsageOnly { .. } if self.withhold_usage_only => {}
                _ => self
                    .buffered
                    .extend(client_bytes(&mut self.translator, event)),
            }
        }
        Ok(committed)
    }

    /// The body ended before content: a clean end (`[DONE]` seen) commits what we have.
    fn at_end(mut self, body: UpstreamBody, idle: Duration, echoes: Echoes) -> StreamStart {
        if let Ok(Some(last)) = self.parser.finish() {
            self.events.push(last);
        }
        let mut done = self.ended_cleanly;
        for event in std::mem::take(&mut self.events) {
            match self.usage.observe(self.format, &event) {
                EventMeaning::Done | EventMeaning::Usage { .. } => done = true,
                EventMeaning::Error { class, message } => {
                    return StreamStart::Failed {
                        class,
                        failure: None,
                        message,
                    }
                }
                _ => {}
            }
            self.buffered
                .extend(client_bytes(&mut self.translator, event));
        }
        if let Some(translator) = self.translator.as_mut() {
            let mut out = BytesMut::new();
            translator.finish(&mut out);
            if !out.is_empty() {
                self.buffered.push(out.freeze());
            }
        }
        if done {
            return self.commit(body, true, idle, echoes);
        }
        StreamStart::failed(
            AttemptFailure::Body(BodyFailure::EndedBeforeContent),
            "stream ended before any content",
        )
    }

    /// The stream, committed (`finished`: the upstream already ended).
    fn commit(
        self,
        body: UpstreamBody,
        finished: bool,
        idle: Duration,
        echoes: Echoes,
    ) -> StreamStart {
        StreamStart::Committed(Box::new(CommittedStream {
            buffered: self.buffered,
            body,
            parser: self.parser,
            usage: self.usage,
            finished,
            format: self.format,
            withhold_usage_only: self.withhold_usage_only,
            idle,
            response_id: self.response_id,
            echoes,
            trace: AttemptSpan::default(),
            translator: self.translator,
            sealer: None,
        }))
    }
}

/// The response id a Responses stream's `response.created` event carries.
fn created_response_id(event: &SseEvent) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Created {
        response: Option<CreatedResponse>,
    }
    #[derive(serde::Deserialize)]
    struct CreatedResponse {
        id: Option<String>,
    }
    if event.event.as_deref() != Some("response.created")
        && !event.data.contains("\"response.created\"")
    {
        return None;
    }
    let created: Created = serde_json::from_str(&event.data).ok()?;
    created.response?.id
}

/// Most upstream bytes gathered into one client write.
const COALESCE_BYTES: usize = 64 * 1024;

/// How many times the relay lets other tasks run while waiting for a frame hyper has already
/// read (see `ready_data`).
const READY_FRAME_YIELDS: usize = 2;

/// What charging a stream needs besides its usage (behaviour §11, "money holds").
#[derive(Debug, Clone)]
pub struct StreamCharge {
    /// The client's request body's bytes: the input estimate when no usage comes.
    pub request_bytes: u64,
    /// `server.usage_max_tokens`.
    pub usage_max_tokens: u64,
    /// The serving connection, named in the logs of a clamped usage.
    pub connection: String,
    /// How far a stream the client left is read on for its usage.
    pub drain: DrainBounds,
    /// The combo's affinity counters, given a success's input tokens.
    pub combo_affinity: Option<std::sync::Arc<crate::node::combo_affinity::ComboAffinity>>,
}

impl StreamCharge {
    /// No reading on, no bound beyond `u64` (the relay's own tests).
    #[cfg(test)]
    fn none() -> Self {
        StreamCharge {
            request_bytes: 0,
            usage_max_tokens: u64::MAX,
            connection: String::new(),
            drain: DrainBounds::NONE,
            combo_affinity: None,
        }
    }
}

/// A committed stream being relayed: polled by the client's response body itself (no task, no
/// channel), one chunk per upstream frame. Reports the attempt when the stream ends — or, if the
/// client goes away first, after reading the upstream on for its usage (`stream_drain`).
struct Relay {
    stream: CommittedStream,
    decision: Option<Decision>,
    deadline: Instant,
    failure: Option<(OutcomeClass, String)>,
    ended: bool,
    /// The connection's input-token counters, bumped when the stream ends.
    input_tokens: Option<crate::node::metrics::InputTokenCounters>,
    /// Counts the stream's usage against its client when it ends; holds the client's ticket.
    client_usage: Option<crate::node::client_gate::StreamUsageSink>,
    /// The end or an error, seen while gathering a burst; handled on the next call.
    pending: Option<Option<Result<Bytes, BodyError>>>,
    charge: StreamCharge,
    /// What the client was charged when it left (and its price), before the drain's report.
    precharged: Option<(TokenCounts, Option<f64>)>,
    /// Being read on after the client left: if this is dropped too (the runtime stops), it
    /// reports what it has at once.
    draining: bool,
}

impl Relay {
    /// The next bytes for the client; `None` once the stream is over (and reported).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if !self.stream.buffered.is_empty() {
            let mut first = BytesMut::new();
            for chunk in std::mem::take(&mut self.stream.buffered) {
                first.extend_from_slice(&self.sealed(&chunk));
            }
            return Some(self.masked(first));
        }
        let mut events: Vec<SseEvent> = Vec::new();
        loop {
            let mut upstream_ended = false;
            if self.ended {
                self.report_applied().await;
                return None;
            }
            let next = match self.pending.take() {
                Some(next) => Ok(next),
                None => {
                    let silence = Instant::now() + self.stream.idle;
                    let by = self.deadline.min(silence);
                    match tokio::time::timeout_at(by, self.stream.body.next_data()).await {
                        Err(_) if by == self.deadline => {
                            return self.fail(
                                failure_class(AttemptFailure::Transport(TransportFailure::Timeout)),
                                "request_timeout_ms passed",
                            )
                        }
                        other => other,
                    }
                }
            };
            let mut out = BytesMut::new();
            match next {
                Err(_) => {
                    return self.fail(
                        failure_class(AttemptFailure::Transport(TransportFailure::Timeout)),
                        "the upstream was silent for stream_idle_timeout_ms",
                    )
                }
                Ok(Some(Err(BodyError::Decode(error)))) => {
                    return self.fail(
                        failure_class(AttemptFailure::Body(BodyFailure::Undecodable)),
                        &format!("unreadable event stream: {error}"),
                    )
                }
                Ok(Some(Err(BodyError::Transport(error)))) => {
                    return self.fail(
                        failure_class(AttemptFailure::Transport(TransportFailure::Reset)),
                        &format!("upstream stream broke: {error}"),
                    )
                }
                Ok(None) => {
                    if let Ok(Some(last)) = self.stream.parser.finish() {
                        events.push(last);
                    }
                    self.ended = true;
                    upstream_ended = true;
                }
                Ok(Some(Ok(data))) => {
                    let mut fed = 0;
                    let mut next = Some(data);
                    // Take whatever else has already arrived: one client write per burst
                    // rather than one per upstream frame.
                    while let Some(data) = next.take() {
                        fed += data.len();
                        if let Err(error) = self.stream.parser.feed(&data, &mut events) {
                            return self.fail(
                                failure_class(AttemptFailure::Body(BodyFailure::UnreadableEvents)),
                                &format!("unreadable event stream: {error}"),
                            );
                        }
                        if fed >= COALESCE_BYTES {
                            break;
                        }
                        match ready_data(&mut self.stream.body).await {
                            None => break,
                            Some(Some(Ok(data))) => next = Some(data),
                            Some(other) => self.pending = Some(other),
                        }
                    }
                }
            }
            self.relay_events(&mut events, &mut out);
            if upstream_ended {
                if let Some(translator) = self.stream.translator.as_mut() {
                    let mut tail = BytesMut::new();
                    translator.finish(&mut tail);
                    out.extend_from_slice(&self.sealed(&tail));
                }
            }
            if !out.is_empty() {
                return Some(self.masked(out));
            }
        }
    }

    /// The events read after commit, for the client (`out`): content counted, a usage-only
    /// event withheld when asked, the upstream's own error event passed on masked (it ends the
    /// stream).
    fn relay_events(&mut self, events: &mut Vec<SseEvent>, out: &mut BytesMut) {
        let watches_budget = self
            .client_usage
            .as_ref()
            .is_some_and(|sink| sink.watches_budget());
        for event in events.drain(..) {
            if !matters_after_commit(self.stream.format, &event) {
                self.stream.usage.count_content(self.stream.format, &event);
                self.write(&event, out);
                // Checked after content only: a usage or closing event is always read.
                if watches_budget && self.budget_reached() {
                    self.stop_at_budget(out);
                    return;
                }
                continue;
            }
            match self.stream.usage.observe(self.stream.format, &event) {
                EventMeaning::UsageOnly { .. } if self.stream.withhold_usage_only => {}
                EventMeaning::Error { class, message } => {
                    // The upstream's own error event reaches the client, masked as an
                    // error body is (translated: in the client's shape, masked below).
                    match self.stream.translator.as_mut() {
                        Some(translator) => translator.event(&event, out),
                        None => {
                            let secrets = self.stream.echoes.exposed();
                            out.extend_from_slice(&mask_sse_event(&event.raw, &secrets, true));
                        }
                    }
                    self.failure = Some((class, message));
                    self.ended = true;
                }
                meaning => {
                    let content = meaning == EventMeaning::Content;
                    if content {
                        self.stream.usage.count_content(self.stream.format, &event);
                    }
                    self.write(&event, out);
                    if content && watches_budget && self.budget_reached() {
                        self.stop_at_budget(out);
                        return;
                    }
                }
            }
        }
    }

    /// Whether what the stream used so far takes its client's budget to its end (its running
    /// cost counted against the budget meanwhile).
    fn budget_reached(&self) -> bool {
        self.client_usage
            .as_ref()
            .is_some_and(|sink| sink.budget_reached(&so_far(&self.stream.usage, &self.charge)))
    }

    /// The client's budget is reached: the stream ends with an error event `budget_exceeded`
    /// and its upstream is dropped at once, which stops the generation (behaviour §11: a
    /// budget caps what the client's concurrent streams spend). Served, not a failure of the
    /// connection: it is charged what it used.
    fn stop_at_budget(&mut self, out: &mut BytesMut) {
        tracing::info!(
            connection = &*self.charge.connection,
            "the client's budget is reached: its stream is stopped"
        );
        let message = "this client's budget_usd is spent: the stream was stopped";
        match self.stream.translator.as_mut() {
            Some(translator) => {
                translator.error_coded(message, "budget_exceeded", "rate_limit_error", out)
            }
            None => out.extend_from_slice(&match self.stream.format {
                StreamFormat::Anthropic => anthropic_stream_error(message, "rate_limit_error"),
                StreamFormat::Gemini => gemini_stream_error(message, 429, "RESOURCE_EXHAUSTED"),
                _ => openai_stream_error(message, "budget_exceeded"),
            }),
        }
        self.ended = true;
        self.pending = None;
        self.stream.body = UpstreamBody::Decoded(Box::pin(futures_util::stream::empty()));
    }

    /// One event for the client: its bytes, or its translation, with its encrypted items
    /// sealed when this stream seals.
    fn write(&mut self, event: &SseEvent, out: &mut BytesMut) {
        match self.stream.translator.as_mut() {
            Some(translator) => {
                let mut translated = BytesMut::new();
                translator.event(event, &mut translated);
                out.extend_from_slice(&self.sealed(&translated));
            }
            None => out.extend_from_slice(&self.sealed(&event.raw)),
        }
    }

    /// One whole event (or a buffered one) with its encrypted items sealed, when this stream
    /// seals.
    fn sealed<'a>(&self, event: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        match &self.stream.sealer {
            Some(sealer) => sealer.seal(event),
            None => std::borrow::Cow::Borrowed(event),
        }
    }

    /// Whole events for the client, with the try's keys masked.
    fn masked(&self, out: BytesMut) -> Bytes {
        let secrets = self.stream.echoes.exposed();
        match mask_exact(&out, &secrets) {
            std::borrow::Cow::Borrowed(_) => out.freeze(),
            std::borrow::Cow::Owned(masked) => Bytes::from(masked),
        }
    }

    /// A break after commit: one final error event in the client's protocol.
    fn fail(&mut self, class: OutcomeClass, message: &str) -> Option<Bytes> {
        self.failure = Some((class, message.to_string()));
        self.ended = true;
        if let Some(translator) = self.stream.translator.as_mut() {
            let mut out = BytesMut::new();
            translator.error(message, &mut out);
            return Some(out.freeze());
        }
        Some(match self.stream.format {
            StreamFormat::Anthropic => anthropic_stream_error(message, "api_error"),
            StreamFormat::Gemini => gemini_stream_error(message, 502, "UNAVAILABLE"),
            _ => openai_stream_error(message, "upstream_error"),
        })
    }

    /// The attempt's final result, once: usage counted, the break (if any) as its class.
    fn final_report(&mut self) -> Option<(Decision, AttemptResult)> {
        let mut decision = self.decision.take()?;
        let mut result = decision.take_stream_result()?;
        let mut charged = self.charged_now();
        if let Some((precharged, _)) = self.precharged {
            // A left stream's client was charged the estimate when it left: it pays the larger
            // of that and what the upstream reported after, and so does the connection.
            let counts = &mut charged.counts;
            charged.estimated |= precharged.tokens_in > counts.tokens_in
                || precharged.tokens_out > counts.tokens_out;
            counts.tokens_in = counts.tokens_in.max(precharged.tokens_in);
            counts.tokens_out = counts.tokens_out.max(precharged.tokens_out);
        }
        result.tokens_in = charged.counts.tokens_in;
        result.tokens_cached = charged.counts.tokens_cached;
        result.tokens_cache_write = charged.counts.tokens_cache_write;
        result.tokens_out = charged.counts.tokens_out;
        result.usage_estimated = charged.estimated;
        // telemetry: how the stream ended, for the attempt's span.
        let broke = self.failure.as_ref().map(|(class, _)| *class);
        self.stream.trace.stream_ended(broke, &self.stream.usage);
        match self.failure.take() {
            Some((class, message)) => {
                result.class = class;
                result.message = Some(message);
                result.after_first_content = true;
            }
            None => result.class = OutcomeClass::Success,
        }
        if let Some(counters) = &self.input_tokens {
            counters.record(
                result.tokens_in,
                result.tokens_cached,
                result.tokens_cache_write,
            );
        }
        if let (OutcomeClass::Success, Some(combo)) = (result.class, &self.charge.combo_affinity) {
            combo.served(result.tokens_in, result.tokens_cached);
        }
        // The client's usage, then its ticket (it counted in flight until now).
        if let Some(client_usage) = self.client_usage.take() {
            match self.precharged.take() {
                // The whole charge at once: a success's own event carries it.
                None => {
                    let record = if result.class == OutcomeClass::Success {
                        ChargeRecord::InRequestEvent
                    } else {
                        ChargeRecord::Separate
                    };
                    client_usage.record(&mut result, record);
                }
                Some((precharged, precharged_cost)) => {
                    // Only what goes beyond the estimate already charged.
                    let mut beyond = AttemptResult {
                        tokens_cached: result.tokens_cached.min(
                            result
                                .tokens_in
                                .saturating_sub(precharged.tokens_in)
                                .saturating_sub(result.tokens_cache_write),
                        ),
                        tokens_cache_write: 0,
                        usage_estimated: result.usage_estimated,
                        ..AttemptResult::success(
                            200,
                            result.tokens_in.saturating_sub(precharged.tokens_in),
                            result.tokens_out.saturating_sub(precharged.tokens_out),
                        )
                    };
                    client_usage.record(&mut beyond, ChargeRecord::Separate);
                    result.cost_usd = match (precharged_cost, beyond.cost_usd) {
                        (None, None) => None,
                        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
                    };
                }
            }
        }
        Some((decision, result))
    }

    /// What the stream is charged on what it read so far: the upstream's usage checked, or
    /// an estimate while its closing usage has not come.
    fn charged_now(&self) -> usage_charge::Charged {
        let usage = &self.stream.usage;
        usage_charge::charged(
            TokenCounts {
                tokens_in: usage.tokens_in,
                tokens_out: usage.tokens_out,
                tokens_cached: usage.tokens_cached,
                tokens_cache_write: usage.tokens_cache_write,
                flaws: usage.flaws,
            },
            usage.final_seen,
            self.charge.request_bytes,
            usage.content_bytes,
            self.charge.usage_max_tokens,
            &self.charge.connection,
        )
    }

    /// The client left before the usage came: its client is charged the estimate now, so that
    /// its very next request already sees the spend (its budget is not a race against the
    /// drain); the drain's report charges only what goes beyond it.
    fn precharge(&mut self) {
        let Some(client_usage) = &self.client_usage else {
            return;
        };
        let estimate = self.charged_now();
        let counts = estimate.counts;
        let mut result = AttemptResult {
            tokens_cached: counts.tokens_cached,
            tokens_cache_write: counts.tokens_cache_write,
            stream: true,
            usage_estimated: estimate.estimated,
            ..AttemptResult::success(200, counts.tokens_in, counts.tokens_out)
        };
        client_usage.record(&mut result, ChargeRecord::Separate);
        self.precharged = Some((counts, result.cost_usd));
    }

    /// Reports the ended stream; a break is applied before the client sees the stream end.
    async fn report_applied(&mut self) {
        if let Some((mut decision, result)) = self.final_report() {
            decision.report_applied(result).await;
        }
    }

    fn report(&mut self) {
        if let Some((mut decision, result)) = self.final_report() {
            decision.report(result);
        }
    }
}

impl Relay {
    /// This relay's stream and report, moved out to be read on after the client left (what
    /// stays behind reports nothing).
    fn take_for_drain(&mut self) -> Relay {
        let stream = CommittedStream {
            buffered: Vec::new(),
            body: std::mem::replace(
                &mut self.stream.body,
                UpstreamBody::Decoded(Box::pin(futures_util::stream::empty())),
            ),
            parser: std::mem::take(&mut self.stream.parser),
            usage: self.stream.usage,
            finished: self.stream.finished,
            format: self.stream.format,
            withhold_usage_only: self.stream.withhold_usage_only,
            idle: self.stream.idle,
            response_id: self.stream.response_id.take(),
            echoes: std::mem::take(&mut self.stream.echoes),
            trace: std::mem::take(&mut self.stream.trace),
            translator: self.stream.translator.take(),
            sealer: self.stream.sealer.take(),
        };
        Relay {
            stream,
            decision: self.decision.take(),
            deadline: self.deadline,
            failure: self.failure.take(),
            ended: self.ended,
            input_tokens: self.input_tokens.take(),
            client_usage: self.client_usage.take(),
            pending: None,
            charge: self.charge.clone(),
            precharged: self.precharged.take(),
            draining: true,
        }
    }

    /// Reads the upstream on for the usage the client did not wait for, then reports.
    async fn drain_then_report(mut self) {
        let sink = self
            .client_usage
            .as_ref()
            .filter(|sink| sink.watches_budget());
        let charge = &self.charge;
        let end = stream_drain::drain_for_usage(
            &mut self.stream.body,
            &mut self.stream.parser,
            self.stream.format,
            &mut self.stream.usage,
            self.charge.drain,
            |usage| sink.is_some_and(|sink| sink.budget_reached(&so_far(usage, charge))),
        )
        .await;
        tracing::debug!(
            connection = &*self.charge.connection,
            end = ?end,
            "read a left stream on for its usage"
        );
        self.report_applied().await;
    }
}

impl Drop for Relay {
    /// The client went away mid-stream: the upstream served, so the attempt counts as served,
    /// and is charged what it used — read on for (bounded) in the background, or estimated.
    fn drop(&mut self) {
        if self.decision.is_none() {
            return;
        }
        let runtime = tokio::runtime::Handle::try_current();
        match runtime {
            Ok(runtime)
                if !self.draining
                    && !self.ended
                    && !self.stream.usage.final_seen
                    && self.charge.drain.reads() =>
            {
                self.precharge();
                let left = self.take_for_drain();
                runtime.spawn(left.drain_then_report());
            }
            _ => self.report(),
        }
    }
}

/// What a stream has used so far (its usage read, or the estimate), for its client's budget.
fn so_far(usage: &StreamUsage, charge: &StreamCharge) -> TokenCounts {
    usage_charge::so_far(
        TokenCounts {
            tokens_in: usage.tokens_in,
            tokens_out: usage.tokens_out,
            tokens_cached: usage.tokens_cached,
            tokens_cache_write: usage.tokens_cache_write,
            flaws: usage.flaws,
        },
        charge.request_bytes,
        usage.content_bytes,
        charge.usage_max_tokens,
    )
}

/// The client's body for a committed stream.
pub fn relay_body(
    stream: CommittedStream,
    decision: Decision,
    deadline: Instant,
    input_tokens: Option<crate::node::metrics::InputTokenCounters>,
    client_usage: Option<crate::node::client_gate::StreamUsageSink>,
    charge: StreamCharge,
) -> axum::body::Body {
    let relay = Relay {
        charge,
        precharged: None,
        draining: false,
        input_tokens,
        client_usage,
        ended: stream.finished,
        stream,
        decision: Some(decision),
        deadline,
        failure: None,
        pending: None,
    };
    axum::body::Body::from_stream(futures_util::stream::unfold(
        relay,
        |mut relay| async move {
            relay
                .next_chunk()
                .await
                .map(|chunk| (Ok::<Bytes, std::io::Error>(chunk), relay))
        },
    ))
}

/// The upstream's next bytes if they are already there, or arrive once the tasks that are
/// ready have run; `None` otherwise. hyper's client hands a body over one frame at a time from
/// its connection task, so a frame already read from the socket is a few task switches away
/// (measured: two yields). Waiting that long lets a burst of events leave in one client write
/// instead of one write per event; it costs two task polls when nothing more has arrived.
async fn ready_data(body: &mut UpstreamBody) -> Option<Option<Result<Bytes, BodyError>>> {
    for _ in 0..READY_FRAME_YIELDS {
        if let Some(next) = body.ready_data() {
            return Some(next);
        }
        YieldOnce(false).await;
    }
    body.ready_data()
}

/// Lets the other ready tasks run once: wakes itself and returns `Pending` a single time.
/// Not `tokio::task::yield_now`, which parks the waker on the worker's defer list: under the
/// 1,000-stream soak that grew RSS with every stream (150 MB after 300k streams, against
/// 100 MB with this).
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// How long until `deadline`, for timeouts expressed as durations.
pub fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::config::Secret;

    const KEY: &str = "upstream-key-Zq81xKp0";

    fn echoes() -> Echoes {
        Echoes {
            current: None,
            previous: Some(Arc::new(Secret::new(KEY))),
        }
    }

    /// What the client reads when the upstream sends `chunks` (already-begun stream).
    async fn relayed(chunks: Vec<Bytes>, format: StreamFormat) -> String {
        let body = UpstreamBody::Decoded(Box::pin(futures_util::stream::iter(
            chunks.into_iter().map(Ok),
        )));
        let far = Instant::now() + Duration::from_secs(60);
        let timing = StreamTiming {
            first_event_by: far,
            idle: Duration::from_secs(60),
            deadline: far,
        };
        let StreamStart::Committed(stream) =
            open(body, format, false, timing, echoes(), None).await
        else {
            panic!("the stream did not commit");
        };
        let mut relay = Relay {
            input_tokens: None,
            client_usage: None,
            ended: stream.finished,
            stream: *stream,
            decision: None,
            deadline: far,
            failure: None,
            pending: None,
            charge: StreamCharge::none(),
            precharged: None,
            draining: false,
        };
        let mut out = Vec::new();
        while let Some(chunk) = relay.next_chunk().await {
            out.extend_from_slice(&chunk);
        }
        String::from_utf8(out).unwrap()
    }

    /// A Responses stream with no delta at all (Codex's inline compaction) that ends with
    /// `response.completed`: a complete answer, committed when the body ends, whatever the reads.
    #[tokio::test]
    async fn s3_a_responses_stream_without_deltas_that_completes_commits() {
        let events = [
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}\n\n",
            "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"compaction\",\"encrypted_content\":\"gAAAAAx\"}}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        ];
        let whole = events.concat();
        for chunks in [
            vec![whole.clone()],
            events.iter().map(|e| e.to_string()).collect(),
        ] {
            let out = relayed(
                chunks.into_iter().map(Bytes::from).collect(),
                StreamFormat::OpenAiResponses,
            )
            .await;
            assert_eq!(out, whole);
        }
        // Without its `response.completed` it is no answer: it fails over.
        let body = UpstreamBody::Decoded(Box::pin(futures_util::stream::iter([Ok(Bytes::from(
            events[..2].concat(),
        ))])));
        let far = Instant::now() + Duration::from_secs(60);
        let timing = StreamTiming {
            first_event_by: far,
            idle: Duration::from_secs(60),
            deadline: far,
        };
        let start = open(
            body,
            StreamFormat::OpenAiResponses,
            false,
            timing,
            echoes(),
            None,
        )
        .await;
        assert!(matches!(start, StreamStart::Failed { .. }));
    }

    /// The content that commits the stream (its first read), then the rest.
    fn openai_stream() -> (String, String) {
        (
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n".to_string(),
            format!("data: {{\"error\":{{\"message\":\"Incorrect API key provided: {KEY} and sk-proj-Abc123Def456Ghi789Jkl012\",\"type\":\"invalid_request_error\"}}}}\n\n"),
        )
    }

    fn anthropic_stream() -> (String, String) {
        (
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_1\",\"usage\":{{\"input_tokens\":3,\"output_tokens\":1}}}}}}\n\n\
             event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"hi\"}}}}\n\n".replace("{{", "{").replace("}}", "}"),
            format!("event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"key {KEY} is overloaded; sk-ant-api03-Abc123Def456Ghi789Jkl012\"}}}}\n\n"),
        )
    }

    fn assert_masked(out: &str, whole: &str) {
        assert!(!out.contains(KEY), "the key reached the client: {out}");
        assert!(
            !out.contains("Abc123Def456"),
            "a key-like word reached the client: {out}"
        );
        assert!(out.contains("hi"), "content was lost: {out}");
        // The error event is still one JSON document the client can read.
        let error_line = out
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .next_back()
            .unwrap();
        let parsed: serde_json::Value = serde_json::from_str(error_line).unwrap();
        assert!(parsed["error"]["message"].as_str().unwrap().contains("***"));
        assert!(out.len() < whole.len(), "nothing was masked");
    }

    /// A key in an error event after the stream began is masked wherever the upstream's reads
    /// split it: every byte boundary, both protocols.
    #[tokio::test]
    async fn s2_a_key_echoed_after_commit_is_masked_at_every_split() {
        for (format, (first, rest)) in [
            (StreamFormat::OpenAiChat, openai_stream()),
            (StreamFormat::Anthropic, anthropic_stream()),
        ] {
            let bytes = Bytes::from(rest.clone());
            for split in 1..bytes.len() {
                let chunks = vec![
                    Bytes::from(first.clone()),
                    bytes.slice(..split),
                    bytes.slice(split..),
                ];
                let out = relayed(chunks, format).await;
                assert_masked(&out, &(first.clone() + &rest));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The same with the stream cut into many reads at random places.
        #[test]
        fn s2_a_key_is_masked_however_the_reads_fall(cuts in proptest::collection::btree_set(1usize..400, 0..12)) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
            for (format, (first, rest)) in [
                (StreamFormat::OpenAiChat, openai_stream()),
                (StreamFormat::Anthropic, anthropic_stream()),
            ] {
                let whole = first.clone() + &rest;
                let bytes = Bytes::from(rest);
                let mut chunks = vec![Bytes::from(first)];
                let mut from = 0;
                for &cut in cuts.iter().filter(|&&cut| cut < bytes.len()) {
                    chunks.push(bytes.slice(from..cut));
                    from = cut;
                }
                chunks.push(bytes.slice(from..));
                let out = runtime.block_on(relayed(chunks, format));
                assert_masked(&out, &whole);
            }
        }
    }
}
