//! The client's request body on its way upstream (contract "Client API"): one parse finds the
//! top-level `model`, `stream` and `stream_options.include_usage`, then [`rewrite`] splices the
//! upstream model (and, on OpenAI streams, `include_usage: true`) into the ORIGINAL bytes.
//! It must not re-serialise the body or change any other byte of it.

use bytes::Bytes;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// Why a request body cannot be routed (rendered as 400 by the HTTP edge).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// serde_json's message, with line and column.
    #[error("request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("request body has no `model`")]
    MissingModel,
    #[error("request body must be a JSON object")]
    NotAnObject,
    #[error("`model` must be a string")]
    ModelNotString,
    /// Too long or holding control characters (contract "Hostile input and bounds").
    #[error("`model` {0}")]
    InvalidModel(String),
}

/// The longest `model` name the router accepts: every name it routes is journaled and echoed
/// in `x-quotaroute-model`, so a client string must not grow either without bound.
pub const MAX_MODEL_BYTES: usize = 256;

/// Why `model` is not a name the router routes, if it is not.
pub fn model_name_problem(model: &str) -> Option<String> {
    if model.len() > MAX_MODEL_BYTES {
        return Some(format!(
            "is {} bytes long; at most {MAX_MODEL_BYTES} are allowed",
            model.len()
        ));
    }
    model
        .chars()
        .any(char::is_control)
        .then(|| "holds control characters".to_string())
}

/// A byte range `[start, end)` inside the request body.
pub type Span = (usize, usize);

/// What the router needs to know about a request body, and where to splice it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The client's model name (unescaped).
    pub model: String,
    /// `"stream": true` at the top level.
    pub stream: bool,
    /// The client itself set `stream_options.include_usage: true`, so the usage-only chunk is
    /// theirs to see.
    pub include_usage_requested: bool,
    /// The `model` string value, quotes included.
    model_span: Span,
    /// Just past the body's opening `{`.
    object_open: usize,
    stream_options: StreamOptionsAt,
}

impl RequestInfo {
    /// Byte range of the `model` value in the body, quotes included.
    pub fn model_span(&self) -> Span {
        self.model_span
    }
}

/// Where `stream_options` sits in the body, so `include_usage` can be spliced in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum StreamOptionsAt {
    Absent,
    /// Present but not an object (e.g. `null`): the whole value is replaced.
    NotAnObject(Span),
    Object {
        /// Just past the object's `{`.
        open: usize,
        /// `{}`: an inserted member needs no trailing comma.
        empty: bool,
        /// The `include_usage` value, when present.
        include_usage: Option<Span>,
    },
}

/// Deserialises a present field (even `null`) as `Some(raw)`, so `null` is told from absent.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// The top-level members we read; everything else is skipped (but still syntax-checked).
/// A duplicate `model` is an error, so no second model can slip past the rewrite.
#[derive(Deserialize)]
struct TopLevel<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    model: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    stream: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    stream_options: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StreamOptionsFields<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    include_usage: Option<&'a RawValue>,
}

fn is_json_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// Where `part` (a slice borrowed from `body` by serde_json) sits inside `body`.
fn span_in(body: &[u8], part: &str) -> Result<Span, BodyError> {
    let start = (part.as_ptr() as usize).checked_sub(body.as_ptr() as usize);
    match start {
        Some(start) if start + part.len() <= body.len() => Ok((start, start + part.len())),
        _ => Err(BodyError::InvalidJson(
            "internal: value does not borrow from the body".to_owned(),
        )),
    }
}

