//! Google's Gemini API as the mock speaks it: which Gemini route a path is (AI Studio's
//! `…/models/{model}:{method}` and Vertex AI's `…/publishers/google/models/{model}:{method}`),
//! what a request asks for ([`GeminiTurn`]) and the success shapes: `GenerateContentResponse`
//! JSON, its stream chunks (SSE with `alt=sse`, else one JSON array), `countTokens`,
//! `embedContent`, `batchEmbedContents` and the models list. A request with Google Search
//! (`tools: [{googleSearch: {}}]`) is answered grounded, as Google does: the candidate's
//! `groundingMetadata` (its query, the page found, a support spanning the text in bytes) on
//! the whole answer and on a stream's last chunk.
//!
//! Owns the shapes; faults, keys and budgets are `gemini_api`'s.

use serde_json::{json, Value};

use super::anthropic::SEARCH_RESULT_URL;
use super::thinking;

use super::exchange::{MAX_REPLY_CHUNKS, REPLY_WORDS};
/// The marker a prompt uses to ask for a call: `mock-tool-call:NAME {args}`.
const TOOL_MARKER: &str = "mock-tool-call:";
/// What the mock thinks (a thought part, with `includeThoughts`).
const THOUGHT_TEXT: &str = "The user wants a reply; a short one will do.";
/// Thought tokens a thinking request is charged.
const THOUGHT_TOKENS: u64 = 12;
/// Dimensions of the mock's embeddings.
const EMBEDDING_DIMENSIONS: usize = 8;

/// The models the mock lists: (id, display name, methods).
const MODELS: [(&str, &str, &[&str]); 4] = [
    (
        "gemini-2.5-flash",
        "Gemini 2.5 Flash",
        &[
            "generateContent",
            "countTokens",
            "createCachedContent",
            "batchGenerateContent",
        ],
    ),
    (
        "gemini-2.5-pro",
        "Gemini 2.5 Pro",
        &[
            "generateContent",
            "countTokens",
            "createCachedContent",
            "batchGenerateContent",
        ],
    ),
    (
        "gemini-2.5-flash-lite",
        "Gemini 2.5 Flash-Lite",
        &[
            "generateContent",
            "countTokens",
            "createCachedContent",
            "batchGenerateContent",
        ],
    ),
    (
        "gemini-embedding-001",
        "Gemini Embedding 001",
        &["embedContent", "countTextTokens", "countTokens"],
    ),
];

/// A model method on `…/models/{model}:{method}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeminiMethod {
    Generate,
    Stream,
    CountTokens,
    Embed,
    BatchEmbed,
}

/// A Gemini route of the mock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GeminiRoute {
    Method { model: String, method: GeminiMethod },
    ListModels,
    GetModel(String),
}

impl GeminiRoute {
    /// `…/models/{model}:{method}` under any prefix; `GET …/models[/{model}]` only under
    /// `/v1beta` or a Vertex publisher (so OpenAI's `/v1/models` stays OpenAI's).
    pub fn from_path(path: &str) -> Option<Self> {
        let path = path.trim_end_matches('/');
        let at = path.rfind("/models")?;
        let (prefix, rest) = (&path[..at], &path[at + "/models".len()..]);
        let google_prefix = prefix.ends_with("/v1beta") || prefix.ends_with("/publishers/google");
        if rest.is_empty() {
            return google_prefix.then_some(Self::ListModels);
        }
        let name = rest.strip_prefix('/')?;
        if let Some((model, method)) = name.rsplit_once(':') {
            let method = match method {
                "generateContent" => GeminiMethod::Generate,
                "streamGenerateContent" => GeminiMethod::Stream,
                "countTokens" => GeminiMethod::CountTokens,
                "embedContent" => GeminiMethod::Embed,
                "batchEmbedContents" => GeminiMethod::BatchEmbed,
                _ => return None,
            };
            return Some(Self::Method {
                model: model.to_owned(),
                method,
            });
        }
        (google_prefix && !name.contains('/')).then(|| Self::GetModel(name.to_owned()))
    }
}

