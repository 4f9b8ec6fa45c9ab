//! The one stream translator the relay drives: upstream SSE events in, read into the hub's
//! events by the target API's reader, written in the client's protocol by its writer, event
//! by event (behaviour §14). `ping` and events the client's protocol has no word for are
//! dropped; a break after commit becomes the client protocol's error event.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::BytesMut;

use super::chat::{read_stream::ChatReader, write_stream::ChatWriter};
use super::chunk_template::Learned;
use super::direction::{Api, Direction};
use super::gemini::framing::Framing;
use super::gemini::{read_stream::GeminiReader, write_stream::GeminiWriter};
use super::hub::form::Event;
use super::messages::{read_stream::MessagesReader, write_stream::MessagesWriter};
use super::responses::echo::Echo;
use super::responses::{read_stream::ResponsesReader, write_stream::ResponsesWriter};
use super::text_delta::{self, GeminiBase};
use crate::wire::sse::SseEvent;
use crate::wire::stream_format::StreamFormat;
use crate::wire::stream_watch::{GeminiTextSeen, Inspected};
use crate::wire::usage::gemini_whole_counts;

/// A Gemini stream relayed as it is (a Gemini client of a Gemini account): its chunks of text
/// alone (most) read for their usage through the stream's template, not parsed whole.
#[derive(Debug, Default)]
pub struct GeminiTextUsage {
    chunks: Learned<GeminiBase>,
}

impl GeminiTextUsage {
    /// A chunk of text alone's usage, as `stream_watch` reads a chunk's, and whether it ends
    /// the answer when its template knows; `None`: not such a chunk (the relay reads it as any
    /// other event). What [`StreamTranslator::gemini_text`] hands the relay of the same chunk.
    pub fn text_usage(&mut self, event: &SseEvent) -> Option<GeminiTextSeen> {
        if event.event.is_some() {
            return None;
        }
        let read = text_delta::gemini_text_learned(&event.data, &mut self.chunks)
            .filter(|read| !read.snake_usage)?;
        Some(GeminiTextSeen {
            usage: read.usage.and_then(|usage| {
                gemini_whole_counts(usage.prompt, usage.candidates, usage.thoughts, usage.cached)
            }),
            closes: self.chunks.read_base().map(|base| base.closes()),
        })
    }
}

/// Reads a target API's stream into the hub's events.
#[derive(Debug)]
enum Reader {
    Chat(ChatReader),
    Responses(ResponsesReader),
    Messages(MessagesReader),
    Gemini(GeminiReader),
}

/// Writes the hub's events in a client API's protocol.
#[derive(Debug)]
enum Writer {
    Chat(ChatWriter),
    Responses(Box<ResponsesWriter>),
    Messages(MessagesWriter),
    Gemini(Box<GeminiWriter>),
}

/// A stream's translation state, one per translated stream.
#[derive(Debug)]
pub struct StreamTranslator {
    reader: Reader,
    writer: Writer,
    /// The events one upstream event became (reused: cleared after each).
    events: Vec<Event>,
    /// A Messages client of a Gemini account: signatures go in their plain form for the node
    /// to seal.
    mark_signatures: bool,
    /// Text pieces of the open text block go from the reader to the writer borrowed, not as
    /// events (tests turn it off: `whole_values`).
    direct_text: bool,
    /// What the last [`StreamTranslator::event_counted`] or [`StreamTranslator::chat_text`]
    /// wrote is text pieces alone, with no member a sealer seals.
    wrote_text_alone: bool,
}

/// A text piece of the open text block, written as `writer` writes `Event::Text`. The piece
/// was read from a JSON string: a borrowed one is the string's own bytes, which hold no escape
/// (`chunk_template` and `json_scan` borrow only such a string, what `json_scan::plain`
/// finds, and serde only a string with no escape, which holds no control byte either), so a
/// Chat, Messages or Responses writer need not look for one.
#[expect(
    clippy::ptr_arg,
    reason = "whether the text is borrowed is what it reads"
)]
fn write_read_text(writer: &mut Writer, text: &Cow<'_, str>, out: &mut BytesMut) {
    let known_plain = matches!(text, Cow::Borrowed(_));
    match writer {
        Writer::Chat(w) if known_plain => w.text_known(text, true, out),
        // It looks for an escape itself.
        Writer::Chat(w) => w.text(text, out),
        Writer::Messages(w) => w.text_known(text, known_plain, out),
        Writer::Responses(w) => w.text_known(text, known_plain, out),
        Writer::Gemini(w) => w.text_known(text, known_plain, out),
    }
}

