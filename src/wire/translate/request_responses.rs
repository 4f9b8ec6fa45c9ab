//! A Responses request as a Messages request (behaviour §14): stateless — the input must hold
//! the whole conversation (`previous_response_id` is refused); reasoning items come back as
//! the thinking blocks they carry only when [`RequestSettings`]'s key opens them (this
//! target's connection made them), and are left out otherwise.

use serde_json::{json, Map, Value};

use super::content::{
    anthropic_tool_choice, anthropic_tools, arguments_input, openai_blocks, push_message,
};
use super::params::{self, drop_named};
use super::request_chat::{common_to_messages, thinking};
use super::thinking_carry::{ReasoningCounts, ReasoningKey};
use super::{RequestSettings, TranslateError};

/// Keys read below or with no meaning upstream; anything else is dropped and named.
const HANDLED: [&str; 18] = [
    "model",
    "input",
    "instructions",
    "stream",
    "max_output_tokens",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "user",
    "store",
    "include",
    "previous_response_id",
    "text",
    "background",
    "stream_options",
];

pub fn to_messages(
    request: Map<String, Value>,
    settings: RequestSettings<'_>,
    dropped: &mut Vec<String>,
    reasoning: &mut ReasoningCounts,
) -> Result<Value, TranslateError> {
    params::refuse_openai_only(&request)?;
    if request
        .get("previous_response_id")
        .is_some_and(|id| !id.is_null())
    {
        return Err(TranslateError::unsupported(
            "previous_response_id",
            "responses served by Anthropic-format accounts are not stored; send the whole input again",
        ));
    }
    if let Some(format) = request.get("text").and_then(|t| t.get("format")) {
        let kind = format.get("type").and_then(Value::as_str).unwrap_or("text");
        if kind != "text" {
            return Err(TranslateError::unsupported(
                "text.format",
                "structured output formats have no equivalent on Anthropic targets",
            ));
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), json!(settings.model));
    let mut system = Vec::new();
    if let Some(instructions) = request.get("instructions").and_then(Value::as_str) {
        if !instructions.is_empty() {
            system.push(json!({"type": "text", "text": instructions}));
        }
    }
    let messages = input_messages(
        request.get("input"),
        &mut system,
        (settings.reasoning, reasoning),
    )?;
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    common_to_messages(&request, settings, &mut out, dropped)?;
    if let Some(tools) = request.get("tools").and_then(Value::as_array) {
        let tools = anthropic_tools(tools)?;
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    if let Some(choice) = anthropic_tool_choice(
        request.get("tool_choice"),
        request.get("parallel_tool_calls"),
    ) {
        out.insert("tool_choice".into(), choice);
    }
    let effort = request
        .get("reasoning")
        .and_then(|r| r.get("effort"))
        .and_then(Value::as_str);
    thinking(effort, "reasoning", &mut out, dropped);
    for key in request.keys() {
        if !HANDLED.contains(&key.as_str()) {
            drop_named(dropped, key);
        }
    }
    Ok(Value::Object(out))
}

/// The input items as alternating messages; system and developer messages go to `system`;
/// reasoning items as the thinking blocks `key` opens, counted in `counts`.
fn input_messages(
    input: Option<&Value>,
    system: &mut Vec<Value>,
    (key, counts): (Option<ReasoningKey<'_>>, &mut ReasoningCounts),
) -> Result<Vec<Value>, TranslateError> {
    let items = match input {
        None | Some(Value::Null) => {
            return Err(TranslateError::Invalid("`input` is required".into()))
        }
        Some(Value::String(text)) => {
            return Ok(vec![
                json!({"role": "user", "content": [{"type": "text", "text": text}]}),
            ])
        }
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(TranslateError::Invalid(
                "`input` must be a string or an array of items".into(),
            ))
        }
    };
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for item in items {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("user");
                let content = item.get("content").unwrap_or(&Value::Null);
                match role {
                    "system" | "developer" => {
                        for block in openai_blocks(content)? {
                            if block["type"] == "text" {
                                system.push(block);
                            }
                        }
                    }
                    "assistant" => push_message(&mut out, "assistant", openai_blocks(content)?),
                    _ => push_message(&mut out, "user", openai_blocks(content)?),
                }
            }
            "function_call" => {
                let block = json!({
                    "type": "tool_use",
                    "id": item.get("call_id").cloned().unwrap_or(json!("")),
                    "name": item.get("name").cloned().unwrap_or(json!("")),
                    "input": arguments_input(item.get("arguments"))?,
                });
                push_message(&mut out, "assistant", vec![block]);
            }
            "function_call_output" => {
                let output = match item.get("output") {
                    Some(Value::String(text)) => json!(text),
                    Some(parts @ Value::Array(_)) => Value::Array(openai_blocks(parts)?),
                    _ => json!(""),
                };
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": item.get("call_id").cloned().unwrap_or(json!("")),
                    "content": output,
                });
                push_message(&mut out, "user", vec![block]);
            }
            // Thinking this connection made goes back to it; anything else is left out: another
            // account would refuse its signature (behaviour §14).
            "reasoning" => {
                let content = item.get("encrypted_content").and_then(Value::as_str);
                match content
                    .zip(key)
                    .and_then(|(content, key)| key.open(content))
                {
                    Some(block) => {
                        counts.restored += 1;
                        push_message(&mut out, "assistant", vec![block]);
                    }
                    None if content.is_some() => counts.left_out += 1,
                    None => {}
                }
            }
            other => {
                return Err(TranslateError::unsupported(
                    other,
                    "this input item has no equivalent on Anthropic targets",
                ))
            }
        }
    }
    Ok(out)
}
