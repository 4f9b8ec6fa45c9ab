//! The hub's events as a Messages stream: `message_start`, one `content_block_*` run per
//! thinking / text / tool call (arguments as `input_json_delta` pieces), then `message_delta`
//! (stop reason, usage with cache reads) and `message_stop`. A web search the host ran is a
//! `server_tool_use` block (its input as one `input_json_delta`) and a
//! `web_search_tool_result` block, as Anthropic streams them; a citation a `citations_delta`
//! in the text block that holds its span (Anthropic's citations cite their whole block: a
//! stream cannot split a block already sent, so the span's own text is its `cited_text`).

use super::super::whole_values::WholeValues;
use bytes::BytesMut;
use serde_json::{json, Value};

use super::write::{message_id, stop_reason, usage};
use crate::wire::stream_error::anthropic_stream_error;
use crate::wire::translate::citations;
use crate::wire::translate::held_text::HeldText;
use crate::wire::translate::hub::form::{Answer, Citation, Event, Finish, SearchCall, Usage};
use crate::wire::translate::sse_write::{
    write_data, write_json, write_json_str, write_json_u64, write_known_json_str,
};

#[derive(Debug, Default)]
pub struct MessagesWriter {
    started: bool,
    /// The open block's index.
    open: Option<u32>,
    next_index: u32,
    finish: Option<Finish>,
    usage: Usage,
    /// The open block is text: its text, for the passages its citations cite.
    text: Option<HeldText>,
    searches: u32,
    done: bool,
    /// Tests: every event built as a `Value` and serialized (what the direct writes are
    /// compared with).
    pub whole_values: WholeValues,
}

impl MessagesWriter {
    pub fn new() -> Self {
        MessagesWriter::default()
    }

    /// Whether the opening and closing events are written directly (else built as `Value`s,
    /// in tests).
    fn direct(&self) -> bool {
        self.whole_values.fast()
    }

    /// A block opened, as [`Self::start_block`] writes it, with the block's JSON (its members
    /// sorted, as a `Value` object's) written directly.
    fn start_block_direct(&mut self, block: &[u8], out: &mut BytesMut) {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        out.extend_from_slice(b"event: content_block_start\ndata: {\"content_block\":");
        out.extend_from_slice(block);
        out.extend_from_slice(b",\"index\":");
        write_json_u64(out, u64::from(index));
        out.extend_from_slice(b",\"type\":\"content_block_start\"}\n\n");
        self.open = Some(index);
    }

    /// `usage` as [`usage`] makes it, written directly (members sorted).
    fn write_usage(out: &mut BytesMut, usage: &Usage) {
        out.extend_from_slice(b"{\"cache_creation_input_tokens\":");
        write_json_u64(out, usage.cache_write);
        out.extend_from_slice(b",\"cache_read_input_tokens\":");
        write_json_u64(out, usage.cached);
        out.extend_from_slice(b",\"input_tokens\":");
        write_json_u64(out, usage.uncached_input());
        out.extend_from_slice(b",\"output_tokens\":");
        write_json_u64(out, usage.output);
        out.extend_from_slice(b"}");
    }

    /// `message_start`, as the `Value` [`Self::event`] builds for it, written directly.
    fn message_start(out: &mut BytesMut, id: &str, model: &Value, usage: Option<&Usage>) {
        out.extend_from_slice(b"event: message_start\ndata: {\"message\":{\"content\":[],\"id\":");
        write_json_str(out, &message_id(id));
        out.extend_from_slice(b",\"model\":");
        write_json(out, model);
        out.extend_from_slice(
            b",\"role\":\"assistant\",\"stop_reason\":null,\"stop_sequence\":null,\"type\":\"message\",\"usage\":",
        );
        match usage {
            Some(usage) => Self::write_usage(out, usage),
            None => out.extend_from_slice(b"{\"input_tokens\":0,\"output_tokens\":0}"),
        }
        out.extend_from_slice(b"},\"type\":\"message_start\"}\n\n");
    }

