//! The content pieces both request directions share: text and image parts (data URLs ↔
//! base64 sources, http URLs ↔ url sources), tools, and the rule that Messages alternate roles
//! (consecutive messages of one role are merged).

use serde_json::{json, Map, Value};

use super::TranslateError;

/// An OpenAI image URL as an Anthropic image block.
pub fn image_block(url: &str) -> Result<Value, TranslateError> {
    if let Some(rest) = url.strip_prefix("data:") {
        let Some((media, data)) = rest.split_once(',') else {
            return Err(TranslateError::Invalid(
                "an image data URL has no `,`".into(),
            ));
        };
        let Some(media_type) = media.strip_suffix(";base64") else {
            return Err(TranslateError::Invalid(
                "an image data URL must be base64".into(),
            ));
        };
        return Ok(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }));
    }
    Ok(json!({"type": "image", "source": {"type": "url", "url": url}}))
}

/// An Anthropic image block's source as an OpenAI image URL.
pub fn image_url(block: &Value) -> Option<String> {
    let source = block.get("source")?;
    match source.get("type")?.as_str()? {
        "base64" => Some(format!(
            "data:{};base64,{}",
            source.get("media_type")?.as_str()?,
            source.get("data")?.as_str()?
        )),
        "url" => Some(source.get("url")?.as_str()?.to_string()),
        _ => None,
    }
}

/// The text of OpenAI content: a string, or the text of its text parts joined.
pub fn openai_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            let mut text = String::new();
            for part in parts {
                if let Some(piece) = part.get("text").and_then(Value::as_str) {
                    text.push_str(piece);
                } else if let Some(piece) = part.as_str() {
                    text.push_str(piece);
                }
            }
            text
        }
        _ => String::new(),
    }
}

/// OpenAI message content (a string or parts: `text`/`input_text`/`output_text`,
/// `image_url`/`input_image`) as Anthropic blocks.
pub fn openai_blocks(content: &Value) -> Result<Vec<Value>, TranslateError> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(text) if text.is_empty() => Ok(Vec::new()),
        Value::String(text) => Ok(vec![json!({"type": "text", "text": text})]),
        Value::Array(parts) => {
            let mut blocks = Vec::with_capacity(parts.len());
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
                match kind {
                    "text" | "input_text" | "output_text" => {
                        let text = part.get("text").and_then(Value::as_str).unwrap_or("");
                        if !text.is_empty() {
                            blocks.push(json!({"type": "text", "text": text}));
                        }
                    }
                    "refusal" => {
                        let text = part.get("refusal").and_then(Value::as_str).unwrap_or("");
                        blocks.push(json!({"type": "text", "text": text}));
                    }
                    "image_url" => {
                        let url = part
                            .get("image_url")
                            .and_then(|u| u.get("url").or(Some(u)))
                            .and_then(Value::as_str)
                            .ok_or_else(|| {
                                TranslateError::Invalid("an image_url part has no url".into())
                            })?;
                        blocks.push(image_block(url)?);
                    }
                    "input_image" => {
                        let Some(url) = part.get("image_url").and_then(Value::as_str) else {
                            return Err(TranslateError::unsupported(
                                "file_id",
                                "uploaded files live on OpenAI accounts only",
                            ));
                        };
                        blocks.push(image_block(url)?);
                    }
                    other => {
                        return Err(TranslateError::unsupported(
                            other,
                            "this content part has no equivalent on Anthropic targets",
                        ))
                    }
                }
            }
            Ok(blocks)
        }
        _ => Err(TranslateError::Invalid(
            "message content must be a string or an array of parts".into(),
        )),
    }
}

/// Appends `blocks` as a message of `role`, merged into the last message when it has the same
/// role (Messages alternate user and assistant).
pub fn push_message(messages: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    if let Some(last) = messages.last_mut() {
        if last.get("role").and_then(Value::as_str) == Some(role) {
            if let Some(Value::Array(existing)) = last.get_mut("content") {
                existing.extend(blocks);
                return;
            }
        }
    }
    messages.push(json!({"role": role, "content": blocks}));
}

/// A tool's arguments (a JSON string) as the `input` object of a `tool_use` block.
pub fn arguments_input(arguments: Option<&Value>) -> Result<Value, TranslateError> {
    match arguments {
        None | Some(Value::Null) => Ok(json!({})),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(json!({})),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => Ok(object),
            _ => Err(TranslateError::Invalid(
                "a tool call's arguments are not a JSON object".into(),
            )),
        },
        Some(object @ Value::Object(_)) => Ok(object.clone()),
        Some(_) => Err(TranslateError::Invalid(
            "a tool call's arguments are not a JSON object".into(),
        )),
    }
}

