//! What `usage::response_summary` reads of a whole answer relayed untranslated (`model`,
//! `modelVersion`, `usage`), read by one `json_scan` walk over its bytes without serde's
//! visitors: every other member checked and passed over. It gives exactly the summary serde
//! gives, or declines (`None`) and `response_summary` reads the body: on `usageMetadata` (left
//! to serde's Gemini reader), a `usage` or `model` member read another way (a count that is not
//! a whole number of at most 18 digits, details that are not an object), a duplicated member,
//! a body that is not one object of UTF-8, and what `json_scan` does not read exactly as
//! `serde_json` does.

use crate::wire::json_scan::{Scan, Seen, DEPTH};
use crate::wire::usage::ResponseSummary;

use super::chat_scan::{raw_or_null, usage};

/// `body`'s summary as `response_summary` reads it, or `None` when the scan declines it.
pub(in crate::wire::translate) fn relayed_summary(body: &[u8]) -> Option<ResponseSummary<'_>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut scan = Scan::new(text);
    let (mut model, mut model_version, mut counted) = (None, None, None);
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "model" => {
            seen.first(0)?;
            model = raw_or_null(scan)?;
            Some(())
        }
        "modelVersion" => {
            seen.first(1)?;
            model_version = raw_or_null(scan)?;
            Some(())
        }
        "usage" => {
            seen.first(2)?;
            if !scan.null() {
                counted = Some(usage(scan)?);
            }
            Some(())
        }
        "usageMetadata" => None,
        _ => scan.skip(DEPTH),
    })?;
    scan.end()?;
    Some(super::summary(model, model_version, counted.as_ref(), None))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::value::RawValue;
    use serde_json::{json, Value};

    use super::*;
    use crate::wire::translate::tests_typed_answer::{chat_corpus, messages_corpus};
    use crate::wire::usage::response_summary;

    /// The scan of `body` either declines or gives what `response_summary` gives: `true` when
    /// it took it.
    fn same_or_declined(body: &[u8]) -> bool {
        let text = String::from_utf8_lossy(body);
        let Some(scanned) = relayed_summary(body) else {
            return false;
        };
        let expected = response_summary(body)
            .unwrap_or_else(|_| panic!("the scan took what serde refuses: {text}"));
        assert_eq!(scanned.counts, expected.counts, "counts of {text}");
        assert_eq!(
            scanned.model.map(RawValue::get),
            expected.model.map(RawValue::get),
            "model of {text}"
        );
        true
    }

    /// The bench mock's Chat answer as it is sent.
    fn host_answer() -> String {
        r#"{"id":"chatcmpl-mock-1","object":"chat.completion","created":1796653687,"model":"mock-gpt","system_fingerprint":"fp_mock","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! It has the size of a short, typical chat reply: 3.14 and 42.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":46,"completion_tokens":58,"total_tokens":104,"prompt_tokens_details":{"cached_tokens":7}}}"#.to_owned()
    }

    fn responses_answer() -> Value {
        json!({"id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
            "model": "gpt-5", "output": [{"type": "reasoning", "id": "rs_1", "summary": [],
                "encrypted_content": "gAAA"},
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [
                {"type": "output_text", "text": "hi", "annotations": []}]}],
            "usage": {"input_tokens": 10, "output_tokens": 4, "total_tokens": 14,
                "input_tokens_details": {"cached_tokens": 2},
                "output_tokens_details": {"reasoning_tokens": 3}}})
    }

    #[test]
    fn the_scan_gives_what_response_summary_gives_or_declines() {
        let mut bodies = vec![host_answer().into_bytes()];
        for answer in chat_corpus()
            .into_iter()
            .chain(messages_corpus())
            .chain([responses_answer()])
        {
            bodies.push(serde_json::to_vec(&answer).unwrap());
            bodies.push(serde_json::to_vec_pretty(&answer).unwrap());
        }
        let taken = bodies.iter().filter(|body| same_or_declined(body)).count();
        assert!(taken >= 24, "{taken} of {} taken", bodies.len());
    }

    #[test]
    fn the_answers_hosts_send_are_scanned() {
        let host = host_answer();
        let scanned = relayed_summary(host.as_bytes()).expect("scanned");
        assert_eq!(scanned.model.map(RawValue::get), Some("\"mock-gpt\""));
        let counts = scanned.counts.expect("counts");
        assert_eq!((counts.tokens_in, counts.tokens_out), (46, 58));
        assert!(same_or_declined(host.as_bytes()));
        let responses = serde_json::to_vec(&responses_answer()).unwrap();
        assert!(same_or_declined(&responses));
        let messages = br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
            "content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"text","text":"hi"}],
            "stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":6,
            "cache_read_input_tokens":3,"cache_creation_input_tokens":0}}"#;
        assert!(same_or_declined(messages));
        // The model in the place Gemini names it, and no usage at all.
        assert!(same_or_declined(
            br#"{"modelVersion":"gemini-x","candidates":[]}"#
        ));
        assert!(same_or_declined(b"{}"));
    }

    #[test]
    fn what_serde_reads_otherwise_or_refuses_is_declined() {
        let host = host_answer();
        let declined = [
            // Duplicated members the summary reads (serde refuses them).
            host.replacen("\"model\":", "\"model\":\"a\",\"model\":", 1),
            host.replacen("\"usage\":", "\"usage\":null,\"usage\":", 1),
            host.replacen(
                "\"id\":",
                "\"modelVersion\":1,\"modelVersion\":2,\"id\":",
                1,
            ),
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
            // Counts serde reads another way (flagged) or refuses.
            host.replacen("\"prompt_tokens\":46", "\"prompt_tokens\":4.6", 1),
            host.replacen("\"prompt_tokens\":46", "\"prompt_tokens\":-46", 1),
            host.replacen("\"prompt_tokens\":46", "\"prompt_tokens\":4e1", 1),
            host.replacen("\"prompt_tokens\":46", "\"prompt_tokens\":\"46\"", 1),
            host.replacen(
                "\"prompt_tokens\":46",
                "\"prompt_tokens\":18446744073709551616",
                1,
            ),
            host.replacen("{\"cached_tokens\":7}", "\"none\"", 1),
            host.replacen("\"usage\":{", "\"usage\":[{", 1)
                .replacen("}}}", "}}]}", 1),
            host.replacen("\"created\":1796653687", "\"created\":1.7e9", 1),
            // Gemini's usage, left to serde's reader.
            host.replacen("\"id\":", "\"usageMetadata\":{},\"id\":", 1),
            // Strings the scan leaves to serde, or that are no JSON.
            host.replacen("3.14", "\\ud83e\\udd80", 1),
            host.replacen("3.14", "\u{1}", 1),
            host.replacen("3.14", "\\x", 1),
            // Not one object.
            format!("{host} x"),
            format!("[{host}]"),
            host.replacen('}', "", 1),
            "\"text\"".to_owned(),
        ];
        for body in &declined {
            assert!(
                relayed_summary(body.as_bytes()).is_none(),
                "scanned: {body}"
            );
        }
        let mut broken = host.clone().into_bytes();
        let at = broken.windows(5).position(|w| w == b"Hello").unwrap();
        broken[at] = 0xff;
        assert!(relayed_summary(&broken).is_none(), "not UTF-8");
        // What it takes of the same answer, spelled otherwise.
        let taken = [
            host.replacen("\"model\":", "\"m\\u006fdel\":", 1),
            host.replacen("3.14", "\\\"q\\\"\\n\\u00e9\\/", 1),
            host.replacen("\"mock-gpt\"", "null", 1),
            host.replacen("\"mock-gpt\"", "{\"odd\":[\"model\"]}", 1),
            host.replacen("\"usage\":{", "\"usage\":null,\"x\":{", 1),
            host.replacen("{\"cached_tokens\":7}", "null", 1),
            host.replacen("\"created\":1796653687", "\"created\":-1.5", 1),
            format!(" \n{host}\n "),
        ];
        for body in &taken {
            assert!(same_or_declined(body.as_bytes()), "declined: {body}");
        }
    }

    /// Values a member may hold, as hosts and hostile upstreams spell them.
    const VALUES: &[&str] = &[
        "null",
        "0",
        "46",
        "-1",
        "4.5",
        "1e3",
        "18446744073709551616",
        "\"46\"",
        "\"m\"",
        "\"m\\u006f\"",
        "\"\\ud83e\\udd80\"",
        "true",
        "[]",
        "{}",
        "[1,{\"a\":[null]}]",
        "{\"prompt_tokens\":3,\"completion_tokens\":4}",
        "{\"input_tokens\":3,\"output_tokens\":4,\"cache_read_input_tokens\":2}",
        "{\"prompt_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":1}}",
        "{\"prompt_tokens\":3,\"prompt_tokens_details\":[]}",
        "{\"prompt_tokens\":3,\"prompt_tokens_details\":null,\"total_tokens\":9}",
        "{\"prompt_tokens\":3,\"prompt_tokens\":3}",
        "{\"completion_tokens\":2.0}",
        "{\"completion_tokens\":null,\"x\":{\"y\":\"z\"}}",
        "{\"promptTokenCount\":3,\"candidatesTokenCount\":4}",
    ];
    const KEYS: &[&str] = &[
        "model",
        "modelVersion",
        "usage",
        "usageMetadata",
        "id",
        "choices",
        "m\\u006fdel",
    ];

    proptest! {
        // Enough cases that each rare pairing (a key with one odd value) is met.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// Any object of these members: the scan declines it or reads what serde reads.
        #[test]
        fn any_answer_is_read_as_serde_reads_it_or_declined(
            members in proptest::collection::vec(
                (0..KEYS.len(), 0..VALUES.len(), any::<bool>()), 0..6),
        ) {
            let body = crate::wire::json_scan::object_text(&members, KEYS, VALUES);
            same_or_declined(body.as_bytes());
        }
    }
}
