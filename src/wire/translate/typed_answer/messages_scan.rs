//! A Messages answer read by one `json_scan` walk over its bytes into the typed shape's own
//! structs ([`MessagesAnswer`] and its blocks), without serde's visitors: the members the
//! shape reads (`id`, `model`, `content` of text blocks, `stop_reason`, `usage`), every other
//! member checked and passed over. It gives exactly what serde gives the shape, or declines
//! (`None`) and serde reads the body: on a block with any member of thinking, a tool call or
//! redacted thinking (left to serde whole), a citation, `modelVersion` or `usageMetadata` (an
//! Anthropic host sends neither), a member of another type than the shape models, a
//! duplicated member, and what `json_scan` does not read exactly as `serde_json` does. The
//! readers of strings, the model and `usage` are the Chat answer scan's (`chat_scan`).

use super::chat_scan::{owned_or_null, raw_or_null, text_or_null, text_owned_or_null, usage};
use super::{MessagesAnswer, MessagesBlock, Obj, Skipped};
use crate::wire::json_scan::{Scan, Seen, DEPTH};

/// `body` read as the shape reads it, or `None` when the scan declines it.
pub(super) fn answer(body: &[u8]) -> Option<MessagesAnswer<'_>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut scan = Scan::new(text);
    let mut answer = MessagesAnswer {
        id: None,
        model: None,
        content: None,
        stop_reason: None,
        usage: None,
        model_version: None,
        usage_metadata: None,
        texts_plain: true,
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
        "content" => {
            seen.first(2)?;
            if !scan.null() {
                let mut blocks = Vec::with_capacity(1);
                let plain = &mut answer.texts_plain;
                scan.array(|scan| {
                    blocks.push(Obj(text_block(scan, plain)?));
                    Some(())
                })?;
                answer.content = Some(blocks);
            }
            Some(())
        }
        "stop_reason" => {
            seen.first(3)?;
            answer.stop_reason = text_or_null(scan)?;
            Some(())
        }
        "usage" => {
            seen.first(4)?;
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

/// One element of `content`: an object of `type`, `text` and an empty or `null` `citations`
/// at most, as the shape's `MessagesBlock` (any member of another kind of block declines).
/// `plain` as [`text_owned_or_null`]'s.
fn text_block<'a>(scan: &mut Scan<'a>, plain: &mut bool) -> Option<MessagesBlock<'a>> {
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
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "type" => {
            seen.first(0)?;
            block.kind = text_or_null(scan)?;
            Some(())
        }
        "text" => {
            seen.first(1)?;
            block.text = text_owned_or_null(scan, plain)?;
            Some(())
        }
        "citations" => {
            seen.first(2)?;
            // Only an empty list is read here: any citation is the `Value` reader's.
            if !scan.null() {
                let none: Skipped = Vec::new();
                scan.array(|_| None)?;
                block.citations = Some(none);
            }
            Some(())
        }
        // Members of other blocks the shape reads: left to it.
        "thinking" | "signature" | "data" | "id" | "name" | "input" => None,
        _ => scan.skip(DEPTH),
    })?;
    Some(block)
}

#[cfg(test)]
mod tests {
    use serde_json::value::RawValue;
    use serde_json::{json, Value};

    use super::super::{from_body, Answer, ResponseSummary};
    use super::*;
    use crate::wire::translate::hub::form::Part;
    use crate::wire::translate::tests_typed_answer::messages_corpus;

