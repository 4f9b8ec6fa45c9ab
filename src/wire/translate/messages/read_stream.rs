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

use super::read::finish;
use crate::wire::json_scan::{Scan, Seen, DEPTH};
use crate::wire::translate::chunk_template::Learned;
use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{Citation, Event, SearchCall, Usage};
use crate::wire::translate::hub::{str_at, text_at};
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

/// The usage members `read::usage` reads, each as its `Value` reads it (0 when absent or of
/// another kind than a whole number).
#[derive(Debug, Default)]
struct Counts {
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
}

impl Counts {
    /// The slot of member `key` (`None`: a member the usage does not read).
    fn slot_of(key: &str) -> Option<u8> {
        match key {
            "input_tokens" => Some(0),
            "cache_read_input_tokens" => Some(1),
            "cache_creation_input_tokens" => Some(2),
            "output_tokens" => Some(3),
            _ => None,
        }
    }

    fn slot(&mut self, slot: u8) -> &mut u64 {
        match slot {
            0 => &mut self.input,
            1 => &mut self.cache_read,
            2 => &mut self.cache_write,
            _ => &mut self.output,
        }
    }

    /// `read::usage` of an object of these members.
    fn usage(&self) -> Usage {
        Usage {
            input: self.input + self.cache_read + self.cache_write,
            cached: self.cache_read,
            cache_write: self.cache_write,
            output: self.output,
            reasoning: 0,
        }
    }
}

/// One event's members the reader reads, scanned (`json_scan`) in one pass without a `Value`:
/// strings borrowed, usage counts as they merge. A member of another kind than the one
/// modelled (a string that is a number, an object that is an array), a repeated member, a
/// text block's `citations` or a `citation` declines the whole event to the typed `Head` and
/// whole `Value` reads.
#[derive(Default)]
struct Scanned<'a> {
    kind: Option<Cow<'a, str>>,
    /// `message_start`'s `message`: its `id` and `model` (strings or `null`).
    id: Option<Cow<'a, str>>,
    model: Option<Cow<'a, str>>,
    /// `content_block_start`'s block and a delta's members (`null` reads as absent).
    block: Fields<'a>,
    delta: Fields<'a>,
    /// The counts of `message.usage` and of `usage`: (slot, count) in order, `null`s left out.
    message_usage: Vec<(u8, u64)>,
    usage: Vec<(u8, u64)>,
}

/// The string members of a block or a delta the reader reads.
#[derive(Default)]
struct Fields<'a> {
    kind: Option<Cow<'a, str>>,
    text: Option<Cow<'a, str>>,
    thinking: Option<Cow<'a, str>>,
    signature: Option<Cow<'a, str>>,
    partial_json: Option<Cow<'a, str>>,
    data: Option<Cow<'a, str>>,
    id: Option<Cow<'a, str>>,
    name: Option<Cow<'a, str>>,
    stop_reason: Option<Cow<'a, str>>,
}

/// A string or `null` (`None` inside); anything else declines.
fn string_or_null<'a>(scan: &mut Scan<'a>) -> Option<Option<Cow<'a, str>>> {
    if scan.null() {
        return Some(None);
    }
    scan.string().map(Some)
}

