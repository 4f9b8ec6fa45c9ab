//! The one stream translator the relay drives: upstream SSE events in, the client's protocol
//! out, event by event (behaviour §14). `ping` and events the client's protocol has no word for
//! are dropped; a break after commit becomes the client protocol's error event.

use bytes::BytesMut;
use serde_json::Value;

use super::stream_chat::ChatFromMessages;
use super::stream_messages::MessagesFromChat;
use super::stream_responses::ResponsesFromMessages;
use super::Direction;
use crate::wire::sse::SseEvent;
use crate::wire::stream_error::{anthropic_stream_error, openai_stream_error};

/// A stream's translation state, one per translated stream.
#[derive(Debug)]
pub enum StreamTranslator {
    ToChat(ChatFromMessages),
    ToResponses(Box<ResponsesFromMessages>),
    ToMessages(MessagesFromChat),
}

impl StreamTranslator {
    /// `include_usage`: a Chat Completions client asked for the usage chunk; `created`: the
    /// Unix time its chunks say.
    pub fn new(direction: Direction, include_usage: bool, created: u64) -> Self {
        match direction {
            Direction::ChatToMessages => {
                StreamTranslator::ToChat(ChatFromMessages::new(include_usage, created))
            }
            Direction::ResponsesToMessages => {
                StreamTranslator::ToResponses(Box::new(ResponsesFromMessages::new(created)))
            }
            Direction::MessagesToChat => StreamTranslator::ToMessages(MessagesFromChat::new()),
        }
    }

    /// One upstream event, translated into `out` (nothing for events with no counterpart).
    pub fn event(&mut self, event: &SseEvent, out: &mut BytesMut) {
        match self {
            StreamTranslator::ToMessages(t) => t.event(&event.data, out),
            StreamTranslator::ToChat(_) | StreamTranslator::ToResponses(_) => {
                let Ok(data) = serde_json::from_str::<Value>(&event.data) else {
                    return;
                };
                match self {
                    StreamTranslator::ToChat(t) => t.event(&data, out),
                    StreamTranslator::ToResponses(t) => t.event(&data, out),
                    StreamTranslator::ToMessages(_) => {}
                }
            }
        }
    }

    /// The upstream's stream ended.
    pub fn finish(&mut self, out: &mut BytesMut) {
        match self {
            StreamTranslator::ToChat(t) => t.finish(out),
            StreamTranslator::ToMessages(t) => t.finish(out),
            StreamTranslator::ToResponses(_) => {}
        }
    }

    /// A break after commit as the client protocol's final error event.
    pub fn error(&mut self, message: &str, out: &mut BytesMut) {
        self.error_coded(message, "upstream_error", "api_error", out);
    }

    /// The client protocol's final error event with OpenAI's `code` or Anthropic's
    /// `error_type` (a stream the router stopped: `budget_exceeded`, `rate_limit_error`).
    pub fn error_coded(&mut self, message: &str, code: &str, error_type: &str, out: &mut BytesMut) {
        match self {
            StreamTranslator::ToChat(_) => {
                out.extend_from_slice(&openai_stream_error(message, code))
            }
            StreamTranslator::ToResponses(t) => t.error(message, code, out),
            StreamTranslator::ToMessages(_) => {
                out.extend_from_slice(&anthropic_stream_error(message, error_type))
            }
        }
    }
}
