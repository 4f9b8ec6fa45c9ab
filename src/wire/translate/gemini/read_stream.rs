//! A Gemini stream (`alt=sse`: each event a whole `GenerateContentResponse`) into the hub's
//! events, chunk by chunk. Thoughts, text and calls become blocks; a call comes whole in one
//! chunk (Gemini never splits its arguments), so it is one block with its arguments in one
//! piece and its made id (`call_ids`). Gemini has no end event: a chunk with a `finishReason`
//! (or a blocked prompt) ends the answer when the upstream's stream ends. State: the open
//! block, the calls so far, the finish and the last usage (every chunk carries the counts so
//! far). Google Search grounding comes on the candidate (each `groundingMetadata` holds all so
//! far): the last one is kept, and at the end its supports become citations of the open text
//! block and its queries searches. The open text block's text is held for that (bounded:
//! `held_text`).

use std::borrow::Cow;

use serde_json::Value;

use super::call_ids;
use super::grounding;
use super::read::{finish, prompt_blocked, usage, usage_of_counts};
use super::{array_of, at, str_of};
use crate::wire::translate::chunk_template::Learned;
use crate::wire::translate::held_text::HeldText;
use crate::wire::translate::hub::form::{Citation, Event, Finish, Usage};
use crate::wire::translate::text_delta;
use crate::wire::translate::whole_values::WholeValues;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

#[derive(Debug, Default)]
pub struct GeminiReader {
    /// The client carries thought signatures sealed (a Responses client).
    signatures: bool,
    /// The Unix time the client's answer says (tells calls apart without a `responseId`).
    created: u64,
    started: bool,
    response_id: String,
    open: Option<Open>,
    calls: usize,
    finish: Option<Finish>,
    usage: Option<Usage>,
    /// The text's bytes so far (all text parts), where the open text block began, its text.
    text_bytes: usize,
    block_base: usize,
    held: HeldText,
    /// The last `groundingMetadata`.
    grounding: Option<Value>,
    done: bool,
    /// The stream's text chunks, as the last one read.
    chunks: Learned<text_delta::GeminiBase>,
    /// Tests: every chunk read as a whole `Value` in [`event`](Self::event).
    pub whole_values: WholeValues,
}

impl GeminiReader {
    pub fn new(signatures: bool, created: u64) -> Self {
        GeminiReader {
            signatures,
            created,
            ..GeminiReader::default()
        }
    }

    fn close(&mut self, events: &mut Vec<Event>) {
        if self.open.take().is_some() {
            events.push(Event::BlockStop);
        }
    }

    fn ensure(&mut self, want: Open, events: &mut Vec<Event>) {
        if self.open == Some(want) {
            return;
        }
        self.close(events);
        events.push(match want {
            Open::Text => Event::TextStart,
            Open::Thinking => Event::ThinkingStart,
        });
        self.open = Some(want);
    }

    /// A signature for the part after it, as a thinking block of its own.
    fn signature_block(&mut self, signature: &str, events: &mut Vec<Event>) {
        self.close(events);
        events.push(Event::ThinkingStart);
        events.push(Event::Signature(signature.to_string()));
        events.push(Event::BlockStop);
    }

