//! The hub's request written straight as a Chat Completions host's request bytes, without a
//! `serde_json::Value` of it: the bytes `write::request`'s `Value` makes (members sorted by
//! name, as its map writes them), for the requests it models — text, images, tool calls and
//! results, thinking (left out, as there), function tools, tool choices, effort, limits,
//! sampling, user. A web search or an output format declines (`None`) to the `Value` writer.

use bytes::BytesMut;

use super::write::result_text;
use crate::wire::translate::hub::form::{Part, Request, Role};
use crate::wire::translate::json_write::{write_value, ArrayWriter, ObjectWriter, RequestBytes};
use crate::wire::translate::openai_common::{
    write_function_members, write_last_members, write_tool_choice,
};
use crate::wire::translate::RequestSettings;

/// The request's bytes; `None` when declined.
pub fn request(form: &Request, settings: RequestSettings<'_>) -> Option<RequestBytes> {
    if form.web_search.is_some() || form.format.is_some() {
        return None;
    }
    let mut body = BytesMut::with_capacity(512);
    let mut out = ObjectWriter::open(&mut body);
    if let Some(max) = form.max_tokens {
        out.u64("max_completion_tokens", max);
    }
    let mut messages = ArrayWriter::open(out.member("messages"));
    let system = form.system.join("\n");
    if !system.is_empty() {
        let mut message = ObjectWriter::open(messages.item());
        message.str("content", &system);
        message.str("role", "system");
        message.close();
    }
    for message in &form.messages {
        match message.role {
            Role::Assistant => assistant_message(&message.parts, messages.item()),
            Role::User => user_messages(&message.parts, &mut messages),
        }
    }
    messages.close();
    let model = out.str_span("model", settings.model);
    let tools = !form.tools.is_empty();
    if tools && form.parallel_tool_calls == Some(false) {
        out.bool("parallel_tool_calls", false);
    }
    if let Some(effort) = &form.effort {
        out.str("reasoning_effort", &effort.level);
    }
    if !form.stop.is_empty() {
        out.values("stop", &form.stop);
    }
    if form.stream {
        out.bool("stream", true);
        // Usage is always asked for (as `write::request`).
        let mut options = ObjectWriter::open(out.member("stream_options"));
        options.bool("include_usage", true);
        options.close();
    }
    if let Some(temperature) = &form.temperature {
        out.value("temperature", temperature);
    }
    if tools {
        if let Some(choice) = &form.tool_choice {
            write_tool_choice(out.member("tool_choice"), choice, |named, name| {
                let mut function = ObjectWriter::open(named.member("function"));
                function.str("name", name);
                function.close();
                named.str("type", "function");
            });
        }
        let mut list = ArrayWriter::open(out.member("tools"));
        for tool in &form.tools {
            let mut entry = ObjectWriter::open(list.item());
            let mut function = ObjectWriter::open(entry.member("function"));
            write_function_members(&mut function, tool);
            function.close();
            entry.str("type", "function");
            entry.close();
        }
        list.close();
    }
    write_last_members(out, form);
    Some((body, model))
}

/// An assistant turn (`write::assistant_message`'s): its text joined, its calls as
/// `tool_calls`.
fn assistant_message(parts: &[Part], out: &mut BytesMut) {
    let mut text = String::new();
    for part in parts {
        if let Part::Text(piece) = part {
            text.push_str(piece);
        }
    }
    let mut message = ObjectWriter::open(out);
    if text.is_empty() {
        write_value(message.member("content"), &serde_json::Value::Null);
    } else {
        message.str("content", &text);
    }
    message.str("role", "assistant");
    let mut calls = parts.iter().filter_map(|part| match part {
        Part::ToolCall(call) => Some(call),
        _ => None,
    });
    if let Some(first) = calls.next() {
        let mut list = ArrayWriter::open(message.member("tool_calls"));
        for call in std::iter::once(first).chain(calls) {
            let mut entry = ObjectWriter::open(list.item());
            let mut function = ObjectWriter::open(entry.member("function"));
            function.str("arguments", &call.arguments);
            function.str("name", &call.name);
            function.close();
            entry.str("id", &call.id);
            entry.str("type", "function");
            entry.close();
        }
        list.close();
    }
    message.close();
}

/// A user turn (`write::user_messages`'s): tool results as `tool` messages, the rest as one
/// user message after them.
fn user_messages(parts: &[Part], messages: &mut ArrayWriter<'_>) {
    let mut content = 0;
    for part in parts {
        match part {
            Part::Text(_) | Part::Image(_) => content += 1,
            Part::ToolResult {
                call_id,
                content: output,
                is_error,
            } => {
                let mut message = ObjectWriter::open(messages.item());
                message.str("content", &result_text(output, *is_error));
                message.str("role", "tool");
                message.str("tool_call_id", call_id);
                message.close();
            }
            _ => {}
        }
    }
    if content == 0 {
        return;
    }
    let mut message = ObjectWriter::open(messages.item());
    let only_text = parts.iter().find_map(|part| match part {
        Part::Text(text) if content == 1 => Some(text),
        _ => None,
    });
    match only_text {
        Some(text) => message.str("content", text),
        None => {
            let mut list = ArrayWriter::open(message.member("content"));
            for part in parts {
                match part {
                    Part::Text(text) => {
                        let mut entry = ObjectWriter::open(list.item());
                        entry.str("text", text);
                        entry.str("type", "text");
                        entry.close();
                    }
                    Part::Image(image) => {
                        let mut entry = ObjectWriter::open(list.item());
                        let mut url = ObjectWriter::open(entry.member("image_url"));
                        url.str("url", &image.url());
                        url.close();
                        entry.str("type", "image_url");
                        entry.close();
                    }
                    _ => {}
                }
            }
            list.close();
        }
    }
    message.str("role", "user");
    message.close();
}
