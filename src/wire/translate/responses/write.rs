//! The hub's form as Responses: an upstream request and a client's whole answer (stateless:
//! `store: false`; thinking as a `reasoning` item whose `encrypted_content` carries the block,
//! signature and all, which the node encrypts for the answering connection: `thinking_carry`).

use serde_json::{json, Map, Value};

use super::echo::Echo;
use crate::wire::translate::citations;
use crate::wire::translate::hub::form::ToolCall;
use crate::wire::translate::hub::form::{
    Answer, Finish, FormatKind, Part, Request, Role, ToolChoice, ToolOutput, Usage,
};
use crate::wire::translate::object::object;
use crate::wire::translate::thinking_carry::carried;
use crate::wire::translate::{RequestSettings, TranslateError};

/// What starts the id of a response served through translation: it is stored nowhere, so a
/// `previous_response_id` naming one is refused (behaviour §14), whichever account it reaches.
pub const TRANSLATED_RESPONSE_PREFIX: &str = "resp_qrt_";

/// The request for a Responses host: stateless (`store: false`), the system text as
/// `instructions`; thinking (whose signature no such host checks) is left out, and thinking
/// asked for becomes an effort with a reasoning summary (the thinking text that comes back).
pub fn request(form: &Request, settings: RequestSettings<'_>) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    out.insert("model".into(), json!(settings.model));
    let system = form.system.join("\n");
    if !system.is_empty() {
        out.insert("instructions".into(), Value::String(system));
    }
    let mut input = Vec::with_capacity(form.messages.len());
    for message in &form.messages {
        input_items(message.role, &message.parts, &mut input);
    }
    out.insert("input".into(), Value::Array(input));
    if let Some(max) = form.max_tokens {
        out.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(t) = &form.temperature {
        out.insert("temperature".into(), t.clone());
    }
    if let Some(p) = &form.top_p {
        out.insert("top_p".into(), p.clone());
    }
    if !form.tools.is_empty() || form.web_search.is_some() {
        let mut tools: Vec<Value> = form
            .tools
            .iter()
            .map(|tool| {
                let mut function = Map::new();
                function.insert("type".into(), json!("function"));
                function.insert("name".into(), json!(tool.name));
                if let Some(description) = &tool.description {
                    function.insert("description".into(), description.clone());
                }
                function.insert("parameters".into(), tool.parameters.clone());
                Value::Object(function)
            })
            .collect();
        if let Some(search) = &form.web_search {
            let mut tool = json!({"type": "web_search"});
            if let Some(domains) = &search.allowed_domains {
                tool["filters"] = object([("allowed_domains", domains.clone())]);
            }
            if let Some(location) = &search.user_location {
                tool["user_location"] = location.clone();
            }
            tools.push(tool);
        }
        out.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &form.tool_choice {
            out.insert("tool_choice".into(), tool_choice(choice));
        }
        if let Some(parallel) = form.parallel_tool_calls {
            out.insert("parallel_tool_calls".into(), json!(parallel));
        }
    }
    if let Some(effort) = &form.effort {
        let mut reasoning = json!({"effort": effort.level});
        // A Messages client that turned thinking on reads the thinking: OpenAI shows reasoning
        // only as a summary, and only when asked for one.
        if effort.parameter == "thinking" {
            reasoning["summary"] = json!("auto");
        }
        out.insert("reasoning".into(), reasoning);
    }
    if let Some(format) = &form.format {
        let format = match &format.kind {
            FormatKind::JsonObject => json!({"type": "json_object"}),
            FormatKind::JsonSchema {
                name,
                schema,
                strict,
            } => {
                let mut format = object([
                    ("type", "json_schema".into()),
                    ("name", name.as_str().into()),
                    ("schema", schema.clone()),
                ]);
                if let Some(strict) = strict {
                    format["strict"] = json!(strict);
                }
                format
            }
        };
        out.insert("text".into(), object([("format", format)]));
    }
    if let Some(user) = &form.user {
        out.insert(
            "user".into(),
            json!(crate::wire::translate::openai_user::openai_user(user)),
        );
    }
    out.insert("store".into(), json!(false));
    if form.stream {
        out.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(out))
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Named(name) => json!({"type": "function", "name": name}),
    }
}

