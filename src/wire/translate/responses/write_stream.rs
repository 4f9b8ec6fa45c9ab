//! The hub's events as the Responses event sequence: `response.created`,
//! `response.in_progress`, per block `response.output_item.added` … its deltas
//! (`response.output_text.delta`, `response.function_call_arguments.delta`,
//! `response.reasoning_summary_text.delta`) … its `*.done` events and
//! `response.output_item.done`, then `response.completed` with the output and usage.
//!
//! The protocol's `*.done` events and `response.completed` repeat what was streamed, so the
//! open block's text and the finished items are kept — at most [`MAX_HELD_OUTPUT_BYTES`]; past
//! it the items are still streamed and done, but `response.completed` lists only those kept.

use super::super::whole_values::WholeValues;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Value};

use super::echo::{Echo, Echoed};
use super::write::{
    bare_id, custom_call_item, custom_input, function_call_item, message_item, reasoning_item,
    response_id, response_object, usage,
};
use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{Answer, Citation, Event, Finish, Part, SearchCall, Usage};
use crate::wire::translate::sse_write::{
    json_bytes, write_data, write_json, write_json_str, write_json_u64, write_known_json_str,
};
use std::sync::Arc;

/// Most output bytes kept for the `*.done` events and `response.completed`.
pub const MAX_HELD_OUTPUT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking {
        signature: String,
    },
    /// A redacted thinking block: no text, its data carried whole.
    Redacted {
        data: String,
    },
    Tool {
        call_id: String,
        name: String,
    },
    /// A freeform tool's call: its input is sent whole when the call ends (its function form's
    /// arguments are JSON around it).
    Custom {
        call_id: String,
        name: String,
    },
}

#[derive(Debug)]
struct OpenItem {
    kind: Kind,
    id: String,
    output_index: u32,
    text: String,
    /// A text block's citations (spans in it), annotated when it ends.
    cited: Vec<Citation>,
    /// What every text delta of the item writes after its piece ([`delta_tail`]).
    delta_tail: Vec<u8>,
}

pub struct ResponsesWriter {
    echo: Arc<Echo>,
    id: String,
    bare: String,
    model: Value,
    created: u64,
    sequence: u64,
    /// Blocks started (each block's item id holds its index).
    blocks: u32,
    next_output: u32,
    open: Option<OpenItem>,
    /// The finished items kept, as `Value`s (tests' `whole_values`) …
    output: Vec<Value>,
    /// … or as the bytes their `response.output_item.done` wrote (serialized once).
    written: Vec<Bytes>,
    /// The response `response.created` wrote, member by member, for `response.completed` to
    /// copy what its finish does not change.
    created_bytes: Option<WrittenResponse>,
    held: usize,
    usage: Usage,
    finish: Option<Finish>,
    done: bool,
    /// Tests: every event built as a `Value` and serialized (what the direct writes are
    /// compared with).
    pub whole_values: WholeValues,
}

/// One member of an event written directly ([`ResponsesWriter::emit_members`]).
enum Member<'a> {
    Str(&'a str),
    U64(u64),
    Json(&'a Value),
    /// JSON bytes as they are.
    Raw(&'a [u8]),
}

impl std::fmt::Debug for ResponsesWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesWriter")
            .field("id", &self.id)
            .field("sequence", &self.sequence)
            .finish_non_exhaustive()
    }
}

impl ResponsesWriter {
    pub fn new(created: u64, echo: Arc<Echo>) -> Self {
        ResponsesWriter {
            echo,
            id: response_id(""),
            bare: String::new(),
            model: Value::Null,
            created,
            sequence: 0,
            blocks: 0,
            next_output: 0,
            open: None,
            output: Vec::new(),
            written: Vec::new(),
            created_bytes: None,
            held: 0,
            usage: Usage::default(),
            finish: None,
            done: false,
            whole_values: WholeValues::default(),
        }
    }

    /// Whether events are written directly (else built as `Value`s, in tests).
    fn direct(&self) -> bool {
        self.whole_values.fast()
    }