impl<'a> Fields<'a> {
    /// An object of these members (others passed over), or `null`.
    fn read(scan: &mut Scan<'a>) -> Option<Fields<'a>> {
        let mut fields = Fields::default();
        if scan.null() {
            return Some(fields);
        }
        let mut seen = Seen::default();
        scan.object(|scan, key| {
            let (bit, slot) = match &*key {
                "type" => (0, &mut fields.kind),
                "text" => (1, &mut fields.text),
                "thinking" => (2, &mut fields.thinking),
                "signature" => (3, &mut fields.signature),
                "partial_json" => (4, &mut fields.partial_json),
                "data" => (5, &mut fields.data),
                "id" => (6, &mut fields.id),
                "name" => (7, &mut fields.name),
                "stop_reason" => (8, &mut fields.stop_reason),
                // Read from the block's `Value`: left to it.
                "citations" | "citation" => return None,
                _ => return scan.skip(DEPTH - 1),
            };
            seen.first(bit)?;
            *slot = string_or_null(scan)?;
            Some(())
        })?;
        Some(fields)
    }

    fn str<'b>(field: &'b Option<Cow<'_, str>>) -> &'b str {
        field.as_deref().unwrap_or("")
    }
}

/// A usage object's counts into `into` (`null` members left out, as merging leaves them), or
/// `null`.
fn usage_counts(scan: &mut Scan<'_>, into: &mut Vec<(u8, u64)>) -> Option<()> {
    if scan.null() {
        return Some(());
    }
    let mut seen = Seen::default();
    scan.object(|scan, key| {
        let Some(slot) = Counts::slot_of(&key) else {
            return scan.skip(DEPTH - 2);
        };
        seen.first(slot.into())?;
        if scan.null() {
            return Some(());
        }
        // A whole number counts; any other number counts 0 (`as_u64`); another kind declines.
        let count = scan.number()?.unwrap_or(0);
        into.push((slot, count));
        Some(())
    })
}

impl<'a> Scanned<'a> {
    /// `data`'s members, when it is one JSON object `json_scan` reads as serde_json does.
    fn read(data: &'a str) -> Option<Scanned<'a>> {
        let mut scanned = Scanned::default();
        let mut scan = Scan::new(data);
        let mut seen = Seen::default();
        scan.object(|scan, key| match &*key {
            "type" => {
                seen.first(0)?;
                scanned.kind = Some(scan.string()?);
                Some(())
            }
            "message" => {
                seen.first(1)?;
                let mut message = Seen::default();
                scan.object(|scan, key| match &*key {
                    "id" => {
                        message.first(0)?;
                        scanned.id = string_or_null(scan)?;
                        Some(())
                    }
                    "model" => {
                        message.first(1)?;
                        scanned.model = string_or_null(scan)?;
                        Some(())
                    }
                    "usage" => {
                        message.first(2)?;
                        usage_counts(scan, &mut scanned.message_usage)
                    }
                    _ => scan.skip(DEPTH - 1),
                })
            }
            "content_block" => {
                seen.first(2)?;
                scanned.block = Fields::read(scan)?;
                Some(())
            }
            "delta" => {
                seen.first(3)?;
                scanned.delta = Fields::read(scan)?;
                Some(())
            }
            "usage" => {
                seen.first(4)?;
                usage_counts(scan, &mut scanned.usage)
            }
            // Read from its `Value`: left to it.
            "error" => None,
            _ => scan.skip(DEPTH),
        })?;
        scan.end()?;
        Some(scanned)
    }
}

#[derive(Debug, Default)]
pub struct MessagesReader {
    /// Whether the open block is one the form carries.
    open: Option<bool>,
    /// The usage so far: the last count of each member `usage` reads (Anthropic sends it in
    /// pieces; a member of another kind than a whole number counts 0, as it reads).
    usage: Counts,
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
        for (key, value) in usage.iter().flatten() {
            if !value.is_null() {
                if let Some(slot) = Counts::slot_of(key) {
                    *self.usage.slot(slot) = value.as_u64().unwrap_or(0);
                }
            }
        }
    }

