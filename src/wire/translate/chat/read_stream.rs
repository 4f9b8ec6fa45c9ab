//! A Chat Completions stream into the hub's events, chunk by chunk: blocks are made from the
//! deltas (reasoning, text, each tool call), the finish reason and the usage chunk end the
//! answer at `[DONE]`. A piece for a tool call that is no longer open (providers send calls one
//! after another) is left out rather than held. A search model's `delta.annotations`
//! (`url_citation`s, indices in the whole `content`) are citations of the open text block.

use std::borrow::Cow;

use serde_json::Value;

use super::read::{finish, usage};
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

    /// A chunk other than text alone, read as a whole `Value`.
    fn chunk(&mut self, data: &str, events: &mut Vec<Event>) {
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if let Some(error) = chunk.get("error") {
            self.done = true;
            events.push(Event::Error {
                message: text_at(error, "message")
                    .unwrap_or("upstream error")
                    .to_string(),
                kind: "api_error".to_string(),
            });
            return;
        }
        if !self.started {
            self.started = true;
            events.push(Event::Start {
                id: str_at(&chunk, "id").to_string(),
                model: chunk.get("model").cloned().unwrap_or(Value::from("")),
                usage: None,
            });
        }
        if let Some(found) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage(found));
        }
        let Some(choice) = array_at(&chunk, "choices").first() else {
            return;
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
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
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
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
