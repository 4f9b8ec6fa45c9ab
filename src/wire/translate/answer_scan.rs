//! Upstream answers read by `json_scan` into `typed_answer`'s shapes, without serde's visitors
//! (a third of the instructions on an answer of many members the reader skips). A scan gives
//! the very shape serde's derived reader gives (so the same form and the same summary), or
//! declines (`None`) and the caller reads the answer through serde as before: on a member of
//! another type than the shape models, a member read twice, and JSON `json_scan` leaves to
//! serde_json (exponents, long integers, surrogate escapes, deep nesting).

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::Value;

use super::hub::form::Answer;
use super::json_scan::{Scan, Seen, DEPTH};
use super::typed_answer::{self, Shape};
use super::typed_answer::{
    ChatAnswer, ChatCall, ChatChoice, ChatFunction, ChatMessage, Counts, GeminiAnswer, GeminiCall,
    GeminiCandidate, GeminiContent, GeminiCounts, GeminiPart, Incomplete, MessagesAnswer,
    MessagesBlock, Obj, PromptFeedback, ResponsesAnswer, ResponsesItem, ResponsesPart, Skipped,
    Text, UsageMembers,
};
use super::Api;
use crate::wire::usage::ResponseSummary;

/// The upstream answer `body` (in `target`'s API) in the hub's form and what
/// `usage::response_summary` reads of it, as `typed_answer::answer` gives them: its shape read
/// by the scan, or by serde's derived reader when the scan declines.
pub fn answer(
    target: Api,
    body: &[u8],
    signatures: bool,
    created: u64,
) -> Option<(Answer, ResponseSummary<'_>)> {
    let scanned = std::str::from_utf8(body)
        .ok()
        .and_then(|text| match target {
            Api::Chat => chat(text).map(Shape::Chat),
            Api::Responses => responses(text).map(Shape::Responses),
            Api::Messages => messages(text).map(Shape::Messages),
            Api::Gemini => gemini(text).map(Shape::Gemini),
        });
    match scanned {
        Some(shape) => typed_answer::form(shape, signatures, created),
        None => typed_answer::answer(target, body, signatures, created),
    }
}

