//! Each client API's whole answer written as bytes straight from the hub's form, without a
//! `serde_json::Value` of it: the bytes the `Value` writers (`*/write.rs`'s `answer`) make once
//! serialized (members in the order a `serde_json::Map` sorts them, strings escaped by
//! serde_json), or `None` for a form it leaves to them (web searches, citations, carried
//! thinking blocks: what needs more than text, thinking, calls, finish and usage).

use super::hub::form::{Answer, Finish, Part, ToolCall, Usage};
use super::json_write::write_value;
use super::responses::echo::Echo;
use super::sse_write::{write_json, write_json_str, write_json_u64, write_known_json_str};
use super::{chat, gemini, messages, responses, Api};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

/// `answer` in `client`'s API as the bytes its `Value` writer makes, or `None` when the form
/// is one this leaves to that writer.
///
/// `texts_plain`: every text and thinking part's text is known to hold nothing JSON escapes (its
/// reader borrowed it from a JSON string with no escape), so it is copied between quotes
/// without the escape scan.
pub fn answer(
    client: Api,
    answer: &Answer,
    texts_plain: bool,
    created: u64,
    echo: &Echo,
) -> Option<Bytes> {
    // Room for the whole answer at once: its fixed members (a Responses object's are ~1 KB)
    // and its texts.
    let texts: usize = answer
        .parts
        .iter()
        .map(|part| match part {
            Part::Text(text) | Part::Thinking { text, .. } => text.len(),
            Part::ToolCall(call) => call.arguments.len() + call.name.len() + call.id.len(),
            _ => 0,
        })
        .sum();
    let fixed = match client {
        Api::Responses => 1536,
        _ => 512,
    };
    let mut out = BytesMut::with_capacity(fixed + texts + texts / 8);
    match client {
        Api::Chat => chat_answer(&mut out, answer, texts_plain, created)?,
        Api::Responses => responses_answer(&mut out, answer, texts_plain, created, echo)?,
        Api::Messages => messages_answer(&mut out, answer, texts_plain)?,
        Api::Gemini => gemini_answer(&mut out, answer, texts_plain)?,
    }
    Some(out.freeze())
}

/// Appends raw JSON text (keys, punctuation, constants).
fn raw(out: &mut BytesMut, text: &str) {
    out.put_slice(text.as_bytes());
}

fn string(out: &mut BytesMut, text: &str) {
    write_json_str(out, text);
}

/// A text or thinking part's text: without the escape scan when it is known plain.
fn part_text(out: &mut BytesMut, text: &str, plain: bool) {
    write_known_json_str(out, text, plain);
}

fn count(out: &mut BytesMut, number: u64) {
    write_json_u64(out, number);
}

/// The answer's `model` (any JSON value; nearly always a string, written without serde's
/// writer).
fn model(out: &mut BytesMut, model: &Value) {
    match model {
        Value::String(name) => string(out, name),
        other => write_json(out, other),
    }
}

/// `chat::write::chat_id` of `id` as a JSON string, without formatting one.
fn chat_id(out: &mut BytesMut, id: &str) {
    if id.starts_with("chatcmpl-") {
        string(out, id);
    } else {
        joined(out, &["chatcmpl-", id]);
    }
}

/// `pieces` joined, as one JSON string (without `format!`).
fn joined(out: &mut BytesMut, pieces: &[&str]) {
    let mut text = String::with_capacity(pieces.iter().map(|piece| piece.len()).sum());
    for piece in pieces {
        text.push_str(piece);
    }
    string(out, &text);
}

/// A `,` before a member or an element unless it is the first (`first`).
fn separate(out: &mut BytesMut, first: &mut bool) {
    if !std::mem::take(first) {
        out.put_u8(b',');
    }
}

/// `"key":` after a `,` unless it opens its object (`first`).
fn key(out: &mut BytesMut, first: &mut bool, name: &str) {
    separate(out, first);
    out.put_u8(b'"');
    raw(out, name);
    raw(out, "\":");
}