impl StreamTranslator {
    /// `include_usage`: a Chat Completions client asked for the usage chunk; `created`: the
    /// Unix time its chunks say.
    /// `echo`: what a Responses client's answer repeats from its request.
    pub fn new(direction: Direction, include_usage: bool, created: u64, echo: Arc<Echo>) -> Self {
        let reader = match direction.target {
            Api::Chat => Reader::Chat(ChatReader::default()),
            Api::Responses => Reader::Responses(ResponsesReader::default()),
            Api::Messages => Reader::Messages(MessagesReader::default()),
            // Gemini's signatures go only to a client that carries them sealed.
            Api::Gemini => Reader::Gemini(GeminiReader::new(
                super::carries_signatures(direction),
                created,
            )),
        };
        let writer = match direction.client {
            Api::Chat => Writer::Chat(ChatWriter::new(include_usage, created)),
            Api::Responses => Writer::Responses(Box::new(ResponsesWriter::new(created, echo))),
            Api::Messages => Writer::Messages(MessagesWriter::new()),
            Api::Gemini => Writer::Gemini(Box::new(GeminiWriter::new(Framing::Sse))),
        };
        StreamTranslator {
            reader,
            writer,
            events: Vec::new(),
            mark_signatures: direction == Direction::MESSAGES_TO_GEMINI,
            direct_text: true,
            wrote_text_alone: false,
        }
    }

    /// A Gemini client that asked without `?alt=sse`: its stream is one JSON array (call
    /// before the first event; other clients' streams are as they were).
    pub fn gemini_json_array(mut self) -> Self {
        if let Writer::Gemini(w) = &mut self.writer {
            w.set_framing(Framing::JsonArray);
        }
        self
    }

    fn write(&mut self, out: &mut BytesMut) {
        // Most upstream events (text pieces written directly) leave none.
        if self.events.is_empty() {
            return;
        }
        for mut event in self.events.drain(..) {
            if self.mark_signatures {
                if let Event::Signature(signature) = &mut event {
                    *signature = super::thinking_carry::marked_signature(signature);
                }
            }
            match &mut self.writer {
                Writer::Chat(w) => w.event(&event, out),
                Writer::Responses(w) => w.event(&event, out),
                Writer::Messages(w) => w.event(&event, out),
                Writer::Gemini(w) => w.event(&event, out),
            }
        }
    }

    /// One upstream event, translated into `out` (nothing for events with no counterpart).
    pub fn event(&mut self, event: &SseEvent, out: &mut BytesMut) {
        self.event_counted(event, out);
    }

    /// [`Self::event`]; when the event was a text piece read through the stream's template,
    /// the bytes of generated text the relay counts of it (`content_bytes::content_text_bytes`
    /// of the event, a stream of `format`), without searching it again.
    pub fn event_counted(&mut self, event: &SseEvent, out: &mut BytesMut) -> Option<usize> {
        self.wrote_text_alone = false;
        // A text piece of the open text block (most events) is written as it was read,
        // borrowed: no event is made of it.
        let text = match &mut self.reader {
            Reader::Chat(r) if self.direct_text => r.event_or_text(&event.data, &mut self.events),
            Reader::Chat(r) => {
                r.event(&event.data, &mut self.events);
                None
            }
            Reader::Responses(r) if self.direct_text => {
                r.event_or_text(event.event.as_deref(), &event.data, &mut self.events)
            }
            Reader::Responses(r) => {
                r.event(event.event.as_deref(), &event.data, &mut self.events);
                None
            }
            Reader::Messages(r) if self.direct_text => {
                r.event_or_text(&event.data, &mut self.events)
            }
            Reader::Messages(r) => {
                r.event(&event.data, &mut self.events);
                None
            }
            Reader::Gemini(r) => {
                r.event(&event.data, &mut self.events);
                None
            }
        };
        let before = out.len();
        self.write(out);
        let text = text?;
        let only_text = out.len() == before;
        write_read_text(&mut self.writer, &text, out);
        self.wrote_text_alone = only_text && self.text_holds_nothing_sealed();
        self.text_bytes()
    }

