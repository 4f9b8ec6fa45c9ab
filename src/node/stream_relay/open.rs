//! The opening of a stream: its events read and held until the first content commits it, or
//! its failure before any content, which fails over cleanly (behaviour §3). Relays nothing.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use quotaroute_actors::policy::classify::{
    failure_class, AttemptFailure, BodyFailure, TransportFailure,
};
use quotaroute_journal::OutcomeClass;
use tokio::time::Instant;

use crate::credentials::Echoes;
use crate::node::lazy_deadline::read_by;
use crate::telemetry::AttemptSpan;
use crate::upstream::body::{BodyError, UpstreamBody};
use crate::wire::item_seal::ItemSealer;
use crate::wire::sse::{SseEvent, SseParser};
use crate::wire::stream_watch::{matters_after_commit, EventMeaning, StreamFormat, StreamUsage};
use crate::wire::translate::{ChatTextWatch, GeminiTextUsage, StreamTranslator};

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
    pub(super) body: UpstreamBody,
    pub(super) parser: SseParser,
    pub usage: StreamUsage,
    /// The upstream already ended (a short stream that finished before we committed).
    pub(super) finished: bool,
    pub(super) format: StreamFormat,
    pub(super) withhold_usage_only: bool,
    /// `stream_idle_timeout_ms`: the longest silence after commit too.
    pub(super) idle: Duration,
    /// The id of the stored response a Responses stream announced (`response.created`).
    pub response_id: Option<String>,
    /// The keys this try sent upstream, masked out of everything relayed.
    pub(super) echoes: Echoes,
    /// telemetry: the attempt's span, which ends when the relay does.
    pub trace: AttemptSpan,
    /// Writes the upstream's events in the client's protocol when the target speaks the other
    /// format (behaviour §14); `None`: relayed byte for byte.
    pub(super) translator: Option<StreamTranslator>,
    /// Seals the encrypted items a Responses stream hands out (behaviour §10) with the
    /// connection that made them; `None`: events go byte for byte.
    pub sealer: Option<ItemSealer>,
    /// Keeps a translated Responses stream's answer (`[responses] store = true`, behaviour
    /// §14) from the events the client is given; `None`: not kept.
    pub keeper: Option<crate::node::kept_responses::StreamKeeper>,
    /// A Gemini stream relayed as it is: its text chunks' usage, read through their template.
    pub(super) gemini_text: GeminiTextUsage,
    /// A Chat stream relayed as it is: its chunks of text alone, known through their template.
    pub(super) chat_text: ChatTextWatch,
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

/// After the stream's first content, whether `event` can only be more of it (its generated
/// text then counted into `usage`); `false`: it may mean more (usage, an error, the end) and
/// is read whole. A Chat stream relayed as it is knows its chunks of text alone through their
/// template (`chat_text`); any other event is searched for what could make it matter.
pub(super) fn counted_as_content(
    format: StreamFormat,
    translated: bool,
    chat_text: &mut ChatTextWatch,
    usage: &mut StreamUsage,
    event: &SseEvent,
) -> bool {
    let relayed_chat = format == StreamFormat::OpenAiChat && !translated;
    if relayed_chat {
        if let Some(bytes) = chat_text.text_bytes(event) {
            usage.count_content_bytes(bytes);
            return true;
        }
    }
    if matters_after_commit(format, event) {
        return false;
    }
    match relayed_chat.then(|| chat_text.learn(event)).flatten() {
        Some(bytes) => usage.count_content_bytes(bytes),
        None => usage.count_content(format, event),
    }
    true
}

/// A translated Responses upstream's lifecycle event read once by the translator: what
/// `observe` would read of it (recorded in `usage`), what the client gets of it (as
/// `client_bytes`), and when `created` the id [`created_response_id`] reads of it. `None`:
/// left to `observe`, `client_bytes` and `created_response_id`, nothing read. Never content,
/// an error or garbage (see `StreamTranslator::responses_inspected`).
fn inspected(
    format: StreamFormat,
    translator: &mut Option<StreamTranslator>,
    usage: &mut StreamUsage,
    event: &SseEvent,
    created: bool,
) -> Option<(EventMeaning, Option<Bytes>, Option<String>)> {
    if format != StreamFormat::OpenAiResponses {
        return None;
    }
    let translator = translator.as_mut()?;
    let mut out = BytesMut::with_capacity(2 * event.raw.len() + 256);
    let (inspected, id) = match created {
        true => translator.responses_created(event, &mut out)?,
        false => (translator.responses_inspected(event, &mut out)?, None),
    };
    let meaning = usage.observe_inspected(format, event, inspected);
    Some((meaning, (!out.is_empty()).then(|| out.freeze()), id))
}