    type Read<'a> = Option<(Answer, ResponseSummary<'a>)>;

    /// What the scan gives of `body`, and what serde gives the shape.
    fn both(body: &[u8]) -> (Read<'_>, Read<'_>) {
        let scanned = answer(body).and_then(MessagesAnswer::into_form);
        let shaped = from_body::<Obj<MessagesAnswer>>(body).and_then(|shape| shape.0.into_form());
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
        json!({"content": [{"text": "This is a mock reply.", "type": "text"}],
            "id": "msg_mock_1", "model": "claude-3-5-haiku", "role": "assistant",
            "stop_reason": "end_turn", "stop_sequence": null, "type": "message",
            "usage": {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                "input_tokens": 35, "output_tokens": 64}})
    }

    #[test]
    fn the_scan_gives_what_serde_gives_the_shape_or_declines() {
        let mut taken = 0;
        let mut bodies = Vec::new();
        for answer in messages_corpus().into_iter().chain([host_answer()]) {
            bodies.push(serde_json::to_vec(&answer).unwrap());
            bodies.push(serde_json::to_vec_pretty(&answer).unwrap());
        }
        for body in &bodies {
            taken += usize::from(same_or_declined(body));
        }
        // Text blocks, `null` citations, no blocks, an empty answer; not thinking or calls.
        assert!(taken >= 10, "{taken} of {} taken", bodies.len());
    }

    #[test]
    fn the_answers_an_anthropic_host_sends_are_scanned() {
        let host = serde_json::to_vec(&host_answer()).unwrap();
        let (scanned, _) = both(&host);
        let (form, summary) = scanned.expect("scanned");
        assert_eq!(form.id, "msg_mock_1");
        assert_eq!(form.model, json!("claude-3-5-haiku"));
        assert_eq!(form.parts, vec![Part::Text("This is a mock reply.".into())]);
        assert_eq!(
            summary.model.map(RawValue::get),
            Some("\"claude-3-5-haiku\"")
        );
        assert_eq!(
            summary.counts.map(|c| (c.tokens_in, c.tokens_out)),
            Some((35, 64))
        );
        // Several text blocks, an empty one, empty or `null` citations, a block of an unread
        // kind (skipped by the reader as by serde).
        let texts = br#"{"id":"m","model":"c","content":[{"type":"text","text":"a","citations":[]},
            {"type":"text","text":""},{"type":"text","text":"b","citations":null},{"type":"image"},
            {"text":"untyped"}],"stop_reason":"max_tokens",
            "usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":2}}"#;
        assert!(same_or_declined(texts), "texts");
        assert!(answer(texts).is_some());
    }

    #[test]
    fn what_serde_reads_otherwise_or_refuses_is_declined() {
        let host = String::from_utf8(serde_json::to_vec(&host_answer()).unwrap()).unwrap();
        let variants = [
            // Duplicated members the shape reads (serde refuses them).
            host.replacen("\"id\":", "\"id\":\"a\",\"id\":", 1),
            host.replacen("\"model\":", "\"model\":\"a\",\"model\":", 1),
            host.replacen(
                "\"stop_reason\":",
                "\"stop_reason\":null,\"stop_reason\":",
                1,
            ),
            host.replacen("\"content\":", "\"content\":null,\"content\":", 1),
            host.replacen("\"text\":", "\"text\":\"x\",\"text\":", 1),
            host.replacen(
                "\"type\":\"text\"",
                "\"type\":\"text\",\"type\":\"text\"",
                1,
            ),
            host.replacen(
                "\"input_tokens\":",
                "\"input_tokens\":1,\"input_tokens\":",
                1,
            ),
            host.replacen("\"usage\":", "\"usage\":null,\"usage\":", 1),
            // Counts serde reads another way or refuses.
            host.replacen("\"input_tokens\":35", "\"input_tokens\":3.5", 1),
            host.replacen("\"input_tokens\":35", "\"input_tokens\":-35", 1),
            host.replacen("\"input_tokens\":35", "\"input_tokens\":3e1", 1),
            host.replacen("\"input_tokens\":35", "\"input_tokens\":\"35\"", 1),
            // Members of another type.
            host.replacen("\"id\":\"msg_mock_1\"", "\"id\":5", 1),
            host.replacen("\"stop_reason\":\"end_turn\"", "\"stop_reason\":3", 1),
            host.replacen("\"text\":\"This is a mock reply.\"", "\"text\":5", 1),
            host.replacen("\"type\":\"text\"", "\"type\":[]", 1),
            host.replacen("\"stop_sequence\":null", "\"stop_sequence\":nul", 1),
            host.replacen("[{\"text\"", "[[{\"text\"", 1),
            // Strings the scan leaves to serde, or that are no JSON.
            host.replacen("mock reply.", "mock \\ud83e\\udd80 reply.", 1),
            host.replacen("mock reply.", "mock \u{1} reply.", 1),
            host.replacen("mock reply.", "mock \\x reply.", 1),
            // Other blocks' members, citations, what the shape reads for `response_summary`.
            host.replacen("{\"text\"", "{\"thinking\":\"t\",\"text\"", 1),
            host.replacen("{\"text\"", "{\"signature\":\"s\",\"text\"", 1),
            host.replacen("{\"text\"", "{\"id\":\"toolu_1\",\"text\"", 1),
            host.replacen("{\"text\"", "{\"input\":{},\"text\"", 1),
            host.replacen("{\"text\"", "{\"citations\":[{\"type\":\"x\"}],\"text\"", 1),
            host.replacen("\"id\":", "\"modelVersion\":\"v\",\"id\":", 1),
            host.replacen("\"id\":", "\"usageMetadata\":{},\"id\":", 1),
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
            host.replacen("\"claude-3-5-haiku\"", "\"claude\\u002d3-5-haiku\"", 1),
            host.replacen("\"claude-3-5-haiku\"", "null", 1),
            host.replacen("\"claude-3-5-haiku\"", "{\"odd\":[\"model\"]}", 1),
            host.replacen("\"usage\":{", "\"usage\":null,\"x\":{", 1),
            host.replacen("\"content\":[", "\"content\":null,\"x\":[", 1),
            host.replacen("\"stop_reason\":\"end_turn\"", "\"stop_reason\":null", 1),
            format!(" \n{host}\n "),
        ];
        for body in &taken {
            assert!(same_or_declined(body.as_bytes()), "declined: {body}");
        }
    }
}
