//! Token usage in upstream answers (behaviour §6: successes are counted in tokens): the `usage`
//! object in every shape upstreams send, for whole JSON responses here and for stream events in
//! `stream_watch`. It must not decide what a count is for.

use quotaroute_journal::ApiFormat;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_scan::{Scan, Seen, DEPTH};
use super::usage_count::{Count, CountField, CountFlaws};

/// Tokens one upstream answer used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCounts {
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Input tokens read from the upstream's prompt cache (behaviour §10): OpenAI
    /// `prompt_tokens_details.cached_tokens` (Responses: `input_tokens_details`), Anthropic
    /// `cache_read_input_tokens`. Part of `tokens_in`.
    pub tokens_cached: u64,
    /// Input tokens written to the cache (Anthropic `cache_creation_input_tokens`).
    pub tokens_cache_write: u64,
    /// Counts that were negative, fractional or not numbers as sent (read as sane values;
    /// the node logs them, `usage_check` clamps the rest).
    pub flaws: CountFlaws,
}

/// A `usage` object: OpenAI chat / completions / embeddings (`prompt_tokens`,
/// `completion_tokens`), Responses and Anthropic (`input_tokens`, `output_tokens`). Each count
/// is read from any JSON value (`usage_count`): a bad one is flagged, never a reason to read no
/// usage at all.
#[derive(Debug, Deserialize, Default, PartialEq, Eq)]
pub(super) struct UsageFields {
    #[serde(default)]
    prompt_tokens: Option<Count>,
    #[serde(default)]
    completion_tokens: Option<Count>,
    #[serde(default)]
    input_tokens: Option<Count>,
    #[serde(default)]
    output_tokens: Option<Count>,
    #[serde(default)]
    cache_creation_input_tokens: Option<Count>,
    #[serde(default)]
    cache_read_input_tokens: Option<Count>,
    #[serde(default)]
    prompt_tokens_details: Option<CachedDetails>,
    #[serde(default)]
    input_tokens_details: Option<CachedDetails>,
}

/// OpenAI's `*_tokens_details` (only the cache count is read); anything but an object there is
/// read as no details.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct CachedDetails {
    cached_tokens: Option<Count>,
}

impl CachedDetails {
    /// Details read by `scan` as the derived read reads them (`Some(None)`: `null`); `None`
    /// (declined) for anything but an object or `null`, a repeated `cached_tokens` (serde
    /// then reads no details) or a count [`scanned_count`] declines.
    fn scanned(scan: &mut Scan<'_>) -> Option<Option<CachedDetails>> {
        if scan.null() {
            return Some(None);
        }
        if scan.next_byte()? != b'{' {
            return None;
        }
        let mut details = CachedDetails::default();
        let mut seen = Seen::default();
        scan.object(|scan, key| match &*key {
            "cached_tokens" => {
                seen.first(0)?;
                details.cached_tokens = scanned_count(scan)?;
                Some(())
            }
            _ => scan.skip(DEPTH),
        })?;
        Some(Some(details))
    }
}

/// A count read by `scan` ([`Scan::count_or_null`]), with no flaw; `None` (declined) for
/// anything else, which serde reads with its flaws.
fn scanned_count(scan: &mut Scan<'_>) -> Option<Option<Count>> {
    let count = scan.count_or_null()?;
    Some(count.map(|value| Count { value, flaw: None }))
}

impl<'de> Deserialize<'de> for CachedDetails {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Details {
            #[serde(default)]
            cached_tokens: Option<Count>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum AnyDetails {
            Details(Details),
            Other(IgnoredAny),
        }
        Ok(match AnyDetails::deserialize(deserializer)? {
            AnyDetails::Details(details) => CachedDetails {
                cached_tokens: details.cached_tokens,
            },
            AnyDetails::Other(_) => CachedDetails::default(),
        })
    }
}