/// A turn's parts as input items: text and images as a message, calls and results as their
/// own items, in order.
fn input_items(role: Role, parts: &[Part], out: &mut Vec<Value>) {
    let (role_name, text_kind) = match role {
        Role::User => ("user", "input_text"),
        Role::Assistant => ("assistant", "output_text"),
    };
    let mut content: Vec<Value> = Vec::new();
    let flush = |content: &mut Vec<Value>, out: &mut Vec<Value>| {
        if !content.is_empty() {
            out.push(object([
                ("type", "message".into()),
                ("role", role_name.into()),
                ("content", Value::Array(std::mem::take(content))),
            ]));
        }
    };
    for part in parts {
        match part {
            Part::Text(text) => content.push(object([
                ("type", text_kind.into()),
                ("text", text.as_str().into()),
            ])),
            Part::Image(image) => {
                content.push(json!({"type": "input_image", "image_url": image.url()}))
            }
            Part::ToolCall(call) => {
                flush(&mut content, out);
                out.push(object([
                    ("type", "function_call".into()),
                    ("call_id", call.id.as_str().into()),
                    ("name", call.name.as_str().into()),
                    ("arguments", call.arguments.as_str().into()),
                ]));
            }
            Part::ToolResult {
                call_id,
                content: output,
                is_error,
            } => {
                flush(&mut content, out);
                let output = match output {
                    ToolOutput::Text(text) if *is_error => json!(format!("Error: {text}")),
                    ToolOutput::Text(text) => json!(text),
                    ToolOutput::Parts(_) if *is_error => {
                        json!(format!("Error: {}", output.text("\n")))
                    }
                    ToolOutput::Parts(parts) => Value::Array(
                        parts
                            .iter()
                            .filter_map(|part| match part {
                                Part::Text(text) => {
                                    Some(json!({"type": "input_text", "text": text}))
                                }
                                Part::Image(image) => {
                                    Some(json!({"type": "input_image", "image_url": image.url()}))
                                }
                                _ => None,
                            })
                            .collect(),
                    ),
                };
                out.push(object([
                    ("type", "function_call_output".into()),
                    ("call_id", call_id.as_str().into()),
                    ("output", output),
                ]));
            }
            Part::Thinking { .. } | Part::RedactedThinking { .. } => {}
        }
    }
    flush(&mut content, out);
}

/// Usage in Responses' terms (input includes cache reads and writes).
pub fn usage(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input,
        // `cache_write_tokens`: required by the Responses schema as the openai SDK (3.63)
        // validates it; Anthropic's cache writes, 0 from hosts that report none.
        "input_tokens_details": {"cached_tokens": usage.cached, "cache_write_tokens": usage.cache_write},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": usage.input + usage.output,
    })
}

/// An upstream id without its API's prefix (`msg_x`, `chatcmpl-x` → `x`).
pub fn bare_id(id: &str) -> &str {
    ["msg_", "chatcmpl-", "resp_"]
        .iter()
        .find_map(|prefix| id.strip_prefix(prefix))
        .unwrap_or(id)
}

/// The Responses id for an upstream id (`msg_x` → `resp_qrt_x`).
pub fn response_id(id: &str) -> String {
    format!("{TRANSLATED_RESPONSE_PREFIX}{}", bare_id(id))
}

/// A reasoning item for thinking: its text as the summary; a block with a signature (or a
/// redacted one) carried in `encrypted_content` for its connection.
pub fn reasoning_item(id: &str, part: &Part) -> Value {
    let (text, block) = match part {
        Part::Thinking { text, signature } => (
            text.as_str(),
            (!signature.is_empty())
                .then(|| json!({"type": "thinking", "thinking": text, "signature": signature})),
        ),
        Part::RedactedThinking { data } => {
            ("", Some(json!({"type": "redacted_thinking", "data": data})))
        }
        _ => ("", None),
    };
    let mut item = json!({
        "id": id,
        "type": "reasoning",
        "summary": if text.is_empty() { json!([]) } else { json!([{"type": "summary_text", "text": text}]) },
    });
    if let Some(block) = block {
        item["encrypted_content"] = json!(carried(&block));
    }
    item
}

/// A message item holding `text`.
pub fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "id": id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

/// A function call item.
pub fn function_call_item(
    id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
) -> Value {
    json!({
        "id": id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    })
}

/// A response's status for why it stopped.
pub fn status(finish: Finish) -> &'static str {
    match finish {
        Finish::Length | Finish::ContentFilter => "incomplete",
        Finish::Stop | Finish::ToolCalls => "completed",
    }
}