/// A Chat Completions answer (`text`, the whole body) in its typed shape.
pub fn chat(text: &str) -> Option<ChatAnswer<'_>> {
    let mut scan = Scan::new(text);
    let mut seen = Seen::default();
    let mut answer = ChatAnswer {
        id: None,
        model: None,
        choices: None,
        usage: None,
        model_version: None,
        usage_metadata: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "id" => {
                seen.first(0)?;
                answer.id = owned(scan)?;
            }
            "model" => {
                seen.first(1)?;
                answer.model = Some(raw(scan, text)?);
            }
            "choices" => {
                seen.first(2)?;
                answer.choices = objects(scan, |scan| choice(scan, text))?;
            }
            "usage" => {
                seen.first(3)?;
                answer.usage = object(scan, usage)?;
            }
            "modelVersion" => {
                seen.first(4)?;
                answer.model_version = raw(scan, text)?;
            }
            "usageMetadata" => {
                seen.first(5)?;
                answer.usage_metadata = object(scan, gemini_counts)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    scan.end()?;
    Some(answer)
}

fn choice<'a>(scan: &mut Scan<'a>, text: &'a str) -> Option<ChatChoice<'a>> {
    let mut seen = Seen::default();
    let mut choice = ChatChoice {
        message: None,
        finish_reason: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "message" => {
                seen.first(0)?;
                choice.message = object(scan, |scan| message(scan, text))?;
            }
            "finish_reason" => {
                seen.first(1)?;
                choice.finish_reason = text_of(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(choice)
}

fn message(scan: &mut Scan<'_>, text: &str) -> Option<ChatMessage> {
    let mut seen = Seen::default();
    let mut message = ChatMessage {
        content: None,
        refusal: None,
        reasoning_content: None,
        reasoning: None,
        tool_calls: None,
        annotations: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "content" => {
                seen.first(0)?;
                message.content = owned(scan)?;
            }
            "refusal" => {
                seen.first(1)?;
                message.refusal = owned(scan)?;
            }
            "reasoning_content" => {
                seen.first(2)?;
                message.reasoning_content = owned(scan)?;
            }
            "reasoning" => {
                seen.first(3)?;
                message.reasoning = owned(scan)?;
            }
            "tool_calls" => {
                seen.first(4)?;
                message.tool_calls = objects(scan, |scan| call(scan, text))?;
            }
            "annotations" => {
                seen.first(5)?;
                message.annotations = skipped(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(message)
}

fn call(scan: &mut Scan<'_>, text: &str) -> Option<ChatCall> {
    let mut seen = Seen::default();
    let mut call = ChatCall {
        id: None,
        function: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "id" => {
                seen.first(0)?;
                call.id = owned(scan)?;
            }
            "function" => {
                seen.first(1)?;
                call.function = object(scan, |scan| function(scan, text))?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(call)
}

fn function(scan: &mut Scan<'_>, text: &str) -> Option<ChatFunction> {
    let mut seen = Seen::default();
    let mut function = ChatFunction {
        name: None,
        arguments: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "name" => {
                seen.first(0)?;
                function.name = owned(scan)?;
            }
            "arguments" => {
                seen.first(1)?;
                function.arguments = Some(value(scan, text)?);
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(function)
}

/// A Messages answer (`text`, the whole body) in its typed shape.
pub fn messages(text: &str) -> Option<MessagesAnswer<'_>> {
    let mut scan = Scan::new(text);
    let mut seen = Seen::default();
    let mut answer = MessagesAnswer {
        id: None,
        model: None,
        content: None,
        stop_reason: None,
        usage: None,
        model_version: None,
        usage_metadata: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "id" => {
                seen.first(0)?;
                answer.id = owned(scan)?;
            }
            "model" => {
                seen.first(1)?;
                answer.model = Some(raw(scan, text)?);
            }
            "content" => {
                seen.first(2)?;
                answer.content = objects(scan, |scan| block(scan, text))?;
            }
            "stop_reason" => {
                seen.first(3)?;
                answer.stop_reason = text_of(scan)?;
            }
            "usage" => {
                seen.first(4)?;
                answer.usage = object(scan, usage)?;
            }
            "modelVersion" => {
                seen.first(5)?;
                answer.model_version = raw(scan, text)?;
            }
            "usageMetadata" => {
                seen.first(6)?;
                answer.usage_metadata = object(scan, gemini_counts)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    scan.end()?;
    Some(answer)
}

fn block<'a>(scan: &mut Scan<'a>, text: &'a str) -> Option<MessagesBlock<'a>> {
    let mut seen = Seen::default();
    let mut block = MessagesBlock {
        kind: None,
        text: None,
        thinking: None,
        signature: None,
        data: None,
        id: None,
        name: None,
        input: None,
        citations: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "type" => {
                seen.first(0)?;
                block.kind = text_of(scan)?;
            }
            "text" => {
                seen.first(1)?;
                block.text = owned(scan)?;
            }
            "thinking" => {
                seen.first(2)?;
                block.thinking = owned(scan)?;
            }
            "signature" => {
                seen.first(3)?;
                block.signature = owned(scan)?;
            }
            "data" => {
                seen.first(4)?;
                block.data = owned(scan)?;
            }
            "id" => {
                seen.first(5)?;
                block.id = owned(scan)?;
            }
            "name" => {
                seen.first(6)?;
                block.name = owned(scan)?;
            }
            "input" => {
                seen.first(7)?;
                block.input = Some(value(scan, text)?);
            }
            "citations" => {
                seen.first(8)?;
                block.citations = skipped(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(block)
}

/// A Responses answer (`text`, the whole body) in its typed shape.
pub fn responses(text: &str) -> Option<ResponsesAnswer<'_>> {
    let mut scan = Scan::new(text);
    let mut seen = Seen::default();
    let mut answer = ResponsesAnswer {
        id: None,
        model: None,
        status: None,
        incomplete_details: None,
        output: None,
        usage: None,
        model_version: None,
        usage_metadata: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "id" => {
                seen.first(0)?;
                answer.id = owned(scan)?;
            }
            "model" => {
                seen.first(1)?;
                answer.model = Some(raw(scan, text)?);
            }
            "status" => {
                seen.first(2)?;
                answer.status = text_of(scan)?;
            }
            "incomplete_details" => {
                seen.first(3)?;
                answer.incomplete_details = object(scan, incomplete)?;
            }
            "output" => {
                seen.first(4)?;
                answer.output = objects(scan, item)?;
            }
            "usage" => {
                seen.first(5)?;
                answer.usage = object(scan, usage)?;
            }
            "modelVersion" => {
                seen.first(6)?;
                answer.model_version = raw(scan, text)?;
            }
            "usageMetadata" => {
                seen.first(7)?;
                answer.usage_metadata = object(scan, gemini_counts)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    scan.end()?;
    Some(answer)
}

fn incomplete<'a>(scan: &mut Scan<'a>) -> Option<Incomplete<'a>> {
    let mut seen = Seen::default();
    let mut reason = None;
    scan.object(|scan, key| {
        match &*key {
            "reason" => {
                seen.first(0)?;
                reason = text_of(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(Incomplete { reason })
}

fn item<'a>(scan: &mut Scan<'a>) -> Option<ResponsesItem<'a>> {
    let mut seen = Seen::default();
    let mut item = ResponsesItem {
        kind: None,
        summary: None,
        content: None,
        call_id: None,
        name: None,
        arguments: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "type" => {
                seen.first(0)?;
                item.kind = text_of(scan)?;
            }
            "summary" => {
                seen.first(1)?;
                item.summary = objects(scan, part)?;
            }
            "content" => {
                seen.first(2)?;
                item.content = objects(scan, part)?;
            }
            "call_id" => {
                seen.first(3)?;
                item.call_id = owned(scan)?;
            }
            "name" => {
                seen.first(4)?;
                item.name = owned(scan)?;
            }
            "arguments" => {
                seen.first(5)?;
                item.arguments = owned(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(item)
}

fn part<'a>(scan: &mut Scan<'a>) -> Option<ResponsesPart<'a>> {
    let mut seen = Seen::default();
    let mut part = ResponsesPart {
        kind: None,
        text: None,
        refusal: None,
        annotations: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "type" => {
                seen.first(0)?;
                part.kind = text_of(scan)?;
            }
            "text" => {
                seen.first(1)?;
                part.text = text_of(scan)?;
            }
            "refusal" => {
                seen.first(2)?;
                part.refusal = text_of(scan)?;
            }
            "annotations" => {
                seen.first(3)?;
                part.annotations = skipped(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(part)
}

/// A Gemini answer (`text`, the whole body) in its typed shape (a member's two spellings are
/// one member, as serde's aliases make them, but for `modelVersion` and `usageMetadata`).
pub fn gemini(text: &str) -> Option<GeminiAnswer<'_>> {
    let mut scan = Scan::new(text);
    let mut seen = Seen::default();
    let mut answer = GeminiAnswer {
        response_id: None,
        model_version: None,
        model_version_snake: None,
        candidates: None,
        prompt_feedback: None,
        usage_metadata: None,
        usage_metadata_snake: None,
        model: None,
        usage: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "responseId" | "response_id" => {
                seen.first(0)?;
                answer.response_id = text_of(scan)?;
            }
            "modelVersion" => {
                seen.first(1)?;
                answer.model_version = Some(raw(scan, text)?);
            }
            "model_version" => {
                seen.first(2)?;
                answer.model_version_snake = Some(raw(scan, text)?);
            }
            "candidates" => {
                seen.first(3)?;
                answer.candidates = objects(scan, |scan| candidate(scan, text))?;
            }
            "promptFeedback" | "prompt_feedback" => {
                seen.first(4)?;
                answer.prompt_feedback = object(scan, feedback)?;
            }
            "usageMetadata" => {
                seen.first(5)?;
                answer.usage_metadata = Some(object(scan, gemini_counts)?);
            }
            "usage_metadata" => {
                seen.first(6)?;
                answer.usage_metadata_snake = Some(object(scan, gemini_counts)?);
            }
            "model" => {
                seen.first(7)?;
                answer.model = raw(scan, text)?;
            }
            "usage" => {
                seen.first(8)?;
                answer.usage = object(scan, usage)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    scan.end()?;
    Some(answer)
}

fn feedback<'a>(scan: &mut Scan<'a>) -> Option<PromptFeedback<'a>> {
    let mut seen = Seen::default();
    let mut block_reason = None;
    scan.object(|scan, key| {
        match &*key {
            "blockReason" | "block_reason" => {
                seen.first(0)?;
                block_reason = text_of(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(PromptFeedback { block_reason })
}

fn candidate<'a>(scan: &mut Scan<'a>, text: &'a str) -> Option<GeminiCandidate<'a>> {
    let mut seen = Seen::default();
    let mut candidate = GeminiCandidate {
        content: None,
        finish_reason: None,
        grounding: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "content" => {
                seen.first(0)?;
                candidate.content = object(scan, |scan| content(scan, text))?;
            }
            "finishReason" | "finish_reason" => {
                seen.first(1)?;
                candidate.finish_reason = text_of(scan)?;
            }
            "groundingMetadata" | "grounding_metadata" => {
                seen.first(2)?;
                scan.skip(DEPTH)?;
                candidate.grounding = Some(IgnoredAny);
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(candidate)
}

fn content<'a>(scan: &mut Scan<'a>, text: &'a str) -> Option<GeminiContent<'a>> {
    let mut seen = Seen::default();
    let mut parts = None;
    scan.object(|scan, key| {
        match &*key {
            "parts" => {
                seen.first(0)?;
                parts = objects(scan, |scan| gemini_part(scan, text))?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(GeminiContent { parts })
}

fn gemini_part<'a>(scan: &mut Scan<'a>, text: &'a str) -> Option<GeminiPart<'a>> {
    let mut seen = Seen::default();
    let mut part = GeminiPart {
        text: None,
        thought: None,
        signature: None,
        call: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "text" => {
                seen.first(0)?;
                part.text = owned(scan)?;
            }
            "thought" => {
                seen.first(1)?;
                part.thought = boolean(scan)?;
            }
            "thoughtSignature" | "thought_signature" => {
                seen.first(2)?;
                part.signature = text_of(scan)?;
            }
            "functionCall" | "function_call" => {
                seen.first(3)?;
                part.call = Some(object(scan, |scan| gemini_call(scan, text))?);
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(part)
}

fn gemini_call(scan: &mut Scan<'_>, text: &str) -> Option<GeminiCall> {
    let mut seen = Seen::default();
    let mut call = GeminiCall {
        id: None,
        name: None,
        args: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "id" => {
                seen.first(0)?;
                call.id = owned(scan)?;
            }
            "name" => {
                seen.first(1)?;
                call.name = owned(scan)?;
            }
            "args" => {
                seen.first(2)?;
                call.args = if scan.null() {
                    None
                } else {
                    Some(value(scan, text)?)
                };
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(call)
}

fn usage(scan: &mut Scan<'_>) -> Option<UsageMembers> {
    let mut seen = Seen::default();
    let mut usage = UsageMembers {
        prompt_tokens: None,
        completion_tokens: None,
        prompt_tokens_details: None,
        completion_tokens_details: None,
        input_tokens: None,
        output_tokens: None,
        input_tokens_details: None,
        output_tokens_details: None,
        cache_read_input_tokens: None,
        cache_creation_input_tokens: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "prompt_tokens" => {
                seen.first(0)?;
                usage.prompt_tokens = count(scan)?;
            }
            "completion_tokens" => {
                seen.first(1)?;
                usage.completion_tokens = count(scan)?;
            }
            "prompt_tokens_details" => {
                seen.first(2)?;
                usage.prompt_tokens_details = object(scan, counts)?;
            }
            "completion_tokens_details" => {
                seen.first(3)?;
                usage.completion_tokens_details = object(scan, counts)?;
            }
            "input_tokens" => {
                seen.first(4)?;
                usage.input_tokens = count(scan)?;
            }
            "output_tokens" => {
                seen.first(5)?;
                usage.output_tokens = count(scan)?;
            }
            "input_tokens_details" => {
                seen.first(6)?;
                usage.input_tokens_details = object(scan, counts)?;
            }
            "output_tokens_details" => {
                seen.first(7)?;
                usage.output_tokens_details = object(scan, counts)?;
            }
            "cache_read_input_tokens" => {
                seen.first(8)?;
                usage.cache_read_input_tokens = count(scan)?;
            }
            "cache_creation_input_tokens" => {
                seen.first(9)?;
                usage.cache_creation_input_tokens = count(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(usage)
}

fn counts(scan: &mut Scan<'_>) -> Option<Counts> {
    let mut seen = Seen::default();
    let mut counts = Counts {
        cached_tokens: None,
        reasoning_tokens: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "cached_tokens" => {
                seen.first(0)?;
                counts.cached_tokens = count(scan)?;
            }
            "reasoning_tokens" => {
                seen.first(1)?;
                counts.reasoning_tokens = count(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(counts)
}

fn gemini_counts(scan: &mut Scan<'_>) -> Option<GeminiCounts> {
    let mut seen = Seen::default();
    let mut counts = GeminiCounts {
        prompt: None,
        cached: None,
        candidates: None,
        thoughts: None,
    };
    scan.object(|scan, key| {
        match &*key {
            "promptTokenCount" => {
                seen.first(0)?;
                counts.prompt = count(scan)?;
            }
            "cachedContentTokenCount" => {
                seen.first(1)?;
                counts.cached = count(scan)?;
            }
            "candidatesTokenCount" => {
                seen.first(2)?;
                counts.candidates = count(scan)?;
            }
            "thoughtsTokenCount" => {
                seen.first(3)?;
                counts.thoughts = count(scan)?;
            }
            _ => scan.skip(DEPTH)?,
        }
        Some(())
    })?;
    Some(counts)
}

// ---- One value, as serde reads it into the shape's type ----

/// A string or `null` (`Option<Text>`).
fn text_of<'a>(scan: &mut Scan<'a>) -> Option<Option<Text<'a>>> {
    if scan.null() {
        return Some(None);
    }
    scan.string().map(|text| Some(Text(text)))
}

/// A string or `null` (`Option<String>`).
fn owned(scan: &mut Scan<'_>) -> Option<Option<String>> {
    if scan.null() {
        return Some(None);
    }
    scan.string().map(|text| Some(Cow::into_owned(text)))
}

/// A whole number or `null` (`Option<u64>`; a number the scan does not read as one declines).
fn count(scan: &mut Scan<'_>) -> Option<Option<u64>> {
    if scan.null() {
        return Some(None);
    }
    scan.count(0).map(Some)
}

/// `true`, `false` or `null` (`Option<bool>`).
fn boolean(scan: &mut Scan<'_>) -> Option<Option<bool>> {
    if scan.null() {
        return Some(None);
    }
    let rest = scan.rest()?;
    let (value, width) = if rest.starts_with(b"true") {
        (true, 4)
    } else if rest.starts_with(b"false") {
        (false, 5)
    } else {
        return None;
    };
    scan.at += width;
    Some(Some(value))
}

/// Any value as it stands in `text`, `null` as none (`Option<&RawValue>`).
fn raw<'a>(scan: &mut Scan<'a>, text: &'a str) -> Option<Option<&'a RawValue>> {
    if scan.null() {
        return Some(None);
    }
    let start = scan.at;
    scan.skip(DEPTH)?;
    let value = text
        .get(start..scan.at)?
        .trim_start_matches([' ', '\t', '\n', '\r']);
    serde_json::from_str(value).ok().map(Some)
}

/// Any value in `text`, as a `Value` (`null` too).
fn value(scan: &mut Scan<'_>, text: &str) -> Option<Value> {
    let start = scan.at;
    scan.skip(DEPTH)?;
    serde_json::from_str(text.get(start..scan.at)?).ok()
}

/// An object read by `read`, or `null` (`Option<Obj<T>>`).
fn object<'a, T>(
    scan: &mut Scan<'a>,
    read: impl FnOnce(&mut Scan<'a>) -> Option<T>,
) -> Option<Option<Obj<T>>> {
    if scan.null() {
        return Some(None);
    }
    read(scan).map(|value| Some(Obj(value)))
}

/// An array of objects each read by `read`, or `null` (`Option<Vec<Obj<T>>>`).
fn objects<'a, T>(
    scan: &mut Scan<'a>,
    mut read: impl FnMut(&mut Scan<'a>) -> Option<T>,
) -> Option<Option<Vec<Obj<T>>>> {
    if scan.null() {
        return Some(None);
    }
    let mut list = Vec::new();
    scan.array(|scan| {
        list.push(Obj(read(scan)?));
        Some(())
    })?;
    Some(Some(list))
}

/// An array of any values, only counted, or `null` (`Option<Skipped>`).
fn skipped(scan: &mut Scan<'_>) -> Option<Option<Skipped>> {
    if scan.null() {
        return Some(None);
    }
    let mut list = Vec::new();
    scan.array(|scan| {
        scan.skip(DEPTH)?;
        list.push(IgnoredAny);
        Some(())
    })?;
    Some(Some(list))
}