/// What the client gets of `event`: its own bytes, or its translation (possibly nothing).
fn client_bytes(translator: &mut Option<StreamTranslator>, event: SseEvent) -> Option<Bytes> {
    match translator {
        None => Some(event.raw),
        Some(translator) => {
            // One allocation where each written piece would grow `out` (a translated event
            // is rarely more than twice its upstream bytes).
            let mut out = BytesMut::with_capacity(2 * event.raw.len() + 256);
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
        chat_text: ChatTextWatch::default(),
    };
    let mut last_activity = Instant::now();
    loop {
        let (wait_until, why) = timing.next_wait(opening.begun, last_activity);
        let data = match read_by(|| wait_until, body.next_data()).await {
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
        match opening.read(data) {
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
    /// A Chat stream's template of its text chunks, learnt here and kept by the relay.
    chat_text: ChatTextWatch,
}

impl Opening {
    /// Feeds `data`: true once content arrived (commit), the start's failure on an error event
    /// or unreadable bytes.
    fn read(&mut self, data: Bytes) -> Result<bool, StreamStart> {
        let format = self.format;
        if let Err(error) = self.parser.feed_bytes(data, &mut self.events) {
            return Err(StreamStart::failed(
                AttemptFailure::Body(BodyFailure::UnreadableEvents),
                format!("unreadable event stream: {error}"),
            ));
        }
        let mut committed = false;
        for event in self.events.drain(..) {
            // The rest of a burst after its first content is read as the relay reads it.
            if committed
                && counted_as_content(
                    format,
                    self.translator.is_some(),
                    &mut self.chat_text,
                    &mut self.usage,
                    &event,
                )
            {
                self.buffered
                    .extend(client_bytes(&mut self.translator, event));
                continue;
            }
            self.begun |= event.event.is_some() || !event.data.is_empty();
            let created = format == StreamFormat::OpenAiResponses
                && self.response_id.is_none()
                && names_created(&event);
            // A translated Responses lifecycle event is read once, for its meaning, the client
            // (its translation then already made) and the id a `response.created` announces.
            let read_once = inspected(
                format,
                &mut self.translator,
                &mut self.usage,
                &event,
                created,
            );
            let (meaning, translated) = match read_once {
                Some((meaning, bytes, id)) => {
                    if created {
                        self.response_id = id;
                    }
                    (meaning, Some(bytes))
                }
                None => {
                    if created {
                        self.response_id = created_response_id(&event);
                    }
                    (self.usage.observe(format, &event), None)
                }
            };
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
                _ => match translated {
                    Some(bytes) => self.buffered.extend(bytes),
                    None => self
                        .buffered
                        .extend(client_bytes(&mut self.translator, event)),
                },
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
            keeper: None,
            gemini_text: GeminiTextUsage::default(),
            chat_text: self.chat_text,
        }))
    }
}

/// Whether `event` may be a Responses stream's `response.created` (by its name, or a mention
/// of it): the events [`created_response_id`] reads.
pub(super) fn names_created(event: &SseEvent) -> bool {
    event.event.as_deref() == Some("response.created")
        || event.data.contains("\"response.created\"")
}

/// The response id a Responses stream's `response.created` event carries.
pub(super) fn created_response_id(event: &SseEvent) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Created {
        response: Option<CreatedResponse>,
    }
    #[derive(serde::Deserialize)]
    struct CreatedResponse {
        id: Option<String>,
    }
    if !names_created(event) {
        return None;
    }
    let created: Created = serde_json::from_str(&event.data).ok()?;
    created.response?.id
}
