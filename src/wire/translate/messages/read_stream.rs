//! A Messages stream into the hub's events, event by event. Blocks other than text, thinking
//! and tool calls are left out whole, but for web search: its `server_tool_use` (its query in
//! pieces) and `web_search_tool_result` become one search event, and a text block's
//! `citations_delta` a citation of the whole block, given when the block ends (Anthropic sends
//! it before the text it cites). State: the open block's kind, its length and citations, the
//! search in progress and the usage so far (Anthropic sends it in pieces: `message_start`,
//! then `message_delta`).

use serde_json::{json, Map, Value};

use super::read::{finish, usage};
use crate::wire::translate::chunk_template::Learned;
use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{Citation, Event, SearchCall};
use crate::wire::translate::hub::{str_at, text_at};
use crate::wire::translate::text_delta;

#[derive(Debug, Default)]
pub struct MessagesReader {
    /// Whether the open block is one the form carries.
    open: Option<bool>,
    usage: Map<String, Value>,
    /// The web search whose `server_tool_use` came, its input JSON so far, until its result.
    search: Option<(SearchCall, String)>,
    /// The open text block's characters so far and its citations (each of the whole block).
    text_chars: usize,
    cited: Vec<Citation>,
    /// The stream's text deltas, as the last one read.
    chunks: Learned<()>,
}

impl MessagesReader {
    fn merge_usage(&mut self, usage: Option<&Value>) {
        for (key, value) in usage.and_then(Value::as_object).into_iter().flatten() {
            if !value.is_null() {
                self.usage.insert(key.clone(), value.clone());
            }
        }
    }

    fn usage(&self) -> crate::wire::translate::hub::form::Usage {
        usage(&Value::Object(self.usage.clone()))
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
        // A text block's piece (most events), as the `content_block_delta` arm below reads it.
        if self.open == Some(true) {
            if let Some(text) = text_delta::messages_text_learned(data, &mut self.chunks) {
                self.text_chars += text.chars().count();
                events.push(Event::Text(text.into_owned()));
                return;
            }
        }
        let Ok(data) = serde_json::from_str::<Value>(data) else {
            return;
        };
        match str_at(&data, "type") {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                self.merge_usage(message.get("usage"));
                events.push(Event::Start {
                    id: str_at(message, "id").to_string(),
                    model: message.get("model").cloned().unwrap_or(Value::Null),
                    usage: Some(self.usage()),
                });
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                let carried = self.block_start(block, events);
                self.open = Some(carried);
            }
            "content_block_delta" if self.open == Some(false) => {
                // A web search's query, in pieces.
                let delta = data.get("delta").unwrap_or(&Value::Null);
                if let Some((_, input)) = self.search.as_mut() {
                    if str_at(delta, "type") == "input_json_delta" {
                        input.push_str(str_at(delta, "partial_json"));
                    }
                }
            }
            "content_block_delta" if self.open == Some(true) => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
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
            "content_block_stop" => {
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
            "message_delta" => {
                self.merge_usage(data.get("usage"));
                let stop = data
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str);
                events.push(Event::Finish {
                    finish: Some(finish(stop)),
                    usage: Some(self.usage()),
                });
            }
            "message_stop" => events.push(Event::Done),
            "error" => {
                let error = data.get("error").unwrap_or(&Value::Null);
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
