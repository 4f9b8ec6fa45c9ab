//! A Responses stream into the hub's events, event by event: each output item is a block
//! (`message` text, `reasoning` summary text, `function_call` arguments in pieces);
//! `response.completed` / `response.incomplete` end the answer with its usage. A host that
//! sends an item's text or arguments only in `response.output_item.done` still has them
//! carried. A reasoning item opens its thinking block only with its first text: a reasoning
//! model's host sends one (its summary empty) whether or not thinking was asked for, and an
//! empty one is no block, as in a whole answer. A `web_search_call` item becomes one search
//! event when it is done; a `url_citation` annotation (`response.output_text.annotation.added`,
//! or in a `done` item whose text was not streamed) a citation of its message's block.

use super::super::whole_values::WholeValues;
use std::borrow::Cow;

use serde_json::Value;

use super::read::{finish, message_text, reasoning_text, usage};
use crate::wire::translate::chunk_template::Learned;
use crate::wire::translate::citations;
use crate::wire::translate::event_type::{event_type, EventType};
use crate::wire::translate::hub::form::Event;
use crate::wire::translate::hub::{str_at, text_at};
use crate::wire::translate::picked::{picked, Members, Pick};
use crate::wire::translate::text_delta;

mod read_once;

/// The members of an event [`ResponsesReader::event`] reads: the `error` arm reads the
/// event's own `message`, `code` and `type` when its `response` has no `error`. A top-level
/// `usage` (no arm reads one) is what the relay's watch reads besides
/// ([`ResponsesReader::other_inspected`]).
pub(in crate::wire::translate) const READ: Members = &[
    ("type", Pick::Whole),
    ("usage", Pick::Whole),
    ("delta", Pick::Whole),
    ("item", Pick::Whole),
    ("annotation", Pick::Whole),
    ("message", Pick::Whole),
    ("code", Pick::Whole),
    (
        "response",
        Pick::Members(&[
            ("id", Pick::Whole),
            ("model", Pick::Whole),
            ("status", Pick::Whole),
            ("incomplete_details", Pick::Whole),
            ("usage", Pick::Whole),
            ("error", Pick::Whole),
        ]),
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    Tool,
    /// A web search the host runs: one search event when done.
    Search,
    /// An item the form does not carry (other built-in tool calls): left out whole.
    Other,
}

#[derive(Debug, Default)]
pub struct ResponsesReader {
    started: bool,
    open: Option<Open>,
    /// Whether the open item had a delta (else its `done` item's content is sent).
    streamed: bool,
    /// The open reasoning item's `ThinkingStart`, held until its first text.
    held_start: bool,
    /// The open message's characters so far, where its current content part began, and
    /// whether an annotation of it came as an event.
    text_chars: usize,
    part_start: usize,
    annotated: bool,
    called: bool,
    done: bool,
    /// The stream's text deltas, as the last one read.
    chunks: Learned<()>,
    /// Tests: every event other than a text piece read as a whole `Value` (what `picked`
    /// reads is compared with it).
    pub whole_values: WholeValues,
}

impl ResponsesReader {
    fn start(&mut self, response: &Value, events: &mut Vec<Event>) {
        if self.started {
            return;
        }
        self.started = true;
        events.push(Event::Start {
            id: str_at(response, "id").to_string(),
            model: response.get("model").cloned().unwrap_or(Value::Null),
            usage: None,
        });
    }

    fn delta(&mut self, want: Open, event: Event, events: &mut Vec<Event>) {
        if self.open == Some(want) {
            self.streamed = true;
            self.release_start(events);
            events.push(event);
        }
    }

    /// Opens the held thinking block, if one is held.
    fn release_start(&mut self, events: &mut Vec<Event>) {
        if std::mem::take(&mut self.held_start) {
            events.push(Event::ThinkingStart);
        }
    }

    /// A `url_citation` of the open message's current content part.
    fn annotation(&mut self, annotation: &Value, events: &mut Vec<Event>) {
        let item = serde_json::json!({"content": [{"annotations": [annotation]}]});
        self.annotated = true;
        let cited = citations::read_responses_citations(&item, 0);
        events.extend(cited.into_iter().map(|mut citation| {
            citation.start += self.part_start;
            citation.end += self.part_start;
            Event::Citation(citation)
        }));
    }

    /// A text piece (most events), read as the `response.output_text.delta` arm of
    /// [`Self::event`] reads it: its text; `None` for any other event, and at once for an
    /// event `name`d otherwise (a lifecycle event is read once, by that arm's match).
    fn text_piece<'a>(&mut self, name: Option<&str>, data: &'a str) -> Option<Cow<'a, str>> {
        if name.is_some_and(|name| name != "response.output_text.delta") {
            return None;
        }
        let text = text_delta::responses_text_learned(data, &mut self.chunks)?;
        if self.open == Some(Open::Text) {
            self.text_chars += text.chars().count();
        }
        Some(text)
    }

    /// The bytes of generated text the relay counts of the text piece just read (what
    /// `content_bytes::content_text_bytes` finds in it), when its template knows them.
    pub fn text_bytes(&self) -> Option<usize> {
        self.chunks.content_bytes()
    }

    /// [`Self::event`], but a text piece of the open text item (most events) gives its text
    /// back, borrowed, instead of pushing it as an event (the events before it pushed): the
    /// translator writes it without making an event of it.
    pub fn event_or_text<'a>(
        &mut self,
        name: Option<&str>,
        data: &'a str,
        events: &mut Vec<Event>,
    ) -> Option<Cow<'a, str>> {
        match self.text_piece(name, data) {
            Some(text) if self.open == Some(Open::Text) => {
                // As `delta` takes it.
                self.streamed = true;
                self.release_start(events);
                Some(text)
            }
            // A piece of no open text item: left out, as `delta` leaves it.
            Some(_) => None,
            None => {
                self.other(name, data, events);
                None
            }
        }
    }

    /// An event other than a text piece: only what [`Self::event`]'s arms read (most of a
    /// lifecycle event is the response or item repeated); anything `picked` declines, as a
    /// whole `Value`. `None`: nothing to read (not JSON, or a type the reader ignores: most
    /// lifecycle events, a `done` one repeating the item's whole text).
    fn read(&self, name: Option<&str>, data: &str) -> Option<Value> {
        if self.ignored(name, data) {
            return None;
        }
        let fast = self.whole_values.fast();
        let read = if fast { picked(data, READ) } else { None };
        read.or_else(|| serde_json::from_str(data).ok())
    }

    /// One event; `name`: its SSE name (see [`Self::text_piece`]).
    pub fn event(&mut self, name: Option<&str>, data: &str, events: &mut Vec<Event>) {
        if let Some(text) = self.text_piece(name, data) {
            return self.delta(Open::Text, Event::Text(text.into_owned()), events);
        }
        self.other(name, data, events);
    }

    /// Whether an event of type `kind` leaves the reader as it is and makes no event (the
    /// arms of [`Self::other`] that do nothing, or nothing now); false when it may not.
    fn ignores(&self, kind: &str) -> bool {
        match kind {
            "response.created" | "response.in_progress" => self.started,
            "response.content_part.added" | "response.output_text.annotation.added" => {
                self.open != Some(Open::Text)
            }
            "response.completed" | "response.incomplete" => self.done,
            "response.output_item.added"
            | "response.output_item.done"
            | "response.output_text.delta"
            | "response.refusal.delta"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning_text.delta"
            | "response.function_call_arguments.delta"
            | "response.failed"
            | "error" => false,
            _ => true,
        }
    }

    /// An event `name`d as one [`Self::ignores`] whose `type` (found without reading the rest:
    /// an event that is not JSON is left out too) is one it ignores.
    fn ignored(&self, name: Option<&str>, data: &str) -> bool {
        if !name.is_some_and(|name| self.ignores(name)) || !self.whole_values.fast() {
            return false;
        }
        match event_type(data) {
            Some(EventType::Named(kind)) => self.ignores(kind),
            // `str_at` reads it as `""`: no arm's.
            Some(EventType::Unnamed) => true,
            None => false,
        }
    }

    /// An event other than a text piece.
    fn other(&mut self, name: Option<&str>, data: &str, events: &mut Vec<Event>) {
        if let Some(data) = self.read(name, data) {
            self.take(data, events);
        }
    }

    /// An event other than a text piece, read (`data`: at least the members of [`READ`]), by
    /// its arm.
    fn take(&mut self, data: Value, events: &mut Vec<Event>) {
        let delta = || str_at(&data, "delta").to_string();
        match str_at(&data, "type") {
            "response.created" | "response.in_progress" => {
                self.start(data.get("response").unwrap_or(&Value::Null), events)
            }
            "response.output_item.added" => {
                let item = data.get("item").unwrap_or(&Value::Null);
                self.streamed = false;
                self.held_start = false;
                (self.text_chars, self.part_start, self.annotated) = (0, 0, false);
                let (open, start) = match str_at(item, "type") {
                    "message" => (Open::Text, Some(Event::TextStart)),
                    "web_search_call" => (Open::Search, None),
                    "reasoning" => {
                        self.held_start = true;
                        (Open::Thinking, None)
                    }
                    "function_call" => {
                        self.called = true;
                        let start = Event::ToolStart {
                            id: str_at(item, "call_id").to_string(),
                            name: str_at(item, "name").to_string(),
                        };
                        (Open::Tool, Some(start))
                    }
                    _ => (Open::Other, None),
                };
                self.open = Some(open);
                events.extend(start);
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let text = delta();
                if self.open == Some(Open::Text) {
                    self.text_chars += text.chars().count();
                }
                self.delta(Open::Text, Event::Text(text), events)
            }
            "response.content_part.added" if self.open == Some(Open::Text) => {
                self.part_start = self.text_chars;
            }
            "response.output_text.annotation.added" if self.open == Some(Open::Text) => {
                self.annotation(data.get("annotation").unwrap_or(&Value::Null), events);
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.delta(Open::Thinking, Event::Thinking(delta()), events)
            }
            "response.function_call_arguments.delta" => {
                self.delta(Open::Tool, Event::ToolArguments(delta()), events)
            }
            "response.output_item.done" => {
                let item = data.get("item").unwrap_or(&Value::Null);
                let whole = match self.open.take() {
                    None | Some(Open::Other) => return,
                    Some(Open::Search) => {
                        events.push(Event::Search(citations::read_responses_search(item)));
                        return;
                    }
                    Some(_) if self.streamed => None,
                    Some(Open::Text) => Some(Event::Text(message_text(item))),
                    Some(Open::Thinking) => Some(Event::Thinking(reasoning_text(item))),
                    Some(Open::Tool) => text_at(item, "arguments")
                        .map(|arguments| Event::ToolArguments(arguments.to_string())),
                };
                let whole = whole
                    .filter(|e| !matches!(e, Event::Text(t) | Event::Thinking(t) if t.is_empty()));
                if whole.is_some() {
                    self.release_start(events);
                } else if std::mem::take(&mut self.held_start) {
                    // A reasoning item without text: no block was opened.
                    return;
                }
                events.extend(whole);
                if str_at(item, "type") == "message" && !self.annotated {
                    let cited = citations::read_responses_citations(item, 0);
                    events.extend(cited.into_iter().map(Event::Citation));
                }
                events.push(Event::BlockStop);
            }
            "response.completed" | "response.incomplete" => {
                if self.done {
                    return;
                }
                self.done = true;
                let response = data.get("response").unwrap_or(&Value::Null);
                self.start(response, events);
                let held = std::mem::take(&mut self.held_start);
                let open = self.open.take();
                if open.is_some_and(|open| !matches!(open, Open::Other | Open::Search)) && !held {
                    events.push(Event::BlockStop);
                }
                events.push(Event::Finish {
                    finish: Some(finish(response, self.called)),
                    usage: Some(usage(response.get("usage").unwrap_or(&Value::Null))),
                });
                events.push(Event::Done);
            }
            "response.failed" | "error" => {
                self.done = true;
                let error = data
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .filter(|e| e.is_object())
                    .unwrap_or(&data);
                events.push(Event::Error {
                    message: text_at(error, "message")
                        .unwrap_or("upstream error")
                        .to_string(),
                    kind: text_at(error, "code")
                        .or_else(|| text_at(error, "type"))
                        .unwrap_or("api_error")
                        .to_string(),
                });
            }
            _ => {}
        }
    }

    /// The upstream ended: a stream without `response.completed` is not ended here (the
    /// relay reports it as broken).
    pub fn finish(&mut self, _events: &mut Vec<Event>) {}
}
