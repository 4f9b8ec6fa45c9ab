//! A Chat Completions answer read by one `json_scan` walk over its bytes into the typed
//! shape's own structs ([`ChatAnswer`] and its members), without serde's visitors: the members
//! the shape reads (`id`, `model`, `choices` with their `message` and `finish_reason`,
//! `usage`), every other member checked and passed over. It gives exactly what serde gives the
//! shape, or declines (`None`) and serde reads the body: on `modelVersion` or `usageMetadata`
//! (a Chat host sends neither), a member of another type than the shape models, a duplicated
//! member, and what `json_scan` does not read exactly as `serde_json` does (an exponent, a
//! count of more than 18 digits, a `\u` escape of a surrogate).

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::Value;

use super::{ChatAnswer, ChatCall, ChatChoice, ChatFunction, ChatMessage, Counts, Obj, Text};
use super::{Skipped, UsageMembers};
use crate::wire::json_scan::{Scan, Seen, DEPTH};

/// `body` read as the shape reads it, or `None` when the scan declines it.
pub(super) fn answer(body: &[u8]) -> Option<ChatAnswer<'_>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut scan = Scan::new(text);
    let mut answer = ChatAnswer {
        id: None,
        model: None,
        choices: None,
        usage: None,
        model_version: None,
        usage_metadata: None,
    };
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "id" => {
            seen.first(0)?;
            answer.id = owned_or_null(scan)?;
            Some(())
        }
        "model" => {
            seen.first(1)?;
            answer.model = Some(raw_or_null(scan)?);
            Some(())
        }
        "choices" => {
            seen.first(2)?;
            if !scan.null() {
                let mut choices = Vec::with_capacity(1);
                scan.array(|scan| {
                    choices.push(Obj(choice(scan)?));
                    Some(())
                })?;
                answer.choices = Some(choices);
            }
            Some(())
        }
        "usage" => {
            seen.first(3)?;
            if !scan.null() {
                answer.usage = Some(Obj(usage(scan)?));
            }
            Some(())
        }
        // The shape reads them (as `response_summary` does): left to it.
        "modelVersion" | "usageMetadata" => None,
        _ => scan.skip(DEPTH),
    })?;
    scan.end()?;
    Some(answer)
}

/// A string as an owned `String`, `null` as `None` (serde's `Option<String>`).
pub(super) fn owned_or_null(scan: &mut Scan<'_>) -> Option<Option<String>> {
    Some(text_or_null(scan)?.map(|text| text.0.into_owned()))
}

/// [`owned_or_null`] of a text the answer's writer copies (content, refusal, reasoning):
/// `plain` stays true only while each such string held nothing JSON escapes (`json_scan`
/// borrows only those).
pub(super) fn text_owned_or_null(scan: &mut Scan<'_>, plain: &mut bool) -> Option<Option<String>> {
    let text = text_or_null(scan)?;
    *plain &= text
        .as_ref()
        .is_none_or(|text| matches!(text.0, Cow::Borrowed(_)));
    Some(text.map(|text| text.0.into_owned()))
}

/// A string borrowed when it has no escapes, `null` as `None` (the shape's `Option<Text>`).
pub(super) fn text_or_null<'a>(scan: &mut Scan<'a>) -> Option<Option<Text<'a>>> {
    if scan.null() {
        return Some(None);
    }
    Some(Some(Text(scan.string()?)))
}

/// A value as it stands, `null` as `None` (the shape's `model`, read by `present`).
pub(super) fn raw_or_null<'a>(scan: &mut Scan<'a>) -> Option<Option<&'a RawValue>> {
    if scan.null() {
        return Some(None);
    }
    // `null` looked past the whitespace: the value starts here.
    let start = scan.at;
    scan.skip(DEPTH)?;
    let raw: &RawValue = serde_json::from_str(scan.read_since(start)?).ok()?;
    Some(Some(raw))
}

/// One element of `choices`: an object, as the shape's `ChatChoice`.
fn choice<'a>(scan: &mut Scan<'a>) -> Option<ChatChoice<'a>> {
    let mut choice = ChatChoice {
        message: None,
        finish_reason: None,
    };
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "message" => {
            seen.first(0)?;
            if !scan.null() {
                choice.message = Some(Obj(message(scan)?));
            }
            Some(())
        }
        "finish_reason" => {
            seen.first(1)?;
            choice.finish_reason = text_or_null(scan)?;
            Some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    Some(choice)
}