    pub fn event(&mut self, data: &str, events: &mut Vec<Event>) {
        if self.done {
            return;
        }
        // A chunk of text alone (most chunks, the first too), as below reads it.
        if self.whole_values.fast() {
            if self.started {
                if let Some(read) = self.read_text(data) {
                    self.text_chunk(read, events);
                    return;
                }
            } else if let Some((read, start)) =
                text_delta::gemini_first_text(data, &mut self.chunks)
            {
                let model = start
                    .model
                    .map_or(Value::Null, |model| Value::String(model.into_owned()));
                self.start(start.id.as_deref().unwrap_or(""), model, events);
                self.text_chunk(read, events);
                return;
            }
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if let Some(error) = chunk.get("error") {
            self.done = true;
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("upstream error");
            let kind = match str_of(error, "status") {
                "" => "api_error",
                status => status,
            };
            events.push(Event::Error {
                message: message.to_string(),
                kind: kind.to_string(),
            });
            return;
        }
        if !self.started {
            let model = at(&chunk, "modelVersion").cloned().unwrap_or(Value::Null);
            self.start(str_of(&chunk, "responseId"), model, events);
        }
        if let Some(found) = at(&chunk, "usageMetadata").filter(|u| u.is_object()) {
            self.usage = Some(usage(found));
        }
        if prompt_blocked(&chunk) {
            self.finish = Some(Finish::ContentFilter);
        }
        let Some(candidate) = array_of(&chunk, "candidates").first() else {
            return;
        };
        if let Some(grounding) = at(candidate, "groundingMetadata").filter(|g| g.is_object()) {
            self.grounding = Some(grounding.clone());
        }
        let content = at(candidate, "content").unwrap_or(&Value::Null);
        for part in array_of(content, "parts") {
            self.part(part, events);
        }
        self.finish_reason(Some(str_of(candidate, "finishReason")));
    }

    /// The first chunk starts the answer: its `responseId` (tells calls apart) and model.
    fn start(&mut self, id: &str, model: Value, events: &mut Vec<Event>) {
        self.started = true;
        self.response_id = id.to_string();
        events.push(Event::Start {
            id: self.response_id.clone(),
            model,
            usage: None,
        });
    }

    /// Whether a chunk of text alone may be read by [`text_chunk`](Self::text_chunk): after
    /// the first chunk, before the end.
    pub fn takes_text(&self) -> bool {
        self.started && !self.done
    }

    /// `data` read as a chunk of text alone (`text_delta::gemini_text`), through the stream's
    /// template.
    pub fn read_text<'a>(&mut self, data: &'a str) -> Option<text_delta::GeminiText<'a>> {
        text_delta::gemini_text_learned(data, &mut self.chunks)
    }

    /// The bytes of generated text the relay counts of the text piece just read (what
    /// `content_bytes::content_text_bytes` finds in it), when its template knows them.
    pub fn text_bytes(&self) -> Option<usize> {
        self.chunks.content_bytes()
    }

    /// Whether the text piece just read ends the answer as the relay's search tells it, when
    /// it was read through the stream's template (its template's answer).
    pub fn text_closes(&self) -> Option<bool> {
        self.chunks.read_base().map(|base| base.closes())
    }

    /// A chunk of text alone (`text_delta::gemini_text`'s reading of it), as [`event`]
    /// reads the same chunk as a `Value`.
    ///
    /// [`event`]: Self::event
    pub fn text_chunk(&mut self, read: text_delta::GeminiText<'_>, events: &mut Vec<Event>) {
        if let Some(counts) = read.usage {
            self.usage = Some(usage_of_counts(counts));
        }
        for text in read.texts {
            self.text(&text, events);
        }
        self.finish_reason(read.finish.as_deref());
    }

    /// A candidate's `finishReason`, as [`event`](Self::event) reads it (after its parts).
    fn finish_reason(&mut self, reason: Option<&str>) {
        let reason = reason.unwrap_or("");
        if !reason.is_empty() && reason != "FINISH_REASON_UNSPECIFIED" {
            self.finish = Some(finish(reason, self.calls > 0));
        }
    }

    /// [`Self::text_chunk`] when the open block is text (its texts are then its only events):
    /// each text's bookkeeping done and the text handed to `write`, borrowed, instead of
    /// pushed as an event. Otherwise `read` is given back untouched.
    pub fn text_in_open_block<'a>(
        &mut self,
        read: text_delta::GeminiText<'a>,
        mut write: impl FnMut(&Cow<'a, str>),
    ) -> Option<text_delta::GeminiText<'a>> {
        if self.open != Some(Open::Text) {
            return Some(read);
        }
        if let Some(counts) = read.usage {
            self.usage = Some(usage_of_counts(counts));
        }
        for text in read.texts.iter() {
            self.text_bytes += text.len();
            self.held.push(text);
            write(text);
        }
        self.finish_reason(read.finish.as_deref());
        None
    }

    fn part(&mut self, part: &Value, events: &mut Vec<Event>) {
        let signature = match str_of(part, "thoughtSignature") {
            s if self.signatures && !s.is_empty() => Some(s),
            _ => None,
        };
        let text = at(part, "text").and_then(Value::as_str).unwrap_or("");
        if at(part, "thought").and_then(Value::as_bool) == Some(true) {
            self.ensure(Open::Thinking, events);
            if !text.is_empty() {
                events.push(Event::Thinking(text.to_string()));
            }
            if let Some(signature) = signature {
                events.push(Event::Signature(signature.to_string()));
            }
            return;
        }
        if let Some(signature) = signature {
            self.signature_block(signature, events);
        }
        if let Some(call) = at(part, "functionCall") {
            self.close(events);
            let id = match str_of(call, "id") {
                "" => call_ids::answer_call(&self.response_id, self.created, self.calls),
                given => given.to_string(),
            };
            self.calls += 1;
            events.push(Event::ToolStart {
                id,
                name: str_of(call, "name").to_string(),
            });
            let arguments = at(call, "args")
                .filter(|a| !a.is_null())
                .map_or_else(|| "{}".to_string(), Value::to_string);
            events.push(Event::ToolArguments(arguments));
            events.push(Event::BlockStop);
        } else if !text.is_empty() {
            self.text(text, events);
        }
    }

    /// A text part's text.
    fn text(&mut self, text: &str, events: &mut Vec<Event>) {
        if self.open != Some(Open::Text) {
            self.block_base = self.text_bytes;
            self.held.clear();
        }
        self.ensure(Open::Text, events);
        self.text_bytes += text.len();
        self.held.push(text);
        events.push(Event::Text(text.to_string()));
    }

    /// A support of the open text block as its citation.
    fn citation(&self, support: grounding::Support) -> Option<Event> {
        let start = support.start.checked_sub(self.block_base)?;
        let end = support
            .end
            .checked_sub(self.block_base)?
            .min(self.held.bytes());
        Some(Event::Citation(Citation {
            part: 0,
            start: self.held.char_at_byte(start)?,
            end: self.held.char_at_byte(end.max(start))?,
            url: support.url,
            title: support.title,
            cited_text: Some(support.text).filter(|text| !text.is_empty()),
        }))
    }

    /// The upstream ended: an answer that finished (a `finishReason` came) gets its closing
    /// events; one that did not is not ended here (the relay reports it as broken).
    pub fn finish(&mut self, events: &mut Vec<Event>) {
        let Some(finish) = self.finish.filter(|_| self.started && !self.done) else {
            return;
        };
        self.done = true;
        let grounding = self.grounding.take().unwrap_or(Value::Null);
        if self.open == Some(Open::Text) {
            events.extend(
                grounding::supports(&grounding)
                    .into_iter()
                    .filter_map(|support| self.citation(support)),
            );
        }
        self.close(events);
        events.extend(
            grounding::searches(&grounding)
                .into_iter()
                .map(Event::Search),
        );
        events.push(Event::Finish {
            finish: Some(finish),
            usage: Some(self.usage.unwrap_or_default()),
        });
        events.push(Event::Done);
    }
}
