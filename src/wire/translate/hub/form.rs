//! The one internal form every generation API is read into and written from (behaviour §14):
//! a request, a whole answer, a stream event, usage and finish reasons. Holds what §14 says is
//! carried and nothing of any API's wire shape; each API's reader and writer own that.

use serde_json::Value;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// An image: a URL as given, or base64 data with its media type.
#[derive(Debug, Clone, PartialEq)]
pub enum Image {
    Url(String),
    Base64 { media_type: String, data: String },
}

/// A tool call the model made: its arguments are the JSON text as the model wrote it (a call
/// `max_tokens` cut short is passed on as the text it is).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A piece of a message or of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Image(Image),
    ToolCall(ToolCall),
    /// A tool's result for the call `call_id`.
    ToolResult {
        call_id: String,
        content: ToolOutput,
        is_error: bool,
    },
    /// Thinking: its text and the upstream's signature (Anthropic's; empty when the upstream
    /// gives none).
    Thinking {
        text: String,
        signature: String,
    },
    /// Anthropic's redacted thinking, its data carried whole.
    RedactedThinking {
        data: String,
    },
}

/// What a tool answered: text, or parts (text and images).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    Text(String),
    Parts(Vec<Part>),
}

impl ToolOutput {
    /// Its text: the text parts joined with `sep`.
    pub fn text(&self, sep: &str) -> String {
        match self {
            ToolOutput::Text(text) => text.clone(),
            ToolOutput::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text(text) => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(sep),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

/// A function tool; `parameters` is its JSON schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<Value>,
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Named(String),
}

/// Reasoning effort as the client asked for it, and the client's name for the parameter (so a
/// writer that must leave it out names it as the client knows it).
#[derive(Debug, Clone, PartialEq)]
pub struct Effort {
    /// `low`, `medium`, `high` (other words mean no thinking).
    pub level: String,
    pub parameter: &'static str,
}

/// The provider's own web search tool (OpenAI's `web_search`, Anthropic's
/// `web_search_20250305`), run by the host.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WebSearch {
    /// The client's name for the tool (its type), for a refusal.
    pub parameter: String,
    pub max_uses: Option<u64>,
    pub allowed_domains: Option<Value>,
    /// `{"type":"approximate","city",…}` in both APIs.
    pub user_location: Option<Value>,
}

/// The shape the answer must take.
#[derive(Debug, Clone, PartialEq)]
pub enum FormatKind {
    /// Any JSON object (no schema).
    JsonObject,
    /// JSON valid against `schema`.
    JsonSchema {
        name: String,
        schema: Value,
        strict: Option<bool>,
    },
}

/// A structured output format and the client's name for the parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputFormat {
    pub kind: FormatKind,
    pub parameter: &'static str,
}

/// A generation request in the internal form.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Request {
    /// System and developer instructions, in order.
    pub system: Vec<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<Tool>,
    pub web_search: Option<WebSearch>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub max_tokens: Option<u64>,
    pub stop: Vec<Value>,
    /// A JSON number, as the client sent it.
    pub temperature: Option<Value>,
    pub top_p: Option<Value>,
    pub effort: Option<Effort>,
    pub format: Option<OutputFormat>,
    pub user: Option<String>,
    pub stream: bool,
}

impl Message {
    fn new(role: Role, parts: Vec<Part>) -> Message {
        Message { role, parts }
    }
}