/// Reads the routing fields of a request body in one pass.
pub fn parse_request(body: &[u8]) -> Result<RequestInfo, BodyError> {
    let invalid = |error: serde_json::Error| BodyError::InvalidJson(error.to_string());
    let first = body.iter().position(|&byte| !is_json_whitespace(byte));
    if first.map(|at| body[at]) != Some(b'{') {
        // Tell "valid JSON of the wrong kind" from "not JSON at all".
        serde_json::from_slice::<serde::de::IgnoredAny>(body).map_err(invalid)?;
        return Err(BodyError::NotAnObject);
    }
    let object_open = first.map_or(0, |at| at + 1);
    let top: TopLevel<'_> = serde_json::from_slice(body).map_err(invalid)?;

    let raw_model = match top.model {
        Some(raw) if raw.get() != "null" => raw,
        _ => return Err(BodyError::MissingModel),
    };
    if !raw_model.get().starts_with('"') {
        return Err(BodyError::ModelNotString);
    }
    let model: String = serde_json::from_str(raw_model.get()).map_err(invalid)?;
    if model.is_empty() {
        return Err(BodyError::MissingModel);
    }
    if let Some(problem) = model_name_problem(&model) {
        return Err(BodyError::InvalidModel(problem));
    }
    let model_span = span_in(body, raw_model.get())?;
    let stream = top.stream.is_some_and(|raw| raw.get() == "true");

    let (stream_options, include_usage_requested) = match top.stream_options {
        None => (StreamOptionsAt::Absent, false),
        Some(raw) if !raw.get().starts_with('{') => (
            StreamOptionsAt::NotAnObject(span_in(body, raw.get())?),
            false,
        ),
        Some(raw) => {
            let fields: StreamOptionsFields<'_> =
                serde_json::from_str(raw.get()).map_err(invalid)?;
            let (open, _) = span_in(body, raw.get())?;
            let empty = raw.get()[1..]
                .bytes()
                .find(|&byte| !is_json_whitespace(byte))
                == Some(b'}');
            let include_usage = fields
                .include_usage
                .map(|value| span_in(body, value.get()))
                .transpose()?;
            let requested = fields.include_usage.is_some_and(|v| v.get() == "true");
            let at = StreamOptionsAt::Object {
                open: open + 1,
                empty,
                include_usage,
            };
            (at, requested)
        }
    };

    Ok(RequestInfo {
        model,
        stream,
        include_usage_requested,
        model_span,
        object_open,
        stream_options,
    })
}

