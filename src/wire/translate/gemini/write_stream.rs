//! The hub's events as a Gemini stream: each chunk a whole `GenerateContentResponse` with the
//! text or thought piece it carries (pieces go out as they come), a call once its arguments are
//! whole (Gemini's clients take a call in one piece), the last chunk with the `finishReason`
//! and `usageMetadata`; framed as SSE or as one JSON array (`framing`). State: the open call's
//! arguments (bounded by the call) and a few fields.

use bytes::BytesMut;
use serde_json::{json, Value};

use super::framing::{Framer, Framing};
use super::write::{answer_part, error, finish_reason, response, usage};
use crate::wire::translate::hub::form::{Event, Finish, Part, ToolCall, Usage};
use crate::wire::translate::sse_write::json_bytes;

#[derive(Debug)]
pub struct GeminiWriter {
    framer: Framer,
    id: String,
    model: Value,
    /// The open call: its id, name and arguments so far.
    call: Option<ToolCall>,
    finish: Option<Finish>,
    usage: Usage,
    done: bool,
}

impl GeminiWriter {
    pub fn new(framing: Framing) -> Self {
        GeminiWriter {
            framer: Framer::new(framing),
            id: String::new(),
            model: Value::Null,
            call: None,
            finish: None,
            usage: Usage::default(),
            done: false,
        }
    }

    /// Switches to another framing (before anything is written).
    pub fn set_framing(&mut self, framing: Framing) {
        self.framer = Framer::new(framing);
    }

    fn chunk(&mut self, chunk: &Value, out: &mut BytesMut) {
        self.framer.chunk(&json_bytes(chunk), out);
    }

    fn part(&mut self, part: &Part, out: &mut BytesMut) {
        if let Some(part) = answer_part(part) {
            let chunk = response(&self.id, &self.model, vec![part]);
            self.chunk(&chunk, out);
        }
    }

    pub fn event(&mut self, event: &Event, out: &mut BytesMut) {
        if self.done {
            return;
        }
        match event {
            Event::Start { id, model, usage } => {
                self.id = id.clone();
                self.model = model.clone();
                self.usage = usage.unwrap_or_default();
            }
            Event::Text(text) => self.part(&Part::Text(text.clone()), out),
            Event::Thinking(text) => self.part(
                &Part::Thinking {
                    text: text.clone(),
                    signature: String::new(),
                },
                out,
            ),
            Event::ToolStart { id, name } => {
                self.call = Some(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                });
            }
            Event::ToolArguments(piece) => {
                if let Some(call) = &mut self.call {
                    call.arguments.push_str(piece);
                }
            }
            Event::BlockStop => {
                if let Some(call) = self.call.take() {
                    self.part(&Part::ToolCall(call), out);
                }
            }
            Event::Finish { finish, usage } => {
                self.finish = finish.or(self.finish);
                if let Some(usage) = usage {
                    self.usage = *usage;
                }
            }
            Event::Done => {
                if let Some(call) = self.call.take() {
                    self.part(&Part::ToolCall(call), out);
                }
                self.done = true;
                let mut last = response(&self.id, &self.model, vec![json!({"text": ""})]);
                last["candidates"][0]["finishReason"] =
                    json!(finish_reason(self.finish.unwrap_or_default()));
                last["usageMetadata"] = usage(&self.usage);
                self.chunk(&last, out);
                self.framer.end(out);
            }
            Event::Error { message, kind } => self.error(message, kind, out),
            _ => {}
        }
    }

    /// A break after commit (or a stream the router stopped) as Google's error object, the
    /// stream's last chunk; `code` (the upstream's status name or the router's code) as its
    /// reason.
    pub fn error(&mut self, message: &str, code: &str, out: &mut BytesMut) {
        self.done = true;
        let status = match code {
            "RESOURCE_EXHAUSTED" | "rate_limit_error" | "rate_limited" | "budget_exceeded" => 429,
            "UNAVAILABLE" | "overloaded_error" => 503,
            "DEADLINE_EXCEEDED" | "timeout_error" => 504,
            _ => 500,
        };
        let body = error(status, message, Some(code));
        self.framer.chunk(&json_bytes(&body), out);
        self.framer.end(out);
    }
}