fn message(scan: &mut Scan<'_>) -> Option<ChatMessage> {
    let mut message = ChatMessage {
        content: None,
        refusal: None,
        reasoning_content: None,
        reasoning: None,
        tool_calls: None,
        annotations: None,
        texts_plain: true,
    };
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "content" => {
            seen.first(0)?;
            message.content = text_owned_or_null(scan, &mut message.texts_plain)?;
            Some(())
        }
        "refusal" => {
            seen.first(1)?;
            message.refusal = text_owned_or_null(scan, &mut message.texts_plain)?;
            Some(())
        }
        "reasoning_content" => {
            seen.first(2)?;
            message.reasoning_content = text_owned_or_null(scan, &mut message.texts_plain)?;
            Some(())
        }
        "reasoning" => {
            seen.first(3)?;
            message.reasoning = text_owned_or_null(scan, &mut message.texts_plain)?;
            Some(())
        }
        "tool_calls" => {
            seen.first(4)?;
            if !scan.null() {
                let mut calls = Vec::new();
                scan.array(|scan| {
                    calls.push(Obj(call(scan)?));
                    Some(())
                })?;
                message.tool_calls = Some(calls);
            }
            Some(())
        }
        "annotations" => {
            seen.first(5)?;
            // Only an empty list is read here: any annotation declines the whole answer.
            if !scan.null() {
                let none: Skipped = Vec::new();
                scan.array(|_| None)?;
                message.annotations = Some(none);
            }
            Some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    Some(message)
}

fn call(scan: &mut Scan<'_>) -> Option<ChatCall> {
    let mut call = ChatCall {
        id: None,
        function: None,
    };
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "id" => {
            seen.first(0)?;
            call.id = owned_or_null(scan)?;
            Some(())
        }
        "function" => {
            seen.first(1)?;
            if !scan.null() {
                call.function = Some(Obj(function(scan)?));
            }
            Some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    Some(call)
}

/// A call's function; its `arguments` read when they are a string or `null` (the shape's
/// `Value` of any other is left to serde).
fn function(scan: &mut Scan<'_>) -> Option<ChatFunction> {
    let mut function = ChatFunction {
        name: None,
        arguments: None,
    };
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "name" => {
            seen.first(0)?;
            function.name = owned_or_null(scan)?;
            Some(())
        }
        "arguments" => {
            seen.first(1)?;
            function.arguments = Some(match owned_or_null(scan)? {
                Some(text) => Value::String(text),
                None => Value::Null,
            });
            Some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    Some(function)
}

pub(super) fn usage(scan: &mut Scan<'_>) -> Option<UsageMembers> {
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
    let mut seen = Seen::default();
    scan.object(|scan, key| {
        let (bit, count, details) = match &*key {
            "prompt_tokens" => (0, Some(&mut usage.prompt_tokens), None),
            "completion_tokens" => (1, Some(&mut usage.completion_tokens), None),
            "input_tokens" => (2, Some(&mut usage.input_tokens), None),
            "output_tokens" => (3, Some(&mut usage.output_tokens), None),
            "cache_read_input_tokens" => (4, Some(&mut usage.cache_read_input_tokens), None),
            "cache_creation_input_tokens" => {
                (5, Some(&mut usage.cache_creation_input_tokens), None)
            }
            "prompt_tokens_details" => (6, None, Some(&mut usage.prompt_tokens_details)),
            "completion_tokens_details" => (7, None, Some(&mut usage.completion_tokens_details)),
            "input_tokens_details" => (8, None, Some(&mut usage.input_tokens_details)),
            "output_tokens_details" => (9, None, Some(&mut usage.output_tokens_details)),
            _ => return scan.skip(DEPTH),
        };
        seen.first(bit)?;
        match (count, details) {
            (Some(count), _) => *count = scan.count_or_null()?,
            (None, Some(details)) => {
                if !scan.null() {
                    *details = Some(Obj(counts(scan)?));
                }
            }
            (None, None) => return None,
        }
        Some(())
    })?;
    Some(usage)
}

fn counts(scan: &mut Scan<'_>) -> Option<Counts> {
    let mut counts = Counts {
        cached_tokens: None,
        reasoning_tokens: None,
    };
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "cached_tokens" => {
            seen.first(0)?;
            counts.cached_tokens = scan.count_or_null()?;
            Some(())
        }
        "reasoning_tokens" => {
            seen.first(1)?;
            counts.reasoning_tokens = scan.count_or_null()?;
            Some(())
        }
        _ => scan.skip(DEPTH),
    })?;
    Some(counts)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{from_body, Answer, ResponseSummary};
    use super::*;
    use crate::wire::translate::hub::form::Part;
    use crate::wire::translate::tests_typed_answer::chat_corpus;

    type Read<'a> = Option<(Answer, ResponseSummary<'a>)>;

    /// What the scan gives of `body`, and what serde gives the shape.
    fn both(body: &[u8]) -> (Read<'_>, Read<'_>) {
        let scanned = answer(body).and_then(ChatAnswer::into_form);
        let shaped = from_body::<Obj<ChatAnswer>>(body).and_then(|shape| shape.0.into_form());
        (scanned, shaped)
    }

    /// The scan of `body` either declines or gives what serde gives: `true` when it took it.
    fn same_or_declined(body: &[u8]) -> bool {
        let text = String::from_utf8_lossy(body);
        let (scanned, shaped) = both(body);
        let Some((form, summary)) = scanned else {
            return false;
        };
        let (expected, expected_summary) =
            shaped.unwrap_or_else(|| panic!("the scan took what serde declines: {text}"));
        assert_eq!(form, expected, "form of {text}");
        assert_eq!(summary.counts, expected_summary.counts, "counts of {text}");
        assert_eq!(
            summary.model.map(RawValue::get),
            expected_summary.model.map(RawValue::get),
            "model of {text}"
        );
        true
    }

    /// A mock host's answer as it is sent (members sorted), and variants of its members.
    fn host_answer() -> Value {
        json!({"choices": [{"finish_reason": "stop", "index": 0, "logprobs": null,
            "message": {"content": "This is a mock reply.", "refusal": null, "role": "assistant"}}],
            "created": 1_700_000_000, "id": "chatcmpl-mock-1", "model": "gpt-4o-mini",
            "object": "chat.completion", "system_fingerprint": "fp_mock",
            "usage": {"completion_tokens": 64, "prompt_tokens": 35,
                "prompt_tokens_details": {"cached_tokens": 0}, "total_tokens": 99}})
    }

    #[test]
    fn the_scan_gives_what_serde_gives_the_shape_or_declines() {
        let mut taken = 0;
        let mut bodies = Vec::new();
        for answer in chat_corpus().into_iter().chain([host_answer()]) {
            bodies.push(serde_json::to_vec(&answer).unwrap());
            bodies.push(serde_json::to_vec_pretty(&answer).unwrap());
        }
        for body in &bodies {
            taken += usize::from(same_or_declined(body));
        }
        // Text, thinking, refusals, calls of string arguments, usage, empty or odd answers.
        assert!(taken >= 16, "{taken} of {} taken", bodies.len());
    }

    #[test]
    fn the_answers_a_chat_host_sends_are_scanned() {
        let host = serde_json::to_vec(&host_answer()).unwrap();
        let (scanned, _) = both(&host);
        let (form, summary) = scanned.expect("scanned");
        assert_eq!(form.id, "chatcmpl-mock-1");
        assert_eq!(form.model, json!("gpt-4o-mini"));
        assert_eq!(form.parts, vec![Part::Text("This is a mock reply.".into())]);
        assert_eq!(summary.model.map(RawValue::get), Some("\"gpt-4o-mini\""));
        assert_eq!(
            summary.counts.map(|c| (c.tokens_in, c.tokens_out)),
            Some((35, 64))
        );
        // Calls of string or `null` arguments, thinking, refusals, an empty annotation list.
        let called = br#"{"id":"c","model":"m","choices":[{"message":{"content":null,"annotations":[],
            "reasoning_content":"hm","refusal":"no","tool_calls":[{"id":"call_1","type":"function",
            "function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"call_2","function":{"name":"g",
            "arguments":null}},{"id":"call_3"}]},"finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":3,"completion_tokens":4,"completion_tokens_details":{"reasoning_tokens":2}}}"#;
        assert!(same_or_declined(called), "calls");
        assert!(answer(called).is_some());
    }

    #[test]
    fn what_serde_reads_otherwise_or_refuses_is_declined() {
        let host = String::from_utf8(serde_json::to_vec(&host_answer()).unwrap()).unwrap();
        let variants = [
            // Duplicated members the shape reads (serde refuses them).
            host.replacen("\"id\":", "\"id\":\"a\",\"id\":", 1),
            host.replacen("\"model\":", "\"model\":\"a\",\"model\":", 1),
            host.replacen(
                "\"finish_reason\":",
                "\"finish_reason\":null,\"finish_reason\":",
                1,
            ),
            host.replacen("\"content\":", "\"content\":null,\"content\":", 1),
            host.replacen("\"refusal\":", "\"refusal\":\"x\",\"refusal\":", 1),
            host.replacen(
                "\"prompt_tokens\":",
                "\"prompt_tokens\":1,\"prompt_tokens\":",
                1,
            ),
            host.replacen(
                "\"cached_tokens\":",
                "\"cached_tokens\":1,\"cached_tokens\":",
                1,
            ),
            host.replacen("\"usage\":", "\"usage\":null,\"usage\":", 1),
            host.replacen("\"choices\":", "\"choices\":null,\"choices\":", 1),
            // Counts serde reads another way or refuses.
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":3.5", 1),
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":35.0", 1),
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":-35", 1),
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":3e1", 1),
            host.replacen("\"prompt_tokens\":35", "\"prompt_tokens\":\"35\"", 1),
            host.replacen(
                "\"prompt_tokens\":35",
                "\"prompt_tokens\":18446744073709551616",
                1,
            ),
            host.replacen("\"created\":1700000000", "\"created\":1.7e9", 1),
            // Members of another type.
            host.replacen("\"id\":\"chatcmpl-mock-1\"", "\"id\":5", 1),
            host.replacen("\"finish_reason\":\"stop\"", "\"finish_reason\":3", 1),
            host.replacen("\"refusal\":null", "\"refusal\":[]", 1),
            host.replacen("\"logprobs\":null", "\"logprobs\":nul", 1),
            host.replacen("{\"finish_reason\"", "[{\"finish_reason\"", 1),
            // Strings the scan leaves to serde, or that are no JSON.
            host.replacen("mock reply.", "mock \\ud83e\\udd80 reply.", 1),
            host.replacen("mock reply.", "mock \\ud83e reply.", 1),
            host.replacen("mock reply.", "mock \u{1} reply.", 1),
            host.replacen("mock reply.", "mock \\x reply.", 1),
            // What the shape reads for `response_summary`, and what it leaves to the `Value` reader.
            host.replacen("\"id\":", "\"modelVersion\":\"v\",\"id\":", 1),
            host.replacen("\"id\":", "\"usageMetadata\":{},\"id\":", 1),
            host.replacen(
                "\"refusal\":null",
                "\"refusal\":null,\"annotations\":[{\"type\":\"url_citation\"}]",
                1,
            ),
            host.replacen(
                "\"refusal\":null",
                "\"refusal\":null,\"tool_calls\":[{\"function\":{\"arguments\":{}}}]",
                1,
            ),
            // Not one object.
            format!("{host} x"),
            format!("[{host}]"),
            host.replacen('}', "", 1),
        ];
        for body in &variants {
            assert!(answer(body.as_bytes()).is_none(), "scanned: {body}");
            same_or_declined(body.as_bytes());
        }
        // What it takes of the same answer, spelled otherwise.
        let taken = [
            host.replacen("\"id\":", "\"\\u0069d\":", 1),
            host.replacen("mock reply.", "mock \\\"reply\\\"\\n\\u00e9\\/.", 1),
            host.replacen("\"gpt-4o-mini\"", "\"gpt-4o\\u002dmini\"", 1),
            host.replacen("\"gpt-4o-mini\"", "null", 1),
            host.replacen("\"gpt-4o-mini\"", "{\"odd\":[\"model\"]}", 1),
            host.replacen("\"usage\":{", "\"usage\":null,\"x\":{", 1),
            host.replacen("\"choices\":[", "\"choices\":null,\"x\":[", 1),
            host.replacen("\"created\":1700000000", "\"created\":-1.5", 1),
            format!(" \n{host}\n "),
        ];
        for body in &taken {
            assert!(same_or_declined(body.as_bytes()), "declined: {body}");
        }
    }
}
