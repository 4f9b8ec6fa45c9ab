//! The hub's events as Chat Completions chunks: the role chunk, `content` /
//! `reasoning_content` / `tool_calls[i]` deltas (arguments in the pieces they came in), the
//! `finish_reason` chunk, the usage chunk when the client asked for it, and `data: [DONE]`.
//! Citations go out as OpenAI's search models send them: one chunk whose `delta.annotations`
//! lists the `url_citation`s (indices in characters of the whole `content`), before the
//! finish. State is the open tool call, a few counters and the citations (one small entry
//! each): nothing grows with the text.

use super::super::whole_values::WholeValues;
use bytes::{BufMut, BytesMut};
use serde::Serialize;
use serde_json::{json, Value};

use super::write::{chat_id, finish_reason, usage};
use crate::wire::json_scan::plain;
use crate::wire::stream_error::openai_stream_error;
use crate::wire::translate::hub::form::{Event, Usage};

/// Most citations one answer's annotations chunk lists.
const MAX_ANNOTATIONS: usize = 4096;
use crate::wire::translate::sse_write::{write_data, write_json, write_json_str, write_json_u64};

/// One `chat.completion.chunk`, serialized as it stands: the same bytes as the `json!` object
/// it replaces (keys in `serde_json::Map`'s sorted order), without building and dropping that
/// object on every event of a translated stream.
#[derive(Serialize)]
struct Chunk<'a> {
    choices: [Choice<'a>; 1],
    created: u64,
    id: &'a str,
    model: &'a Value,
    object: &'static str,
}

#[derive(Serialize)]
struct Choice<'a> {
    delta: &'a Value,
    finish_reason: Option<&'a str>,
    index: u32,
    logprobs: Option<()>,
}

#[derive(Debug)]
pub struct ChatWriter {
    id: String,
    model: Value,
    created: u64,
    include_usage: bool,
    /// The open tool call's index in `tool_calls`.
    tool: Option<u32>,
    tools: u32,
    usage: Usage,
    /// Characters of `content` sent, and where the open text block began in it.
    content_chars: usize,
    block_start: usize,
    /// The `url_citation` annotations not yet sent.
    annotations: Vec<Value>,
    /// What a `content` chunk holds after its text (the stream's time, id and model), made on
    /// the first text after the start: every text chunk of a stream ends the same.
    content_tail: Vec<u8>,
    done: bool,
    /// Tests: the chunks other than text built as `Value`s and serialized (what the direct
    /// writes are compared with).
    pub whole_values: WholeValues,
}

impl ChatWriter {
    pub fn new(include_usage: bool, created: u64) -> Self {
        ChatWriter {
            id: chat_id(""),
            model: Value::Null,
            created,
            include_usage,
            tool: None,
            tools: 0,
            usage: Usage::default(),
            content_chars: 0,
            block_start: 0,
            annotations: Vec::new(),
            content_tail: Vec::new(),
            done: false,
            whole_values: WholeValues::default(),
        }
    }

    /// Whether the role, finish and usage chunks are written directly (else built as
    /// `Value`s, in tests).
    fn direct(&self) -> bool {
        self.whole_values.fast()
    }

    /// The chunk [`Self::chunk`] writes for a delta whose members (sorted, as a `Value`
    /// object's) are `delta` and finish reason `finish`, byte for byte, written directly.
    fn chunk_direct(&self, out: &mut BytesMut, delta: &[u8], finish: Option<&str>) {
        out.extend_from_slice(b"data: {\"choices\":[{\"delta\":{");
        out.extend_from_slice(delta);
        out.extend_from_slice(b"},\"finish_reason\":");
        match finish {
            Some(finish) => write_json_str(out, finish),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"index\":0,\"logprobs\":null}],");
        self.identity(out);
        out.extend_from_slice(b"}\n\n");
    }

    /// A chunk's `created`, `id`, `model` and `object` members (sorted as the chunk's are).
    fn identity(&self, out: &mut BytesMut) {
        out.extend_from_slice(b"\"created\":");
        write_json_u64(out, self.created);
        out.extend_from_slice(b",\"id\":");
        write_json_str(out, &self.id);
        out.extend_from_slice(b",\"model\":");
        write_json(out, &self.model);
        out.extend_from_slice(b",\"object\":\"chat.completion.chunk\"");
    }