/// A freeform tool's call: its input is the one string argument the function form took (the
/// arguments as they are when they are not that: a call `max_tokens` cut short).
pub fn custom_call_item(
    id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
) -> Value {
    json!({
        "id": id,
        "type": "custom_tool_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "input": custom_input(arguments),
    })
}

/// The `input` a freeform tool's call carries in its function form's arguments.
pub fn custom_input(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|args| args.get("input")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| arguments.to_string())
}

/// A call item: a `custom_tool_call` for a freeform tool, else a `function_call`.
pub fn call_item(echo: &Echo, index_id: (&str, usize), call: &ToolCall, status: &str) -> Value {
    let (bare, index) = index_id;
    if echo.is_custom(&call.name) {
        let id = format!("ctc_{bare}_{index}");
        return custom_call_item(&id, &call.id, &call.name, &call.arguments, status);
    }
    let id = format!("fc_{bare}_{index}");
    function_call_item(&id, &call.id, &call.name, &call.arguments, status)
}

/// The response object around `output`: every field the Responses schema requires, the
/// request's own (`tools`, `tool_choice`, `temperature`, `text`, …) repeated from `echo`.
pub fn response_object(
    (id, model, created): (&str, &Value, u64),
    echo: &Echo,
    finish: Option<Finish>,
    output: Vec<Value>,
    usage: Value,
) -> Value {
    let status = finish.map_or("in_progress", status);
    let incomplete = match finish {
        Some(Finish::Length) => json!({"reason": "max_output_tokens"}),
        Some(Finish::ContentFilter) => json!({"reason": "content_filter"}),
        _ => Value::Null,
    };
    // A kept answer has the router's id for it (behaviour §14).
    let id = echo.kept_id().unwrap_or(id);
    let mut response = Map::new();
    response.insert("id".into(), json!(id));
    response.insert("object".into(), json!("response"));
    response.insert("created_at".into(), json!(created));
    response.insert("status".into(), json!(status));
    response.insert("background".into(), json!(false));
    response.insert(
        "completed_at".into(),
        if status == "completed" {
            json!(created)
        } else {
            Value::Null
        },
    );
    response.insert("error".into(), Value::Null);
    response.insert("incomplete_details".into(), incomplete);
    response.insert("model".into(), model.clone());
    response.insert("output".into(), Value::Array(output));
    echo.fill(&mut response);
    response.insert("prompt_cache_key".into(), Value::Null);
    response.insert("safety_identifier".into(), Value::Null);
    response.insert("service_tier".into(), json!("default"));
    response.insert("store".into(), json!(echo.kept_id().is_some()));
    response.insert("top_logprobs".into(), json!(0));
    response.insert("truncation".into(), json!("disabled"));
    response.insert("usage".into(), usage);
    Value::Object(response)
}

/// A whole answer: reasoning items, the text as one message item before the calls (as OpenAI
/// orders a turn's items), the calls as `function_call` items.
pub fn answer(answer: &Answer, created: u64, echo: &Echo) -> Value {
    let bare = bare_id(&answer.id);
    let mut output = Vec::new();
    let mut text = String::new();
    for (index, part) in answer.parts.iter().enumerate() {
        match part {
            Part::Thinking { .. } | Part::RedactedThinking { .. } => {
                output.push(reasoning_item(&format!("rs_{bare}_{index}"), part));
            }
            Part::Text(piece) => text.push_str(piece),
            Part::ToolCall(call) => output.push(call_item(echo, (bare, index), call, "completed")),
            _ => {}
        }
    }
    if !text.is_empty() {
        let at = output
            .iter()
            .position(|item| {
                matches!(
                    item["type"].as_str(),
                    Some("function_call" | "custom_tool_call")
                )
            })
            .unwrap_or(output.len());
        let mut message = message_item(&format!("msg_{bare}"), &text, "completed");
        message["content"][0]["annotations"] =
            Value::Array(citations::responses_annotations(answer));
        output.insert(at, message);
    }
    // The searches the host ran come before what they informed.
    let searches = citations::responses_search_items(answer);
    if !searches.is_empty() {
        output.splice(0..0, searches);
    }
    response_object(
        (&response_id(&answer.id), &answer.model, created),
        echo,
        Some(answer.finish),
        output,
        usage(&answer.usage),
    )
}
