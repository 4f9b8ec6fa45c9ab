//! The attribute names the spans carry (OpenTelemetry GenAI and HTTP semantic conventions, and
//! `quotaroute.*` for the router's own) and their values. Only ids, model names, counts,
//! statuses and classes are ever set: never a key, a header value or prompt text.

pub const OPERATION_NAME: &str = "gen_ai.operation.name";
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// Input tokens read from the provider's prompt cache (part of `input_tokens`).
pub const CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
pub const COMBO: &str = "quotaroute.combo";
pub const CLIENT: &str = "quotaroute.client";
pub const ATTEMPTS: &str = "quotaroute.attempts";
pub const AFFINITY: &str = "quotaroute.affinity";
pub const CONNECTION: &str = "quotaroute.connection";
pub const PROVIDER: &str = "quotaroute.provider";
pub const SERVER_ADDRESS: &str = "server.address";
pub const SERVER_PORT: &str = "server.port";
pub const STATUS_CODE: &str = "http.response.status_code";
pub const ERROR_TYPE: &str = "error.type";

/// The client of a request answered before it was routed (`server.api_keys`' client).
pub const DEFAULT_CLIENT: &str = "default";

/// One attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Static(&'static str),
    Text(String),
    /// A name the config already holds (connection, provider, model, host).
    Shared(std::sync::Arc<str>),
    Int(i64),
}

impl From<&'static str> for Value {
    fn from(text: &'static str) -> Self {
        Value::Static(text)
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Value::Text(text)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

/// A span's attributes in the order set.
pub type Attributes = Vec<(&'static str, Value)>;
