//! Responses into the hub's form: a client's request (reasoning items back as the thinking
//! blocks they carry only when the [`ReasoningKey`] opens them), an upstream's whole answer
//! and its usage.

use serde_json::{Map, Value};

use crate::wire::translate::citations;
use crate::wire::translate::hub::form::{
    Answer, Effort, Finish, Part, Request, Role, ToolCall, ToolOutput, Usage,
};
use crate::wire::translate::hub::{array_at, count_at, str_at};
use crate::wire::translate::openai_common::{self, common, drop_unknown};
use crate::wire::translate::params;
use crate::wire::translate::thinking_carry::{ReasoningCounts, ReasoningKey};
use crate::wire::translate::TranslateError;

/// Keys read here or with no meaning upstream; anything else is dropped and named.
const HANDLED: [&str; 19] = [
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
    "stop",
];

pub fn request(
    request: &Map<String, Value>,
    key: Option<ReasoningKey<'_>>,
    dropped: &mut Vec<String>,
    counts: &mut ReasoningCounts,
) -> Result<Request, TranslateError> {
    params::refuse_openai_only(request)?;
    if request
        .get("previous_response_id")
        .is_some_and(|id| !id.is_null())
    {
        return Err(TranslateError::unsupported(
            "previous_response_id",
            "responses served through translation are not stored; send the whole input again",
        ));
    }
    let mut form = Request::default();
    if let Some(format) = request.get("text").and_then(|t| t.get("format")) {
        form.format = openai_common::output_format(format, format, "text.format")?;
    }
    if let Some(instructions) = request.get("instructions").and_then(Value::as_str) {
        if !instructions.is_empty() {
            form.system.push(instructions.to_string());
        }
    }
    input(request.get("input"), &mut form, (key, counts))?;
    common(request, &["max_output_tokens"], &mut form, dropped);
    (form.tools, form.web_search) = openai_common::responses_tools(
        request
            .get("tools")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice),
    )?;
    form.effort = request
        .get("reasoning")
        .and_then(|r| r.get("effort"))
        .and_then(Value::as_str)
        .map(|level| Effort {
            level: level.to_string(),
            parameter: "reasoning",
        });
    drop_unknown(request, &HANDLED, dropped);
    Ok(form)
}

/// The input items; system and developer messages go to the system text; reasoning items as
/// the thinking blocks `key` opens, counted in `counts`.
fn input(
    input: Option<&Value>,
    form: &mut Request,
    (key, counts): (Option<ReasoningKey<'_>>, &mut ReasoningCounts),
) -> Result<(), TranslateError> {
    let items = match input {
        None | Some(Value::Null) => {
            return Err(TranslateError::Invalid("`input` is required".into()))
        }
        Some(Value::String(text)) => {
            form.push(Role::User, vec![Part::Text(text.clone())]);
            return Ok(());
        }
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(TranslateError::Invalid(
                "`input` must be a string or an array of items".into(),
            ))
        }
    };
    for item in items {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let content = item.get("content").unwrap_or(&Value::Null);
                let parts = openai_common::parts(content)?;
                match item.get("role").and_then(Value::as_str).unwrap_or("user") {
                    "system" | "developer" => {
                        for part in parts {
                            if let Part::Text(text) = part {
                                form.system.push(text);
                            }
                        }
                    }
                    "assistant" => form.push(Role::Assistant, parts),
                    _ => form.push(Role::User, parts),
                }
            }
            "function_call" => {
                let arguments = match item.get("arguments") {
                    Some(Value::String(text)) => text.clone(),
                    None | Some(Value::Null) => String::new(),
                    Some(other) => other.to_string(),
                };
                let call = ToolCall {
                    id: str_at(item, "call_id").to_string(),
                    name: str_at(item, "name").to_string(),
                    arguments,
                };
                form.push(Role::Assistant, vec![Part::ToolCall(call)]);
            }
            // A freeform tool's call: its input as the one string argument.
            "custom_tool_call" => {
                let call = ToolCall {
                    id: str_at(item, "call_id").to_string(),
                    name: str_at(item, "name").to_string(),
                    arguments: serde_json::json!({"input": str_at(item, "input")}).to_string(),
                };
                form.push(Role::Assistant, vec![Part::ToolCall(call)]);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let content = match item.get("output") {
                    Some(Value::String(text)) => ToolOutput::Text(text.clone()),
                    Some(parts @ Value::Array(_)) => {
                        ToolOutput::Parts(openai_common::parts(parts)?)
                    }
                    _ => ToolOutput::Text(String::new()),
                };
                let result = Part::ToolResult {
                    call_id: str_at(item, "call_id").to_string(),
                    content,
                    is_error: false,
                };
                form.push(Role::User, vec![result]);
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
                        form.push(Role::Assistant, vec![thinking_part(&block)]);
                    }
                    None if content.is_some() => counts.left_out += 1,
                    None => {}
                }
            }
            other => {
                return Err(TranslateError::unsupported(
                    other,
                    "this input item has no equivalent on the target's API",
                ))
            }
        }
    }
    Ok(())
}

