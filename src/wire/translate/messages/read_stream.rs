//! A Messages stream into the hub's events, event by event. Blocks other than text, thinking
//! and tool calls are left out whole, but for web search: its `server_tool_use` (its query in
//! pieces) and `web_search_tool_result` become one search event, and a text block's
//! `citations_delta` a citation of the whole block, given when the block ends (Anthropic sends
//! it before the text it cites). State: the open block's kind, its length and citations, the
//! search in progress and the usage so far (Anthropic sends it in pieces: `message_start`,
//! then `message_delta`).

use super::super::whole_values::WholeValues;
use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::read::{finish, usage};
use crate::wire::translate::chunk_template::Learned;
use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{Citation, Event, SearchCall};
use crate::wire::translate::hub::{str_at, text_at};
use crate::wire::translate::json_scan::{Scan, Seen, DEPTH};
use crate::wire::translate::text_delta;

/// The members of an event the reader reads, for the events other than text pieces, read
/// typed (strings borrowed, every other member passed over) rather than as a whole `Value`:
/// each is what the `Value`'s accessors give (`None` for a member that is absent or `null`).
/// Any event this does not read (a member of another kind, a repeated member) is read as a
/// whole `Value`.
#[derive(Debug, Default, Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<StartMessage<'a>>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    usage: Option<Map<String, Value>>,
    #[serde(default)]
    error: Option<Value>,
}

/// `message_start`'s `message`: the members the reader reads.
#[derive(Debug, Default, Deserialize)]
struct StartMessage<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(default)]
    model: Option<Value>,
    #[serde(default)]
    usage: Option<Map<String, Value>>,
}

impl<'a> Head<'a> {
    /// The same members of a whole `Value` (the event read as before).
    fn of_value(data: &'a Value) -> Head<'a> {
        let object = |key: &str| data.get(key).and_then(Value::as_object).cloned();
        let value = |key: &str| data.get(key).filter(|v| !v.is_null()).cloned();
        Head {
            kind: Some(Cow::Borrowed(str_at(data, "type"))),
            message: data.get("message").map(|message| StartMessage {
                id: Some(Cow::Borrowed(str_at(message, "id"))),
                model: message.get("model").cloned(),
                usage: message.get("usage").and_then(Value::as_object).cloned(),
            }),
            content_block: value("content_block"),
            delta: value("delta"),
            usage: object("usage"),
            error: value("error"),
        }
    }
}

/// The `type` of an event, when the event is JSON that `json_scan` reads as serde_json does
/// (so that a whole `Value` parse of it succeeds) and names it once, and its `message` (if
/// any) is an object or `null` (serde would read an array into [`StartMessage`] by position,
/// where the `Value`'s accessors find nothing); `None` otherwise.
fn event_type(data: &str) -> Option<Cow<'_, str>> {
    let mut scan = Scan::new(data);
    let mut seen = Seen::default();
    let mut kind = None;
    scan.object(|scan, key| match &*key {
        "type" => {
            seen.first(0)?;
            kind = Some(scan.string()?);
            Some(())
        }
        "message" if scan.null() => Some(()),
        "message" => scan.object(|scan, _| scan.skip(DEPTH - 1)),
        _ => scan.skip(DEPTH),
    })?;
    scan.end()?;
    kind
}

#[derive(Debug, Default)]
pub struct MessagesReader {
    /// Whether the open block is one the form carries.
    open: Option<bool>,
    /// The usage so far: an object (`null` until a member came, which reads the same).
    usage: Value,
    /// The web search whose `server_tool_use` came, its input JSON so far, until its result.
    search: Option<(SearchCall, String)>,
    /// The open text block's characters so far and its citations (each of the whole block).
    text_chars: usize,
    cited: Vec<Citation>,
    /// The stream's text deltas, as the last one read.
    chunks: Learned<()>,
    /// Tests: every event other than a text piece read as a whole `Value`, as before its
    /// typed read.
    pub whole_values: WholeValues,
}