    /// `message_delta` and `message_stop`, as the `Value`s [`Self::event`] builds for them,
    /// written directly.
    fn message_end(&self, out: &mut BytesMut) {
        out.extend_from_slice(b"event: message_delta\ndata: {\"delta\":{\"stop_reason\":");
        write_json_str(out, stop_reason(self.finish.unwrap_or_default()));
        out.extend_from_slice(b",\"stop_sequence\":null},\"type\":\"message_delta\",\"usage\":");
        Self::write_usage(out, &self.usage);
        out.extend_from_slice(b"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    }

    /// A piece of text, as [`Self::event`] writes `Event::Text`: the translator hands a text
    /// event's piece here borrowed, without an event around it.
    pub fn text(&mut self, text: &str, out: &mut BytesMut) {
        self.text_known(text, false, out)
    }

    /// [`Self::text`] of a text known to hold nothing JSON escapes (`is_plain`: no quote,
    /// backslash or control byte, as `json_scan::plain` finds), written as its own bytes.
    pub fn text_known(&mut self, text: &str, is_plain: bool, out: &mut BytesMut) {
        if self.done || text.is_empty() {
            return;
        }
        if let Some(held) = self.text.as_mut() {
            held.push(text);
        }
        self.text_delta(out, text, is_plain)
    }

    fn start_block(&mut self, block: Value, out: &mut BytesMut) {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        write_data(
            out,
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        self.open = Some(index);
    }

    fn close(&mut self, out: &mut BytesMut) {
        self.text = None;
        if let Some(index) = self.open.take() {
            if self.direct() {
                out.extend_from_slice(b"event: content_block_stop\ndata: {\"index\":");
                write_json_u64(out, u64::from(index));
                out.extend_from_slice(b",\"type\":\"content_block_stop\"}\n\n");
                return;
            }
            write_data(
                out,
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
    }

    fn delta(&self, out: &mut BytesMut, delta: Value) {
        if let Some(index) = self.open {
            write_data(
                out,
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            );
        }
    }

    /// The `text_delta` [`Self::delta`] writes for `text`, byte for byte, written around the
    /// text instead of serialized from a `Value`: most of a translated stream's events are text.
    fn text_delta(&self, out: &mut BytesMut, text: &str, is_plain: bool) {
        const HEAD: &[u8] = b"event: content_block_delta\ndata: {\"delta\":{\"text\":";
        const AFTER_TEXT: &[u8] = b",\"type\":\"text_delta\"},\"index\":";
        const TAIL: &[u8] = b",\"type\":\"content_block_delta\"}\n\n";
        if let Some(index) = self.open {
            // The whole event at once (its quotes and an index of up to 10 digits; escapes
            // may ask for more): one allocation where five growing writes would each grow
            // `out`.
            out.reserve(HEAD.len() + text.len() + 2 + AFTER_TEXT.len() + 10 + TAIL.len());
            out.extend_from_slice(HEAD);
            write_known_json_str(out, text, is_plain);
            out.extend_from_slice(AFTER_TEXT);
            write_json_u64(out, u64::from(index));
            out.extend_from_slice(TAIL);
        }
    }

    pub fn event(&mut self, event: &Event, out: &mut BytesMut) {
        if self.done {
            return;
        }
        match event {
            Event::Start { id, model, usage } => {
                if self.started {
                    return;
                }
                self.started = true;
                if self.direct() {
                    Self::message_start(out, id, model, usage.as_ref());
                    return;
                }
                let start_usage = match usage {
                    Some(usage) => super::write::usage(usage),
                    None => json!({"input_tokens": 0, "output_tokens": 0}),
                };
                write_data(
                    out,
                    Some("message_start"),
                    &json!({"type": "message_start", "message": {
                        "id": message_id(id),
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": null,
                        "stop_sequence": null,
                        "usage": start_usage,
                    }}),
                );
            }
            Event::TextStart => {
                if self.direct() {
                    self.start_block_direct(b"{\"text\":\"\",\"type\":\"text\"}", out);
                } else {
                    self.start_block(json!({"type": "text", "text": ""}), out);
                }
                self.text = Some(HeldText::default());
            }
            Event::ThinkingStart if self.direct() => self.start_block_direct(
                b"{\"signature\":\"\",\"thinking\":\"\",\"type\":\"thinking\"}",
                out,
            ),
            Event::ThinkingStart => self.start_block(
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                out,
            ),
            Event::Redacted(data) => {
                self.start_block(json!({"type": "redacted_thinking", "data": data}), out)
            }
            Event::ToolStart { id, name } => self.start_block(
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                out,
            ),
            Event::Text(text) => self.text(text, out),
            Event::Search(search) => self.search(search, out),
            Event::Citation(citation) => self.citation(citation, out),
            Event::Thinking(text) if !text.is_empty() => {
                self.delta(out, json!({"type": "thinking_delta", "thinking": text}))
            }
            Event::Signature(piece) if !piece.is_empty() => {
                self.delta(out, json!({"type": "signature_delta", "signature": piece}))
            }
            Event::ToolArguments(piece) if !piece.is_empty() => self.delta(
                out,
                json!({"type": "input_json_delta", "partial_json": piece}),
            ),
            Event::BlockStop => self.close(out),
            Event::Finish { finish, usage } => {
                self.finish = finish.or(self.finish);
                if let Some(usage) = usage {
                    self.usage = *usage;
                }
            }
            Event::Done => {
                if !self.started {
                    return;
                }
                self.done = true;
                self.close(out);
                if self.direct() {
                    self.message_end(out);
                    return;
                }
                write_data(
                    out,
                    Some("message_delta"),
                    &json!({
                        "type": "message_delta",
                        "delta": {"stop_reason": stop_reason(self.finish.unwrap_or_default()), "stop_sequence": null},
                        "usage": usage(&self.usage),
                    }),
                );
                write_data(out, Some("message_stop"), &json!({"type": "message_stop"}));
            }
            Event::Error { message, .. } => {
                self.done = true;
                out.extend_from_slice(&anthropic_stream_error(message, "api_error"));
            }
            _ => {}
        }
    }

    /// A web search the host ran: its `server_tool_use` block and its result block.
    fn search(&mut self, search: &SearchCall, out: &mut BytesMut) {
        let answer = Answer {
            searches: vec![search.clone()],
            ..Answer::default()
        };
        let mut blocks = citations::anthropic_search_blocks(&answer).into_iter();
        let (Some(mut call), Some(result)) = (blocks.next(), blocks.next()) else {
            return;
        };
        // Unique in this answer: the blocks' ids say which search they are.
        let id = format!(
            "{}_{}",
            call["id"].as_str().unwrap_or("srvtoolu"),
            self.searches
        );
        self.searches += 1;
        let input = std::mem::replace(&mut call["input"], json!({}));
        call["id"] = json!(id);
        self.start_block(call, out);
        self.delta(
            out,
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
        );
        let mut result = result;
        result["tool_use_id"] = json!(id);
        self.start_block(result, out);
        self.close(out);
    }

    /// A citation of the open text block, as a `citations_delta`.
    fn citation(&mut self, citation: &Citation, out: &mut BytesMut) {
        let Some(held) = self.text.as_ref() else {
            return;
        };
        let cited_text = citation
            .cited_text
            .clone()
            .or_else(|| held.slice(citation.start, citation.end.min(held.chars())))
            .unwrap_or_default();
        self.delta(
            out,
            json!({"type": "citations_delta", "citation": {
                "type": "web_search_result_location",
                "url": citation.url,
                "title": citation.title,
                "cited_text": cited_text,
                "encrypted_index": "",
            }}),
        );
    }

    /// A break after commit (or a stream the router stopped) as the protocol's final error
    /// event, with its `error_type`.
    pub fn error(&mut self, message: &str, error_type: &str, out: &mut BytesMut) {
        self.done = true;
        out.extend_from_slice(&anthropic_stream_error(message, error_type));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_delta_is_the_bytes_of_the_event_it_replaces() {
        let mut writer = MessagesWriter::new();
        writer.event(&Event::TextStart, &mut BytesMut::new());
        writer.event(&Event::BlockStop, &mut BytesMut::new());
        writer.event(&Event::TextStart, &mut BytesMut::new());
        assert_eq!(writer.open, Some(1));
        for text in [
            "hé \"q\"\n",
            "\u{1}</b>",
            "🦀",
            "plain é 🦀 \u{7f} \u{2028}",
        ] {
            let mut fast = BytesMut::new();
            writer.text_delta(&mut fast, text, false);
            let mut event = BytesMut::new();
            writer.delta(&mut event, json!({"type": "text_delta", "text": text}));
            assert_eq!(fast, event);
            // Written as it is only when it holds nothing to escape, as then it is the same.
            if crate::wire::json_scan::plain(text.as_bytes()) {
                let mut known = BytesMut::new();
                writer.text_delta(&mut known, text, true);
                assert_eq!(known, event, "{text:?}");
            }
        }
    }
}
