//! What one mock request asks for: the endpoint (by path suffix) and the deterministic reply it
//! will get (text chunks, token counts).
//!
//! Owns reading the request body; never renders a response.

use serde_json::Value;

use super::rate_headers::Dialect;

/// The reply's words; a request's `max_tokens` (or `max_completion_tokens` /
/// `max_output_tokens`) picks how many chunks it gets (cycling through these), default 6.
pub(crate) const REPLY_WORDS: [&str; 6] = ["This", " is", " a", " mock", " reply", "."];
pub(crate) const MAX_REPLY_CHUNKS: u64 = 4096;

/// The text of a reply of `chunks` chunks, as every API of the mock answers it.
pub fn reply_text(chunks: usize) -> String {
    REPLY_WORDS.iter().cycle().take(chunks).copied().collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    ChatCompletions,
    Completions,
    Embeddings,
    Responses,
    /// `…/responses/compact`: the Responses API's compaction, never streamed.
    Compact,
    Messages,
    /// Anthropic's `…/messages/count_tokens`: `{"input_tokens": N}`, never streamed.
    CountTokens,
}

impl Endpoint {
    /// Matches on the path's end, so `/v1/chat/completions` and `/openai/v1/chat/completions`
    /// both work.
    pub fn from_path(path: &str) -> Option<Self> {
        let path = path.trim_end_matches('/');
        [
            ("/chat/completions", Self::ChatCompletions),
            ("/completions", Self::Completions),
            ("/embeddings", Self::Embeddings),
            ("/responses", Self::Responses),
            ("/responses/compact", Self::Compact),
            ("/messages", Self::Messages),
            ("/messages/count_tokens", Self::CountTokens),
        ]
        .into_iter()
        .find(|(suffix, _)| path.ends_with(suffix))
        .map(|(_, endpoint)| endpoint)
    }

    pub fn dialect(self) -> Dialect {
        match self {
            Self::Messages | Self::CountTokens => Dialect::Anthropic,
            _ => Dialect::OpenAi,
        }
    }
}

/// One request's deterministic reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub endpoint: Endpoint,
    pub model: String,
    pub sequence: u64,
    pub streaming: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    pub prompt_tokens: u64,
    pub chunks: Vec<&'static str>,
    /// Embeddings: one vector per input string.
    pub embedding_inputs: Vec<String>,
    /// `encoding_format: "base64"` (openai-node's default): vectors as base64 of little-endian
    /// float32s, as the real API sends them.
    pub embedding_base64: bool,
    /// Responses API: the `previous_response_id` the request continues, if any.
    pub previous_response_id: Option<String>,
    /// Responses API: `"store": false` asks for the response not to be kept.
    pub store: bool,
    /// What the key's prompt cache held of this prompt (`prompt_cache`), in tokens.
    pub cached_tokens: u64,
    pub cache_write_tokens: u64,
    /// The tool call the prompt asked for (`tool_calls`), if any (set by the handler).
    pub tool_call: Option<ToolCall>,
    /// Messages with thinking on: the signature of the thinking block that opens the answer
    /// (`thinking`), made for the answering key (set by the handler).
    pub thinking_signature: Option<String>,
    /// The `HostileUsage` fault: this value is sent as the answer's `usage`, whatever it is.
    pub usage_override: Option<Value>,
    /// Responses API: the request's parameters a response object repeats (`instructions`,
    /// `tools`, `tool_choice`, …), as sent.
    pub echo: serde_json::Map<String, Value>,
    /// Responses API: the encrypted content of the reasoning item (with `include:
    /// ["reasoning.encrypted_content"]`) or of the compaction item, made for the request's key
    /// (set by the handler, which knows the key).
    pub encrypted_content: Option<String>,
    /// Compaction: the request's user messages, which its answer keeps as they were sent.
    pub kept_messages: Vec<Value>,
    /// The request offers the host's web search tool (Anthropic's `web_search_20250305`,
    /// OpenAI's `web_search`): a Messages or Responses answer, whole or streamed, runs one
    /// search and cites its result (`anthropic`, `openai`).
    pub web_search: bool,
    /// Responses API: the `input` ends with a `compaction_trigger` item (Codex's inline
    /// compaction): the answer is one compaction item instead of reasoning and a message.
    pub compaction_trigger: bool,
    /// Responses API: the request asked for a reasoning summary (`reasoning.summary`), which
    /// the reasoning item then carries.
    pub reasoning_summary: bool,
    /// Chat Completions with `reasoning_effort`: the answer opens with `reasoning_content`, as
    /// a reasoning model's chat host (DeepSeek, vLLM) sends it.
    pub reasoning_content: bool,
}

/// A tool call the mock makes (`tool_calls` reads it from the prompt and shapes the answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    /// The arguments as JSON text — cut short, and then not JSON, when `cut_short`.
    pub arguments: String,
    /// The request's `max_tokens` ended the call before its arguments did, as providers
    /// answer it: `finish_reason: length` / `stop_reason: max_tokens` / `incomplete`.
    pub cut_short: bool,
}

/// The request parameters a Responses object repeats, as the API reference lists them.
const ECHOED: [&str; 14] = [
    "instructions",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "prompt_cache_key",
    "reasoning",
    "service_tier",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
];