/// OpenAI tools as Anthropic tools: function tools one for one, and a Responses `namespace`
/// (a named group of function tools, as Codex sends its sub-agent tools) flattened into its
/// function tools under their own names (a name already taken is kept once).
pub fn anthropic_tools(tools: &[Value]) -> Result<Vec<Value>, TranslateError> {
    let mut out: Vec<Value> = Vec::with_capacity(tools.len());
    let push = |tool: Value, out: &mut Vec<Value>| {
        if !out.iter().any(|t| t["name"] == tool["name"]) {
            out.push(tool);
        }
    };
    for tool in tools {
        if tool.get("type").and_then(Value::as_str) == Some("namespace") {
            for member in tool
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                push(anthropic_tool(member)?, &mut out);
            }
            continue;
        }
        push(anthropic_tool(tool)?, &mut out);
    }
    Ok(out)
}

/// An OpenAI function tool (`{"type":"function","function":{…}}` in Chat Completions, the
/// function's fields at the top in Responses) as an Anthropic tool.
pub fn anthropic_tool(tool: &Value) -> Result<Value, TranslateError> {
    let kind = tool
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("function");
    super::params::refuse_built_in_tool(kind)?;
    let function = tool.get("function").unwrap_or(tool);
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| TranslateError::Invalid("a tool has no name".into()))?;
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    if let Some(description) = function.get("description").filter(|d| !d.is_null()) {
        out.insert("description".into(), description.clone());
    }
    let schema = function
        .get("parameters")
        .filter(|p| p.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    out.insert("input_schema".into(), schema);
    Ok(Value::Object(out))
}

/// OpenAI's `tool_choice` (and `parallel_tool_calls: false`) as Anthropic's `tool_choice`.
pub fn anthropic_tool_choice(choice: Option<&Value>, parallel: Option<&Value>) -> Option<Value> {
    let mut out = match choice {
        Some(Value::String(word)) => match word.as_str() {
            "none" => json!({"type": "none"}),
            "required" => json!({"type": "any"}),
            _ => json!({"type": "auto"}),
        },
        Some(Value::Object(named)) => {
            let name = named
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| named.get("name"))
                .and_then(Value::as_str);
            match name {
                Some(name) => json!({"type": "tool", "name": name}),
                None => json!({"type": "auto"}),
            }
        }
        _ => {
            if parallel.and_then(Value::as_bool) != Some(false) {
                return None;
            }
            json!({"type": "auto"})
        }
    };
    if parallel.and_then(Value::as_bool) == Some(false) && out["type"] != "none" {
        out["disable_parallel_tool_use"] = json!(true);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_cross_as_base64_or_url_sources_and_back() {
        let data = "data:image/png;base64,iVBORw0KGgo=";
        let block = image_block(data).unwrap();
        assert_eq!(
            block,
            json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}})
        );
        assert_eq!(image_url(&block).as_deref(), Some(data));
        let url = "https://example.test/cat.jpg";
        let block = image_block(url).unwrap();
        assert_eq!(block["source"], json!({"type":"url","url":url}));
        assert_eq!(image_url(&block).as_deref(), Some(url));
        assert!(image_block("data:image/png,notbase64").is_err());
    }

    #[test]
    fn tool_choices_map_as_the_spec_says() {
        let cases = [
            (json!("auto"), None, json!({"type":"auto"})),
            (json!("none"), None, json!({"type":"none"})),
            (json!("required"), None, json!({"type":"any"})),
            (
                json!({"type":"function","function":{"name":"get"}}),
                None,
                json!({"type":"tool","name":"get"}),
            ),
            (
                json!({"type":"function","name":"get"}),
                Some(json!(false)),
                json!({"type":"tool","name":"get","disable_parallel_tool_use":true}),
            ),
        ];
        for (choice, parallel, want) in cases {
            assert_eq!(
                anthropic_tool_choice(Some(&choice), parallel.as_ref()),
                Some(want),
                "{choice}"
            );
        }
        assert_eq!(anthropic_tool_choice(None, None), None);
        assert_eq!(
            anthropic_tool_choice(None, Some(&json!(false))),
            Some(json!({"type":"auto","disable_parallel_tool_use":true}))
        );
    }

    #[test]
    fn consecutive_messages_of_one_role_merge() {
        let mut messages = Vec::new();
        push_message(
            &mut messages,
            "user",
            vec![json!({"type":"text","text":"a"})],
        );
        push_message(
            &mut messages,
            "user",
            vec![json!({"type":"text","text":"b"})],
        );
        push_message(
            &mut messages,
            "assistant",
            vec![json!({"type":"text","text":"c"})],
        );
        push_message(&mut messages, "assistant", Vec::new());
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0]["content"].as_array().unwrap().len(), 2);
    }
}
