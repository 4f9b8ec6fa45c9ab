//! Messages into the hub's form: a client's request, an upstream's whole answer and its usage.

use serde_json::{Map, Value};

use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{
    Answer, Effort, Finish, FormatKind, Image, OutputFormat, Part, Request, Role, Tool, ToolCall,
    ToolChoice, ToolOutput, Usage, WebSearch,
};
use crate::wire::translate::hub::{array_at, count_at, str_at};
use crate::wire::translate::params::{self, drop_named};
use crate::wire::translate::TranslateError;

/// Keys read here or with no meaning upstream; anything else is dropped and named.
const HANDLED: [&str; 14] = [
    "model",
    "output_format",
    "messages",
    "system",
    "max_tokens",
    "stop_sequences",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "thinking",
    "metadata",
    "stream",
    "top_k",
];

pub fn request(
    request: &Map<String, Value>,
    dropped: &mut Vec<String>,
) -> Result<Request, TranslateError> {
    let Some(Value::Array(messages)) = request.get("messages") else {
        return Err(TranslateError::Invalid(
            "`messages` must be an array".into(),
        ));
    };
    let messages = messages
        .iter()
        .map(|message| (str_at(message, "role"), message.get("content")));
    let form = read_members(|name| request.get(name), messages, dropped)?;
    for key in request.keys() {
        if !HANDLED.contains(&key.as_str()) {
            drop_named(dropped, key);
        }
    }
    Ok(form)
}