impl Request {
    /// Appends `parts` as a message of `role`, merged into the last message when it has the
    /// same role (the form alternates roles, as Messages requires).
    pub fn push(&mut self, role: Role, parts: Vec<Part>) {
        if parts.is_empty() {
            return;
        }
        match self.messages.last_mut() {
            Some(last) if last.role == role => last.parts.extend(parts),
            _ => self.messages.push(Message::new(role, parts)),
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Finish {
    #[default]
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
}

/// Token usage: `input` counts every input token, cache reads (`cached`) and writes
/// (`cache_write`) included, as OpenAI counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input: u64,
    pub cached: u64,
    pub cache_write: u64,
    pub output: u64,
    pub reasoning: u64,
}

impl Usage {
    /// Input tokens neither read from nor written to a cache (Anthropic's `input_tokens`).
    pub fn uncached_input(&self) -> u64 {
        self.input
            .saturating_sub(self.cached)
            .saturating_sub(self.cache_write)
    }
}

/// A whole answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// The upstream's id, as it gave it (each writer makes its own id from it).
    pub id: String,
    pub model: Value,
    /// Text, thinking and tool calls, in the order the model gave them.
    pub parts: Vec<Part>,
    pub finish: Finish,
    pub usage: Usage,
    /// The web searches the host ran for it (behaviour §14), in order.
    pub searches: Vec<SearchCall>,
    /// The sources its text cites.
    pub citations: Vec<Citation>,
}

/// A web search the host ran (OpenAI's `web_search_call`, Anthropic's `server_tool_use` and
/// its `web_search_tool_result`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchCall {
    pub id: String,
    pub query: String,
    /// The pages it found: (url, title).
    pub results: Vec<(String, String)>,
}

/// A source a span of the answer's text cites (OpenAI's `url_citation` annotation,
/// Anthropic's `web_search_result_location` citation).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Citation {
    /// The index in [`Answer::parts`] of the text it annotates.
    pub part: usize,
    /// The span in that text, in characters: `start..end`.
    pub start: usize,
    pub end: usize,
    pub url: String,
    pub title: String,
    /// The passage cited, when the host gave it (Anthropic's `cited_text`).
    pub cited_text: Option<String>,
}

/// One stream event. Readers give blocks one after another: a `*Start` opens one, `BlockStop`
/// closes it, deltas belong to the open one.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The answer began (its id and model, the usage known so far).
    Start {
        id: String,
        model: Value,
        usage: Option<Usage>,
    },
    TextStart,
    Text(String),
    ThinkingStart,
    Thinking(String),
    /// A piece of the open thinking block's signature.
    Signature(String),
    /// A redacted thinking block, whole (no `BlockStop` follows).
    Redacted(String),
    ToolStart {
        id: String,
        name: String,
    },
    /// A piece of the open tool call's arguments.
    ToolArguments(String),
    BlockStop,
    /// Why it stopped and/or the usage so far (every count, not a difference).
    Finish {
        finish: Option<Finish>,
        usage: Option<Usage>,
    },
    /// The answer ended.
    Done,
    /// A web search the host ran, whole, with its results (between blocks).
    Search(SearchCall),
    /// A source the open text block cites: `start..end` is its span in that block's text, in
    /// characters (`part` is not used: the writer knows the block). It comes before the
    /// block's `BlockStop`, after the text it spans (a reader that learns of it earlier holds
    /// it until then).
    Citation(Citation),
    /// The upstream's error in the stream.
    Error {
        message: String,
        kind: String,
    },
}

/// An upstream error, read from its body.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorForm {
    pub status: u16,
    pub message: String,
    /// The upstream's error type (`overloaded_error`, `rate_limit_exceeded`, …).
    pub kind: Option<String>,
    pub code: Option<Value>,
}

impl Image {
    /// An OpenAI image URL: a base64 data URL becomes data, anything else stays a URL.
    pub fn from_url(url: &str) -> Result<Image, String> {
        let Some(rest) = url.strip_prefix("data:") else {
            return Ok(Image::Url(url.to_string()));
        };
        let Some((media, data)) = rest.split_once(',') else {
            return Err("an image data URL has no `,`".into());
        };
        let Some(media_type) = media.strip_suffix(";base64") else {
            return Err("an image data URL must be base64".into());
        };
        Ok(Image::Base64 {
            media_type: media_type.to_string(),
            data: data.to_string(),
        })
    }

    /// As an OpenAI image URL (base64 data as a data URL).
    pub fn url(&self) -> String {
        match self {
            Image::Url(url) => url.clone(),
            Image::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        }
    }
}