/// A carried thinking block as a part.
fn thinking_part(block: &Value) -> Part {
    match str_at(block, "type") {
        "redacted_thinking" => Part::RedactedThinking {
            data: str_at(block, "data").to_string(),
        },
        _ => Part::Thinking {
            text: str_at(block, "thinking").to_string(),
            signature: str_at(block, "signature").to_string(),
        },
    }
}

/// Responses usage (`input_tokens` includes cached ones).
pub fn usage(usage: &Value) -> Usage {
    let details =
        |key: &str, inner: &str| usage.get(key).map_or(0, |details| count_at(details, inner));
    Usage {
        input: count_at(usage, "input_tokens"),
        cached: details("input_tokens_details", "cached_tokens"),
        cache_write: 0,
        output: count_at(usage, "output_tokens"),
        reasoning: details("output_tokens_details", "reasoning_tokens"),
    }
}

/// Why a response stopped: its status and why it is incomplete, or its calls.
pub fn finish(response: &Value, called: bool) -> Finish {
    if str_at(response, "status") == "incomplete" {
        let reason = response
            .get("incomplete_details")
            .map_or("", |d| str_at(d, "reason"));
        return match reason {
            "content_filter" => Finish::ContentFilter,
            _ => Finish::Length,
        };
    }
    if called {
        Finish::ToolCalls
    } else {
        Finish::Stop
    }
}

/// The text of a message item's parts (`output_text`, `refusal`).
pub fn message_text(item: &Value) -> String {
    array_at(item, "content")
        .iter()
        .map(|part| match str_at(part, "type") {
            "refusal" => str_at(part, "refusal"),
            _ => str_at(part, "text"),
        })
        .collect()
}

/// A reasoning item's summary text.
pub fn reasoning_text(item: &Value) -> String {
    let summary = array_at(item, "summary").iter();
    let content = array_at(item, "content").iter();
    summary
        .chain(content)
        .map(|part| str_at(part, "text"))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A whole answer: total — whatever the model answered is translated as far as it goes.
pub fn answer(response: &Value) -> Answer {
    let mut parts = Vec::new();
    let mut called = false;
    let (mut searches, mut citations) = (Vec::new(), Vec::new());
    for item in array_at(response, "output") {
        match str_at(item, "type") {
            "reasoning" => {
                let text = reasoning_text(item);
                if !text.is_empty() {
                    parts.push(Part::Thinking {
                        text,
                        signature: String::new(),
                    });
                }
            }
            "message" => {
                let text = message_text(item);
                if !text.is_empty() {
                    citations.extend(citations::read_responses_citations(item, parts.len()));
                    parts.push(Part::Text(text));
                }
            }
            "web_search_call" => searches.push(citations::read_responses_search(item)),
            "function_call" => {
                called = true;
                parts.push(Part::ToolCall(ToolCall {
                    id: str_at(item, "call_id").to_string(),
                    name: str_at(item, "name").to_string(),
                    arguments: str_at(item, "arguments").to_string(),
                }));
            }
            _ => {}
        }
    }
    Answer {
        id: str_at(response, "id").to_string(),
        model: response.get("model").cloned().unwrap_or(Value::Null),
        parts,
        finish: finish(response, called),
        usage: usage(response.get("usage").unwrap_or(&Value::Null)),
        searches,
        citations,
    }
}
