//! The hub's form as Messages: an upstream request and a client's whole answer.

use serde_json::{json, Map, Value};

use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{
    Answer, Finish, FormatKind, Image, Part, Request, Role, ToolChoice, ToolOutput, Usage,
};
use crate::wire::translate::object::object;
use crate::wire::translate::params::{self, drop_named};
use crate::wire::translate::{RequestSettings, TranslateError};

/// The request for an Anthropic host (`max_tokens` is required: the default when the client
/// sent none).
pub fn request(
    form: &Request,
    settings: RequestSettings<'_>,
    dropped: &mut Vec<String>,
) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), json!(settings.model));
    if !form.system.is_empty() {
        let system = form
            .system
            .iter()
            .map(|text| object([("type", "text".into()), ("text", text.as_str().into())]))
            .collect();
        out.insert("system".into(), Value::Array(system));
    }
    let mut messages = Vec::with_capacity(form.messages.len());
    for message in &form.messages {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let blocks = message
            .parts
            .iter()
            .map(block)
            .collect::<Result<Vec<_>, _>>()?;
        if !blocks.is_empty() {
            messages.push(object([
                ("role", role.into()),
                ("content", Value::Array(blocks)),
            ]));
        }
    }
    out.insert("messages".into(), Value::Array(messages));
    let max_tokens = form
        .max_tokens
        .unwrap_or(u64::from(settings.default_max_tokens));
    out.insert("max_tokens".into(), json!(max_tokens));
    if !form.stop.is_empty() {
        out.insert("stop_sequences".into(), Value::Array(form.stop.clone()));
    }
    if let Some(t) = form
        .temperature
        .as_ref()
        .and_then(params::anthropic_temperature)
    {
        out.insert("temperature".into(), t);
    }
    if let Some(p) = &form.top_p {
        out.insert("top_p".into(), p.clone());
    }
    if let Some(user) = &form.user {
        out.insert("metadata".into(), json!({"user_id": user}));
    }
    if form.stream {
        out.insert("stream".into(), json!(true));
    }
    if !form.tools.is_empty() {
        let tools = form
            .tools
            .iter()
            .map(|tool| {
                let mut out = Map::new();
                out.insert("name".into(), json!(tool.name));
                if let Some(description) = &tool.description {
                    out.insert("description".into(), description.clone());
                }
                out.insert("input_schema".into(), tool.parameters.clone());
                Value::Object(out)
            })
            .collect();
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(search) = &form.web_search {
        let mut tool = json!({"type": "web_search_20250305", "name": "web_search"});
        if let Some(max) = search.max_uses {
            tool["max_uses"] = json!(max);
        }
        if let Some(domains) = &search.allowed_domains {
            tool["allowed_domains"] = domains.clone();
        }
        if let Some(location) = &search.user_location {
            tool["user_location"] = location.clone();
        }
        match out.get_mut("tools") {
            Some(Value::Array(tools)) => tools.push(tool),
            _ => {
                out.insert("tools".into(), json!([tool]));
            }
        }
    }
    if let Some(choice) = tool_choice(form.tool_choice.as_ref(), form.parallel_tool_calls) {
        out.insert("tool_choice".into(), choice);
    }
    if let Some(format) = &form.format {
        match &format.kind {
            FormatKind::JsonSchema { schema, .. } => {
                out.insert(
                    "output_format".into(),
                    object([("type", "json_schema".into()), ("schema", schema.clone())]),
                );
            }
            FormatKind::JsonObject => {
                return Err(TranslateError::unsupported(
                    format.parameter,
                    "Anthropic's structured outputs need a JSON schema",
                ))
            }
        }
    }
    thinking(form, &mut out, dropped);
    Ok(Value::Object(out))
}

/// A part as a content block.
fn block(part: &Part) -> Result<Value, TranslateError> {
    Ok(match part {
        Part::Text(text) => object([("type", "text".into()), ("text", text.as_str().into())]),
        Part::Image(image) => image_block(image),
        Part::ToolCall(call) => object([
            ("type", "tool_use".into()),
            ("id", call.id.as_str().into()),
            ("name", call.name.as_str().into()),
            ("input", call_input(&call.arguments)?),
        ]),
        Part::ToolResult {
            call_id,
            content,
            is_error,
        } => {
            let content = match content {
                ToolOutput::Text(text) => Value::from(text.as_str()),
                ToolOutput::Parts(parts) => {
                    Value::Array(parts.iter().map(block).collect::<Result<Vec<_>, _>>()?)
                }
            };
            let mut result = object([
                ("type", "tool_result".into()),
                ("tool_use_id", call_id.as_str().into()),
                ("content", content),
            ]);
            if *is_error {
                result["is_error"] = json!(true);
            }
            result
        }
        Part::Thinking { text, signature } => object([
            ("type", "thinking".into()),
            ("thinking", text.as_str().into()),
            ("signature", signature.as_str().into()),
        ]),
        Part::RedactedThinking { data } => object([
            ("type", "redacted_thinking".into()),
            ("data", data.as_str().into()),
        ]),
    })
}