    /// The usage chunk (no choices), as `write_data` writes its `Value`, written directly.
    fn usage_chunk(&self, out: &mut BytesMut) {
        let u = &self.usage;
        out.extend_from_slice(b"data: {\"choices\":[],");
        self.identity(out);
        out.extend_from_slice(b",\"usage\":{\"completion_tokens\":");
        write_json_u64(out, u.output);
        out.extend_from_slice(b",\"completion_tokens_details\":{\"reasoning_tokens\":");
        write_json_u64(out, u.reasoning);
        out.extend_from_slice(b"},\"prompt_tokens\":");
        write_json_u64(out, u.input);
        out.extend_from_slice(b",\"prompt_tokens_details\":{\"cached_tokens\":");
        write_json_u64(out, u.cached);
        out.extend_from_slice(b"},\"total_tokens\":");
        write_json_u64(out, u.input + u.output);
        out.extend_from_slice(b"}}\n\n");
    }

    /// A piece of text, as [`Self::event`] writes `Event::Text`: the translator hands a text
    /// event's piece here borrowed, without an event around it.
    pub fn text(&mut self, text: &str, out: &mut BytesMut) {
        self.text_known(text, plain(text.as_bytes()), out)
    }

    /// [`Self::text`] of a text whose reader knows whether it is [`plain`] (then its bytes are
    /// written as they are).
    pub fn text_known(&mut self, text: &str, is_plain: bool, out: &mut BytesMut) {
        if self.done || text.is_empty() {
            return;
        }
        self.content_chars += text.chars().count();
        self.content_chunk(out, text, is_plain)
    }

    /// The chunk [`Self::chunk`] writes for the delta `{"content": text}`, byte for byte,
    /// written around the text instead of serialized from a `Value`: most of a translated
    /// stream's events are text.
    fn content_chunk(&mut self, out: &mut BytesMut, text: &str, is_plain: bool) {
        if self.content_tail.is_empty() {
            let mut tail = BytesMut::new();
            tail.extend_from_slice(
                b"\"},\"finish_reason\":null,\"index\":0,\"logprobs\":null}],\"created\":",
            );
            write_json_u64(&mut tail, self.created);
            tail.extend_from_slice(b",\"id\":");
            write_json_str(&mut tail, &self.id);
            tail.extend_from_slice(b",\"model\":");
            write_json(&mut tail, &self.model);
            tail.extend_from_slice(b",\"object\":\"chat.completion.chunk\"}\n\n");
            self.content_tail = tail.to_vec();
        }
        // Up to the text's opening quote; the tail begins with its closing quote.
        const HEAD: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"";
        // The whole chunk at once (escapes may ask for more): one allocation where three
        // growing writes would each grow `out`.
        out.reserve(HEAD.len() + text.len() + self.content_tail.len());
        if is_plain {
            // Nothing to escape (most texts): the text's bytes are the string's.
            out.extend_from_slice(HEAD);
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(&self.content_tail);
        } else {
            out.extend_from_slice(HEAD.get(..HEAD.len() - 1).unwrap_or_default());
            write_json_str(out, text);
            out.extend_from_slice(self.content_tail.get(1..).unwrap_or_default());
        }
    }

    fn chunk(&self, out: &mut BytesMut, delta: Value, finish: Option<&str>) {
        let chunk = Chunk {
            choices: [Choice {
                delta: &delta,
                finish_reason: finish,
                index: 0,
                logprobs: None,
            }],
            created: self.created,
            id: &self.id,
            model: &self.model,
            object: "chat.completion.chunk",
        };
        out.extend_from_slice(b"data: ");
        // Borrowed fields serialize without error and `BytesMut`'s writer never fails.
        let _ = serde_json::to_writer(out.writer(), &chunk);
        out.extend_from_slice(b"\n\n");
    }