/// A call the prompt asked for: a name and its arguments object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionCall {
    pub name: String,
    pub args: Value,
}

/// What one generateContent request asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiTurn {
    pub model: String,
    pub sequence: u64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub chunks: Vec<&'static str>,
    /// `thinkingConfig` with a budget other than 0: thought tokens are charged and the answer's
    /// first part carries a `thoughtSignature`.
    pub thinking: bool,
    /// `thinkingConfig.includeThoughts`: the answer opens with a thought part.
    pub include_thoughts: bool,
    /// The signature of the answer's thought, made for the answering key.
    pub thought_signature: Option<String>,
    pub call: Option<FunctionCall>,
    /// The `GeminiSafety` fault: the candidate finishes with `SAFETY` and no content.
    pub safety_block: bool,
    /// The request offers Google Search: the answer is grounded.
    pub google_search: bool,
}

impl GeminiTurn {
    pub fn from_request(model: &str, body: &Value, body_len: usize) -> Self {
        let config = body.get("generationConfig");
        let requested = config
            .and_then(|config| config.get("maxOutputTokens"))
            .and_then(Value::as_u64)
            .unwrap_or(REPLY_WORDS.len() as u64)
            .clamp(1, MAX_REPLY_CHUNKS);
        let thinking_config = config.and_then(|config| config.get("thinkingConfig"));
        let thinking = thinking_config.is_some_and(|thinking| {
            thinking.get("thinkingBudget").and_then(Value::as_i64) != Some(0)
        });
        Self {
            model: model.to_owned(),
            sequence: 0,
            prompt_tokens: (body_len as u64).div_ceil(4).max(1),
            cached_tokens: 0,
            chunks: REPLY_WORDS
                .iter()
                .copied()
                .cycle()
                .take(usize::try_from(requested).unwrap_or(REPLY_WORDS.len()))
                .collect(),
            thinking,
            include_thoughts: thinking
                && thinking_config
                    .and_then(|thinking| thinking.get("includeThoughts"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            thought_signature: None,
            call: requested_call(body),
            safety_block: false,
            google_search: body
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|tool| {
                    tool.get("googleSearch")
                        .or(tool.get("google_search"))
                        .is_some()
                }),
        }
    }

    pub fn output_tokens(&self) -> u64 {
        if self.safety_block {
            0
        } else if self.call.is_some() {
            self.call
                .as_ref()
                .map_or(0, |call| call.args.to_string().len() as u64)
                .div_ceil(4)
                .max(1)
        } else {
            self.chunks.len() as u64
        }
    }

    fn thought_tokens(&self) -> u64 {
        if self.thinking {
            THOUGHT_TOKENS
        } else {
            0
        }
    }

    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.output_tokens() + self.thought_tokens()
    }

    fn usage(&self, output_tokens: u64) -> Value {
        let mut usage = json!({
            "promptTokenCount": self.prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": self.prompt_tokens + output_tokens + self.thought_tokens(),
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": self.prompt_tokens}],
        });
        if self.thinking {
            usage["thoughtsTokenCount"] = json!(THOUGHT_TOKENS);
        }
        if self.cached_tokens > 0 {
            usage["cachedContentTokenCount"] = json!(self.cached_tokens);
            usage["cacheTokensDetails"] =
                json!([{"modality": "TEXT", "tokenCount": self.cached_tokens}]);
        }
        usage
    }

