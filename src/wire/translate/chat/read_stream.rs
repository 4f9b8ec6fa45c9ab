//! A Chat Completions stream into the hub's events, chunk by chunk: blocks are made from the
//! deltas (reasoning, text, each tool call), the finish reason and the usage chunk end the
//! answer at `[DONE]`. A piece for a tool call that is no longer open (providers send calls one
//! after another) is left out rather than held. A search model's `delta.annotations`
//! (`url_citation`s, indices in the whole `content`) are citations of the open text block.

use super::super::whole_values::WholeValues;
use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::read::{finish, usage};
use crate::wire::json_scan::{Scan, DEPTH};
use crate::wire::translate::chunk_template::Learned;
use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{Event, Finish, Usage};
use crate::wire::translate::hub::{array_at, str_at, text_at};
use crate::wire::translate::text_delta;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// The upstream's `tool_calls[i]`.
    Tool(u64),
}

#[derive(Debug, Default)]
pub struct ChatReader {
    started: bool,
    open: Option<Open>,
    finish: Option<Finish>,
    usage: Option<Usage>,
    /// Characters of `content` so far, and where the open text block began in it.
    content_chars: usize,
    block_start: usize,
    done: bool,
    /// The stream's text chunks, as the last one read.
    chunks: Learned<()>,
    /// Tests: every chunk other than text alone read as a whole `Value`, as before its typed
    /// read.
    pub whole_values: WholeValues,
}

/// The members of a chunk the reader reads, for chunks other than text alone, read typed
/// (strings borrowed, every other member passed over) rather than as a whole `Value`: each is
/// what the `Value`'s accessors give (`error` and `model` `Some` when present, `null` too).
/// Any chunk this does not read (a member of another kind, a repeated member) is read as a
/// whole `Value`.
#[derive(Debug, Default, Deserialize)]
struct Head<'a> {
    #[serde(default, deserialize_with = "present")]
    error: Option<Value>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    model: Option<Value>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
}

/// A choice's members the reader reads.
#[derive(Debug, Default, Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    finish_reason: Option<Value>,
}

/// A member's value, `null` too (`Some(Value::Null)`, as `Value::get` finds it).
fn present<'de, D: serde::Deserializer<'de>>(value: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(value).map(Some)
}

impl<'a> Head<'a> {
    /// The same members of a whole `Value` (the chunk read as before).
    fn of_value(chunk: &'a Value) -> Head<'a> {
        let choice = |choice: &Value| Choice {
            delta: choice.get("delta").cloned(),
            finish_reason: choice.get("finish_reason").cloned(),
        };
        Head {
            error: chunk.get("error").cloned(),
            id: Some(Cow::Borrowed(str_at(chunk, "id"))),
            model: chunk.get("model").cloned(),
            usage: chunk.get("usage").cloned(),
            choices: Some(
                array_at(chunk, "choices")
                    .first()
                    .map(choice)
                    .into_iter()
                    .collect(),
            ),
        }
    }
}

/// A chunk `json_scan` reads as serde_json does (so that a whole `Value` parse of it
/// succeeds), whose `choices`, if any, is `null` or an array of objects.
fn checked(data: &str) -> Option<()> {
    let mut scan = Scan::new(data);
    scan.object(|scan, key| match &*key {
        "choices" if scan.null() => Some(()),
        "choices" => scan.array(|scan| scan.object(|scan, _| scan.skip(DEPTH - 2))),
        _ => scan.skip(DEPTH),
    })?;
    scan.end()
}

impl ChatReader {
    fn close(&mut self, events: &mut Vec<Event>) {
        if self.open.take().is_some() {
            events.push(Event::BlockStop);
        }
    }

    /// Opens a block of `want` unless it is the open one.
    fn ensure(&mut self, want: Open, start: Event, events: &mut Vec<Event>) {
        if self.open == Some(want) {
            return;
        }
        self.close(events);
        events.push(start);
        self.open = Some(want);
    }

    pub fn event(&mut self, data: &str, events: &mut Vec<Event>) {
        if let Some(text) = self.event_or_text(data, events) {
            events.push(Event::Text(text.into_owned()));
        }
    }

