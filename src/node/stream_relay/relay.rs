//! The relay of a committed stream: polled by the client's response body, it reads the
//! upstream's events, counts their usage, seals and translates them, masks the try's keys, and
//! ends with one error event on a break or a spent budget. Charging and reporting are `report`.

use bytes::{Bytes, BytesMut};
use quotaroute_actors::policy::classify::{
    failure_class, AttemptFailure, BodyFailure, TransportFailure,
};
use quotaroute_actors::Decision;
use quotaroute_journal::OutcomeClass;
use tokio::time::Instant;

use crate::node::lazy_deadline::read_by;
use crate::upstream::body::{BodyError, UpstreamBody};
use crate::wire::item_seal::ItemSealer;
use crate::wire::sse::SseEvent;
use crate::wire::stream_error::{anthropic_stream_error, gemini_stream_error, openai_stream_error};
use crate::wire::stream_watch::{EventMeaning, StreamFormat};
use crate::wire::translate::StreamTranslator;
use crate::wire::upstream_mask::{mask_found, mask_sse_event};
use crate::wire::usage::TokenCounts;

use super::charge::{so_far, StreamCharge};
use super::open::{counted_as_content, CommittedStream};
use super::schedule::COALESCE_BYTES;

/// A committed stream being relayed: polled by the client's response body itself (no task, no
/// channel), one chunk per upstream frame. Reports the attempt when the stream ends — or, if the
/// client goes away first, after reading the upstream on for its usage (`stream_drain`).
pub(super) struct Relay {
    pub(super) stream: CommittedStream,
    pub(super) decision: Option<Decision>,
    pub(super) deadline: Instant,
    pub(super) failure: Option<(OutcomeClass, String)>,
    pub(super) ended: bool,
    /// The connection's input-token counters, bumped when the stream ends.
    pub(super) input_tokens: Option<crate::node::metrics::InputTokenCounters>,
    /// Counts the stream's usage against its client when it ends; holds the client's ticket.
    pub(super) client_usage: Option<crate::node::client_gate::StreamUsageSink>,
    /// The end or an error, seen while gathering a burst; handled on the next call.
    pub(super) pending: Option<Option<Result<Bytes, BodyError>>>,
    pub(super) charge: StreamCharge,
    /// What the client was charged when it left (and its price), before the drain's report.
    pub(super) precharged: Option<(TokenCounts, Option<f64>)>,
    /// Being read on after the client left: if this is dropped too (the runtime stops), it
    /// reports what it has at once.
    pub(super) draining: bool,
}