impl Turn {
    /// Reads what the reply depends on from the request body; `sequence` is set at admission.
    pub fn from_request(endpoint: Endpoint, body: &Value, body_len: usize) -> Option<Self> {
        let model = body.get("model")?.as_str()?.to_owned();
        let streaming = !matches!(
            endpoint,
            Endpoint::Embeddings | Endpoint::CountTokens | Endpoint::Compact
        ) && body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let include_usage = body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let requested = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
            .iter()
            .find_map(|field| body.get(*field).and_then(Value::as_u64))
            .unwrap_or(REPLY_WORDS.len() as u64)
            .clamp(1, MAX_REPLY_CHUNKS);
        let chunks = REPLY_WORDS
            .iter()
            .copied()
            .cycle()
            .take(usize::try_from(requested).unwrap_or(REPLY_WORDS.len()))
            .collect();
        let embedding_inputs = match body.get("input") {
            Some(Value::String(text)) => vec![text.clone()],
            Some(Value::Array(items)) => items.iter().map(ToString::to_string).collect(),
            _ => Vec::new(),
        };
        Some(Self {
            endpoint,
            model,
            sequence: 0,
            streaming,
            include_usage,
            prompt_tokens: (body_len as u64).div_ceil(4).max(1),
            chunks,
            embedding_inputs,
            embedding_base64: body.get("encoding_format").and_then(Value::as_str) == Some("base64"),
            previous_response_id: body
                .get("previous_response_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            store: body.get("store").and_then(Value::as_bool).unwrap_or(true),
            cached_tokens: 0,
            cache_write_tokens: 0,
            tool_call: None,
            thinking_signature: None,
            usage_override: None,
            echo: ECHOED
                .iter()
                .filter_map(|name| Some(((*name).to_owned(), body.get(*name)?.clone())))
                .collect(),
            encrypted_content: None,
            compaction_trigger: endpoint == Endpoint::Responses
                && body
                    .get("input")
                    .and_then(Value::as_array)
                    .and_then(|items| items.last())
                    .and_then(|item| item.get("type"))
                    .and_then(Value::as_str)
                    == Some("compaction_trigger"),
            reasoning_summary: body
                .get("reasoning")
                .and_then(|reasoning| reasoning.get("summary"))
                .is_some_and(|summary| !summary.is_null()),
            reasoning_content: endpoint == Endpoint::ChatCompletions
                && body
                    .get("reasoning_effort")
                    .is_some_and(|effort| !effort.is_null()),
            web_search: body
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| {
                    tools.iter().any(|tool| {
                        tool.get("type")
                            .and_then(Value::as_str)
                            .is_some_and(|kind| {
                                kind == "web_search" || kind.starts_with("web_search_")
                            })
                    })
                }),
            kept_messages: match (endpoint, body.get("input")) {
                (Endpoint::Compact, Some(Value::Array(items))) => items
                    .iter()
                    .filter(|item| {
                        item.get("role").and_then(Value::as_str) == Some("user")
                            && item
                                .get("type")
                                .and_then(Value::as_str)
                                .unwrap_or("message")
                                == "message"
                    })
                    .cloned()
                    .collect(),
                (Endpoint::Compact, Some(Value::String(text))) => {
                    vec![serde_json::json!({"type": "message", "role": "user", "content": text})]
                }
                _ => Vec::new(),
            },
        })
    }

    pub fn completion_tokens(&self) -> u64 {
        if matches!(self.endpoint, Endpoint::Embeddings | Endpoint::CountTokens) {
            0
        } else {
            self.chunks.len() as u64
        }
    }

    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens()
    }

    pub fn text(&self) -> String {
        self.chunks.concat()
    }
}

/// How a stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnding {
    Complete,
    /// An error event before any content event.
    FailBeforeContent,
    /// Some content events, then an error event.
    FailAfterContent,
}

impl StreamEnding {
    /// How many content chunks a stream with this ending sends.
    pub fn content_chunks(self, turn: &Turn) -> usize {
        match self {
            Self::Complete => turn.chunks.len(),
            Self::FailBeforeContent => 0,
            Self::FailAfterContent => turn.chunks.len().clamp(1, 2),
        }
    }
}

/// One SSE event, `event:` line optional.
pub fn sse(event: Option<&str>, data: &str) -> String {
    match event {
        Some(event) => format!("event: {event}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoint_is_matched_by_suffix() {
        assert_eq!(
            Endpoint::from_path("/v1/chat/completions"),
            Some(Endpoint::ChatCompletions)
        );
        assert_eq!(
            Endpoint::from_path("/v1/completions"),
            Some(Endpoint::Completions)
        );
        assert_eq!(
            Endpoint::from_path("/anthropic/v1/messages"),
            Some(Endpoint::Messages)
        );
        assert_eq!(
            Endpoint::from_path("/v1/messages/count_tokens"),
            Some(Endpoint::CountTokens)
        );
        assert_eq!(Endpoint::from_path("/v1/models"), None);
        assert_eq!(Endpoint::from_path("/v1/responses/resp_1"), None);
        assert_eq!(
            Endpoint::from_path("/v1/responses/compact"),
            Some(Endpoint::Compact)
        );
    }

    #[test]
    fn max_tokens_sets_the_reply_length() {
        let body = json!({"model": "m", "max_tokens": 9, "stream": true});
        let turn = Turn::from_request(Endpoint::ChatCompletions, &body, 40).unwrap();
        assert_eq!(turn.chunks.len(), 9);
        assert_eq!(turn.prompt_tokens, 10);
        assert!(turn.streaming);
        assert!(Turn::from_request(Endpoint::Messages, &json!({}), 2).is_none());
    }
}
