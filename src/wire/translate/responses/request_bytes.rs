//! The hub's request written straight as a Responses host's request bytes, without a
//! `serde_json::Value` of it: the bytes `write::request`'s `Value` makes (members sorted by
//! name, as its map writes them), for the requests it models — text, images, tool calls and
//! text results, thinking (left out, as there), function tools, tool choices, effort, limits,
//! sampling, user. A web search or an output format declines (`None`) to the `Value` writer,
//! and so does a tool result of parts.

use std::borrow::Cow;

use bytes::BytesMut;

use crate::wire::translate::hub::form::{Part, Request, Role, ToolOutput};
use crate::wire::translate::json_write::{ArrayWriter, ObjectWriter, RequestBytes};
use crate::wire::translate::openai_common::{
    write_function_members, write_last_members, write_tool_choice,
};
use crate::wire::translate::RequestSettings;

/// The request's bytes; `None` when declined.
pub fn request(form: &Request, settings: RequestSettings<'_>) -> Option<RequestBytes> {
    if form.web_search.is_some() || form.format.is_some() {
        return None;
    }
    let declines = |part: &Part| {
        matches!(
            part,
            Part::ToolResult {
                content: ToolOutput::Parts(_),
                ..
            }
        )
    };
    if form
        .messages
        .iter()
        .any(|message| message.parts.iter().any(declines))
    {
        return None;
    }
    let mut body = BytesMut::with_capacity(512);
    let mut out = ObjectWriter::open(&mut body);
    let mut input = ArrayWriter::open(out.member("input"));
    for message in &form.messages {
        input_items(message.role, &message.parts, &mut input);
    }
    input.close();
    let system = form.system.join("\n");
    if !system.is_empty() {
        out.str("instructions", &system);
    }
    if let Some(max) = form.max_tokens {
        out.u64("max_output_tokens", max);
    }
    let model = out.str_span("model", settings.model);
    let tools = !form.tools.is_empty();
    if tools {
        if let Some(parallel) = form.parallel_tool_calls {
            out.bool("parallel_tool_calls", parallel);
        }
    }
    if let Some(effort) = &form.effort {
        let mut reasoning = ObjectWriter::open(out.member("reasoning"));
        reasoning.str("effort", &effort.level);
        // A Messages client that turned thinking on reads the thinking (as `write::request`).
        if effort.parameter == "thinking" {
            reasoning.str("summary", "auto");
        }
        reasoning.close();
    }
    out.bool("store", false);
    if form.stream {
        out.bool("stream", true);
    }
    if let Some(temperature) = &form.temperature {
        out.value("temperature", temperature);
    }
    if tools {
        if let Some(choice) = &form.tool_choice {
            write_tool_choice(out.member("tool_choice"), choice, |named, name| {
                named.str("name", name);
                named.str("type", "function");
            });
        }
        let mut list = ArrayWriter::open(out.member("tools"));
        for tool in &form.tools {
            let mut function = ObjectWriter::open(list.item());
            write_function_members(&mut function, tool);
            function.str("type", "function");
            function.close();
        }
        list.close();
    }
    write_last_members(out, form);
    Some((body, model))
}

/// A turn's parts as input items (`write::input_items`'s): text and images as a message,
/// calls and results as their own items, in order.
fn input_items(role: Role, parts: &[Part], input: &mut ArrayWriter<'_>) {
    let (role_name, text_kind) = match role {
        Role::User => ("user", "input_text"),
        Role::Assistant => ("assistant", "output_text"),
    };
    // Where the message being gathered (text and images; thinking between them is left out)
    // starts in `parts`.
    let mut open = None;
    for (at, part) in parts.iter().enumerate() {
        match part {
            Part::Text(_) | Part::Image(_) => {
                open.get_or_insert(at);
                continue;
            }
            Part::ToolCall(_) | Part::ToolResult { .. } => {}
            Part::Thinking { .. } | Part::RedactedThinking { .. } => continue,
        }
        if let Some(start) = open.take() {
            message(role_name, text_kind, &parts[start..at], input.item());
        }
        let mut item = ObjectWriter::open(input.item());
        match part {
            Part::ToolCall(call) => {
                item.str("arguments", &call.arguments);
                item.str("call_id", &call.id);
                item.str("name", &call.name);
                item.str("type", "function_call");
            }
            Part::ToolResult {
                call_id,
                content,
                is_error,
            } => {
                item.str("call_id", call_id);
                // Parts were declined before writing began.
                let text = match content {
                    ToolOutput::Text(text) => text.as_str(),
                    ToolOutput::Parts(_) => "",
                };
                if *is_error {
                    item.str("output", &format!("Error: {text}"));
                } else {
                    item.str("output", text);
                }
                item.str("type", "function_call_output");
            }
            _ => {}
        }
        item.close();
    }
    if let Some(start) = open {
        message(role_name, text_kind, &parts[start..], input.item());
    }
}

/// A message item of text and image parts.
fn message(role: &str, text_kind: &str, parts: &[Part], out: &mut BytesMut) {
    let mut item = ObjectWriter::open(out);
    let mut content = ArrayWriter::open(item.member("content"));
    for part in parts {
        let (name, text, kind) = match part {
            Part::Text(text) => ("text", Cow::Borrowed(text.as_str()), text_kind),
            Part::Image(image) => ("image_url", Cow::Owned(image.url()), "input_image"),
            _ => continue,
        };
        let mut entry = ObjectWriter::open(content.item());
        entry.str(name, &text);
        entry.str("type", kind);
        entry.close();
    }
    content.close();
    item.str("role", role);
    item.str("type", "message");
    item.close();
}