    /// Whether what the last [`Self::event_counted`] or [`Self::chat_text`] wrote is text
    /// pieces alone that hold no member any sealer seals (`"encrypted_content"`,
    /// `"signature"`, `"thoughtSignature"`): a text piece's event has none of its own, and its
    /// text is a JSON string, in which a quote is always escaped, so no member name can be
    /// found in it. Then sealing it would find nothing. False when it may hold one.
    pub fn wrote_text_alone(&self) -> bool {
        self.wrote_text_alone
    }

    /// Whether the text piece just written holds no sealed member: always, but for a Gemini
    /// chunk carrying a `thoughtSignature`.
    fn text_holds_nothing_sealed(&self) -> bool {
        match &self.writer {
            Writer::Gemini(w) => w.wrote_no_signature(),
            _ => true,
        }
    }

    /// The content bytes of the text piece the reader just read, when its template knows them.
    fn text_bytes(&self) -> Option<usize> {
        match &self.reader {
            Reader::Chat(r) => r.text_bytes(),
            Reader::Responses(r) => r.text_bytes(),
            Reader::Messages(r) => r.text_bytes(),
            Reader::Gemini(r) => r.text_bytes(),
        }
    }

    /// The protocol of the upstream stream the reader reads (its content bytes are counted as
    /// a stream of it).
    pub fn upstream_format(&self) -> StreamFormat {
        match &self.reader {
            Reader::Chat(_) => StreamFormat::OpenAiChat,
            Reader::Responses(_) => StreamFormat::OpenAiResponses,
            Reader::Messages(_) => StreamFormat::Anthropic,
            Reader::Gemini(_) => StreamFormat::Gemini,
        }
    }

    /// A Chat upstream's chunk of text alone (most of its chunks: `text_delta::chat_content`),
    /// read once for the client and for the relay: translated into `out`, and its content
    /// bytes when its template knows them (as [`Self::event_counted`]). It is content with no
    /// usage, as `stream_watch` reads such a chunk. `None`: not such a chunk (a named event,
    /// the first chunk, any other), or not a Chat upstream; nothing was read or written (the
    /// relay reads it as any other event).
    pub fn chat_text(&mut self, event: &SseEvent, out: &mut BytesMut) -> Option<Option<usize>> {
        self.wrote_text_alone = false;
        let Reader::Chat(reader) = &mut self.reader else {
            return None;
        };
        if event.event.is_some() || !self.direct_text {
            return None;
        }
        let text = reader.text_alone(&event.data, &mut self.events)?;
        let bytes = reader.text_bytes();
        let before = out.len();
        self.write(out);
        let only_text = out.len() == before;
        write_read_text(&mut self.writer, &text, out);
        self.wrote_text_alone = only_text && self.text_holds_nothing_sealed();
        Some(bytes)
    }

    /// A Responses upstream's event other than a text piece (a lifecycle event, named as
    /// they are), read once for the client and for the relay: translated into `out`, and what
    /// `stream_watch` reads of it (its meaning and usage: never content, an error or garbage).
    /// `None`: not such an event, one whose reading is left to `observe` (see
    /// `ResponsesReader::other_inspected`), or not a Responses upstream; nothing was read or
    /// written (the relay reads it as any other event).
    pub fn responses_inspected(
        &mut self,
        event: &SseEvent,
        out: &mut BytesMut,
    ) -> Option<Inspected> {
        self.responses_read_once(event, out, false)
            .map(|(inspected, _)| inspected)
    }

    /// [`Self::responses_inspected`] of a stream's `response.created`, with its response's id
    /// (`None`: none, or not a string), as a typed read of `{"response":{"id":…}}` reads it.
    pub fn responses_created(
        &mut self,
        event: &SseEvent,
        out: &mut BytesMut,
    ) -> Option<(Inspected, Option<String>)> {
        self.responses_read_once(event, out, true)
    }