    fn response(&self, parts: Vec<Value>, finish: Option<&str>, usage: Value) -> Value {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        if finish.is_some_and(|finish| finish != "SAFETY")
            && self.google_search
            && self.call.is_none()
        {
            candidate["groundingMetadata"] = self.grounding();
        }
        if finish == Some("SAFETY") {
            candidate["content"] = json!({"parts": [], "role": "model"});
            candidate["safetyRatings"] = json!([
                {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true},
                {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
            ]);
        }
        json!({
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": self.model,
            "responseId": format!("mock-gemini-{}", self.sequence),
        })
    }

    /// Google Search's grounding of the answer: one query, the page it found, and a support
    /// of the whole text (its end in bytes; Google leaves a zero `startIndex` out).
    fn grounding(&self) -> Value {
        let text = self.chunks.concat();
        json!({
            "webSearchQueries": ["quotaroute mock"],
            "searchEntryPoint": {"renderedContent": "<div class=\"container\">quotaroute mock</div>"},
            "groundingChunks": [{"web": {"uri": SEARCH_RESULT_URL, "title": "example.org"}}],
            "groundingSupports": [{"segment": {"endIndex": text.len(), "text": text},
                                   "groundingChunkIndices": [0]}],
        })
    }

    /// The thought part and the answer's parts (text, or the function call), the first of
    /// them signed when thinking.
    fn answer_parts(&self) -> (Option<Value>, Vec<Value>) {
        let thought = self
            .include_thoughts
            .then(|| json!({"text": THOUGHT_TEXT, "thought": true}));
        let mut parts = match &self.call {
            Some(call) => vec![json!({"functionCall": {"name": call.name, "args": call.args}})],
            None => self
                .chunks
                .iter()
                .map(|chunk| json!({"text": chunk}))
                .collect(),
        };
        if let (Some(signature), Some(first)) = (&self.thought_signature, parts.first_mut()) {
            first["thoughtSignature"] = json!(signature);
        }
        (thought, parts)
    }

    /// The whole answer, `generateContent`'s JSON.
    pub fn json_body(&self) -> Value {
        if self.safety_block {
            return self.response(Vec::new(), Some("SAFETY"), self.usage(0));
        }
        let (thought, parts) = self.answer_parts();
        let parts = if self.call.is_some() {
            parts
        } else {
            let mut part = json!({"text": self.chunks.concat()});
            if let Some(signature) = &self.thought_signature {
                part["thoughtSignature"] = json!(signature);
            }
            vec![part]
        };
        let all = thought.into_iter().chain(parts).collect();
        self.response(all, Some("STOP"), self.usage(self.output_tokens()))
    }

    /// The stream's chunks, each a whole `GenerateContentResponse`: the thought, then one per
    /// word (or the call, whole: Gemini never splits a call's arguments), the last with the
    /// finish reason; every chunk carries the usage so far, as Google's do. `content_chunks`
    /// limits how many answer chunks come (a stream that fails part-way).
    pub fn stream_chunks(&self, content_chunks: usize) -> Vec<Value> {
        if self.safety_block {
            return vec![self.response(Vec::new(), Some("SAFETY"), self.usage(0))];
        }
        let (thought, parts) = self.answer_parts();
        let mut chunks = Vec::new();
        if let Some(thought) = thought {
            chunks.push(self.response(vec![thought], None, self.usage(0)));
        }
        let complete = content_chunks >= parts.len();
        let sent: Vec<Value> = parts.into_iter().take(content_chunks).collect();
        let count = sent.len();
        let mut output = 0;
        for (index, part) in sent.into_iter().enumerate() {
            output += if self.call.is_some() {
                self.output_tokens()
            } else {
                1
            };
            let last = complete && index + 1 == count;
            chunks.push(self.response(vec![part], last.then_some("STOP"), self.usage(output)));
        }
        chunks
    }
}

/// The function call a request asks for: its last user text carries the marker and the tool
/// is declared; a turn that hands back a `functionResponse` gets text.
fn requested_call(body: &Value) -> Option<FunctionCall> {
    let last = body.get("contents")?.as_array()?.last()?;
    if last.get("role").and_then(Value::as_str) == Some("model") {
        return None;
    }
    let parts = last.get("parts")?.as_array()?;
    if parts
        .iter()
        .any(|part| part.get("functionResponse").is_some())
    {
        return None;
    }
    let text: String = parts
        .iter()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    let rest = &text[text.find(TOOL_MARKER)? + TOOL_MARKER.len()..];
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    let declared = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|tool| tool.get("functionDeclarations").and_then(Value::as_array))
        .flatten()
        .any(|declaration| declaration.get("name").and_then(Value::as_str) == Some(&name));
    if !declared {
        return None;
    }
    let after = rest[name.len()..].trim_start();
    let args = serde_json::Deserializer::from_str(after)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    Some(FunctionCall { name, args })
}

