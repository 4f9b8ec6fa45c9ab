//! How an OpenAI chat / completions chunk is read on the hot path: what its `choices` hold
//! (count, content per behaviour §3, finish reason), its `usage` and whether it is an error,
//! decoded straight from the bytes without building the choices: by `json_scan`'s one walk,
//! and by serde's typed read for what the walk declines. It must not say what that means for
//! the router (that is `stream_watch`).

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_scan::{Scan, Seen, DEPTH};
use super::usage::UsageFields;

/// A chunk as read: what its choices hold and its usage; or an `error` member; or no chunk.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Chunk {
    Read {
        choices: ChoicesSummary,
        usage: Option<UsageFields>,
    },
    /// An `error` member that is not `null`: the event is read as an error.
    Error,
    /// Not a chunk serde's typed read takes.
    Garbage,
}

/// Reads `data`, one event's JSON: by [`scanned`], and by serde's typed read ([`OpenAiChunk`])
/// when that declines.
pub(super) fn read(data: &str) -> Chunk {
    match scanned(data) {
        Some((choices, usage)) => Chunk::Read { choices, usage },
        None => typed(data),
    }
}

/// `data` read by serde's typed read, [`OpenAiChunk`].
fn typed(data: &str) -> Chunk {
    match serde_json::from_str::<OpenAiChunk<'_>>(data) {
        Err(_) => Chunk::Garbage,
        Ok(chunk) if chunk.error.is_some() => Chunk::Error,
        Ok(chunk) => Chunk::Read {
            choices: chunk.choices.unwrap_or_default(),
            usage: chunk.usage,
        },
    }
}