    fn responses_read_once(
        &mut self,
        event: &SseEvent,
        out: &mut BytesMut,
        want_id: bool,
    ) -> Option<(Inspected, Option<String>)> {
        let Reader::Responses(reader) = &mut self.reader else {
            return None;
        };
        if !self.direct_text {
            return None;
        }
        let read = reader.other_inspected(
            event.event.as_deref(),
            &event.data,
            &mut self.events,
            want_id,
        )?;
        self.write(out);
        Some(read)
    }

    /// A Gemini upstream's chunk of text alone (most of its chunks), read once for the client
    /// and for the relay: translated into `out`, its usage as `stream_watch` reads a chunk's
    /// (with whether it ends the answer, when its template knows) and its content bytes when
    /// its template knows them (as [`Self::event_counted`]). `None`: not such a chunk, or not a
    /// Gemini upstream; nothing was read or written (the relay reads it as any other event).
    pub fn gemini_text(
        &mut self,
        event: &SseEvent,
        out: &mut BytesMut,
    ) -> Option<(GeminiTextSeen, Option<usize>)> {
        let Reader::Gemini(reader) = &mut self.reader else {
            return None;
        };
        // A named event (`error`) or a chunk the reader would not take as text is declined.
        if event.event.is_some() || !reader.takes_text() {
            return None;
        }
        let read = reader
            .read_text(&event.data)
            .filter(|read| !read.snake_usage)?;
        let bytes = reader.text_bytes();
        let seen = GeminiTextSeen {
            usage: read.usage.and_then(|usage| {
                gemini_whole_counts(usage.prompt, usage.candidates, usage.thoughts, usage.cached)
            }),
            closes: reader.text_closes(),
        };
        // In the open text block its texts are written as they were read, borrowed.
        let writer = &mut self.writer;
        let read = match self.direct_text {
            true => reader.text_in_open_block(read, |text| write_read_text(writer, text, out)),
            false => Some(read),
        };
        if let Some(read) = read {
            reader.text_chunk(read, &mut self.events);
            self.write(out);
        }
        Some((seen, bytes))
    }

    /// Tests: a reader's events other than text pieces read as whole `Value`s, and a writer's
    /// built as `Value`s, as before their fast reads and direct writes.
    #[cfg(test)]
    pub(super) fn whole_values(mut self) -> Self {
        if let Reader::Responses(r) = &mut self.reader {
            r.whole_values.set(true);
        }
        match &mut self.reader {
            Reader::Messages(r) => r.whole_values.set(true),
            Reader::Chat(r) => r.whole_values.set(true),
            Reader::Gemini(r) => r.whole_values.set(true),
            Reader::Responses(_) => {}
        }
        match &mut self.writer {
            Writer::Responses(w) => w.whole_values.set(true),
            Writer::Chat(w) => w.whole_values.set(true),
            Writer::Messages(w) => w.whole_values.set(true),
            Writer::Gemini(w) => w.whole_values.set(true),
        }
        self.direct_text = false;
        self
    }

    /// The upstream's stream ended.
    pub fn finish(&mut self, out: &mut BytesMut) {
        match &mut self.reader {
            Reader::Chat(r) => r.finish(&mut self.events),
            Reader::Responses(r) => r.finish(&mut self.events),
            Reader::Messages(r) => r.finish(&mut self.events),
            Reader::Gemini(r) => r.finish(&mut self.events),
        }
        self.write(out);
    }

    /// A break after commit as the client protocol's final error event.
    pub fn error(&mut self, message: &str, out: &mut BytesMut) {
        self.error_coded(message, "upstream_error", "api_error", out);
    }

    /// The client protocol's final error event with OpenAI's `code` or Anthropic's
    /// `error_type` (a stream the router stopped: `budget_exceeded`, `rate_limit_error`).
    pub fn error_coded(&mut self, message: &str, code: &str, error_type: &str, out: &mut BytesMut) {
        match &mut self.writer {
            Writer::Chat(w) => w.error(message, code, out),
            Writer::Responses(w) => w.error(message, code, out),
            Writer::Messages(w) => w.error(message, error_type, out),
            Writer::Gemini(w) => w.error(message, code, out),
        }
    }
}