/// What goes into one splice.
enum Replacement {
    /// The upstream model, JSON-escaped and quoted.
    Model,
    Text(&'static str),
}

/// The body for the upstream: the same bytes, with only the top-level `model` value replaced
/// and — when `force_include_usage` (an OpenAI stream whose client did not ask for usage) —
/// `stream_options.include_usage` set to `true` by the smallest splice that does it.
pub fn rewrite(
    body: &[u8],
    info: &RequestInfo,
    upstream_model: &str,
    force_include_usage: bool,
) -> Bytes {
    let mut splices: Vec<(Span, Replacement)> = Vec::with_capacity(2);
    splices.push((info.model_span, Replacement::Model));
    if force_include_usage && !info.include_usage_requested {
        splices.push(match info.stream_options {
            StreamOptionsAt::Absent => (
                (info.object_open, info.object_open),
                Replacement::Text("\"stream_options\":{\"include_usage\":true},"),
            ),
            StreamOptionsAt::NotAnObject(span) => {
                (span, Replacement::Text("{\"include_usage\":true}"))
            }
            StreamOptionsAt::Object {
                include_usage: Some(span),
                ..
            } => (span, Replacement::Text("true")),
            StreamOptionsAt::Object {
                open, empty: true, ..
            } => ((open, open), Replacement::Text("\"include_usage\":true")),
            StreamOptionsAt::Object {
                open, empty: false, ..
            } => ((open, open), Replacement::Text("\"include_usage\":true,")),
        });
    }
    splices.sort_by_key(|((start, _), _)| *start);

    let mut out = Vec::with_capacity(body.len() + upstream_model.len() + 48);
    let mut copied_to = 0;
    for ((start, end), replacement) in &splices {
        out.extend_from_slice(&body[copied_to..*start]);
        match replacement {
            Replacement::Model => write_json_string(&mut out, upstream_model),
            Replacement::Text(text) => out.extend_from_slice(text.as_bytes()),
        }
        copied_to = *end;
    }
    out.extend_from_slice(&body[copied_to..]);
    Bytes::from(out)
}

/// Appends `text` as a quoted JSON string.
fn write_json_string(out: &mut Vec<u8>, text: &str) {
    // Writing a `&str` into a Vec cannot fail; the fallback only keeps this total.
    if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn rewritten(body: &str, model: &str, force: bool) -> String {
        let info = parse_request(body.as_bytes()).unwrap();
        String::from_utf8(rewrite(body.as_bytes(), &info, model, force).to_vec()).unwrap()
    }

    #[test]
    fn contract_reads_model_stream_and_include_usage() {
        let body = br#"{"model":"fast","stream":true,"stream_options":{"include_usage":true}}"#;
        let info = parse_request(body).unwrap();
        assert_eq!(info.model, "fast");
        assert!(info.stream);
        assert!(info.include_usage_requested);
        assert_eq!(
            &body[info.model_span().0..info.model_span().1],
            br#""fast""#
        );

        let info = parse_request(br#"{"model":"m","stream":false}"#).unwrap();
        assert!(!info.stream && !info.include_usage_requested);
        let info = parse_request(br#"{"model":"m"}"#).unwrap();
        assert!(!info.stream);
    }

    #[test]
    fn contract_body_errors_are_classified() {
        let invalid = BodyError::InvalidJson(String::new());
        let table: [(&[u8], &BodyError); 13] = [
            (b"", &invalid),
            (b"{", &invalid),
            (b"{\"model\":\"a\",}", &invalid),
            (b"{\"model\":\"a\"} x", &invalid),
            (b"{\"model\":\"a\",\"model\":\"b\"}", &invalid),
            (b"[1,2]", &BodyError::NotAnObject),
            (b" \"model\" ", &BodyError::NotAnObject),
            (b"{}", &BodyError::MissingModel),
            (b"{\"model\":null}", &BodyError::MissingModel),
            (b"{\"model\":\"\"}", &BodyError::MissingModel),
            (b"{\"model\":42}", &BodyError::ModelNotString),
            (b"{\"model\":{\"name\":\"x\"}}", &BodyError::ModelNotString),
            (b"{\"model\":\"a\\nb\"}", &BodyError::InvalidModel(String::new())),
        ];
        for (body, expected) in table {
            let error = parse_request(body).unwrap_err();
            assert_eq!(
                std::mem::discriminant(&error),
                std::mem::discriminant(expected),
                "{:?} gave {error:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn contract_invalid_json_message_names_line_and_column() {
        let BodyError::InvalidJson(message) = parse_request(b"{\n \"model\": }").unwrap_err()
        else {
            panic!("expected InvalidJson");
        };
        assert!(message.contains("line 2"), "{message}");
        assert!(message.contains("column"), "{message}");
    }

    #[test]
    fn contract_rewrite_changes_only_the_model_bytes() {
        let body = "{ \"messages\" : [ {\"role\":\"user\",\"content\":\"h\\u00e9llo \\\"q\\\"\"} ],\n\t\"model\" :  \"fast\" , \"temperature\":0.50,\"x\":1e3 }";
        let out = rewritten(body, "gpt-4o", false);
        assert_eq!(out, body.replace("\"fast\"", "\"gpt-4o\""));
    }

    #[test]
    fn contract_nested_model_keys_are_not_touched() {
        let body = r#"{"messages":[{"role":"user","content":"x","model":"inner"}],"metadata":{"model":"meta"},"model":"outer"}"#;
        let out = rewritten(body, "new", false);
        assert_eq!(
            out,
            r#"{"messages":[{"role":"user","content":"x","model":"inner"}],"metadata":{"model":"meta"},"model":"new"}"#
        );
    }

    #[test]
    fn contract_model_with_quotes_and_unicode_is_escaped_and_unescaped() {
        let body = r#"{"model":"caf\u00e9 \"x\"\\y"}"#;
        let info = parse_request(body.as_bytes()).unwrap();
        assert_eq!(info.model, "café \"x\"\\y");
        let out = rewritten(body, "m\"o\\d\u{e9}l\n", false);
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["model"], "m\"o\\d\u{e9}l\n");
        assert_eq!(
            parse_request(out.as_bytes()).unwrap().model,
            "m\"o\\d\u{e9}l\n"
        );
    }

    #[test]
    fn contract_force_include_usage_inserts_stream_options_after_the_brace() {
        let body = "  {\"model\":\"a\",\"stream\":true}";
        let out = rewritten(body, "b", true);
        assert_eq!(
            out,
            "  {\"stream_options\":{\"include_usage\":true},\"model\":\"b\",\"stream\":true}"
        );
        let info = parse_request(out.as_bytes()).unwrap();
        assert!(info.include_usage_requested && info.stream);
    }

    #[test]
    fn contract_force_include_usage_patches_existing_stream_options() {
        let table = [
            (
                r#"{"model":"a","stream_options":{"x":1}}"#,
                r#"{"model":"b","stream_options":{"include_usage":true,"x":1}}"#,
            ),
            (
                r#"{"model":"a","stream_options":{ }}"#,
                r#"{"model":"b","stream_options":{"include_usage":true }}"#,
            ),
            (
                r#"{"stream_options": {"include_usage": false, "y":2},"model":"a"}"#,
                r#"{"stream_options": {"include_usage": true, "y":2},"model":"b"}"#,
            ),
            (
                r#"{"model":"a","stream_options":{"include_usage":null}}"#,
                r#"{"model":"b","stream_options":{"include_usage":true}}"#,
            ),
            (
                r#"{"model":"a","stream_options":null}"#,
                r#"{"model":"b","stream_options":{"include_usage":true}}"#,
            ),
            (
                r#"{"model":"a","stream_options":{"include_usage":true}}"#,
                r#"{"model":"b","stream_options":{"include_usage":true}}"#,
            ),
        ];
        for (body, expected) in table {
            let out = rewritten(body, "b", true);
            assert_eq!(out, expected, "from {body}");
            let info = parse_request(out.as_bytes()).unwrap();
            assert!(info.include_usage_requested, "{out}");
        }
    }

    #[test]
    fn contract_include_usage_is_left_alone_without_force() {
        let body = r#"{"model":"a","stream":true,"stream_options":{"include_usage":false}}"#;
        assert_eq!(rewritten(body, "b", false), body.replace("\"a\"", "\"b\""));
    }

    #[test]
    fn contract_rewritten_body_round_trips_to_the_same_value() {
        let original = json!({
            "model": "combo",
            "messages": [{"role": "user", "content": "é \u{1F600} \"quoted\"", "model": "n"}],
            "stream": true,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        });
        let body = serde_json::to_vec_pretty(&original).unwrap();
        let info = parse_request(&body).unwrap();
        let out = rewrite(&body, &info, "gpt-4o-mini", true);
        let mut expected = original.clone();
        expected["model"] = json!("gpt-4o-mini");
        expected["stream_options"] = json!({"include_usage": true});
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), expected);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn contract_any_model_names_round_trip_and_nothing_else_changes(
            client_model in "\\PC{1,16}",
            upstream_model in "\\PC{0,16}",
            content in "\\PC{0,24}",
            pretty in proptest::prelude::any::<bool>(),
            force in proptest::prelude::any::<bool>(),
        ) {
            let original = json!({
                "messages": [{"role": "user", "content": content, "model": client_model}],
                "model": client_model,
                "stream": true,
            });
            let body = if pretty {
                serde_json::to_vec_pretty(&original).unwrap()
            } else {
                serde_json::to_vec(&original).unwrap()
            };
            let info = parse_request(&body).unwrap();
            proptest::prop_assert_eq!(&info.model, &client_model);
            let out = rewrite(&body, &info, &upstream_model, force);
            let mut expected = original.clone();
            expected["model"] = json!(upstream_model);
            if force {
                expected["stream_options"] = json!({"include_usage": true});
            }
            let parsed: Value = serde_json::from_slice(&out).unwrap();
            proptest::prop_assert_eq!(parsed, expected);
            let (start, end) = info.model_span();
            proptest::prop_assert_eq!(&out[..start.min(info.object_open)], &body[..start.min(info.object_open)]);
            proptest::prop_assert!(out.ends_with(&body[end..]));
        }
    }
}