impl UsageFields {
    /// A `usage` value read by `scan` as the derived read reads it (`Some(None)`: `null`).
    /// `None` (declined, for serde to judge) for a repeated member, a count that is neither
    /// `null` nor a whole number of at most 18 digits (serde flags those), and details that
    /// are neither an object nor `null`.
    pub(super) fn scanned(scan: &mut Scan<'_>) -> Option<Option<UsageFields>> {
        if scan.null() {
            return Some(None);
        }
        let mut usage = UsageFields::default();
        let mut seen = Seen::default();
        scan.object(|scan, key| {
            let (bit, count, details) = match &*key {
                "prompt_tokens" => (0, Some(&mut usage.prompt_tokens), None),
                "completion_tokens" => (1, Some(&mut usage.completion_tokens), None),
                "input_tokens" => (2, Some(&mut usage.input_tokens), None),
                "output_tokens" => (3, Some(&mut usage.output_tokens), None),
                "cache_creation_input_tokens" => {
                    (4, Some(&mut usage.cache_creation_input_tokens), None)
                }
                "cache_read_input_tokens" => (5, Some(&mut usage.cache_read_input_tokens), None),
                "prompt_tokens_details" => (6, None, Some(&mut usage.prompt_tokens_details)),
                "input_tokens_details" => (7, None, Some(&mut usage.input_tokens_details)),
                _ => return scan.skip(DEPTH),
            };
            seen.first(bit)?;
            match (count, details) {
                (Some(count), _) => *count = scanned_count(scan)?,
                (None, Some(details)) => *details = CachedDetails::scanned(scan)?,
                (None, None) => return None,
            }
            Some(())
        })?;
        Some(Some(usage))
    }

    /// OpenAI names first, then Responses / Anthropic names. Anthropic's `input_tokens`
    /// excludes cache reads and writes, so they are added (OpenAI's `prompt_tokens` already
    /// includes its cached tokens, and OpenAI never sends the `cache_*` fields).
    pub(super) fn counts(&self) -> TokenCounts {
        let mut flaws = CountFlaws::default();
        let mut value = |count: Option<Count>, field: CountField| {
            count.map(|count| {
                if let Some(flaw) = count.flaw {
                    flaws.add(field, flaw);
                }
                count.value
            })
        };
        let prompt = value(self.prompt_tokens, CountField::PromptTokens);
        let completion = value(self.completion_tokens, CountField::CompletionTokens);
        let input = value(self.input_tokens, CountField::InputTokens);
        let output = value(self.output_tokens, CountField::OutputTokens);
        let cache_write = value(
            self.cache_creation_input_tokens,
            CountField::CacheCreationInputTokens,
        );
        let cache_read = value(
            self.cache_read_input_tokens,
            CountField::CacheReadInputTokens,
        );
        let details = value(
            self.prompt_tokens_details
                .as_ref()
                .or(self.input_tokens_details.as_ref())
                .and_then(|d| d.cached_tokens),
            CountField::CachedTokens,
        );
        let cached = cache_write
            .unwrap_or(0)
            .saturating_add(cache_read.unwrap_or(0));
        TokenCounts {
            tokens_in: prompt.or(input).unwrap_or(0).saturating_add(cached),
            tokens_out: completion.or(output).unwrap_or(0),
            tokens_cached: cache_read.or(details).unwrap_or(0),
            tokens_cache_write: cache_write.unwrap_or(0),
            flaws,
        }
    }
}

/// Gemini's `usageMetadata` (behaviour §15): `promptTokenCount` counts cached input in
/// (`cachedContentTokenCount`); the output is the candidates' and the thoughts' tokens. Flaws
/// are named by the OpenAI field each count stands for.
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct GeminiUsageFields {
    #[serde(default)]
    prompt_token_count: Option<Count>,
    #[serde(default)]
    candidates_token_count: Option<Count>,
    #[serde(default)]
    thoughts_token_count: Option<Count>,
    #[serde(default)]
    cached_content_token_count: Option<Count>,
}

