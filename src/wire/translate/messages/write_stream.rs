//! The hub's events as a Messages stream: `message_start`, one `content_block_*` run per
//! thinking / text / tool call (arguments as `input_json_delta` pieces), then `message_delta`
//! (stop reason, usage with cache reads) and `message_stop`.

use bytes::BytesMut;
use serde_json::{json, Value};

use super::write::{message_id, stop_reason, usage};
use crate::wire::stream_error::anthropic_stream_error;
use crate::wire::translate::hub::form::{Event, Finish, Usage};
use crate::wire::translate::sse_write::write_data;

#[derive(Debug, Default)]
pub struct MessagesWriter {
    started: bool,
    /// The open block's index.
    open: Option<u32>,
    next_index: u32,
    finish: Option<Finish>,
    usage: Usage,
    done: bool,
}

impl MessagesWriter {
    pub fn new() -> Self {
        MessagesWriter::default()
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
        if let Some(index) = self.open.take() {
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
            Event::TextStart => self.start_block(json!({"type": "text", "text": ""}), out),
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
            Event::Text(text) if !text.is_empty() => {
                self.delta(out, json!({"type": "text_delta", "text": text}))
            }
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

    /// A break after commit (or a stream the router stopped) as the protocol's final error
    /// event, with its `error_type`.
    pub fn error(&mut self, message: &str, error_type: &str, out: &mut BytesMut) {
        self.done = true;
        out.extend_from_slice(&anthropic_stream_error(message, error_type));
    }
}