// ---- Chat Completions (`chat::write::answer`) ----

fn chat_answer(out: &mut BytesMut, answer: &Answer, plain: bool, created: u64) -> Option<()> {
    if !answer.citations.is_empty() {
        return None;
    }
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls: Vec<&ToolCall> = Vec::new();
    for part in &answer.parts {
        match part {
            Part::Text(piece) => text.push_str(piece),
            Part::Thinking { text: piece, .. } => reasoning.push_str(piece),
            Part::ToolCall(call) => calls.push(call),
            _ => {}
        }
    }
    raw(out, "{\"choices\":[{\"finish_reason\":");
    string(out, chat::write::finish_reason(answer.finish));
    raw(
        out,
        ",\"index\":0,\"logprobs\":null,\"message\":{\"content\":",
    );
    if text.is_empty() && !calls.is_empty() {
        raw(out, "null");
    } else {
        part_text(out, &text, plain);
    }
    if !reasoning.is_empty() {
        raw(out, ",\"reasoning_content\":");
        part_text(out, &reasoning, plain);
    }
    raw(out, ",\"refusal\":null,\"role\":\"assistant\"");
    if !calls.is_empty() {
        raw(out, ",\"tool_calls\":[");
        for (index, call) in calls.iter().enumerate() {
            if index > 0 {
                out.put_u8(b',');
            }
            raw(out, "{\"function\":{\"arguments\":");
            string(out, &call.arguments);
            raw(out, ",\"name\":");
            string(out, &call.name);
            raw(out, "},\"id\":");
            string(out, &call.id);
            raw(out, ",\"type\":\"function\"}");
        }
        out.put_u8(b']');
    }
    raw(out, "}}],\"created\":");
    count(out, created);
    raw(out, ",\"id\":");
    chat_id(out, &answer.id);
    raw(out, ",\"model\":");
    model(out, &answer.model);
    raw(
        out,
        ",\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":",
    );
    let usage = &answer.usage;
    count(out, usage.output);
    raw(out, ",\"completion_tokens_details\":{\"reasoning_tokens\":");
    count(out, usage.reasoning);
    raw(out, "},\"prompt_tokens\":");
    count(out, usage.input);
    raw(out, ",\"prompt_tokens_details\":{\"cached_tokens\":");
    count(out, usage.cached);
    raw(out, "},\"total_tokens\":");
    count(out, usage.input + usage.output);
    raw(out, "}}");
    Some(())
}

// ---- Messages (`messages::write::answer`) ----

fn messages_answer(out: &mut BytesMut, answer: &Answer, plain: bool) -> Option<()> {
    if !answer.citations.is_empty() || !answer.searches.is_empty() {
        return None;
    }
    raw(out, "{\"content\":[");
    let mut first = true;
    for part in &answer.parts {
        match part {
            Part::ToolCall(call) => {
                separate(out, &mut first);
                raw(out, "{\"id\":");
                string(out, &call.id);
                raw(out, ",\"input\":");
                write_json(out, &messages::write::answer_input(&call.arguments));
                raw(out, ",\"name\":");
                string(out, &call.name);
                raw(out, ",\"type\":\"tool_use\"}");
            }
            Part::Text(text) if text.is_empty() => {}
            Part::Thinking { text, signature } if text.is_empty() && signature.is_empty() => {}
            Part::Text(text) => {
                separate(out, &mut first);
                raw(out, "{\"text\":");
                part_text(out, text, plain);
                raw(out, ",\"type\":\"text\"}");
            }
            Part::Thinking { text, signature } => {
                separate(out, &mut first);
                raw(out, "{\"signature\":");
                string(out, signature);
                raw(out, ",\"thinking\":");
                part_text(out, text, plain);
                raw(out, ",\"type\":\"thinking\"}");
            }
            Part::RedactedThinking { data } => {
                separate(out, &mut first);
                raw(out, "{\"data\":");
                string(out, data);
                raw(out, ",\"type\":\"redacted_thinking\"}");
            }
            // No answer holds these; the `Value` writer's.
            Part::Image(_) | Part::ToolResult { .. } => return None,
        }
    }
    raw(out, "],\"id\":");
    string(out, &messages::write::message_id(&answer.id));
    raw(out, ",\"model\":");
    model(out, &answer.model);
    raw(out, ",\"role\":\"assistant\",\"stop_reason\":");
    string(out, messages::write::stop_reason(answer.finish));
    raw(
        out,
        ",\"stop_sequence\":null,\"type\":\"message\",\"usage\":{\"cache_creation_input_tokens\":",
    );
    let usage = &answer.usage;
    count(out, usage.cache_write);
    raw(out, ",\"cache_read_input_tokens\":");
    count(out, usage.cached);
    raw(out, ",\"input_tokens\":");
    count(out, usage.uncached_input());
    raw(out, ",\"output_tokens\":");
    count(out, usage.output);
    raw(out, "}}");
    Some(())
}