impl GeminiUsageFields {
    fn counts(&self) -> TokenCounts {
        let mut flaws = CountFlaws::default();
        let mut value = |count: Option<Count>, field: CountField| {
            count.map_or(0, |count| {
                if let Some(flaw) = count.flaw {
                    flaws.add(field, flaw);
                }
                count.value
            })
        };
        let prompt = value(self.prompt_token_count, CountField::PromptTokens);
        let candidates = value(self.candidates_token_count, CountField::CompletionTokens);
        let thoughts = value(self.thoughts_token_count, CountField::CompletionTokens);
        let cached = value(self.cached_content_token_count, CountField::CachedTokens);
        TokenCounts {
            tokens_in: prompt,
            tokens_out: candidates.saturating_add(thoughts),
            tokens_cached: cached,
            tokens_cache_write: 0,
            flaws,
        }
    }
}

/// Counts of a present `usageMetadata` with at least one token count.
pub(super) fn gemini_usage_counts(usage: Option<GeminiUsageFields>) -> Option<TokenCounts> {
    usage
        .filter(|usage| {
            [
                usage.prompt_token_count,
                usage.candidates_token_count,
                usage.thoughts_token_count,
            ]
            .iter()
            .any(Option::is_some)
        })
        .map(|usage| usage.counts())
}

/// What [`gemini_usage_counts`] reads of a `usageMetadata` whose counts were read elsewhere as
/// whole numbers (no flaws): `None` without a prompt, candidates or thoughts count.
pub fn gemini_whole_counts(
    prompt: Option<u64>,
    candidates: Option<u64>,
    thoughts: Option<u64>,
    cached: Option<u64>,
) -> Option<TokenCounts> {
    let any = prompt.is_some() || candidates.is_some() || thoughts.is_some();
    any.then(|| TokenCounts {
        tokens_in: prompt.unwrap_or(0),
        tokens_out: candidates
            .unwrap_or(0)
            .saturating_add(thoughts.unwrap_or(0)),
        tokens_cached: cached.unwrap_or(0),
        tokens_cache_write: 0,
        flaws: CountFlaws::default(),
    })
}

/// A `usage` object whose counts were read elsewhere as whole numbers (no flaws): each count
/// as sent, and each `*_tokens_details` present as an object with its `cached_tokens`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WholeUsage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub prompt_tokens_details: Option<Option<u64>>,
    pub input_tokens_details: Option<Option<u64>>,
}

/// What [`usage_counts`] reads of a `usage` object read elsewhere as [`WholeUsage`] (`None`:
/// no `usage`, or one of no token count).
pub fn whole_usage_counts(usage: Option<WholeUsage>) -> Option<TokenCounts> {
    let count = |value: Option<u64>| value.map(|value| Count { value, flaw: None });
    let details = |cached: Option<Option<u64>>| {
        cached.map(|cached| CachedDetails {
            cached_tokens: count(cached),
        })
    };
    usage_counts(usage.map(|usage| UsageFields {
        prompt_tokens: count(usage.prompt_tokens),
        completion_tokens: count(usage.completion_tokens),
        input_tokens: count(usage.input_tokens),
        output_tokens: count(usage.output_tokens),
        cache_creation_input_tokens: count(usage.cache_creation_input_tokens),
        cache_read_input_tokens: count(usage.cache_read_input_tokens),
        prompt_tokens_details: details(usage.prompt_tokens_details),
        input_tokens_details: details(usage.input_tokens_details),
    }))
}

/// Counts of a present `usage` object with at least one token count (`usage: null` and
/// `usage: {}` are none).
pub(super) fn usage_counts(usage: Option<UsageFields>) -> Option<TokenCounts> {
    usage
        .filter(|usage| {
            [
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.input_tokens,
                usage.output_tokens,
            ]
            .iter()
            .any(Option::is_some)
        })
        .map(|usage| usage.counts())
}