    /// [`Self::event`], but a chunk of text alone (most chunks) gives its text back, borrowed,
    /// instead of pushing it as the last event (the events before it pushed): the translator
    /// writes it without making an event of it.
    pub fn event_or_text<'a>(
        &mut self,
        data: &'a str,
        events: &mut Vec<Event>,
    ) -> Option<Cow<'a, str>> {
        if data.trim() == "[DONE]" {
            self.end(events);
            return None;
        }
        // A chunk of text alone (most chunks), as below reads it: the text block opened when
        // it is not the open one.
        if let Some(text) = self.text_alone(data, events) {
            return Some(text);
        }
        self.chunk(data, events);
        None
    }

    /// A chunk of text alone (`text_delta::chat_content`) after the first chunk, read as
    /// [`Self::event_or_text`] reads it (the events before its text pushed, its text given
    /// back); `None`: not such a chunk, and nothing was read.
    pub fn text_alone<'a>(
        &mut self,
        data: &'a str,
        events: &mut Vec<Event>,
    ) -> Option<Cow<'a, str>> {
        if !self.started {
            return None;
        }
        let text = text_delta::chat_content_learned(data, &mut self.chunks)?;
        if self.open != Some(Open::Text) {
            self.block_start = self.content_chars;
        }
        self.ensure(Open::Text, Event::TextStart, events);
        self.content_chars += text.chars().count();
        Some(text)
    }

    /// The bytes of generated text the relay counts of the text piece just read (what
    /// `content_bytes::content_text_bytes` finds in it), when its template knows them.
    pub fn text_bytes(&self) -> Option<usize> {
        self.chunks.content_bytes()
    }

    /// A chunk other than text alone, read as a whole `Value`.
    fn chunk(&mut self, data: &str, events: &mut Vec<Event>) {
        // Typed only what `json_scan` found to be JSON serde_json reads as a `Value` reads it,
        // with its choices objects (serde would read an array into a `Choice` by position).
        if self.typed() && checked(data).is_some() {
            if let Ok(head) = serde_json::from_str::<Head>(data) {
                return self.head(head, events);
            }
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return;
        };
        self.head(Head::of_value(&chunk), events);
    }

    /// Whether chunks other than text alone are read typed (else as whole `Value`s, in
    /// tests).
    fn typed(&self) -> bool {
        self.whole_values.fast()
    }

    fn head(&mut self, chunk: Head<'_>, events: &mut Vec<Event>) {
        if let Some(error) = chunk.error {
            self.done = true;
            events.push(Event::Error {
                message: text_at(&error, "message")
                    .unwrap_or("upstream error")
                    .to_string(),
                kind: "api_error".to_string(),
            });
            return;
        }
        if !self.started {
            self.started = true;
            events.push(Event::Start {
                id: chunk.id.unwrap_or_default().into_owned(),
                model: chunk.model.unwrap_or(Value::from("")),
                usage: None,
            });
        }
        if let Some(found) = chunk.usage.filter(|u| u.is_object()) {
            self.usage = Some(usage(&found));
        }
        let Some(choice) = chunk.choices.into_iter().flatten().next() else {
            return;
        };
        let null = Value::Null;
        let finish_reason = choice.finish_reason;
        let delta = choice.delta.as_ref().unwrap_or(&null);
        if let Some(thinking) =
            text_at(delta, "reasoning_content").or_else(|| text_at(delta, "reasoning"))
        {
            self.ensure(Open::Thinking, Event::ThinkingStart, events);
            events.push(Event::Thinking(thinking.to_string()));
        }
        if let Some(text) = text_at(delta, "content").or_else(|| text_at(delta, "refusal")) {
            if self.open != Some(Open::Text) {
                self.block_start = self.content_chars;
            }
            self.ensure(Open::Text, Event::TextStart, events);
            self.content_chars += text.chars().count();
            events.push(Event::Text(text.to_string()));
        }
        if self.open == Some(Open::Text) {
            let start = self.block_start;
            events.extend(
                citations::read_chat_citations(delta, 0)
                    .into_iter()
                    .filter(|citation| citation.start >= start)
                    .map(|mut citation| {
                        citation.start -= start;
                        citation.end = citation.end.saturating_sub(start);
                        Event::Citation(citation)
                    }),
            );
        }
        for call in array_at(delta, "tool_calls") {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let function = call.get("function").unwrap_or(&Value::Null);
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                self.close(events);
                let start = Event::ToolStart {
                    id: id.to_string(),
                    name: str_at(function, "name").to_string(),
                };
                self.ensure(Open::Tool(index), start, events);
            }
            if let Some(piece) = text_at(function, "arguments") {
                if self.open == Some(Open::Tool(index)) {
                    events.push(Event::ToolArguments(piece.to_string()));
                }
            }
        }
        if let Some(reason) = finish_reason.as_ref().and_then(Value::as_str) {
            self.finish = Some(finish(Some(reason)));
            self.close(events);
        }
    }

    fn end(&mut self, events: &mut Vec<Event>) {
        if self.done || !self.started {
            return;
        }
        self.done = true;
        self.close(events);
        events.push(Event::Finish {
            finish: Some(self.finish.unwrap_or_default()),
            usage: Some(self.usage.unwrap_or_default()),
        });
        events.push(Event::Done);
    }

    /// The upstream ended: one that finished its answer (a finish reason) without `[DONE]`
    /// still gets its closing events.
    pub fn finish(&mut self, events: &mut Vec<Event>) {
        if self.finish.is_some() {
            self.end(events);
        }
    }
}
