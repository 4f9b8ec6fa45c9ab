//! The hub's request written straight as an Anthropic host's request bytes, without a
//! `serde_json::Value` of it: the bytes `write::request`'s `Value` makes (members sorted by
//! name, as its map writes them), for the requests it models — text, images, tool calls and
//! text results, thinking blocks, function tools, tool choices, limits, sampling, user. A web
//! search, an output format, thinking asked for (an effort with a budget), a tool result of
//! parts and a call whose arguments are no JSON object decline (`None`) to the `Value`
//! writer.

use bytes::BytesMut;
use serde_json::Value;

use super::write::tool_choice;
use crate::wire::translate::hub::form::{Image, Part, Request, Role, ToolOutput};
use crate::wire::translate::json_write::{ArrayWriter, ObjectWriter, RequestBytes};
use crate::wire::translate::params;
use crate::wire::translate::RequestSettings;

/// The request's bytes; `None` when declined.
pub fn request(form: &Request, settings: RequestSettings<'_>) -> Option<RequestBytes> {
    let thinking = form
        .effort
        .as_ref()
        .is_some_and(|effort| params::budget_for_effort(&effort.level).is_some());
    if form.web_search.is_some() || form.format.is_some() || thinking {
        return None;
    }
    // Each call's arguments as the object `input` is (read once, before anything is written).
    let mut inputs = Vec::new();
    for part in form.messages.iter().flat_map(|message| &message.parts) {
        match part {
            Part::ToolCall(call) => inputs.push(call_input(&call.arguments)?),
            Part::ToolResult {
                content: ToolOutput::Parts(_),
                ..
            } => return None,
            _ => {}
        }
    }
    let mut inputs = inputs.iter();
    let mut body = BytesMut::with_capacity(512);
    let mut out = ObjectWriter::open(&mut body);
    out.u64(
        "max_tokens",
        form.max_tokens
            .unwrap_or(u64::from(settings.default_max_tokens)),
    );
    let mut messages = ArrayWriter::open(out.member("messages"));
    for message in form.messages.iter().filter(|m| !m.parts.is_empty()) {
        let mut item = ObjectWriter::open(messages.item());
        let mut blocks = ArrayWriter::open(item.member("content"));
        for part in &message.parts {
            block(part, &mut inputs, blocks.item());
        }
        blocks.close();
        item.str(
            "role",
            match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            },
        );
        item.close();
    }
    messages.close();
    if let Some(user) = &form.user {
        let mut metadata = ObjectWriter::open(out.member("metadata"));
        metadata.str("user_id", user);
        metadata.close();
    }
    let model = out.str_span("model", settings.model);
    if !form.stop.is_empty() {
        out.values("stop_sequences", &form.stop);
    }
    if form.stream {
        out.bool("stream", true);
    }
    if !form.system.is_empty() {
        let mut system = ArrayWriter::open(out.member("system"));
        for text in &form.system {
            text_block(text, system.item());
        }
        system.close();
    }
    if let Some(temperature) = form
        .temperature
        .as_ref()
        .and_then(params::anthropic_temperature)
    {
        out.value("temperature", &temperature);
    }
    if let Some(choice) = tool_choice(form.tool_choice.as_ref(), form.parallel_tool_calls) {
        out.value("tool_choice", &choice);
    }
    if !form.tools.is_empty() {
        let mut tools = ArrayWriter::open(out.member("tools"));
        for tool in &form.tools {
            let mut entry = ObjectWriter::open(tools.item());
            if let Some(description) = &tool.description {
                entry.value("description", description);
            }
            entry.value("input_schema", &tool.parameters);
            entry.str("name", &tool.name);
            entry.close();
        }
        tools.close();
    }
    if let Some(top_p) = &form.top_p {
        out.value("top_p", top_p);
    }
    out.close();
    Some((body, model))
}

/// A call's arguments as its `input` (`write::call_input`'s): `{}` for none, else the object
/// they are; `None` for arguments that are no object.
fn call_input(arguments: &str) -> Option<Value> {
    if arguments.trim().is_empty() {
        return Some(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str::<Value>(arguments)
        .ok()
        .filter(Value::is_object)
}

fn text_block(text: &str, out: &mut BytesMut) {
    let mut block = ObjectWriter::open(out);
    block.str("text", text);
    block.str("type", "text");
    block.close();
}

/// A part as a content block (`write::block`'s); `inputs` gives each call's `input`, in order.
fn block<'v>(part: &Part, inputs: &mut impl Iterator<Item = &'v Value>, out: &mut BytesMut) {
    if let Part::Text(text) = part {
        return text_block(text, out);
    }
    let mut block = ObjectWriter::open(out);
    match part {
        Part::Text(_) => {}
        Part::Image(image) => {
            let mut source = ObjectWriter::open(block.member("source"));
            match image {
                Image::Url(url) => {
                    source.str("type", "url");
                    source.str("url", url);
                }
                Image::Base64 { media_type, data } => {
                    source.str("data", data);
                    source.str("media_type", media_type);
                    source.str("type", "base64");
                }
            }
            source.close();
            block.str("type", "image");
        }
        Part::ToolCall(call) => {
            block.str("id", &call.id);
            if let Some(input) = inputs.next() {
                block.value("input", input);
            }
            block.str("name", &call.name);
            block.str("type", "tool_use");
        }
        Part::ToolResult {
            call_id,
            content,
            is_error,
        } => {
            // Parts were declined before writing began.
            if let ToolOutput::Text(text) = content {
                block.str("content", text);
            }
            if *is_error {
                block.bool("is_error", true);
            }
            block.str("tool_use_id", call_id);
            block.str("type", "tool_result");
        }
        Part::Thinking { text, signature } => {
            block.str("signature", signature);
            block.str("thinking", text);
            block.str("type", "thinking");
        }
        Part::RedactedThinking { data } => {
            block.str("data", data);
            block.str("type", "redacted_thinking");
        }
    }
    block.close();
}