#[derive(Deserialize)]
struct ResponseBody<'a> {
    /// Borrowed as it stands (any JSON value): read only when a span records it.
    #[serde(default, borrow)]
    model: Option<&'a RawValue>,
    #[serde(default)]
    usage: Option<UsageFields>,
    /// Gemini's usage and model.
    #[serde(default, rename = "usageMetadata")]
    usage_metadata: Option<GeminiUsageFields>,
    #[serde(default, borrow, rename = "modelVersion")]
    model_version: Option<&'a RawValue>,
}

/// The body of a 2xx answer is not JSON (behaviour §3/§4: that is a `server_error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("upstream response body is not valid JSON: {0}")]
pub struct InvalidBody(pub String);

/// What one parse of a whole (non-streaming) response reads: its usage and the `model` it
/// names (the raw JSON value, borrowed from the body).
#[derive(Debug, Default)]
pub struct ResponseSummary<'a> {
    pub counts: Option<TokenCounts>,
    pub model: Option<&'a RawValue>,
}

/// One parse of a whole (non-streaming) response: `Err` when the body is not JSON, else the
/// top-level `usage` (Gemini: `usageMetadata`) if it has one; the field names tell the formats
/// apart, so `_format` only documents the caller's intent.
pub fn response_usage(_format: ApiFormat, body: &[u8]) -> Result<Option<TokenCounts>, InvalidBody> {
    response_summary(body).map(|summary| summary.counts)
}

/// [`response_usage`] and the answer's `model`, from the same single parse.
pub fn response_summary(body: &[u8]) -> Result<ResponseSummary<'_>, InvalidBody> {
    let is_object = body.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'{');
    // serde would read an array positionally as the struct: only objects go that way.
    let parsed = if is_object {
        crate::wire::json_body::from_body::<ResponseBody>(body)
    } else {
        serde_json::from_slice::<IgnoredAny>(body).map(|_| ResponseBody {
            model: None,
            usage: None,
            usage_metadata: None,
            model_version: None,
        })
    };
    match parsed {
        Ok(parsed) => Ok(ResponseSummary {
            counts: usage_counts(parsed.usage)
                .or_else(|| gemini_usage_counts(parsed.usage_metadata)),
            model: parsed.model.or(parsed.model_version),
        }),
        // Valid JSON of another shape (an array, a `usage` that is not an object, a duplicate
        // key) has no usage we can read, but is not a broken answer.
        Err(error) => match serde_json::from_slice::<IgnoredAny>(body) {
            Ok(_) => Ok(ResponseSummary::default()),
            Err(_) => Err(InvalidBody(error.to_string())),
        },
    }
}

/// `(tokens_in, tokens_out)` of a whole response, `None` when it has no readable usage.
pub fn usage_from_json(format: ApiFormat, body: &[u8]) -> Option<(u64, u64)> {
    response_usage(format, body)
        .ok()
        .flatten()
        .map(|counts| (counts.tokens_in, counts.tokens_out))
}