// ---- Gemini (`gemini::write::answer`) ----

fn gemini_answer(out: &mut BytesMut, answer: &Answer, plain: bool) -> Option<()> {
    if !answer.citations.is_empty() || !answer.searches.is_empty() {
        return None;
    }
    raw(out, "{\"candidates\":[{\"content\":{\"parts\":[");
    let mut first = true;
    for part in &answer.parts {
        if gemini::write::carried_block(part).is_some() {
            // Carried in a signature: the `Value` writer's.
            return None;
        }
        match part {
            Part::Text(text) if !text.is_empty() => {
                separate(out, &mut first);
                raw(out, "{\"text\":");
                part_text(out, text, plain);
                out.put_u8(b'}');
            }
            Part::Thinking { text, .. } if !text.is_empty() => {
                separate(out, &mut first);
                raw(out, "{\"text\":");
                part_text(out, text, plain);
                raw(out, ",\"thought\":true}");
            }
            Part::ToolCall(call) => {
                separate(out, &mut first);
                raw(out, "{\"functionCall\":{\"args\":");
                write_json(out, &gemini::write::answer_args(&call.arguments));
                raw(out, ",\"id\":");
                string(out, &call.id);
                raw(out, ",\"name\":");
                string(out, &call.name);
                raw(out, "}}");
            }
            _ => {}
        }
    }
    raw(out, "],\"role\":\"model\"},\"finishReason\":");
    string(out, gemini::write::finish_reason(answer.finish));
    raw(out, ",\"index\":0}],\"modelVersion\":");
    model(out, &answer.model);
    raw(out, ",\"responseId\":");
    string(out, &answer.id);
    raw(out, ",\"usageMetadata\":{");
    let usage = &answer.usage;
    let mut first = true;
    if usage.cached > 0 {
        key(out, &mut first, "cachedContentTokenCount");
        count(out, usage.cached);
    }
    key(out, &mut first, "candidatesTokenCount");
    count(out, usage.output.saturating_sub(usage.reasoning));
    key(out, &mut first, "promptTokenCount");
    count(out, usage.input);
    if usage.reasoning > 0 {
        key(out, &mut first, "thoughtsTokenCount");
        count(out, usage.reasoning);
    }
    key(out, &mut first, "totalTokenCount");
    count(out, usage.input + usage.output);
    raw(out, "}}");
    Some(())
}

// ---- Responses (`responses::write::answer`) ----