fn image_block(image: &Image) -> Value {
    match image {
        Image::Url(url) => json!({"type": "image", "source": {"type": "url", "url": url}}),
        Image::Base64 { media_type, data } => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }),
    }
}

/// A client's tool call arguments (a JSON text) as the `input` object of a `tool_use` block.
fn call_input(arguments: &str) -> Result<Value, TranslateError> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => Ok(object),
        // A call `max_tokens` cut short, sent back: Anthropic takes only an object, so such a
        // turn cannot be carried there (another target of the combo may take it as it is).
        _ => Err(TranslateError::unsupported(
            "tool_calls",
            "a tool call's arguments are not a JSON object (a call cut short by max_tokens?)",
        )),
    }
}

/// The form's tool choice (and `parallel_tool_calls: false`) as Anthropic's `tool_choice`.
pub fn tool_choice(choice: Option<&ToolChoice>, parallel: Option<bool>) -> Option<Value> {
    let mut out = match choice {
        Some(ToolChoice::None) => json!({"type": "none"}),
        Some(ToolChoice::Required) => json!({"type": "any"}),
        Some(ToolChoice::Named(name)) => json!({"type": "tool", "name": name}),
        Some(ToolChoice::Auto) => json!({"type": "auto"}),
        None if parallel == Some(false) => json!({"type": "auto"}),
        None => return None,
    };
    if parallel == Some(false) && out["type"] != "none" {
        out["disable_parallel_tool_use"] = json!(true);
    }
    Some(out)
}

/// Reasoning effort as `thinking` with its budget; Anthropic then requires `max_tokens` above
/// the budget and no `temperature` / `top_p` other than the defaults (those are dropped). A
/// tool loop whose last assistant turn does not start with its thinking block (a Chat
/// Completions client never sends one back; a Responses client's was left out) cannot have
/// thinking on — Anthropic refuses it — so the effort is dropped for that turn and named.
fn thinking(form: &Request, out: &mut Map<String, Value>, dropped: &mut Vec<String>) {
    let Some(effort) = &form.effort else {
        return;
    };
    let Some(budget) = params::budget_for_effort(&effort.level) else {
        return;
    };
    if tool_turn_without_thinking(form) {
        drop_named(dropped, effort.parameter);
        return;
    }
    out.insert(
        "thinking".into(),
        json!({"type": "enabled", "budget_tokens": budget}),
    );
    let max_tokens = out.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
    if max_tokens <= u64::from(budget) {
        out.insert("max_tokens".into(), json!(max_tokens + u64::from(budget)));
    }
    for key in ["temperature", "top_p"] {
        if out.remove(key).is_some() {
            drop_named(dropped, key);
        }
    }
}

/// Whether the last assistant turn calls a tool without starting with a thinking block.
fn tool_turn_without_thinking(form: &Request) -> bool {
    let Some(last) = form
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
    else {
        return false;
    };
    let starts_thinking = matches!(
        last.parts.first(),
        Some(Part::Thinking { .. } | Part::RedactedThinking { .. })
    );
    !starts_thinking && last.parts.iter().any(|p| matches!(p, Part::ToolCall(_)))
}

/// A `stop_reason`.
pub fn stop_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop => "end_turn",
        Finish::Length => "max_tokens",
        Finish::ToolCalls => "tool_use",
        Finish::ContentFilter => "refusal",
    }
}

/// Usage in Anthropic's terms: `input_tokens` excludes cache reads and writes.
pub fn usage(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.uncached_input(),
        "output_tokens": usage.output,
        "cache_read_input_tokens": usage.cached,
        "cache_creation_input_tokens": usage.cache_write,
    })
}

/// A Messages id for an upstream id (`chatcmpl-x` → `msg_x`).
pub fn message_id(id: &str) -> String {
    if id.starts_with("msg_") {
        return id.to_string();
    }
    format!("msg_{}", id.strip_prefix("chatcmpl-").unwrap_or(id))
}

/// A `tool_use` input for a call's arguments: the JSON they hold, `{}` for none, and the text
/// as it is when it is not JSON (a call `max_tokens` cut short): the client sees what the
/// model wrote, with `stop_reason: max_tokens` beside it.
pub fn answer_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| Value::String(arguments.into()))
}

/// A whole answer.
pub fn answer(answer: &Answer) -> Value {
    // The searches the host ran come first, then what they informed, cited.
    let mut content = citations::anthropic_search_blocks(answer);
    for (index, part) in answer.parts.iter().enumerate() {
        match part {
            Part::ToolCall(call) => content.push(json!({
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": answer_input(&call.arguments),
            })),
            Part::Text(text) if text.is_empty() => {}
            // A block with no text is kept only for its signature (a Gemini account's).
            Part::Thinking { text, signature } if text.is_empty() && signature.is_empty() => {}
            Part::Text(text) => {
                content.extend(citations::anthropic_text_blocks(answer, index, text))
            }
            other => content.extend(block(other).ok()),
        }
    }
    json!({
        "id": message_id(&answer.id),
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": stop_reason(answer.finish),
        "stop_sequence": null,
        "usage": usage(&answer.usage),
    })
}