/// The thought signature `key`'s account makes (the same form as Anthropic's, so an account
/// can tell its own).
pub fn thought_signature(key: &str) -> String {
    thinking::signature(key, THOUGHT_TEXT)
}

/// Google's 400 message for the first `thoughtSignature` in the request's `contents` that
/// `key`'s account did not make (a signature goes back only to the account that made it);
/// `None` when every one verifies.
pub fn refused_signature(body: &Value, key: &str) -> Option<String> {
    let own = thought_signature(key);
    let contents = body.get("contents")?.as_array()?;
    let foreign = contents
        .iter()
        .filter_map(|content| content.get("parts").and_then(Value::as_array))
        .flatten()
        .filter_map(|part| part.get("thoughtSignature").and_then(Value::as_str))
        .any(|signature| signature != own);
    foreign.then(|| "Corrupted thought signature.".to_owned())
}

/// `countTokens`: the prompt's tokens (of `contents`, or of a `generateContentRequest`).
pub fn count_tokens_body(prompt_tokens: u64) -> Value {
    json!({"totalTokens": prompt_tokens,
           "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt_tokens}]})
}

/// A deterministic vector for a text.
fn embedding(text: &str) -> Value {
    let seed = text.bytes().fold(17u32, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(u32::from(b))
    });
    let values: Vec<f64> = (0..EMBEDDING_DIMENSIONS)
        .map(|index| {
            let mixed = seed.rotate_left(u32::try_from(index).unwrap_or(0) * 4) % 2000;
            (f64::from(mixed) - 1000.0) / 1000.0
        })
        .collect();
    json!({ "values": values })
}

fn content_text(content: Option<&Value>) -> String {
    content
        .and_then(|content| content.get("parts"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect()
}

/// `embedContent`: one vector for `content`.
pub fn embed_body(body: &Value) -> Value {
    json!({ "embedding": embedding(&content_text(body.get("content"))) })
}

/// `batchEmbedContents`: one vector per `requests[]` item.
pub fn batch_embed_body(body: &Value) -> Value {
    let embeddings: Vec<Value> = body
        .get("requests")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|request| embedding(&content_text(request.get("content"))))
        .collect();
    json!({ "embeddings": embeddings })
}

fn model_object(id: &str, display: &str, methods: &[&str]) -> Value {
    json!({
        "name": format!("models/{id}"),
        "version": "001",
        "displayName": display,
        "description": format!("{display} (mock)"),
        "inputTokenLimit": 1_048_576,
        "outputTokenLimit": 65_536,
        "supportedGenerationMethods": methods,
        "temperature": 1.0,
        "topP": 0.95,
        "topK": 64,
    })
}

/// `GET …/models`.
pub fn models_list() -> Value {
    let models: Vec<Value> = MODELS
        .iter()
        .map(|(id, display, methods)| model_object(id, display, methods))
        .collect();
    json!({ "models": models })
}

/// `GET …/models/{model}`; `None` for a model the mock does not list.
pub fn model_get(id: &str) -> Option<Value> {
    MODELS
        .iter()
        .find(|(known, _, _)| *known == id)
        .map(|(id, display, methods)| model_object(id, display, methods))
}

/// How a stream is framed for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `?alt=sse`: `data: {chunk}\r\n\r\n`.
    Sse,
    /// Without it: one JSON array, `[` + chunks joined by `,\r\n` + `]`, sent chunk by chunk.
    JsonArray,
}

impl Framing {
    pub fn from_query(query: Option<&str>) -> Self {
        let sse = query.is_some_and(|query| {
            url::form_urlencoded::parse(query.as_bytes())
                .any(|(name, value)| name == "alt" && value == "sse")
        });
        if sse {
            Self::Sse
        } else {
            Self::JsonArray
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::Sse => "text/event-stream",
            Self::JsonArray => "application/json; charset=UTF-8",
        }
    }

    /// The frames of `chunks` in this framing (an error `tail`, if any, after them).
    pub fn frames(self, chunks: &[Value], tail: Option<&Value>) -> Vec<String> {
        let all: Vec<&Value> = chunks.iter().chain(tail).collect();
        match self {
            Self::Sse => all
                .iter()
                .map(|chunk| format!("data: {chunk}\r\n\r\n"))
                .collect(),
            Self::JsonArray => {
                let mut frames: Vec<String> = all
                    .iter()
                    .enumerate()
                    .map(|(index, chunk)| {
                        let lead = if index == 0 { "[" } else { ",\r\n" };
                        format!("{lead}{chunk}")
                    })
                    .collect();
                match frames.last_mut() {
                    Some(last) => last.push(']'),
                    None => frames.push("[]".to_owned()),
                }
                frames
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_read_from_ai_studio_and_vertex_paths() {
        assert_eq!(
            GeminiRoute::from_path("/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
            Some(GeminiRoute::Method {
                model: "gemini-2.5-flash".into(),
                method: GeminiMethod::Stream
            })
        );
        assert_eq!(
            GeminiRoute::from_path(
                "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:countTokens"
            ),
            Some(GeminiRoute::Method {
                model: "gemini-2.5-pro".into(),
                method: GeminiMethod::CountTokens
            })
        );
        assert_eq!(
            GeminiRoute::from_path("/v1beta/models"),
            Some(GeminiRoute::ListModels)
        );
        assert_eq!(
            GeminiRoute::from_path("/v1beta/models/gemini-2.5-pro"),
            Some(GeminiRoute::GetModel("gemini-2.5-pro".into()))
        );
        assert_eq!(GeminiRoute::from_path("/v1/models"), None);
        assert_eq!(GeminiRoute::from_path("/v1/chat/completions"), None);
        assert_eq!(
            GeminiRoute::from_path("/v1beta/models/m:unknownMethod"),
            None
        );
    }

    #[test]
    fn a_declared_function_is_called_without_an_id() {
        let body = json!({
            "contents": [{"role": "user", "parts": [{"text": "mock-tool-call:get_weather {\"city\":\"Paris\"}"}]}],
            "tools": [{"functionDeclarations": [{"name": "get_weather"}]}],
        });
        let turn = GeminiTurn::from_request("m", &body, 100);
        let answer = turn.json_body();
        let part = &answer["candidates"][0]["content"]["parts"][0];
        assert_eq!(part["functionCall"]["name"], "get_weather");
        assert_eq!(part["functionCall"]["args"]["city"], "Paris");
        assert!(part["functionCall"].get("id").is_none());
    }

    #[test]
    fn both_framings_carry_the_same_chunks() {
        let turn = GeminiTurn::from_request("m", &json!({"contents": []}), 8);
        let chunks = turn.stream_chunks(usize::MAX);
        assert_eq!(chunks.len(), 6);
        assert_eq!(chunks[5]["candidates"][0]["finishReason"], "STOP");
        let array: String = Framing::JsonArray.frames(&chunks, None).concat();
        let parsed: Vec<Value> = serde_json::from_str(&array).unwrap();
        assert_eq!(parsed, chunks);
        let sse = Framing::Sse.frames(&chunks, None);
        assert!(sse[0].starts_with("data: {") && sse[0].ends_with("\r\n\r\n"));
    }
}