impl MessagesReader {
    fn merge_usage(&mut self, usage: Option<Map<String, Value>>) {
        for (key, value) in usage.into_iter().flatten() {
            if !value.is_null() {
                if !self.usage.is_object() {
                    self.usage = Value::Object(Map::new());
                }
                if let Value::Object(merged) = &mut self.usage {
                    merged.insert(key, value);
                }
            }
        }
    }

    fn usage(&self) -> crate::wire::translate::hub::form::Usage {
        usage(&self.usage)
    }

    /// A content block opened: its events, and whether it is carried (a web search's blocks
    /// become one `Search` event, not a block).
    fn block_start(&mut self, block: &Value, events: &mut Vec<Event>) -> bool {
        match str_at(block, "type") {
            "text" => {
                events.push(Event::TextStart);
                self.text_chars = 0;
                self.cited = citations::read_anthropic_citations(block, 0, "");
                if let Some(text) = text_at(block, "text") {
                    self.text_chars = text.chars().count();
                    events.push(Event::Text(text.to_string()));
                }
                true
            }
            "thinking" => {
                events.push(Event::ThinkingStart);
                if let Some(signature) = text_at(block, "signature") {
                    events.push(Event::Signature(signature.to_string()));
                }
                true
            }
            "redacted_thinking" => {
                events.push(Event::Redacted(str_at(block, "data").to_string()));
                true
            }
            "tool_use" => {
                events.push(Event::ToolStart {
                    id: str_at(block, "id").to_string(),
                    name: str_at(block, "name").to_string(),
                });
                true
            }
            "server_tool_use" if str_at(block, "name") == "web_search" => {
                let search = SearchCall {
                    id: str_at(block, "id").to_string(),
                    ..SearchCall::default()
                };
                let input = block
                    .get("input")
                    .filter(|input| input.as_object().is_some_and(|o| !o.is_empty()))
                    .map(Value::to_string)
                    .unwrap_or_default();
                self.search = Some((search, input));
                false
            }
            "web_search_tool_result" => {
                if let Some((mut search, input)) = self.search.take() {
                    let input: Value = serde_json::from_str(&input).unwrap_or_default();
                    search.query = str_at(&input, "query").to_string();
                    let found = citations::read_anthropic_searches(&[
                        json!({"type": "server_tool_use", "id": search.id}),
                        block.clone(),
                    ]);
                    search.results = found.into_iter().flat_map(|found| found.results).collect();
                    events.push(Event::Search(search));
                }
                false
            }
            _ => false,
        }
    }

    pub fn event(&mut self, data: &str, events: &mut Vec<Event>) {
        if let Some(text) = self.event_or_text(data, events) {
            events.push(Event::Text(text.into_owned()));
        }
    }