impl Relay {
    /// The next bytes for the client; `None` once the stream is over (and reported).
    pub(super) async fn next_chunk(&mut self) -> Option<Bytes> {
        if !self.stream.buffered.is_empty() {
            let len = self.stream.buffered.iter().map(Bytes::len).sum();
            let mut first = BytesMut::with_capacity(len);
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
                    let (deadline, idle) = (self.deadline, self.stream.idle);
                    let by = || deadline.min(Instant::now() + idle);
                    match read_by(by, self.stream.body.next_data()).await {
                        Err(_) if Instant::now() >= deadline => {
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
                        if let Err(error) = self.stream.parser.feed_bytes(data, &mut events) {
                            return self.fail(
                                failure_class(AttemptFailure::Body(BodyFailure::UnreadableEvents)),
                                &format!("unreadable event stream: {error}"),
                            );
                        }
                        if fed >= COALESCE_BYTES {
                            break;
                        }
                        // What already arrived, without a yield: a driven HTTP/1.1 body polls
                        // its connection itself, and a client connection's yield is polled again
                        // in place (`node::self_wake`), so a yield would let nothing else run.
                        match self.stream.body.ready_data() {
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
        if self.stream.translator.is_some() {
            // What the events' translations will take, about (a translated event is rarely
            // more than twice its upstream bytes): one allocation where each written piece
            // would grow `out` (and each growth is a reallocation).
            let upstream: usize = events.iter().map(|event| event.raw.len()).sum();
            out.reserve(2 * upstream + 256);
        }
        for event in events.drain(..) {
            if self.gemini_text(&event, out)
                || self.chat_text(&event, out)
                || self.named_delta(&event, out)
            {
                if watches_budget && self.budget_reached() {
                    self.stop_at_budget(out);
                    return;
                }
                continue;
            }
            if counted_as_content(
                self.stream.format,
                self.stream.translator.is_some(),
                &mut self.stream.chat_text,
                &mut self.stream.usage,
                &event,
            ) {
                self.write(&event, out);
                // Checked after content only: a usage or closing event is always read.
                if watches_budget && self.budget_reached() {
                    self.stop_at_budget(out);
                    return;
                }
                continue;
            }
            if self.responses_inspected(&event, out) {
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

    /// A Gemini upstream's chunk of text alone, read once (by the translator, or for its usage
    /// alone when relayed as it is) for the client and for its usage, as `observe` and `write`
    /// would: true when it was (and is in `out`).
    fn gemini_text(&mut self, event: &SseEvent, out: &mut BytesMut) -> bool {
        if self.stream.format != StreamFormat::Gemini {
            return false;
        }
        let start = out.len();
        let read = match self.stream.translator.as_mut() {
            Some(translator) => translator.gemini_text(event, out),
            None => {
                let seen = self.stream.gemini_text.text_usage(event);
                if seen.is_some() {
                    out.extend_from_slice(&event.raw);
                }
                seen.map(|seen| (seen, None))
            }
        };
        seal_tail(self.stream.sealer.as_ref(), out, start);
        let Some((seen, bytes)) = read else {
            return false;
        };
        self.stream.usage.observe_gemini_text(event, seen);
        self.count_content(event, bytes);
        true
    }

    /// Counts `event`'s generated text: `bytes` when its reader knew them, else searched.
    fn count_content(&mut self, event: &SseEvent, bytes: Option<usize>) {
        match bytes {
            Some(bytes) => self.stream.usage.count_content_bytes(bytes),
            None => self.stream.usage.count_content(self.stream.format, event),
        }
    }

    /// A translated Anthropic or Responses upstream's event that cannot matter after commit
    /// (`matters_after_commit` tells it by its name alone: a delta), taken as
    /// `counted_as_content` takes it (content, counted) and translated once: its text bytes
    /// from the translator when it read a text piece through its template, else searched.
    /// True when it was (and is in `out`).
    fn named_delta(&mut self, event: &SseEvent, out: &mut BytesMut) -> bool {
        let format = self.stream.format;
        if !matches!(
            format,
            StreamFormat::Anthropic | StreamFormat::OpenAiResponses
        ) {
            return false;
        }
        let Some(translator) = self.stream.translator.as_mut() else {
            return false;
        };
        // The name check `counted_as_content` makes first (a delta cannot matter).
        let matters = crate::wire::stream_watch::matters_after_commit(format, event);
        if translator.upstream_format() != format || matters {
            return false;
        }
        let start = out.len();
        let bytes = translator.event_counted(event, out);
        seal_read(self.stream.sealer.as_ref(), translator, out, start);
        self.count_content(event, bytes);
        true
    }

    /// A translated Responses upstream's lifecycle event that matters after commit
    /// (`response.completed` …), read once by the translator for the client and for what
    /// `observe` reads of it (its usage, the end), as `observe` and `write` take it: true when
    /// it was (and is in `out`). It is never content, an error or garbage: those, and whatever
    /// else its read declines, are left to `observe`.
    fn responses_inspected(&mut self, event: &SseEvent, out: &mut BytesMut) -> bool {
        let format = StreamFormat::OpenAiResponses;
        let Some(inspected) =
            self.read_translated(format, event, out, StreamTranslator::responses_inspected)
        else {
            return false;
        };
        self.stream
            .usage
            .observe_inspected(format, event, inspected);
        true
    }

    /// A Chat upstream's chunk of text alone, read once by the translator for the client and
    /// taken as content with no usage (what `observe` reads of it), as the relay takes an event
    /// that does not matter after commit: true when it was (and is in `out`).
    fn chat_text(&mut self, event: &SseEvent, out: &mut BytesMut) -> bool {
        if self.stream.format != StreamFormat::OpenAiChat {
            return false;
        }
        let Some(translator) = self.stream.translator.as_mut() else {
            return false;
        };
        let start = out.len();
        let Some(bytes) = translator.chat_text(event, out) else {
            return false;
        };
        seal_read(self.stream.sealer.as_ref(), translator, out, start);
        self.count_content(event, bytes);
        true
    }

    /// `read` of `event` by the stream's translator, when the stream is translated from an
    /// upstream speaking `format`, with what it wrote into `out` sealed (when this stream
    /// seals). `None`: not such a stream, or `read` declined the event and wrote nothing.
    fn read_translated<T>(
        &mut self,
        format: StreamFormat,
        event: &SseEvent,
        out: &mut BytesMut,
        read: impl FnOnce(&mut StreamTranslator, &SseEvent, &mut BytesMut) -> Option<T>,
    ) -> Option<T> {
        if self.stream.format != format {
            return None;
        }
        let translator = self.stream.translator.as_mut()?;
        let start = out.len();
        let read = read(translator, event, out)?;
        seal_tail(self.stream.sealer.as_ref(), out, start);
        Some(read)
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
            // Translated straight into `out`, then sealed there.
            Some(translator) => {
                let start = out.len();
                translator.event(event, out);
                seal_tail(self.stream.sealer.as_ref(), out, start);
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

    /// Whole events for the client, with the try's keys masked (and watched for the answer
    /// to keep, when it is kept).
    fn masked(&mut self, out: BytesMut) -> Bytes {
        let out = match mask_found(&out, &self.stream.echoes.searches()) {
            std::borrow::Cow::Borrowed(_) => out.freeze(),
            std::borrow::Cow::Owned(masked) => Bytes::from(masked),
        };
        if let Some(keeper) = self.stream.keeper.as_mut() {
            keeper.watch(&out);
        }
        out
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
}

/// What `out` holds from `start` (one upstream event's translation, whole events) with its
/// encrypted items sealed, when this stream seals: in place, without a buffer of its own for
/// the events that hold none (most).
fn seal_tail(sealer: Option<&ItemSealer>, out: &mut BytesMut, start: usize) {
    let Some(sealer) = sealer else {
        return;
    };
    if let std::borrow::Cow::Owned(sealed) = sealer.seal(&out[start..]) {
        out.truncate(start);
        out.extend_from_slice(&sealed);
    }
}

/// [`seal_tail`] of what `translator`'s last read wrote, unless it wrote text pieces alone,
/// which hold nothing a sealer seals (most of a stream: `StreamTranslator::wrote_text_alone`).
fn seal_read(
    sealer: Option<&ItemSealer>,
    translator: &StreamTranslator,
    out: &mut BytesMut,
    start: usize,
) {
    if !translator.wrote_text_alone() {
        seal_tail(sealer, out, start);
    }
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
    // Boxed: the relay's state moves into each chunk's future and back out of it, a pointer
    // rather than the whole relay (its parser, usage, translator) each time.
    axum::body::Body::from_stream(futures_util::stream::unfold(
        Box::new(relay),
        |mut relay| async move {
            relay
                .next_chunk()
                .await
                .map(|chunk| (Ok::<Bytes, std::io::Error>(chunk), relay))
        },
    ))
}
