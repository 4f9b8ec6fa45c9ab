//! A Responses request without its provider web search tool (behaviour §14): what a combo
//! whose targets all lack web search serves instead of refusing it. Codex sends `web_search`
//! by default with every turn, so on a pool of chat-only hosts the tool is left out and named
//! in `x-quotaroute-dropped` rather than every turn being refused; a combo with a target that
//! runs web search never gets here (that target is chosen).

use bytes::Bytes;
use serde_json::{Map, Value};

/// The tool types that are OpenAI's hosted web search.
fn is_web_search(kind: &str) -> bool {
    kind == "web_search" || kind.starts_with("web_search_")
}

/// `body` without its web search tools (and a `tool_choice` or `include` entry that names
/// them), and the tools' names as the client sent them; `None` when it has none (or is not a
/// JSON object).
pub fn without_web_search(body: &[u8]) -> Option<(Bytes, Vec<String>)> {
    let Ok(Value::Object(mut request)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    let left_out = take_search_tools(&mut request);
    if left_out.is_empty() {
        return None;
    }
    let choice_names_search = request
        .get("tool_choice")
        .and_then(|choice| choice.get("type"))
        .and_then(Value::as_str)
        .is_some_and(is_web_search);
    if choice_names_search {
        request.insert("tool_choice".into(), Value::String("auto".into()));
    }
    if let Some(Value::Array(include)) = request.get_mut("include") {
        include.retain(|entry| {
            !entry
                .as_str()
                .is_some_and(|entry| entry.starts_with("web_search_call"))
        });
    }
    let body = serde_json::to_vec(&request).ok()?;
    Some((Bytes::from(body), left_out))
}

/// Removes the web search entries of `tools`, returning their types (each once).
fn take_search_tools(request: &mut Map<String, Value>) -> Vec<String> {
    let Some(Value::Array(tools)) = request.get_mut("tools") else {
        return Vec::new();
    };
    let mut left_out: Vec<String> = Vec::new();
    tools.retain(|tool| {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("");
        if !is_web_search(kind) {
            return true;
        }
        if !left_out.iter().any(|name| name == kind) {
            left_out.push(kind.to_owned());
        }
        false
    });
    left_out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codex_default_search_tool_is_left_out_and_named() {
        let body = json!({"model": "m", "input": "hi", "tool_choice": {"type": "web_search"},
                          "include": ["reasoning.encrypted_content", "web_search_call.action.sources"],
                          "tools": [{"type": "function", "name": "shell", "parameters": {}},
                                    {"type": "web_search", "external_web_access": false},
                                    {"type": "web_search_preview"}]});
        let (out, left_out) = without_web_search(&serde_json::to_vec(&body).unwrap()).unwrap();
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(left_out, ["web_search", "web_search_preview"]);
        assert_eq!(
            out["tools"],
            json!([{"type": "function", "name": "shell", "parameters": {}}])
        );
        assert_eq!(out["tool_choice"], "auto");
        assert_eq!(out["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(out["input"], "hi");
    }

    #[test]
    fn a_request_without_search_is_left_as_it_is() {
        for body in [
            json!({"model": "m", "input": "hi"}),
            json!({"model": "m", "tools": [{"type": "function", "name": "f"}]}),
        ] {
            assert!(without_web_search(&serde_json::to_vec(&body).unwrap()).is_none());
        }
        assert!(without_web_search(b"not json").is_none());
    }
}