/// The form of a request whose top-level member `name` is `member(name)` and whose messages
/// are `messages` (each one's role, `""` when it has none, and content): every member the
/// reader reads, the members it does not know aside.
pub(super) fn read_members<'a>(
    member: impl Fn(&str) -> Option<&'a Value>,
    messages: impl Iterator<Item = (&'a str, Option<&'a Value>)>,
    dropped: &mut Vec<String>,
) -> Result<Request, TranslateError> {
    let mut form = Request::default();
    match member("system") {
        Some(Value::String(text)) if !text.is_empty() => form.system.push(text.clone()),
        Some(Value::Array(blocks)) => {
            let texts = blocks.iter().filter_map(|b| b.get("text")?.as_str());
            form.system.extend(texts.map(str::to_owned));
        }
        _ => {}
    }
    for (role, content) in messages {
        let role = match role {
            "assistant" => Role::Assistant,
            _ => Role::User,
        };
        let parts = match content {
            Some(Value::String(text)) => vec![Part::Text(text.clone())],
            Some(Value::Array(blocks)) => blocks_of(blocks, role)?,
            _ => {
                return Err(TranslateError::Invalid(
                    "message content must be a string or an array of blocks".into(),
                ))
            }
        };
        form.push(role, parts);
    }
    form.max_tokens = member("max_tokens").and_then(Value::as_u64);
    form.stop = member("stop_sequences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    form.temperature = member("temperature").filter(|v| v.is_number()).cloned();
    form.top_p = member("top_p").filter(|v| v.is_number()).cloned();
    for tool in member("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = str_at(tool, "type");
        if kind.starts_with("web_search_") {
            form.web_search = Some(WebSearch {
                parameter: kind.to_string(),
                max_uses: tool.get("max_uses").and_then(Value::as_u64),
                allowed_domains: tool
                    .get("allowed_domains")
                    .filter(|d| !d.is_null())
                    .cloned(),
                user_location: tool.get("user_location").filter(|l| !l.is_null()).cloned(),
            });
            continue;
        }
        form.tools.push(tool_of(tool)?);
    }
    if let Some(choice) = member("tool_choice") {
        form.tool_choice = Some(match str_at(choice, "type") {
            "any" => ToolChoice::Required,
            "none" => ToolChoice::None,
            "tool" => ToolChoice::Named(str_at(choice, "name").to_string()),
            _ => ToolChoice::Auto,
        });
        if choice
            .get("disable_parallel_tool_use")
            .and_then(Value::as_bool)
            == Some(true)
        {
            form.parallel_tool_calls = Some(false);
        }
    }
    if let Some(thinking) = member("thinking") {
        if str_at(thinking, "type") == "enabled" {
            form.effort = Some(Effort {
                level: params::effort_for_budget(count_at(thinking, "budget_tokens")).to_string(),
                parameter: "thinking",
            });
        }
    }
    if let Some(format) = member("output_format") {
        if str_at(format, "type") == "json_schema" {
            form.format = Some(OutputFormat {
                kind: FormatKind::JsonSchema {
                    name: "output".to_string(),
                    schema: format
                        .get("schema")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                    strict: Some(true),
                },
                parameter: "output_format",
            });
        }
    }
    form.user = member("metadata")
        .and_then(|m| m.get("user_id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    form.stream = member("stream").and_then(Value::as_bool) == Some(true);
    if member("top_k").is_some_and(|v| !v.is_null()) {
        drop_named(dropped, "top_k");
    }
    Ok(form)
}

/// A client tool: a custom (function) tool; Anthropic's server tools run nowhere else.
fn tool_of(tool: &Value) -> Result<Tool, TranslateError> {
    if let Some(kind) = tool.get("type").and_then(Value::as_str) {
        if kind != "custom" {
            return Err(TranslateError::unsupported(
                kind,
                "Anthropic's server tools do not run on the target's API",
            ));
        }
    }
    Ok(Tool {
        name: str_at(tool, "name").to_string(),
        description: tool.get("description").cloned(),
        parameters: tool
            .get("input_schema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
    })
}

/// A message's blocks as parts.
fn blocks_of(blocks: &[Value], role: Role) -> Result<Vec<Part>, TranslateError> {
    let mut parts = Vec::with_capacity(blocks.len());
    for block in blocks {
        let Some(kind) = block.get("type").and_then(Value::as_str) else {
            continue;
        };
        let part = match (kind, role) {
            ("text", _) => Part::Text(str_at(block, "text").to_string()),
            ("tool_use", Role::Assistant) => Part::ToolCall(ToolCall {
                id: str_at(block, "id").to_string(),
                name: str_at(block, "name").to_string(),
                arguments: input_arguments(block),
            }),
            ("thinking", Role::Assistant) => Part::Thinking {
                text: str_at(block, "thinking").to_string(),
                signature: str_at(block, "signature").to_string(),
            },
            ("redacted_thinking", Role::Assistant) => Part::RedactedThinking {
                data: str_at(block, "data").to_string(),
            },
            ("image", Role::User) => Part::Image(image_of(block).ok_or_else(|| {
                TranslateError::Invalid("an image block has no readable source".into())
            })?),
            ("tool_result", Role::User) => {
                let content = match block.get("content") {
                    Some(Value::String(text)) => ToolOutput::Text(text.clone()),
                    Some(Value::Array(inner)) => ToolOutput::Parts(
                        inner
                            .iter()
                            .filter_map(|b| match str_at(b, "type") {
                                "text" => Some(Part::Text(str_at(b, "text").to_string())),
                                "image" => image_of(b).map(Part::Image),
                                _ => None,
                            })
                            .collect(),
                    ),
                    _ => ToolOutput::Text(String::new()),
                };
                Part::ToolResult {
                    call_id: str_at(block, "tool_use_id").to_string(),
                    content,
                    is_error: block.get("is_error").and_then(Value::as_bool) == Some(true),
                }
            }
            (other, _) => {
                return Err(TranslateError::unsupported(
                    other,
                    "this content block has no equivalent on the target's API",
                ))
            }
        };
        parts.push(part);
    }
    Ok(parts)
}

/// An image block's source.
pub fn image_of(block: &Value) -> Option<Image> {
    let source = block.get("source")?;
    match source.get("type")?.as_str()? {
        "base64" => Some(Image::Base64 {
            media_type: source.get("media_type")?.as_str()?.to_string(),
            data: source.get("data")?.as_str()?.to_string(),
        }),
        "url" => Some(Image::Url(source.get("url")?.as_str()?.to_string())),
        _ => None,
    }
}

/// Anthropic usage: `input_tokens` excludes cache reads and writes, which the form counts in.
pub fn usage(usage: &Value) -> Usage {
    let cached = count_at(usage, "cache_read_input_tokens");
    let cache_write = count_at(usage, "cache_creation_input_tokens");
    Usage {
        input: count_at(usage, "input_tokens") + cached + cache_write,
        cached,
        cache_write,
        output: count_at(usage, "output_tokens"),
        reasoning: 0,
    }
}

/// A `stop_reason`.
pub fn finish(stop_reason: Option<&str>) -> Finish {
    match stop_reason {
        Some("max_tokens") | Some("model_context_window_exceeded") => Finish::Length,
        Some("tool_use") => Finish::ToolCalls,
        Some("refusal") => Finish::ContentFilter,
        _ => Finish::Stop,
    }
}

/// A whole answer: total — one without `content` is an empty answer.
pub fn answer(answer: &Value) -> Answer {
    let mut parts = Vec::new();
    let mut citations = Vec::new();
    for block in array_at(answer, "content") {
        match str_at(block, "type") {
            "text" => {
                let text = str_at(block, "text");
                citations.extend(citations::read_anthropic_citations(
                    block,
                    parts.len(),
                    text,
                ));
                parts.push(Part::Text(text.to_string()));
            }
            "thinking" => parts.push(Part::Thinking {
                text: str_at(block, "thinking").to_string(),
                signature: str_at(block, "signature").to_string(),
            }),
            "redacted_thinking" => parts.push(Part::RedactedThinking {
                data: str_at(block, "data").to_string(),
            }),
            "tool_use" => parts.push(Part::ToolCall(ToolCall {
                id: str_at(block, "id").to_string(),
                name: str_at(block, "name").to_string(),
                arguments: input_arguments(block),
            })),
            _ => {}
        }
    }
    Answer {
        id: str_at(answer, "id").to_string(),
        model: answer.get("model").cloned().unwrap_or(Value::Null),
        parts,
        finish: finish(answer.get("stop_reason").and_then(Value::as_str)),
        usage: usage(answer.get("usage").unwrap_or(&Value::Null)),
        searches: citations::read_anthropic_searches(array_at(answer, "content")),
        citations,
    }
}

/// A `tool_use` block's `input` as the form's arguments text: its JSON, or — when it is a
/// string, as the router hands a call `max_tokens` cut short to a Messages client — that text as
/// the model wrote it, so the call goes back to an OpenAI account as it came.
fn input_arguments(block: &Value) -> String {
    match block.get("input") {
        Some(Value::String(text)) => text.clone(),
        Some(input) => input.to_string(),
        None => "{}".to_string(),
    }
}