    fn usage(&self) -> crate::wire::translate::hub::form::Usage {
        self.usage.usage()
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
    /// without making an event of it. Borrowed, it is the bytes of a string with no escape
    /// (`json_scan::plain` holds of them): every text piece is read by `json_scan`.
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
        if self.typed() && self.scanned(data, events).is_some() {
            return;
        }
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

    fn merge_counts(&mut self, counts: &[(u8, u64)]) {
        for &(slot, count) in counts {
            *self.usage.slot(slot) = count;
        }
    }

    /// An event read by one scan ([`Scanned`]), as [`Self::head`] reads it; `None` (nothing
    /// done) for an event it leaves to `head`: one not scanned, an error, a block other than
    /// text, thinking and calls, a delta outside a carried block, a citation.
    fn scanned(&mut self, data: &str, events: &mut Vec<Event>) -> Option<()> {
        let scanned = Scanned::read(data)?;
        let owned = |field: &Option<Cow<'_, str>>| Fields::str(field).to_owned();
        match scanned.kind.as_deref()? {
            "content_block_stop" => self.block_stop(events),
            "message_stop" => events.push(Event::Done),
            "ping" => {}
            "message_start" => {
                self.merge_counts(&scanned.message_usage);
                events.push(Event::Start {
                    id: owned(&scanned.id),
                    model: scanned
                        .model
                        .map_or(Value::Null, |model| Value::String(model.into_owned())),
                    usage: Some(self.usage()),
                });
            }
            "content_block_start" => {
                let block = &scanned.block;
                let non_empty = |field: &Option<Cow<'_, str>>| {
                    field
                        .as_deref()
                        .filter(|text| !text.is_empty())
                        .map(str::to_owned)
                };
                match Fields::str(&block.kind) {
                    "text" => {
                        events.push(Event::TextStart);
                        self.cited.clear();
                        self.text_chars = 0;
                        if let Some(text) = non_empty(&block.text) {
                            self.text_chars = text.chars().count();
                            events.push(Event::Text(text));
                        }
                    }
                    "thinking" => {
                        events.push(Event::ThinkingStart);
                        events.extend(non_empty(&block.signature).map(Event::Signature));
                    }
                    "redacted_thinking" => events.push(Event::Redacted(owned(&block.data))),
                    "tool_use" => events.push(Event::ToolStart {
                        id: owned(&block.id),
                        name: owned(&block.name),
                    }),
                    _ => return None,
                }
                self.open = Some(true);
            }
            "content_block_delta" if self.open == Some(true) => {
                let delta = &scanned.delta;
                events.push(match Fields::str(&delta.kind) {
                    "text_delta" => {
                        let text = owned(&delta.text);
                        self.text_chars += text.chars().count();
                        Event::Text(text)
                    }
                    "thinking_delta" => Event::Thinking(owned(&delta.thinking)),
                    "signature_delta" => Event::Signature(owned(&delta.signature)),
                    "input_json_delta" => Event::ToolArguments(owned(&delta.partial_json)),
                    "citations_delta" => return None,
                    _ => return Some(()),
                });
            }
            "message_delta" => {
                self.merge_counts(&scanned.usage);
                events.push(Event::Finish {
                    finish: Some(finish(scanned.delta.stop_reason.as_deref())),
                    usage: Some(self.usage()),
                });
            }
            _ => return None,
        }
        Some(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of a real-shaped stream other than text pieces are read by the one scan
    /// (the relay's fast way), and those it leaves to `head` are left untouched.
    #[test]
    fn the_streams_other_events_are_read_by_one_scan() {
        let mut reader = MessagesReader::default();
        let mut events = Vec::new();
        for data in [
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":3,"cache_read_input_tokens":40,"cache_creation":{"ephemeral_5m_input_tokens":3},"output_tokens":1,"service_tier":"standard"}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm é"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG=="}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi \"q\""}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"look","input":{}}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"at\":"}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}"#,
            r#"{"type":"message_stop"}"#,
        ] {
            assert!(reader.scanned(data, &mut events).is_some(), "{data}");
        }
        assert_eq!(
            reader.usage(),
            Usage {
                input: 55,
                cached: 40,
                cache_write: 3,
                output: 30,
                reasoning: 0
            }
        );
        let before = events.len();
        for data in [
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"","citations":[]}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}"#,
            r#"{"type":"message_delta","usage":{"output_tokens":1e3}}"#,
            r#"{"type":"message_delta","usage":{"output_tokens":"3"}}"#,
        ] {
            assert!(reader.scanned(data, &mut events).is_none(), "{data}");
        }
        assert_eq!(events.len(), before);
    }
}