/// `data` read by one `json_scan` walk as serde's typed read reads it: its choices' summary
/// and its usage. `None` (declined, for serde to read) for an `error` member that is not
/// `null`, a repeated member of the chunk or of a choice, a `delta` that is neither an object
/// nor `null`, a choice that is no object, and whatever `json_scan` or
/// [`UsageFields::scanned`] decline.
fn scanned(data: &str) -> Option<(ChoicesSummary, Option<UsageFields>)> {
    let mut scan = Scan::new(data);
    let mut choices = None;
    let mut usage = None;
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "choices" => {
            seen.first(0)?;
            if !scan.null() {
                choices = Some(choices_scanned(scan)?);
            }
            Some(())
        }
        "usage" => {
            seen.first(1)?;
            usage = UsageFields::scanned(scan)?;
            Some(())
        }
        "error" => {
            seen.first(2)?;
            scan.null().then_some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    scan.end()?;
    Some((choices.unwrap_or_default(), usage))
}

/// A `choices` array, as [`ChoicesSummary`]'s read sums it.
fn choices_scanned(scan: &mut Scan<'_>) -> Option<ChoicesSummary> {
    let mut summary = ChoicesSummary::default();
    scan.array(|scan| {
        let (has_content, has_finish_reason) = choice_scanned(scan)?;
        summary.count += 1;
        summary.has_content |= has_content;
        summary.has_finish_reason |= has_finish_reason;
        Some(())
    })?;
    Some(summary)
}

/// One choice, an object, as [`Choice`] reads it: whether it has content (its delta's or
/// its `text`) and a finish reason.
fn choice_scanned(scan: &mut Scan<'_>) -> Option<(bool, bool)> {
    if scan.next_byte()? != b'{' {
        return None;
    }
    let (mut delta, mut text, mut finish_reason) = (false, false, false);
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "delta" => {
            seen.first(0)?;
            if !scan.null() {
                delta = delta_scanned(scan)?;
            }
            Some(())
        }
        "text" => {
            seen.first(1)?;
            text = non_empty_scanned(scan)?;
            Some(())
        }
        "finish_reason" => {
            seen.first(2)?;
            finish_reason = non_empty_scanned(scan)?;
            Some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    Some((delta || text, finish_reason))
}

/// A delta object, as [`DeltaHasContent`] reads it (a repeated member is read, as there).
fn delta_scanned(scan: &mut Scan<'_>) -> Option<bool> {
    if scan.next_byte()? != b'{' {
        return None;
    }
    let mut has_content = false;
    scan.object(|scan, key| {
        if key == "role" {
            return scan.skip(DEPTH);
        }
        has_content |= non_empty_scanned(scan)?;
        Some(())
    })?;
    Some(has_content)
}

/// Any value, as [`NonEmpty`] reads it: `null`, `""`, `[]` and `{}` carry nothing.
fn non_empty_scanned(scan: &mut Scan<'_>) -> Option<bool> {
    match scan.next_byte()? {
        b'"' => Some(!scan.string()?.is_empty()),
        b'n' => scan.null().then_some(false),
        b'[' | b'{' => {
            let text = scan.value(DEPTH)?;
            let inside = text.get(1..text.len().checked_sub(1)?)?;
            Some(!inside.trim_matches([' ', '\t', '\n', '\r']).is_empty())
        }
        _ => {
            scan.skip(DEPTH)?;
            Some(true)
        }
    }
}

/// An OpenAI chat or completions chunk.
#[derive(Deserialize)]
struct OpenAiChunk<'a> {
    #[serde(default)]
    choices: Option<ChoicesSummary>,
    #[serde(default)]
    usage: Option<UsageFields>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

/// What the `choices` array of a chunk holds, read without building it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct ChoicesSummary {
    pub(super) count: usize,
    /// Some choice has a non-empty delta field other than `role`, or non-empty `text`.
    pub(super) has_content: bool,
    pub(super) has_finish_reason: bool,
}

impl<'de> Deserialize<'de> for ChoicesSummary {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ChoicesVisitor;
        impl<'de> Visitor<'de> for ChoicesVisitor {
            type Value = ChoicesSummary;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_unit<E>(self) -> Result<ChoicesSummary, E> {
                Ok(ChoicesSummary::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ChoicesSummary, A::Error> {
                let mut summary = ChoicesSummary::default();
                while let Some(choice) = seq.next_element::<Choice>()? {
                    summary.count += 1;
                    summary.has_content |= choice.delta.is_some_and(|d| d.0) || choice.text.0;
                    summary.has_finish_reason |= choice.finish_reason.0;
                }
                Ok(summary)
            }
        }
        deserializer.deserialize_any(ChoicesVisitor)
    }
}

#[derive(Deserialize)]
struct Choice {
    /// Chat: whether the delta has content.
    #[serde(default)]
    delta: Option<DeltaHasContent>,
    /// Completions: whether `text` is non-empty.
    #[serde(default)]
    text: NonEmpty,
    #[serde(default)]
    finish_reason: NonEmpty,
}

/// Whether a delta object has a non-empty field other than `role` (behaviour §3).
struct DeltaHasContent(bool);

impl<'de> Deserialize<'de> for DeltaHasContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DeltaVisitor;
        impl<'de> Visitor<'de> for DeltaVisitor {
            type Value = DeltaHasContent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a delta object")
            }
            fn visit_unit<E>(self) -> Result<DeltaHasContent, E> {
                Ok(DeltaHasContent(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DeltaHasContent, A::Error> {
                let mut has_content = false;
                while let Some(IsRole(is_role)) = map.next_key::<IsRole>()? {
                    if is_role {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        has_content |= map.next_value::<NonEmpty>()?.0;
                    }
                }
                Ok(DeltaHasContent(has_content))
            }
        }
        deserializer.deserialize_any(DeltaVisitor)
    }
}

/// Whether a map key is `role`.
struct IsRole(bool);

impl<'de> Deserialize<'de> for IsRole {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = IsRole;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, key: &str) -> Result<IsRole, E> {
                Ok(IsRole(key == "role"))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Whether a JSON value carries something: `null`, `""`, `[]` and `{}` do not.
#[derive(Default)]
struct NonEmpty(bool);

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NonEmptyVisitor;
        impl<'de> Visitor<'de> for NonEmptyVisitor {
            type Value = NonEmpty;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<NonEmpty, E> {
                Ok(NonEmpty(false))
            }
            fn visit_none<E>(self) -> Result<NonEmpty, E> {
                Ok(NonEmpty(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<NonEmpty, E> {
                Ok(NonEmpty(true))
            }
            fn visit_i64<E>(self, _: i64) -> Result<NonEmpty, E> {
                Ok(NonEmpty(true))
            }
            fn visit_u64<E>(self, _: u64) -> Result<NonEmpty, E> {
                Ok(NonEmpty(true))
            }
            fn visit_f64<E>(self, _: f64) -> Result<NonEmpty, E> {
                Ok(NonEmpty(true))
            }
            fn visit_str<E>(self, text: &str) -> Result<NonEmpty, E> {
                Ok(NonEmpty(!text.is_empty()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NonEmpty, A::Error> {
                let mut any = false;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(NonEmpty(any))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NonEmpty, A::Error> {
                let mut any = false;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(NonEmpty(any))
            }
        }
        deserializer.deserialize_any(NonEmptyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(choices: &str) -> (usize, bool, bool) {
        let data = format!("{{\"choices\":{choices}}}");
        let chunk: OpenAiChunk<'_> = serde_json::from_str(&data).unwrap();
        let summary = chunk.choices.unwrap_or_default();
        assert!(same_or_declined(&data), "not scanned: {data}");
        (
            summary.count,
            summary.has_content,
            summary.has_finish_reason,
        )
    }

    #[test]
    fn s3_content_is_any_non_empty_delta_field_but_role() {
        let table = [
            (r#"[]"#, (0, false, false)),
            (r#"null"#, (0, false, false)),
            (r#"[{"delta":{"role":"assistant"}}]"#, (1, false, false)),
            (
                r#"[{"delta":{"role":"assistant","content":"","tool_calls":[],"x":{}}}]"#,
                (1, false, false),
            ),
            (
                r#"[{"delta":null,"finish_reason":"stop"}]"#,
                (1, false, true),
            ),
            (r#"[{"delta":{"content":" "}}]"#, (1, true, false)),
            (
                r#"[{"delta":{"tool_calls":[{"index":0}]}}]"#,
                (1, true, false),
            ),
            (r#"[{"delta":{"audio":{"data":"AAA"}}}]"#, (1, true, false)),
            (
                r#"[{"delta":{"\u0072ole":"assistant"}}]"#,
                (1, false, false),
            ),
            (
                r#"[{"delta":{}},{"delta":{"content":"b"}}]"#,
                (2, true, false),
            ),
            (r#"[{"text":"x","finish_reason":null}]"#, (1, true, false)),
        ];
        for (choices, expected) in table {
            assert_eq!(summary(choices), expected, "{choices}");
        }
    }

    /// The scan of `data` either declines or reads what serde's typed read reads: `true` when
    /// it took it.
    fn same_or_declined(data: &str) -> bool {
        let Some((choices, usage)) = scanned(data) else {
            return false;
        };
        assert_eq!(
            Chunk::Read { choices, usage },
            typed(data),
            "the scan read {data} otherwise"
        );
        true
    }

    /// Chunks as OpenAI-compatible hosts stream them (the bench mock's and the test mock's
    /// among them), each also pretty-printed.
    fn chunks() -> Vec<String> {
        let compact = [
            r#"{"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"mock-gpt","system_fingerprint":"fp_mock","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"mock-gpt","system_fingerprint":"fp_mock","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"mock-gpt","system_fingerprint":"fp_mock","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}"#,
            r#"{"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"mock-gpt","system_fingerprint":"fp_mock","choices":[],"usage":{"prompt_tokens":35,"completion_tokens":64,"total_tokens":99}}"#,
            r#"{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":8,"total_tokens":1208,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":null},"finish_reason":null}],"usage":null}"#,
            r#"{"id":"c","object":"text_completion","choices":[{"text":"Hi","index":0,"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"c","object":"text_completion","choices":[{"text":"","index":0,"finish_reason":"length"}]}"#,
            r#"{"choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}"#,
            r#"{"choices":null,"error":null}"#,
            r#"{"choices":[{"delta":{"content":"a\"b\u00e9"},"finish_reason":null},{"delta":null,"finish_reason":"stop"}]}"#,
            r#"{"cho\u0069ces":[{"delta":{"\u0072ole":"assistant"}}]}"#,
            r#"{"choices":[{"delta":{"audio":{"data":"AAA"},"x":[],"y":{},"z":0}}],"usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":2,"cache_creation_input_tokens":1,"input_tokens_details":null}}"#,
            r#"{"choices":[{"finish_reason":false,"text":[0]}],"usage":{"prompt_tokens":null,"completion_tokens":0,"prompt_tokens_details":{}}}"#,
            r#"{}"#,
        ];
        let mut chunks = Vec::new();
        for chunk in compact {
            chunks.push(chunk.to_string());
            let value: serde_json::Value = serde_json::from_str(chunk).unwrap();
            chunks.push(serde_json::to_string_pretty(&value).unwrap());
        }
        chunks
    }

    #[test]
    fn the_scan_reads_what_serde_reads_or_declines() {
        let chunks = chunks();
        let taken = chunks.iter().filter(|data| same_or_declined(data)).count();
        assert_eq!(taken, chunks.len(), "every usual chunk is scanned");
    }

    #[test]
    fn what_serde_refuses_or_reads_otherwise_is_declined() {
        let host = chunks()[6].clone();
        let content = chunks()[4].clone();
        let variants = [
            // Members serde's typed read refuses repeated.
            host.replacen("\"choices\":", "\"choices\":null,\"choices\":", 1),
            host.replacen("\"usage\":", "\"usage\":null,\"usage\":", 1),
            host.replacen("\"prompt_tokens\":", "\"prompt_tokens\":1,\"prompt_tokens\":", 1),
            content.replacen("\"delta\":", "\"delta\":null,\"delta\":", 1),
            content.replacen("\"finish_reason\":", "\"finish_reason\":1,\"finish_reason\":", 1),
            r#"{"choices":[{"text":"a","text":"b"}]}"#.into(),
            r#"{"error":null,"error":null}"#.into(),
            r#"{"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}}"#.into(),
            // Counts serde reads with a flaw.
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":-35", 1),
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":35.5", 1),
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":\"35\"", 1),
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":3.5e1", 1),
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":1234567890123456789012", 1),
            r#"{"usage":{"prompt_tokens":1,"prompt_tokens_details":"none"}}"#.into(),
            // An error, shapes serde refuses, and what is no JSON.
            r#"{"error":{"message":"overloaded","type":"server_error"}}"#.into(),
            r#"{"choices":[{"delta":"text"}]}"#.into(),
            r#"{"choices":[1]}"#.into(),
            r#"{"choices":{}}"#.into(),
            r#"{"usage":"none"}"#.into(),
            r#"{"choices":[]} x"#.into(),
            r#"{"choices":[],}"#.into(),
            r#"{"choices":[{"delta":{"content":"\ud800"}}]}"#.into(),
        ];
        for data in &variants {
            assert!(scanned(data).is_none(), "scanned: {data}");
            // The typed read still reads it (or refuses it) as before.
            assert_eq!(read(data), typed(data), "{data}");
        }
        assert_eq!(read(&variants[0]), Chunk::Garbage);
        assert_eq!(read(&variants[14]), Chunk::Error);
        assert!(matches!(
            read(&variants[8]),
            Chunk::Read { usage: Some(_), .. }
        ));
    }

    #[test]
    fn s3_malformed_choices_do_not_parse() {
        for choices in [r#""x""#, "[1]", r#"[{"delta":"text"}]"#, "{}"] {
            let data = format!("{{\"choices\":{choices}}}");
            assert!(
                serde_json::from_str::<OpenAiChunk<'_>>(&data).is_err(),
                "{choices}"
            );
        }
    }
}