    /// [`Self::event`], but a text piece of the open text block (most events) gives its text
    /// back, borrowed and counted, instead of pushing it as an event: the translator writes it
    /// without making an event of it.
    pub fn event_or_text<'a>(
        &mut self,
        data: &'a str,
        events: &mut Vec<Event>,
    ) -> Option<Cow<'a, str>> {
        // A text block's piece (most events), as the `content_block_delta` arm below reads it.
        if self.open == Some(true) {
            if let Some(text) = text_delta::messages_text_learned(data, &mut self.chunks) {
                self.text_chars += text.chars().count();
                return Some(text);
            }
        }
        self.other(data, events);
        None
    }

    /// The bytes of generated text the relay counts of the text piece just read (what
    /// `content_bytes::content_text_bytes` finds in it), when its template knows them.
    pub fn text_bytes(&self) -> Option<usize> {
        self.chunks.content_bytes()
    }

    /// Whether events are read typed (else as whole `Value`s, in tests).
    fn typed(&self) -> bool {
        self.whole_values.fast()
    }

    /// An event other than a text piece of the open text block.
    fn other(&mut self, data: &str, events: &mut Vec<Event>) {
        // Typed only what `json_scan` found to be JSON serde_json reads as a `Value` reads it
        // (no exponent, no integer of more than 18 digits, which serde's skipping of the
        // members a `Head` passes over would take but a `Value` would not).
        if let Some(kind) = event_type(data).filter(|_| self.typed()) {
            // The events read by their type alone, as the arms below read them.
            match &*kind {
                "content_block_stop" => return self.block_stop(events),
                "message_stop" => return events.push(Event::Done),
                "ping" => return,
                _ => {}
            }
            if let Ok(head) = serde_json::from_str::<Head>(data) {
                return self.head(head, events);
            }
        }
        let Ok(data) = serde_json::from_str::<Value>(data) else {
            return;
        };
        self.head(Head::of_value(&data), events);
    }

    fn block_stop(&mut self, events: &mut Vec<Event>) {
        let carried = self.open.take() == Some(true);
        let end = std::mem::take(&mut self.text_chars);
        events.extend(self.cited.drain(..).map(|citation| {
            Event::Citation(Citation {
                start: 0,
                end,
                ..citation
            })
        }));
        events.extend(carried.then_some(Event::BlockStop));
    }

    fn head(&mut self, data: Head<'_>, events: &mut Vec<Event>) {
        let null = Value::Null;
        match data.kind.as_deref().unwrap_or("") {
            "message_start" => {
                let message = data.message.unwrap_or_default();
                self.merge_usage(message.usage);
                events.push(Event::Start {
                    id: message.id.unwrap_or_default().into_owned(),
                    model: message.model.unwrap_or(Value::Null),
                    usage: Some(self.usage()),
                });
            }
            "content_block_start" => {
                let block = data.content_block.as_ref().unwrap_or(&null);
                let carried = self.block_start(block, events);
                self.open = Some(carried);
            }
            "content_block_delta" if self.open == Some(false) => {
                // A web search's query, in pieces.
                let delta = data.delta.as_ref().unwrap_or(&null);
                if let Some((_, input)) = self.search.as_mut() {
                    if str_at(delta, "type") == "input_json_delta" {
                        input.push_str(str_at(delta, "partial_json"));
                    }
                }
            }
            "content_block_delta" if self.open == Some(true) => {
                let delta = data.delta.as_ref().unwrap_or(&null);
                let piece = |key: &str| str_at(delta, key).to_string();
                events.push(match str_at(delta, "type") {
                    "text_delta" => {
                        let text = piece("text");
                        self.text_chars += text.chars().count();
                        Event::Text(text)
                    }
                    "thinking_delta" => Event::Thinking(piece("thinking")),
                    "signature_delta" => Event::Signature(piece("signature")),
                    "input_json_delta" => Event::ToolArguments(piece("partial_json")),
                    "citations_delta" => {
                        let block =
                            json!({"citations": [delta.get("citation").unwrap_or(&Value::Null)]});
                        self.cited
                            .extend(citations::read_anthropic_citations(&block, 0, ""));
                        return;
                    }
                    _ => return,
                });
            }
            "content_block_stop" => self.block_stop(events),
            "message_delta" => {
                self.merge_usage(data.usage);
                let stop = data
                    .delta
                    .as_ref()
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str);
                events.push(Event::Finish {
                    finish: Some(finish(stop)),
                    usage: Some(self.usage()),
                });
            }
            "message_stop" => events.push(Event::Done),
            "error" => {
                let error = data.error.as_ref().unwrap_or(&null);
                events.push(Event::Error {
                    message: text_at(error, "message")
                        .unwrap_or("upstream error")
                        .to_string(),
                    kind: text_at(error, "type").unwrap_or("api_error").to_string(),
                });
            }
            _ => {}
        }
    }

    /// The upstream ended: a stream that never said `message_stop` is not ended here (the
    /// relay reports it as broken).
    pub fn finish(&mut self, _events: &mut Vec<Event>) {}
}