/// An output item of a Responses answer, in order.
enum Item<'a> {
    Reasoning(usize, &'a str),
    Message,
    Call(usize, &'a ToolCall),
}

fn responses_answer(
    out: &mut BytesMut,
    answer: &Answer,
    plain: bool,
    created: u64,
    echo: &Echo,
) -> Option<()> {
    if !answer.citations.is_empty() || !answer.searches.is_empty() {
        return None;
    }
    let bare = responses::write::bare_id(&answer.id);
    let mut items = Vec::with_capacity(answer.parts.len() + 1);
    let mut text = String::new();
    for (index, part) in answer.parts.iter().enumerate() {
        match part {
            // A signed or redacted block is carried sealed: the `Value` writer's.
            Part::Thinking { signature, .. } if !signature.is_empty() => return None,
            Part::RedactedThinking { .. } => return None,
            Part::Thinking { text, .. } => items.push(Item::Reasoning(index, text)),
            Part::Text(piece) => text.push_str(piece),
            Part::ToolCall(call) => items.push(Item::Call(index, call)),
            _ => {}
        }
    }
    if !text.is_empty() {
        let at = items
            .iter()
            .position(|item| matches!(item, Item::Call(..)))
            .unwrap_or(items.len());
        items.insert(at, Item::Message);
    }
    let status = responses::write::status(answer.finish);
    raw(out, "{\"background\":false,\"completed_at\":");
    if status == "completed" {
        count(out, created);
    } else {
        raw(out, "null");
    }
    raw(out, ",\"created_at\":");
    count(out, created);
    raw(out, ",\"error\":null,\"id\":");
    match echo.kept_id() {
        Some(kept) => string(out, kept),
        // `responses::write::response_id`.
        None => joined(out, &[responses::write::TRANSLATED_RESPONSE_PREFIX, bare]),
    }
    raw(out, ",\"incomplete_details\":");
    raw(
        out,
        match answer.finish {
            Finish::Length => "{\"reason\":\"max_output_tokens\"}",
            Finish::ContentFilter => "{\"reason\":\"content_filter\"}",
            _ => "null",
        },
    );
    // The fields the request set, walked once beside the echoed fields (both in the order of
    // their names).
    let mut set = echo.set_fields().peekable();
    for field in [
        "instructions",
        "max_output_tokens",
        "max_tool_calls",
        "metadata",
    ] {
        echoed(out, &mut set, field);
    }
    raw(out, ",\"model\":");
    model(out, &answer.model);
    raw(out, ",\"object\":\"response\",\"output\":[");
    output_items(out, (&items, &text, plain), bare, echo);
    out.put_u8(b']');
    echoed(out, &mut set, "parallel_tool_calls");
    echoed(out, &mut set, "previous_response_id");
    raw(out, ",\"prompt_cache_key\":null");
    echoed(out, &mut set, "reasoning");
    raw(
        out,
        ",\"safety_identifier\":null,\"service_tier\":\"default\",\"status\":",
    );
    string(out, status);
    raw(out, ",\"store\":");
    raw(
        out,
        if echo.kept_id().is_some() {
            "true"
        } else {
            "false"
        },
    );
    for field in ["temperature", "text", "tool_choice", "tools"] {
        echoed(out, &mut set, field);
    }
    raw(out, ",\"top_logprobs\":0");
    echoed(out, &mut set, "top_p");
    raw(out, ",\"truncation\":\"disabled\",\"usage\":");
    responses_usage(out, &answer.usage);
    echoed(out, &mut set, "user");
    raw(out, "}");
    Some(())
}

/// The output items in order, the message item holding `text`.
/// `plain`: the texts are known plain (as [`answer`]'s `texts_plain`).
fn output_items(
    out: &mut BytesMut,
    (items, text, plain): (&[Item<'_>], &str, bool),
    bare: &str,
    echo: &Echo,
) {
    for (at, item) in items.iter().enumerate() {
        if at > 0 {
            out.put_u8(b',');
        }
        match item {
            Item::Reasoning(index, text) => {
                raw(out, "{\"id\":");
                string(out, &format!("rs_{bare}_{index}"));
                if text.is_empty() {
                    raw(out, ",\"summary\":[]");
                } else {
                    raw(out, ",\"summary\":[{\"text\":");
                    part_text(out, text, plain);
                    raw(out, ",\"type\":\"summary_text\"}]");
                }
                raw(out, ",\"type\":\"reasoning\"}");
            }
            Item::Message => {
                raw(out, "{\"content\":[{\"annotations\":[],\"text\":");
                part_text(out, text, plain);
                raw(out, ",\"type\":\"output_text\"}],\"id\":");
                joined(out, &["msg_", bare]);
                raw(
                    out,
                    ",\"role\":\"assistant\",\"status\":\"completed\",\"type\":\"message\"}",
                );
            }
            Item::Call(index, call) if echo.is_custom(&call.name) => {
                raw(out, "{\"call_id\":");
                string(out, &call.id);
                raw(out, ",\"id\":");
                string(out, &format!("ctc_{bare}_{index}"));
                raw(out, ",\"input\":");
                string(out, &responses::write::custom_input(&call.arguments));
                raw(out, ",\"name\":");
                string(out, &call.name);
                raw(
                    out,
                    ",\"status\":\"completed\",\"type\":\"custom_tool_call\"}",
                );
            }
            Item::Call(index, call) => {
                raw(out, "{\"arguments\":");
                string(out, &call.arguments);
                raw(out, ",\"call_id\":");
                string(out, &call.id);
                raw(out, ",\"id\":");
                string(out, &format!("fc_{bare}_{index}"));
                raw(out, ",\"name\":");
                string(out, &call.name);
                raw(out, ",\"status\":\"completed\",\"type\":\"function_call\"}");
            }
        }
    }
}

/// Usage in Responses' terms (`responses::write::usage`).
fn responses_usage(out: &mut BytesMut, usage: &Usage) {
    raw(out, "{\"input_tokens\":");
    count(out, usage.input);
    raw(out, ",\"input_tokens_details\":{\"cache_write_tokens\":");
    count(out, usage.cache_write);
    raw(out, ",\"cached_tokens\":");
    count(out, usage.cached);
    raw(out, "},\"output_tokens\":");
    count(out, usage.output);
    raw(out, ",\"output_tokens_details\":{\"reasoning_tokens\":");
    count(out, usage.reasoning);
    raw(out, "},\"total_tokens\":");
    count(out, usage.input + usage.output);
    raw(out, "}");
}

/// `,"field":` and the value the echo repeats for it.
fn echoed<'a>(
    out: &mut BytesMut,
    set: &mut std::iter::Peekable<impl Iterator<Item = (&'a str, &'a Value)>>,
    field: &str,
) {
    let mut first = false;
    key(out, &mut first, field);
    // `set` holds the fields the request set in the order of their names, and `field` comes
    // after every one asked before: what precedes it was not asked.
    while set.next_if(|(name, _)| *name < field).is_some() {}
    let value = set
        .next_if(|(name, _)| *name == field)
        .map(|(_, value)| value);
    match value {
        Some(value) => write_value(out, value),
        // The API's default, as serde_json writes `Echo::field`'s (no `Value` made of it).
        None => raw(out, echoed_default(field)),
    }
}

/// The JSON text of the default a response repeats for the echoed field `field` (`null` for a
/// field that is not echoed): `Echo::field`'s default as serde_json writes it.
fn echoed_default(field: &str) -> &'static str {
    match field {
        "metadata" => "{}",
        "parallel_tool_calls" => "true",
        "reasoning" => "{\"effort\":null,\"summary\":null}",
        "temperature" | "top_p" => "1.0",
        "text" => "{\"format\":{\"type\":\"text\"}}",
        "tool_choice" => "\"auto\"",
        "tools" => "[]",
        _ => "null",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_echoed_default_is_the_one_echo_gives() {
        let echo = Echo::default();
        for field in [
            "instructions",
            "max_output_tokens",
            "max_tool_calls",
            "metadata",
            "parallel_tool_calls",
            "previous_response_id",
            "reasoning",
            "temperature",
            "text",
            "tool_choice",
            "tools",
            "top_p",
            "user",
        ] {
            let default = echo.field(field).expect("an echoed field");
            assert_eq!(
                echoed_default(field).as_bytes(),
                serde_json::to_vec(&default).unwrap().as_slice(),
                "{field}"
            );
            assert_eq!(echo.set_field(field), None);
        }
    }
}
