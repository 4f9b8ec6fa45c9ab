//! The attribute names the spans carry (OpenTelemetry GenAI and HTTP semantic conventions, and
//! `quotaroute.*` for the router's own) and their values. Only ids, model names, counts,
//! statuses and classes are ever set: never a key, a header value or prompt text.

use crate::telemetry::protobuf::AttributeKey;

pub static OPERATION_NAME: AttributeKey = AttributeKey::new("gen_ai.operation.name");
pub static REQUEST_MODEL: AttributeKey = AttributeKey::new("gen_ai.request.model");
pub static RESPONSE_MODEL: AttributeKey = AttributeKey::new("gen_ai.response.model");
pub static INPUT_TOKENS: AttributeKey = AttributeKey::new("gen_ai.usage.input_tokens");
pub static OUTPUT_TOKENS: AttributeKey = AttributeKey::new("gen_ai.usage.output_tokens");
/// Input tokens read from the provider's prompt cache (part of `input_tokens`).
pub static CACHE_READ_INPUT_TOKENS: AttributeKey =
    AttributeKey::new("gen_ai.usage.cache_read.input_tokens");
pub static COMBO: AttributeKey = AttributeKey::new("quotaroute.combo");
pub static CLIENT: AttributeKey = AttributeKey::new("quotaroute.client");
pub static ATTEMPTS: AttributeKey = AttributeKey::new("quotaroute.attempts");
pub static AFFINITY: AttributeKey = AttributeKey::new("quotaroute.affinity");
pub static CONNECTION: AttributeKey = AttributeKey::new("quotaroute.connection");
pub static PROVIDER: AttributeKey = AttributeKey::new("quotaroute.provider");
pub static SERVER_ADDRESS: AttributeKey = AttributeKey::new("server.address");
pub static SERVER_PORT: AttributeKey = AttributeKey::new("server.port");
pub static STATUS_CODE: AttributeKey = AttributeKey::new("http.response.status_code");
pub static ERROR_TYPE: AttributeKey = AttributeKey::new("error.type");
/// The resource's attributes.
pub static SERVICE_NAME: AttributeKey = AttributeKey::new("service.name");
pub static SERVICE_VERSION: AttributeKey = AttributeKey::new("service.version");

/// The client of a request answered before it was routed (`server.api_keys`' client).
pub const DEFAULT_CLIENT: &str = "default";

/// One attribute's value, borrowed from the finished span that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Text(&'a str),
    Int(i64),
}

impl From<u64> for Value<'_> {
    fn from(n: u64) -> Self {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(text: &'a str) -> Self {
        Value::Text(text)
    }
}
