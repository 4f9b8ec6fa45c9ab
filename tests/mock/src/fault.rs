//! The scripted faults of the mock upstream and the rules that say when each one fires.
//!
//! Owns only the vocabulary (serde-friendly, so tests can post rules as JSON); rendering a
//! fault as an HTTP response is `handler`'s and `delivery`'s job, choosing one is `state`'s.

use serde::{Deserialize, Serialize};

/// How a 429 tells the client when to come back (behaviour.md §5, "an upstream reset").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetForm {
    /// `retry-after: N` (seconds).
    RetryAfterSeconds(u64),
    /// `retry-after: <HTTP date>` N seconds from now.
    RetryAfterHttpDate(u64),
    /// `retry-after-ms: N`.
    RetryAfterMs(u64),
    /// `x-ratelimit-reset-requests` / `-tokens` with OpenAI's duration text, e.g. `6m0s`.
    OpenAiResetHeaders(String),
    /// `anthropic-ratelimit-{requests,tokens}-reset` as RFC 3339, N seconds from now.
    AnthropicResetRfc3339(u64),
    /// Google-style body hint: `error.details[{"@type":"…RetryInfo","retryDelay":"Ns"}]`.
    BodyRetryDelay(u64),
    /// OpenAI's message text "… Please try again in <text>." e.g. `1m30s`.
    MessageTryAgainIn(String),
    /// No reset information at all.
    None,
}

/// One scripted misbehaviour. Stream faults (`StreamFail*`, `GarbageSse`) only fire on
/// streaming requests; every other fault fires on both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// A rate-limit 429 carrying its reset in the given form.
    Status429 { reset: ResetForm },
    /// OpenAI's 429 `insufficient_quota`: the whole account is out of credit.
    InsufficientQuota429,
    /// 400 (model not found), 401, 402, 403, 404, 413, 500, 502, 503, 504, 529 with the
    /// provider's own body; any other status gets a generic body.
    Status(u16),
    /// Any status and body, verbatim (`application/json`), for shapes the others lack.
    Custom { status: u16, body: String },
    /// The TCP connection is reset (RST) before any response byte.
    ConnectionReset,
    /// Waits this long before sending headers, then succeeds.
    Stall { ms: u64 },
    /// A 200 stream whose error event comes before the first content event.
    StreamFailBeforeContent,
    /// A 200 stream with some content, then an error event, then an abrupt close.
    StreamFailAfterContent,
    /// A 200 `application/json` body that does not parse.
    BadJson200,
    /// A 200 `text/event-stream` body that is not valid SSE/JSON.
    GarbageSse,
    /// Adds latency before the headers, then succeeds (for load tests).
    Latency { ms: u64 },
    /// A 200 with `Content-Encoding: gzip` whose gzip data is cut short: a valid gzip header,
    /// then the body ends mid-stream (JSON: half the compressed bytes; a stream: the first half
    /// of the events, then part of the next one), whatever the request accepts.
    CorruptCompressed,
    /// A 200 that says `Content-Encoding: gzip` but sends the plain body.
    MislabelledCompression,
    /// A stream sends its first `events` SSE events, pauses `pause_ms`, then sends the rest
    /// (Responses API: `response.created`, `response.in_progress` and the reasoning item's
    /// `response.output_item.added` are the first three). A JSON answer waits `pause_ms` before
    /// its headers, like `Latency`.
    SlowStart { events: u32, pause_ms: u64 },
    /// A stream pauses `pause_ms` before its last `events` SSE events (the closing usage is
    /// among the last two or three): a client that leaves during the pause leaves before the
    /// usage came. A JSON answer is not delayed.
    SlowEnd { events: u32, pause_ms: u64 },
    /// A stream sends one SSE event every `every_ms`, as a model generating its answer does
    /// (so a client or router that stops reading stops the generation). A JSON answer is not
    /// delayed.
    Paced { every_ms: u64 },
    /// A success whose `usage` object is this JSON text, verbatim, wherever the answer carries
    /// usage (JSON bodies; a stream's usage chunk, `response.completed`, Anthropic
    /// `message_start` and `message_delta`): negative, fractional, string, absurd counts, or
    /// `null` for none. Text that is not JSON is sent as a JSON string.
    HostileUsage { usage: String },
}

impl Fault {
    /// Faults that still answer the request (slowly, or in a shape that tests the client):
    /// a plan's window counts the request, as the provider's would.
    pub fn still_serves(&self) -> bool {
        matches!(
            self,
            Self::Latency { .. }
                | Self::SlowStart { .. }
                | Self::SlowEnd { .. }
                | Self::Paced { .. }
        )
    }

    /// Faults that only make sense on a streaming response.
    pub fn streaming_only(&self) -> bool {
        matches!(
            self,
            Self::StreamFailBeforeContent | Self::StreamFailAfterContent | Self::GarbageSse
        )
    }
}

/// When a fault fires: the first rule (in order) whose `key` and `model` match (`None` = any)
/// and that has not used up its `times` wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    pub fault: Fault,
    /// Fires this many times, then the rule is spent; `None` = forever.
    #[serde(default)]
    pub times: Option<u32>,
}

impl Rule {
    /// A rule for every key and model, forever.
    pub fn always(fault: Fault) -> Self {
        Self {
            key: None,
            model: None,
            fault,
            times: None,
        }
    }

    /// A 429 with `Retry-After: seconds`, for every key and model, forever.
    pub fn rate_limited(seconds: u64) -> Self {
        Self::always(Fault::Status429 {
            reset: ResetForm::RetryAfterSeconds(seconds),
        })
    }

    pub fn for_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    pub fn for_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    pub fn times(mut self, times: u32) -> Self {
        self.times = Some(times);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_round_trip_through_json() {
        let rules = vec![
            Rule::always(Fault::Status429 {
                reset: ResetForm::OpenAiResetHeaders("6m0s".into()),
            })
            .for_key("k1")
            .times(2),
            Rule::always(Fault::Status(503)).for_model("m"),
            Rule::always(Fault::ConnectionReset),
            Rule::always(Fault::CorruptCompressed),
            Rule::always(Fault::SlowStart {
                events: 3,
                pause_ms: 500,
            }),
            Rule::always(Fault::SlowEnd {
                events: 2,
                pause_ms: 500,
            }),
            Rule::always(Fault::HostileUsage {
                usage: r#"{"prompt_tokens":-5}"#.into(),
            }),
        ];
        let json = serde_json::to_string(&rules).unwrap();
        assert!(json.contains(r#""status429":{"reset":{"open_ai_reset_headers":"6m0s"}}"#));
        let back: Vec<Rule> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, rules);
        let terse: Rule = serde_json::from_str(r#"{"fault":{"status":401}}"#).unwrap();
        assert_eq!(terse, Rule::always(Fault::Status(401)));
        let new_faults: Vec<Fault> = serde_json::from_str(
            r#"["corrupt_compressed", "mislabelled_compression",
                {"slow_start": {"events": 3, "pause_ms": 500}}]"#,
        )
        .unwrap();
        assert_eq!(
            new_faults,
            vec![
                Fault::CorruptCompressed,
                Fault::MislabelledCompression,
                Fault::SlowStart {
                    events: 3,
                    pause_ms: 500
                }
            ]
        );
    }
}