/// Whether `body` is one valid JSON value (a 2xx whose body is not is a `server_error`).
pub fn is_valid_json(body: &[u8]) -> bool {
    serde_json::from_slice::<IgnoredAny>(body).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_read_alike_whether_or_not_it_is_all_utf8() {
        let body = "{\"model\":\"m-é\",\"choices\":[{\"message\":{\"content\":\"café 🦀\"}}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}";
        let summary = response_summary(body.as_bytes()).unwrap();
        assert_eq!(summary.model.map(RawValue::get), Some("\"m-é\""));
        assert_eq!(
            summary.counts.map(|c| (c.tokens_in, c.tokens_out)),
            Some((3, 4))
        );
        // A byte that is no UTF-8 inside a string the read skips is read past by bytes, as
        // it always was; outside every string it breaks the answer.
        let mut broken = body.as_bytes().to_vec();
        let at = broken.windows(3).position(|w| w == b"caf").unwrap() + 2;
        broken[at] = 0xff;
        let summary = response_summary(&broken).unwrap();
        assert_eq!(
            summary.counts.map(|c| (c.tokens_in, c.tokens_out)),
            Some((3, 4))
        );
        let mut outside = body.as_bytes().to_vec();
        outside.insert(1, 0xff);
        assert!(response_summary(&outside).is_err());
    }

    #[test]
    fn s6_usage_of_each_response_shape() {
        let table = [
            (
                ApiFormat::Openai,
                r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0}}}"#,
                Some((19, 10)),
            ),
            (
                ApiFormat::Openai,
                r#"{"object":"list","data":[{"object":"embedding","embedding":[0.1],"index":0}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}"#,
                Some((8, 0)),
            ),
            (
                ApiFormat::Openai,
                r#"{"id":"resp_1","object":"response","output":[],"usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"total_tokens":123}}"#,
                Some((36, 87)),
            ),
            (
                ApiFormat::Anthropic,
                r#"{"id":"msg_1","type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":2095,"output_tokens":503}}"#,
                Some((2095, 503)),
            ),
            (
                ApiFormat::Anthropic,
                r#"{"type":"message","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":5}}"#,
                Some((1110, 5)),
            ),
            (ApiFormat::Openai, r#"{"choices":[],"usage":null}"#, None),
            (ApiFormat::Openai, r#"{"choices":[]}"#, None),
            (ApiFormat::Openai, r#"{"usage":{"total_tokens":3}}"#, None),
            (
                ApiFormat::Openai,
                r#"[{"usage":{"prompt_tokens":1}}]"#,
                None,
            ),
        ];
        for (format, body, expected) in table {
            assert_eq!(usage_from_json(format, body.as_bytes()), expected, "{body}");
        }
    }

    #[test]
    fn s15_gemini_usage_metadata_counts_cached_and_thought_tokens() {
        let body = br#"{"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP"}],
            "usageMetadata":{"promptTokenCount":1200,"cachedContentTokenCount":1024,"candidatesTokenCount":30,
            "thoughtsTokenCount":12,"totalTokenCount":1242},"modelVersion":"gemini-2.5-flash","responseId":"r"}"#;
        let summary = response_summary(body).unwrap();
        let counts = summary.counts.unwrap();
        assert_eq!(
            (counts.tokens_in, counts.tokens_out, counts.tokens_cached),
            (1200, 42, 1024)
        );
        assert_eq!(
            summary.model.map(RawValue::get),
            Some("\"gemini-2.5-flash\"")
        );
        // A safety block still used the prompt; no count at all is no usage.
        let blocked = br#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9}}"#;
        assert_eq!(usage_from_json(ApiFormat::Gemini, blocked), Some((9, 0)));
        assert_eq!(
            usage_from_json(ApiFormat::Gemini, br#"{"usageMetadata":{}}"#),
            None
        );
        let flawed = br#"{"usageMetadata":{"promptTokenCount":-3,"candidatesTokenCount":"7"}}"#;
        let counts = response_usage(ApiFormat::Gemini, flawed).unwrap().unwrap();
        assert_eq!((counts.tokens_in, counts.tokens_out), (0, 7));
        assert!(counts.flaws.any_unreadable());
    }

    #[test]
    fn s3_unparseable_2xx_body_is_told_apart_from_json_without_usage() {
        assert!(response_usage(ApiFormat::Openai, b"<html>502</html>").is_err());
        assert!(response_usage(ApiFormat::Openai, b"").is_err());
        assert!(response_usage(ApiFormat::Openai, b"{\"usage\":{}").is_err());
        assert_eq!(
            response_usage(ApiFormat::Openai, b"{\"usage\":\"n/a\"}"),
            Ok(None)
        );
        assert!(is_valid_json(b" {\"a\":[1,2,{}]} "));
        assert!(is_valid_json(b"null"));
        assert!(!is_valid_json(b"{\"a\":1} trailing"));
        assert!(!is_valid_json(b"data: {}\n\n"));
    }
}