    pub fn event(&mut self, event: &Event, out: &mut BytesMut) {
        if self.done {
            return;
        }
        match event {
            Event::Start { id, model, usage } => {
                self.id = chat_id(id);
                self.model = model.clone();
                self.content_tail.clear();
                self.usage = usage.unwrap_or_default();
                if self.direct() {
                    self.chunk_direct(out, b"\"content\":\"\",\"role\":\"assistant\"", None);
                } else {
                    self.chunk(out, json!({"role": "assistant", "content": ""}), None);
                }
            }
            Event::TextStart => self.block_start = self.content_chars,
            Event::Text(text) => self.text(text, out),
            Event::Citation(citation) if self.annotations.len() < MAX_ANNOTATIONS => {
                let end = self.content_chars;
                let at = |offset: usize| (self.block_start + offset).min(end);
                self.annotations
                    .push(json!({"type": "url_citation", "url_citation": {
                        "start_index": at(citation.start),
                        "end_index": at(citation.end),
                        "url": citation.url,
                        "title": citation.title,
                    }}));
            }
            Event::Thinking(text) if !text.is_empty() => {
                self.chunk(out, json!({"reasoning_content": text}), None)
            }
            Event::ToolStart { id, name } => {
                let index = self.tools;
                self.tools += 1;
                self.tool = Some(index);
                self.chunk(
                    out,
                    json!({"tool_calls": [{
                        "index": index,
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }]}),
                    None,
                );
            }
            Event::ToolArguments(piece) if !piece.is_empty() => {
                if let Some(index) = self.tool {
                    self.chunk(
                        out,
                        json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                        None,
                    );
                }
            }
            Event::BlockStop => self.tool = None,
            Event::Finish { finish, usage } => {
                if let Some(usage) = usage {
                    self.usage = *usage;
                }
                if let Some(finish) = finish {
                    self.send_annotations(out);
                    if self.direct() {
                        self.chunk_direct(out, b"", Some(finish_reason(*finish)));
                    } else {
                        self.chunk(out, json!({}), Some(finish_reason(*finish)));
                    }
                }
            }
            Event::Done => {
                self.send_annotations(out);
                self.done = true;
                if self.include_usage && self.direct() {
                    self.usage_chunk(out);
                } else if self.include_usage {
                    write_data(
                        out,
                        None,
                        &json!({
                            "id": self.id,
                            "object": "chat.completion.chunk",
                            "created": self.created,
                            "model": self.model,
                            "choices": [],
                            "usage": usage(&self.usage),
                        }),
                    );
                }
                out.extend_from_slice(b"data: [DONE]\n\n");
            }
            Event::Error { message, kind } => {
                self.done = true;
                out.extend_from_slice(&openai_stream_error(message, kind));
            }
            _ => {}
        }
    }

    /// The citations not yet sent, as one chunk (nothing when there are none).
    fn send_annotations(&mut self, out: &mut BytesMut) {
        if self.annotations.is_empty() {
            return;
        }
        let annotations = std::mem::take(&mut self.annotations);
        self.chunk(out, json!({"annotations": annotations}), None);
    }

    /// A break after commit (or a stream the router stopped) as the protocol's final error
    /// event, with its `code`.
    pub fn error(&mut self, message: &str, code: &str, out: &mut BytesMut) {
        self.done = true;
        out.extend_from_slice(&openai_stream_error(message, code));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_is_the_bytes_of_the_json_object_it_replaces() {
        let mut writer = ChatWriter::new(false, 7);
        writer.id = "chatcmpl-x".into();
        writer.model = json!("gpt-x");
        for (delta, finish) in [
            (json!({"content": "hé \"q\"\n"}), None),
            (json!({}), Some("stop")),
        ] {
            let mut out = BytesMut::new();
            writer.chunk(&mut out, delta.clone(), finish);
            let object = json!({
                "id": "chatcmpl-x",
                "object": "chat.completion.chunk",
                "created": 7,
                "model": "gpt-x",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            });
            assert_eq!(
                std::str::from_utf8(&out).unwrap(),
                format!("data: {object}\n\n")
            );
        }
    }

    #[test]
    fn a_text_chunk_is_the_bytes_of_the_chunk_it_replaces() {
        let mut writer = ChatWriter::new(false, 7);
        let start = Event::Start {
            id: "msg_\"1\"".into(),
            model: json!("claude-é"),
            usage: None,
        };
        writer.event(&start, &mut BytesMut::new());
        for text in [
            "hé \"q\"\n",
            "\u{1}</b>",
            "🦀",
            "plain",
            " a plain piece of text longer than a word",
            "a \\ b",
            "end\"",
        ] {
            let mut fast = BytesMut::new();
            writer.event(&Event::Text(text.into()), &mut fast);
            let mut chunk = BytesMut::new();
            writer.chunk(&mut chunk, json!({"content": text}), None);
            assert_eq!(fast, chunk);
        }
        // A new start makes the end of the text chunks again.
        let again = Event::Start {
            id: "other".into(),
            model: json!("m2"),
            usage: None,
        };
        writer.event(&again, &mut BytesMut::new());
        let mut fast = BytesMut::new();
        writer.event(&Event::Text("x".into()), &mut fast);
        let mut chunk = BytesMut::new();
        writer.chunk(&mut chunk, json!({"content": "x"}), None);
        assert_eq!(fast, chunk);
    }
}