    /// The bytes [`emit`](Self::emit) writes for an object of `members`, written directly:
    /// `members` named in `serde_json::Map`'s sorted order, `sequence_number` and `type` put
    /// in theirs.
    fn emit_members(&mut self, out: &mut BytesMut, kind: &str, members: &[(&str, Member<'_>)]) {
        debug_assert!(members.windows(2).all(|pair| pair[0].0 < pair[1].0));
        let sequence = self.sequence;
        self.sequence += 1;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: {");
        let mut first = true;
        let mut name = |out: &mut BytesMut, name: &str| {
            if !std::mem::take(&mut first) {
                out.extend_from_slice(b",");
            }
            write_json_str(out, name);
            out.extend_from_slice(b":");
        };
        let (mut numbered, mut typed) = (false, false);
        for (key, member) in members {
            if !numbered && *key > "sequence_number" {
                numbered = true;
                name(out, "sequence_number");
                write_json_u64(out, sequence);
            }
            if !typed && *key > "type" {
                typed = true;
                name(out, "type");
                write_json_str(out, kind);
            }
            name(out, key);
            match member {
                Member::Str(text) => write_json_str(out, text),
                Member::U64(number) => write_json_u64(out, *number),
                Member::Json(value) => write_json(out, value),
                Member::Raw(bytes) => out.extend_from_slice(bytes),
            }
        }
        if !numbered {
            name(out, "sequence_number");
            write_json_u64(out, sequence);
        }
        if !typed {
            name(out, "type");
            write_json_str(out, kind);
        }
        out.extend_from_slice(b"}\n\n");
    }

    fn emit(&mut self, out: &mut BytesMut, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        write_data(out, Some(kind), &data);
    }

    fn response(&self, finish: Option<Finish>, output: Vec<Value>, usage: Value) -> Value {
        response_object(
            (&self.id, &self.model, self.created),
            &self.echo,
            finish,
            output,
            usage,
        )
    }

    pub fn event(&mut self, event: &Event, out: &mut BytesMut) {
        if self.done {
            return;
        }
        match event {
            Event::Start { id, model, usage } => {
                self.id = response_id(id);
                self.bare = bare_id(id).to_string();
                self.model = model.clone();
                self.usage = usage.unwrap_or_default();
                if self.direct() {
                    // The same response in both: written once.
                    let written = self.created_written();
                    for kind in ["response.created", "response.in_progress"] {
                        let response = Member::Raw(&written.bytes);
                        self.emit_members(out, kind, &[("response", response)]);
                    }
                    self.created_bytes = Some(written);
                    return;
                }
                let created = self.response(None, Vec::new(), Value::Null);
                self.emit(out, "response.created", json!({"response": created}));
                let progress = self.response(None, Vec::new(), Value::Null);
                self.emit(out, "response.in_progress", json!({"response": progress}));
            }
            Event::TextStart => self.start_block(Kind::Text, out),
            Event::ThinkingStart => self.start_block(
                Kind::Thinking {
                    signature: String::new(),
                },
                out,
            ),
            Event::Redacted(data) => self.start_block(Kind::Redacted { data: data.clone() }, out),
            Event::ToolStart { id, name } => {
                let (call_id, name) = (id.clone(), name.clone());
                let kind = if self.echo.is_custom(&name) {
                    Kind::Custom { call_id, name }
                } else {
                    Kind::Tool { call_id, name }
                };
                self.start_block(kind, out)
            }
            Event::Text(piece) | Event::Thinking(piece) | Event::ToolArguments(piece) => {
                self.delta(event, piece, out)
            }
            Event::Signature(piece) => {
                if let Some(OpenItem {
                    kind: Kind::Thinking { signature },
                    ..
                }) = self.open.as_mut()
                {
                    signature.push_str(piece);
                }
            }
            Event::BlockStop => self.stop_block(out),
            Event::Finish { finish, usage } => {
                self.finish = finish.or(self.finish);
                if let Some(usage) = usage {
                    self.usage = *usage;
                }
            }
            Event::Done => {
                self.done = true;
                self.stop_block(out);
                let finish = self.finish.unwrap_or_default();
                let kind = match super::write::status(finish) {
                    "incomplete" => "response.incomplete",
                    _ => "response.completed",
                };
                if self.direct() {
                    // The items as their `done` events wrote them, not serialized again.
                    let written = self.created_bytes.take();
                    let mut body = BytesMut::with_capacity(self.held + 1024);
                    let copied = written.as_ref().is_some_and(|written| {
                        written.finish(
                            &mut body,
                            (finish, self.created, &self.usage),
                            &self.written,
                        )
                    });
                    if !copied {
                        // No `response.created` was written: the response built whole.
                        body.clear();
                        let response = self.response(Some(finish), Vec::new(), usage(&self.usage));
                        write_with_output(&mut body, &response, &self.written);
                    }
                    self.emit_members(out, kind, &[("response", Member::Raw(&body))]);
                } else {
                    let output = std::mem::take(&mut self.output);
                    let response = self.response(Some(finish), output, usage(&self.usage));
                    self.emit(out, kind, json!({"response": response}));
                }
            }
            Event::Error { message, kind } => self.error(message, kind, out),
            Event::Search(search) => self.search(search, out),
            Event::Citation(citation) => {
                if let Some(open) = self.open.as_mut().filter(|open| open.kind == Kind::Text) {
                    open.cited.push(citation.clone());
                }
            }
        }
    }

    /// The response `response.created` says, written as `write_json` writes
    /// [`Self::response`]`(None, [], null)`, without building it: its members in
    /// `serde_json::Map`'s sorted order.
    fn created_written(&self) -> WrittenResponse {
        let id = self.echo.kept_id().unwrap_or(&self.id);
        let kept: &[u8] = match self.echo.kept_id() {
            Some(_) => b"true",
            None => b"false",
        };
        let mut members: Vec<(&str, Member<'_>)> = vec![
            ("id", Member::Str(id)),
            ("object", Member::Raw(br#""response""#)),
            ("created_at", Member::U64(self.created)),
            ("status", Member::Raw(br#""in_progress""#)),
            ("background", Member::Raw(b"false")),
            ("completed_at", Member::Raw(b"null")),
            ("error", Member::Raw(b"null")),
            ("incomplete_details", Member::Raw(b"null")),
            ("model", Member::Json(&self.model)),
            ("output", Member::Raw(b"[]")),
            ("prompt_cache_key", Member::Raw(b"null")),
            ("safety_identifier", Member::Raw(b"null")),
            ("service_tier", Member::Raw(br#""default""#)),
            ("store", Member::Raw(kept)),
            ("top_logprobs", Member::Raw(b"0")),
            ("truncation", Member::Raw(br#""disabled""#)),
            ("usage", Member::Raw(b"null")),
        ];
        members.extend(self.echo.echoed().map(|(key, echoed)| match echoed {
            Echoed::Set(value) => (key, Member::Json(value)),
            Echoed::Default(json) => (key, Member::Raw(json)),
        }));
        members.sort_unstable_by_key(|(key, _)| *key);
        WrittenResponse::written(&members)
    }

    /// A web search the host ran, as its own `web_search_call` item.
    fn search(&mut self, search: &SearchCall, out: &mut BytesMut) {
        self.stop_block(out);
        let output_index = self.next_output;
        self.next_output += 1;
        let answer = Answer {
            searches: vec![search.clone()],
            ..Answer::default()
        };
        let Some(mut item) = citations::responses_search_items(&answer).pop() else {
            return;
        };
        let id = item["id"].clone();
        item["status"] = json!("in_progress");
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": output_index, "item": item}),
        );
        for kind in [
            "response.web_search_call.in_progress",
            "response.web_search_call.searching",
            "response.web_search_call.completed",
        ] {
            self.emit(
                out,
                kind,
                json!({"output_index": output_index, "item_id": id}),
            );
        }
        item["status"] = json!("completed");
        self.item_done(out, item, output_index);
    }

    /// A finished item's `response.output_item.done`; the item is kept for
    /// `response.completed`, within [`MAX_HELD_OUTPUT_BYTES`] (its bytes, written once).
    fn item_done(&mut self, out: &mut BytesMut, item: Value, output_index: u32) {
        if !self.direct() {
            self.emit(
                out,
                "response.output_item.done",
                json!({"output_index": output_index, "item": item}),
            );
            let size = json_bytes(&item).len();
            if self.held + size <= MAX_HELD_OUTPUT_BYTES {
                self.held += size;
                self.output.push(item);
            }
            return;
        }
        self.item_written(out, json_bytes(&item).freeze(), output_index);
    }

    /// [`Self::item_done`] of an item written as `bytes` (what `write_json` writes of it).
    fn item_written(&mut self, out: &mut BytesMut, bytes: Bytes, output_index: u32) {
        let members = [
            ("item", Member::Raw(&bytes)),
            ("output_index", Member::U64(u64::from(output_index))),
        ];
        self.emit_members(out, "response.output_item.done", &members);
        if self.held + bytes.len() <= MAX_HELD_OUTPUT_BYTES {
            self.held += bytes.len();
            self.written.push(bytes);
        }
    }

    /// The Responses `error` event (a break after commit, or the upstream's own error).
    pub fn error(&mut self, message: &str, code: &str, out: &mut BytesMut) {
        self.done = true;
        self.emit(
            out,
            "error",
            json!({"code": code, "message": message, "param": null}),
        );
    }

    fn start_block(&mut self, kind: Kind, out: &mut BytesMut) {
        self.stop_block(out);
        let output_index = self.next_output;
        let index = self.blocks;
        self.blocks += 1;
        let bare = &self.bare;
        let direct = self.direct();
        let (id, item) = match &kind {
            Kind::Text => {
                let id = format!("msg_{bare}_{index}");
                // `None`: written directly below.
                let item = (!direct).then(|| json!({"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}));
                (id, item)
            }
            Kind::Thinking { .. } | Kind::Redacted { .. } => {
                let id = format!("rs_{bare}_{index}");
                let item = json!({"id": id, "type": "reasoning", "summary": []});
                (id, Some(item))
            }
            Kind::Tool { call_id, name } => {
                let id = format!("fc_{bare}_{index}");
                let item = function_call_item(&id, call_id, name, "", "in_progress");
                (id, Some(item))
            }
            Kind::Custom { call_id, name } => {
                let id = format!("ctc_{bare}_{index}");
                let item = custom_call_item(&id, call_id, name, "", "in_progress");
                (id, Some(item))
            }
        };
        self.next_output += 1;
        match &item {
            Some(item) => self.emit_item(out, "response.output_item.added", item, output_index),
            None => {
                // The message item above, as `write_json` writes it (its keys in order).
                let mut item = BytesMut::with_capacity(id.len() + 80);
                item.extend_from_slice(br#"{"content":[],"id":"#);
                write_json_str(&mut item, &id);
                item.extend_from_slice(
                    br#","role":"assistant","status":"in_progress","type":"message"}"#,
                );
                let members = [
                    ("item", Member::Raw(&item)),
                    ("output_index", Member::U64(u64::from(output_index))),
                ];
                self.emit_members(out, "response.output_item.added", &members);
            }
        }
        match &kind {
            Kind::Text if self.direct() => self.emit_members(
                out,
                "response.content_part.added",
                &[
                    ("content_index", Member::U64(0)),
                    ("item_id", Member::Str(&id)),
                    ("output_index", Member::U64(u64::from(output_index))),
                    (
                        "part",
                        Member::Raw(br#"{"annotations":[],"text":"","type":"output_text"}"#),
                    ),
                ],
            ),
            Kind::Text => self.emit(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": output_index, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
            Kind::Thinking { .. } => self.emit(
                out,
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": output_index, "summary_index": 0,
                       "part": {"type": "summary_text", "text": ""}}),
            ),
            _ => {}
        }
        self.open = Some(OpenItem {
            delta_tail: match kind {
                Kind::Text => delta_tail(&id, output_index),
                _ => Vec::new(),
            },
            kind,
            id,
            output_index,
            text: String::new(),
            cited: Vec::new(),
        });
    }

    /// A piece of text, as [`Self::event`] writes `Event::Text`: the translator hands a text
    /// event's piece here borrowed, without an event around it; `is_plain` when it is known
    /// to hold nothing JSON escapes (no quote, backslash or control byte, as
    /// `json_scan::plain` finds), then written as its own bytes.
    pub fn text_known(&mut self, piece: &str, is_plain: bool, out: &mut BytesMut) {
        if !self.done {
            self.text_delta(piece, is_plain, out);
        }
    }

    /// A text piece: a delta of the open text item (none when the open item is not text).
    fn text_delta(&mut self, piece: &str, is_plain: bool, out: &mut BytesMut) {
        if let Some(open) = self.open.as_mut().filter(|open| open.kind == Kind::Text) {
            open.text.push_str(piece);
            write_text_delta(out, &open.delta_tail, self.sequence, (piece, is_plain));
            self.sequence += 1;
        }
    }

    fn delta(&mut self, event: &Event, piece: &str, out: &mut BytesMut) {
        if let Event::Text(_) = event {
            return self.text_delta(piece, false, out);
        }
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let (kind, body) = match (event, &open.kind) {
            (Event::Thinking(_), Kind::Thinking { .. }) => (
                "response.reasoning_summary_text.delta",
                json!({"item_id": open.id, "output_index": open.output_index, "summary_index": 0, "delta": piece}),
            ),
            (Event::ToolArguments(_), Kind::Tool { .. }) => (
                "response.function_call_arguments.delta",
                json!({"item_id": open.id, "output_index": open.output_index, "delta": piece}),
            ),
            (Event::ToolArguments(_), Kind::Custom { .. }) => {
                open.text.push_str(piece);
                return;
            }
            _ => return,
        };
        open.text.push_str(piece);
        self.emit(out, kind, body);
    }

    fn stop_block(&mut self, out: &mut BytesMut) {
        let Some(open) = self.open.take() else {
            return;
        };
        let OpenItem {
            kind,
            id,
            output_index,
            text,
            cited,
            ..
        } = open;
        let item = match kind {
            Kind::Text => {
                let end = text.chars().count();
                let annotations: Vec<Value> = cited
                    .into_iter()
                    .map(|citation| {
                        json!({"type": "url_citation",
                               "start_index": citation.start.min(end),
                               "end_index": citation.end.min(end),
                               "url": citation.url, "title": citation.title})
                    })
                    .collect();
                for (index, annotation) in annotations.iter().enumerate() {
                    self.emit(
                        out,
                        "response.output_text.annotation.added",
                        json!({"item_id": id, "output_index": output_index, "content_index": 0,
                               "annotation_index": index, "annotation": annotation}),
                    );
                }
                if self.direct() {
                    let item = self.text_done(out, (&id, output_index), &text, &annotations);
                    self.item_written(out, item, output_index);
                    return;
                }
                self.emit(out, "response.output_text.done",
                    json!({"item_id": id, "output_index": output_index, "content_index": 0, "text": text, "logprobs": []}));
                self.emit(
                    out,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": output_index, "content_index": 0,
                           "part": {"type": "output_text", "text": text, "annotations": annotations}}),
                );
                let mut item = message_item(&id, &text, "completed");
                item["content"][0]["annotations"] = Value::Array(annotations);
                item
            }
            Kind::Thinking { signature } => {
                self.emit(out, "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": output_index, "summary_index": 0, "text": text}));
                self.emit(
                    out,
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": output_index, "summary_index": 0,
                           "part": {"type": "summary_text", "text": text}}),
                );
                reasoning_item(&id, &Part::Thinking { text, signature })
            }
            Kind::Redacted { data } => reasoning_item(&id, &Part::RedactedThinking { data }),
            Kind::Tool { call_id, name } => {
                let arguments = if text.is_empty() {
                    "{}".to_string()
                } else {
                    text
                };
                self.emit(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": output_index, "arguments": arguments}),
                );
                function_call_item(&id, &call_id, &name, &arguments, "completed")
            }
            Kind::Custom { call_id, name } => {
                let input = custom_input(&text);
                self.emit(
                    out,
                    "response.custom_tool_call_input.delta",
                    json!({"item_id": id, "output_index": output_index, "delta": input}),
                );
                self.emit(
                    out,
                    "response.custom_tool_call_input.done",
                    json!({"item_id": id, "output_index": output_index, "input": input}),
                );
                custom_call_item(&id, &call_id, &name, &text, "completed")
            }
        };
        self.item_done(out, item, output_index);
    }

    /// `response.output_item.added` / `.done` of `item`.
    fn emit_item(&mut self, out: &mut BytesMut, kind: &str, item: &Value, output_index: u32) {
        if self.direct() {
            let index = u64::from(output_index);
            let members = [
                ("item", Member::Json(item)),
                ("output_index", Member::U64(index)),
            ];
            self.emit_members(out, kind, &members);
        } else {
            self.emit(
                out,
                kind,
                json!({"output_index": output_index, "item": item}),
            );
        }
    }

    /// A text item's `response.output_text.done` and `response.content_part.done`; the
    /// finished item's bytes (its text escaped once for all three).
    fn text_done(
        &mut self,
        out: &mut BytesMut,
        (id, output_index): (&str, u32),
        text: &str,
        annotations: &[Value],
    ) -> Bytes {
        let index = u64::from(output_index);
        let mut quoted = BytesMut::with_capacity(text.len() + 2);
        write_json_str(&mut quoted, text);
        self.emit_members(
            out,
            "response.output_text.done",
            &[
                ("content_index", Member::U64(0)),
                ("item_id", Member::Str(id)),
                ("logprobs", Member::Raw(b"[]")),
                ("output_index", Member::U64(index)),
                ("text", Member::Raw(&quoted)),
            ],
        );
        // The item's `content` is this one part: written once, the item around it.
        let mut item = BytesMut::with_capacity(quoted.len() + id.len() + 160);
        item.extend_from_slice(b"{\"content\":[");
        let part_start = item.len();
        item.extend_from_slice(b"{\"annotations\":");
        // A slice of `Value`s serializes as the array of them, without error.
        let _ = serde_json::to_writer((&mut item).writer(), annotations);
        item.extend_from_slice(b",\"text\":");
        item.extend_from_slice(&quoted);
        item.extend_from_slice(b",\"type\":\"output_text\"}");
        let part = part_start..item.len();
        self.emit_members(
            out,
            "response.content_part.done",
            &[
                ("content_index", Member::U64(0)),
                ("item_id", Member::Str(id)),
                ("output_index", Member::U64(index)),
                ("part", Member::Raw(&item[part])),
            ],
        );
        // `message_item(id, text, "completed")` with these annotations, in its key order.
        item.extend_from_slice(b"],\"id\":");
        write_json_str(&mut item, id);
        item.extend_from_slice(
            b",\"role\":\"assistant\",\"status\":\"completed\",\"type\":\"message\"}",
        );
        item.freeze()
    }
}
/// A member of the response `response.created` wrote that its finish changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finished {
    Status,
    CompletedAt,
    Incomplete,
    Usage,
    Output,
}

impl Finished {
    const ALL: [Finished; 5] = [
        Finished::Status,
        Finished::CompletedAt,
        Finished::Incomplete,
        Finished::Usage,
        Finished::Output,
    ];

    fn key(self) -> &'static str {
        match self {
            Finished::Status => "status",
            Finished::CompletedAt => "completed_at",
            Finished::Incomplete => "incomplete_details",
            Finished::Usage => "usage",
            Finished::Output => "output",
        }
    }

    fn of(key: &str) -> Option<Finished> {
        Finished::ALL.into_iter().find(|member| member.key() == key)
    }
}

/// The response `response.created` wrote, as `write_json` writes it, and where each member's
/// bytes (`"key":value`) are in it: `response.completed` copies the members its finish does
/// not change instead of serializing them again (the echoed request is most of them).
#[derive(Debug)]
struct WrittenResponse {
    bytes: BytesMut,
    members: Vec<(std::ops::Range<usize>, Option<Finished>)>,
}

impl WrittenResponse {
    /// The object of `members` (in their order, each key once).
    fn written(object: &[(&str, Member<'_>)]) -> Self {
        let mut bytes = BytesMut::with_capacity(1024);
        let mut members = Vec::with_capacity(object.len());
        bytes.extend_from_slice(b"{");
        for (n, (key, value)) in object.iter().enumerate() {
            if n > 0 {
                bytes.extend_from_slice(b",");
            }
            let start = bytes.len();
            write_json_str(&mut bytes, key);
            bytes.extend_from_slice(b":");
            match value {
                Member::Str(text) => write_json_str(&mut bytes, text),
                Member::U64(number) => write_json_u64(&mut bytes, *number),
                Member::Json(value) => write_json(&mut bytes, value),
                Member::Raw(json) => bytes.extend_from_slice(json),
            }
            members.push((start..bytes.len(), Finished::of(key)));
        }
        bytes.extend_from_slice(b"}");
        WrittenResponse { bytes, members }
    }

    /// The finished response: this one with what the finish changes in `response_object` (its
    /// status, `completed_at`, `incomplete_details`, usage) and `output` (the items' JSON
    /// bytes), as `write_json` writes that response; false (nothing meant) when this one lacks
    /// a member the finish sets.
    fn finish(
        &self,
        out: &mut BytesMut,
        (finish, created, counts): (Finish, u64, &Usage),
        output: &[Bytes],
    ) -> bool {
        let has = |member| self.members.iter().any(|(_, m)| *m == Some(member));
        if !Finished::ALL.into_iter().all(has) {
            return false;
        }
        let status = super::write::status(finish);
        out.extend_from_slice(b"{");
        for (n, (span, member)) in self.members.iter().enumerate() {
            if n > 0 {
                out.extend_from_slice(b",");
            }
            let Some(member) = member else {
                out.extend_from_slice(&self.bytes[span.clone()]);
                continue;
            };
            write_json_str(out, member.key());
            out.extend_from_slice(b":");
            match member {
                Finished::Status => write_json_str(out, status),
                Finished::CompletedAt if status == "completed" => write_json_u64(out, created),
                Finished::CompletedAt => out.extend_from_slice(b"null"),
                Finished::Incomplete => out.extend_from_slice(match finish {
                    Finish::Length => br#"{"reason":"max_output_tokens"}"#,
                    Finish::ContentFilter => br#"{"reason":"content_filter"}"#,
                    _ => b"null",
                }),
                Finished::Usage => write_usage(out, counts),
                Finished::Output => write_output(out, output),
            }
        }
        out.extend_from_slice(b"}");
        true
    }
}

/// `usage(counts)` as `write_json` writes it (its keys in order), without building it.
fn write_usage(out: &mut BytesMut, counts: &Usage) {
    out.extend_from_slice(br#"{"input_tokens":"#);
    write_json_u64(out, counts.input);
    out.extend_from_slice(br#","input_tokens_details":{"cache_write_tokens":"#);
    write_json_u64(out, counts.cache_write);
    out.extend_from_slice(br#","cached_tokens":"#);
    write_json_u64(out, counts.cached);
    out.extend_from_slice(br#"},"output_tokens":"#);
    write_json_u64(out, counts.output);
    out.extend_from_slice(br#","output_tokens_details":{"reasoning_tokens":"#);
    write_json_u64(out, counts.reasoning);
    out.extend_from_slice(br#"},"total_tokens":"#);
    write_json_u64(out, counts.input + counts.output);
    out.extend_from_slice(b"}");
}

/// `response` (an object) as `write_json` writes it with `output` (items' JSON bytes) as its
/// `output` array: the members in their order, each as serde_json writes it.
fn write_with_output(out: &mut BytesMut, response: &Value, output: &[Bytes]) {
    let Some(members) = response.as_object() else {
        write_json(out, response);
        return;
    };
    out.extend_from_slice(b"{");
    for (n, (key, value)) in members.iter().enumerate() {
        if n > 0 {
            out.extend_from_slice(b",");
        }
        write_json_str(out, key);
        out.extend_from_slice(b":");
        if key == "output" {
            write_output(out, output);
        } else {
            write_json(out, value);
        }
    }
    out.extend_from_slice(b"}");
}

/// A response's `output` array from its items' JSON bytes.
fn write_output(out: &mut BytesMut, output: &[Bytes]) {
    out.extend_from_slice(b"[");
    for (n, item) in output.iter().enumerate() {
        if n > 0 {
            out.extend_from_slice(b",");
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]");
}

/// The `response.output_text.delta` event [`ResponsesWriter::emit`] writes for `piece` of
/// item `id` at `output_index`, numbered `sequence`, byte for byte (keys in `serde_json::Map`'s
/// sorted order), written around the piece instead of serialized from a `Value`: most of a
/// translated stream's events are text.
/// `piece`: the text, and whether it holds nothing to escape (then written as it is).
fn write_text_delta(out: &mut BytesMut, tail: &[u8], sequence: u64, piece: (&str, bool)) {
    let (piece, is_plain) = piece;
    const HEAD: &[u8] = b"event: response.output_text.delta\ndata: {\"content_index\":0,\"delta\":";
    const END: &[u8] = b",\"type\":\"response.output_text.delta\"}\n\n";
    // The whole event at once (the piece's quotes, a sequence number of up to 20 digits;
    // escapes may ask for more): one allocation where growing writes would each grow `out`.
    out.reserve(HEAD.len() + piece.len() + 2 + tail.len() + 20 + END.len());
    out.extend_from_slice(HEAD);
    write_known_json_str(out, piece, is_plain);
    out.extend_from_slice(tail);
    write_json_u64(out, sequence);
    out.extend_from_slice(END);
}

/// What a text delta of item `id` at `output_index` writes between its piece and its
/// sequence number: the same for all of the item's deltas, written once.
fn delta_tail(id: &str, output_index: u32) -> Vec<u8> {
    let mut tail = BytesMut::with_capacity(id.len() + 64);
    tail.extend_from_slice(b",\"item_id\":");
    write_json_str(&mut tail, id);
    tail.extend_from_slice(b",\"logprobs\":[],\"output_index\":");
    write_json_u64(&mut tail, u64::from(output_index));
    tail.extend_from_slice(b",\"sequence_number\":");
    tail.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One answer written by a writer for `echo`: directly, or built as `Value`s.
    fn written(echo: &Arc<Echo>, events: &[Event], whole: bool) -> BytesMut {
        let mut writer = ResponsesWriter::new(1_700_000_000, Arc::clone(echo));
        writer.whole_values.set(whole);
        let mut out = BytesMut::new();
        for event in events {
            writer.event(event, &mut out);
        }
        out
    }

    #[test]
    fn the_finished_response_copied_from_the_created_one_is_the_bytes_of_its_value() {
        let request = json!({"model": "m", "input": "hi", "instructions": "Be \"brief\"\n é 🦀",
            "max_output_tokens": 64, "temperature": 0, "metadata": {"k": "v\u{1}"},
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}},
                      {"type": "custom", "name": "apply_patch"}],
            "reasoning": {"effort": "low", "summary": "auto"}, "text": {"format": {"type": "json_object"}},
            "user": "u", "parallel_tool_calls": false, "top_p": 0.5});
        let Value::Object(request) = request else {
            unreachable!()
        };
        let plain = Echo::of(&request);
        let echoes = [
            Arc::new(Echo::default()),
            Arc::new(plain.clone()),
            Arc::new(plain.kept_as("resp_kept")),
            Arc::new(plain.continuing("resp_before")),
        ];
        let usage = Usage {
            input: 12,
            cached: 4,
            cache_write: 1,
            output: 30,
            reasoning: 7,
        };
        for echo in echoes {
            for finish in [
                None,
                Some(Finish::Stop),
                Some(Finish::Length),
                Some(Finish::ToolCalls),
                Some(Finish::ContentFilter),
            ] {
                let events = [
                    Event::Start {
                        id: "msg_\"x\"".into(),
                        model: json!("claude \"é\""),
                        usage: Some(usage),
                    },
                    Event::ThinkingStart,
                    Event::Thinking("hm \"".into()),
                    Event::Signature("sig".into()),
                    Event::BlockStop,
                    Event::TextStart,
                    Event::Text("Hé \"q\"\n".into()),
                    Event::Text(" 🦀".into()),
                    Event::BlockStop,
                    Event::ToolStart {
                        id: "call_1".into(),
                        name: "f".into(),
                    },
                    Event::ToolArguments("{\"a\":1}".into()),
                    Event::Finish {
                        finish,
                        usage: Some(Usage {
                            output: 31,
                            ..usage
                        }),
                    },
                    Event::Done,
                ];
                let direct = written(&echo, &events, false);
                assert_eq!(direct, written(&echo, &events, true), "{echo:?} {finish:?}");
                assert!(
                    String::from_utf8_lossy(&direct).contains("response.completed")
                        || String::from_utf8_lossy(&direct).contains("response.incomplete")
                );
            }
        }
    }

    #[test]
    fn each_echoed_default_written_is_the_bytes_of_its_value() {
        let echo = Echo::default();
        let mut count = 0;
        for (key, echoed) in echo.echoed() {
            let Echoed::Default(written) = echoed else {
                panic!("{key} is not set")
            };
            let value = echo.field(key).unwrap();
            assert_eq!(written, &serde_json::to_vec(&*value).unwrap()[..], "{key}");
            count += 1;
        }
        assert_eq!(count, 13);
    }

    #[test]
    fn usage_written_is_the_bytes_of_its_value() {
        for counts in [
            Usage::default(),
            Usage {
                input: 12,
                cached: 4,
                cache_write: 1,
                output: 30,
                reasoning: 7,
            },
            Usage {
                input: u64::MAX / 2,
                cached: 10_000_000_000,
                cache_write: 9,
                output: 99,
                reasoning: 0,
            },
        ] {
            let mut written = BytesMut::new();
            write_usage(&mut written, &counts);
            assert_eq!(written, json_bytes(&usage(&counts)));
        }
    }

    #[test]
    fn a_text_delta_is_the_bytes_of_the_event_it_replaces() {
        for piece in [
            "hé \"q\"\n",
            "\u{1}</b>",
            "🦀",
            "plain é 🦀 \u{7f} \u{2028}",
        ] {
            let mut writer = ResponsesWriter::new(7, Arc::new(Echo::default()));
            writer.sequence = 41;
            let mut fast = BytesMut::new();
            write_text_delta(&mut fast, &delta_tail("msg_\"x\"", 3), 41, (piece, false));
            // Written as it is only when it holds nothing to escape, as then it is the same.
            if crate::wire::json_scan::plain(piece.as_bytes()) {
                let mut known = BytesMut::new();
                write_text_delta(&mut known, &delta_tail("msg_\"x\"", 3), 41, (piece, true));
                assert_eq!(known, fast, "{piece:?}");
            }
            let mut event = BytesMut::new();
            writer.emit(
                &mut event,
                "response.output_text.delta",
                json!({"item_id": "msg_\"x\"", "output_index": 3, "content_index": 0,
                       "delta": piece, "logprobs": []}),
            );
            assert_eq!(fast, event);
            assert_eq!(writer.sequence, 42);
        }
    }
}
