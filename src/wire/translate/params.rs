//! What a translation cannot carry and the fixed mappings between the two vocabularies
//! (behaviour §14): parameters refused before anything is sent (they change what the answer
//! means), tuning ones dropped and named, reasoning effort ↔ thinking budget, finish reasons.

use serde_json::{Map, Value};

use super::TranslateError;

/// Tuning parameters with no equivalent: dropped and named in `x-quotaroute-dropped`.
pub const DROPPED_TUNING: [&str; 6] = [
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "service_tier",
    "top_k",
];

/// OpenAI built-in tools, which no translation carries.
const BUILT_IN_TOOLS: [&str; 8] = [
    "web_search_preview",
    "web_search",
    "file_search",
    "computer_use_preview",
    "code_interpreter",
    "image_generation",
    "local_shell",
    "mcp",
];

/// Refuses the OpenAI parameters that change what an answer means and that no translation
/// carries (`n` > 1, `logprobs`, `top_logprobs`, audio output, `prediction`).
pub fn refuse_openai_only(request: &Map<String, Value>) -> Result<(), TranslateError> {
    // Most requests name none of them: one walk over the members says so.
    let names_any = request.keys().any(|key| {
        matches!(
            key.as_str(),
            "n" | "logprobs"
                | "top_logprobs"
                | "audio"
                | "modalities"
                | "prediction"
                | "background"
        )
    });
    if !names_any {
        return Ok(());
    }
    if request
        .get("n")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 1)
    {
        return Err(TranslateError::unsupported(
            "n",
            "a translated request gives one choice",
        ));
    }
    if request.get("logprobs").is_some_and(is_set) {
        return Err(TranslateError::unsupported(
            "logprobs",
            "a translated answer has no log probabilities",
        ));
    }
    if request.get("top_logprobs").is_some_and(|v| !v.is_null()) {
        return Err(TranslateError::unsupported(
            "top_logprobs",
            "a translated answer has no log probabilities",
        ));
    }
    let audio_out = request.get("audio").is_some_and(|v| !v.is_null())
        || request
            .get("modalities")
            .and_then(Value::as_array)
            .is_some_and(|m| m.iter().any(|v| v.as_str() == Some("audio")));
    if audio_out {
        return Err(TranslateError::unsupported(
            "audio",
            "a translated answer has no audio output",
        ));
    }
    if request.get("prediction").is_some_and(|v| !v.is_null()) {
        return Err(TranslateError::unsupported(
            "prediction",
            "a translated request takes no predicted output",
        ));
    }
    if request
        .get("background")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        return Err(TranslateError::unsupported(
            "background",
            "a translated response is answered in the request",
        ));
    }
    Ok(())
}

/// Refuses a built-in (non-function) tool by its type.
pub fn refuse_built_in_tool(tool_type: &str) -> Result<(), TranslateError> {
    if tool_type == "function" {
        return Ok(());
    }
    let why = if BUILT_IN_TOOLS.contains(&tool_type) {
        "OpenAI's built-in tools do not run through translation"
    } else {
        "only function tools are carried through translation"
    };
    Err(TranslateError::unsupported(tool_type, why))
}

fn is_set(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        _ => true,
    }
}

/// `reasoning_effort` → `thinking.budget_tokens` (low 2048, medium 8192, high 24576);
/// `None` for `minimal`/`none` and unknown words (no thinking).
pub fn budget_for_effort(effort: &str) -> Option<u32> {
    match effort {
        "low" => Some(2048),
        "medium" => Some(8192),
        "high" => Some(24576),
        _ => None,
    }
}

/// `thinking.budget_tokens` → `reasoning_effort` (≤ 4096 low, ≤ 16384 medium, else high).
pub fn effort_for_budget(budget: u64) -> &'static str {
    match budget {
        0..=4096 => "low",
        4097..=16384 => "medium",
        _ => "high",
    }
}

/// Notes `key` as dropped, once.
pub fn drop_named(dropped: &mut Vec<String>, key: &str) {
    if !dropped.iter().any(|d| d == key) {
        dropped.push(key.to_string());
    }
}

/// A temperature for Anthropic (0..=1; OpenAI's range is 0..=2).
pub fn anthropic_temperature(value: &Value) -> Option<Value> {
    let t = value.as_f64()?;
    serde_json::Number::from_f64(t.clamp(0.0, 1.0)).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effort_and_budget_map_both_ways_as_the_spec_says() {
        for (effort, budget) in [("low", 2048), ("medium", 8192), ("high", 24576)] {
            assert_eq!(budget_for_effort(effort), Some(budget));
            assert_eq!(effort_for_budget(u64::from(budget)), effort);
        }
        for (budget, effort) in [
            (1024, "low"),
            (4096, "low"),
            (4097, "medium"),
            (16384, "medium"),
            (16385, "high"),
            (64000, "high"),
        ] {
            assert_eq!(effort_for_budget(budget), effort, "{budget}");
        }
        assert_eq!(budget_for_effort("minimal"), None);
    }

    #[test]
    fn finish_reasons_map_both_ways() {
        use crate::wire::translate::{chat, messages};
        for (anthropic, openai) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("max_tokens", "length"),
            ("tool_use", "tool_calls"),
            ("refusal", "content_filter"),
        ] {
            let finish = messages::read::finish(Some(anthropic));
            assert_eq!(chat::write::finish_reason(finish), openai, "{anthropic}");
        }
        for (openai, anthropic) in [
            ("stop", "end_turn"),
            ("length", "max_tokens"),
            ("tool_calls", "tool_use"),
            ("content_filter", "refusal"),
        ] {
            let finish = chat::read::finish(Some(openai));
            assert_eq!(messages::write::stop_reason(finish), anthropic, "{openai}");
        }
    }

    #[test]
    fn meaning_changing_parameters_are_refused_by_name() {
        let cases = [
            (r#"{"n":2}"#, Some("n")),
            (r#"{"n":1}"#, None),
            (r#"{"logprobs":true}"#, Some("logprobs")),
            (r#"{"logprobs":false}"#, None),
            (r#"{"top_logprobs":3}"#, Some("top_logprobs")),
            (r#"{"modalities":["text","audio"]}"#, Some("audio")),
            (r#"{"audio":{"voice":"alloy"}}"#, Some("audio")),
            (
                r#"{"prediction":{"type":"content","content":"x"}}"#,
                Some("prediction"),
            ),
            (r#"{"seed":1}"#, None),
            (r#"{"background":true}"#, Some("background")),
            (r#"{"background":false,"model":"m","messages":[]}"#, None),
            (
                r#"{"model":"m","messages":[],"n":3,"stream":true}"#,
                Some("n"),
            ),
            (r#"{"logprobs":true,"n":2}"#, Some("n")),
        ];
        for (body, refused) in cases {
            let request: Map<String, Value> = serde_json::from_str(body).unwrap();
            let got = match refuse_openai_only(&request) {
                Ok(()) => None,
                Err(TranslateError::Unsupported { parameter, .. }) => Some(parameter),
                Err(other) => panic!("{other}"),
            };
            assert_eq!(got.as_deref(), refused, "{body}");
        }
        assert!(refuse_built_in_tool("function").is_ok());
        for tool in ["web_search_preview", "file_search", "computer_use_preview"] {
            assert!(
                matches!(refuse_built_in_tool(tool), Err(TranslateError::Unsupported { parameter, .. }) if parameter == tool)
            );
        }
    }
}
