//! Issue 7 §5 in the normal suite: proptest over bytes for the parsers the fuzz targets cover
//! (config, SSE, body rewrite, header parsers + classifier), with the same invariants
//! (`fuzz/checks.rs`). Modest case counts; `bench/fuzz.sh` runs the long version.

#[path = "../../fuzz/checks.rs"]
mod checks;

use proptest::prelude::*;

/// Bytes biased towards each parser's syntax, so most cases get past the first check.
fn near(alphabet: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(alphabet).prop_map(|s| s.as_bytes().to_vec()),
            1 => prop::collection::vec(any::<u8>(), 0..4),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

const TOML: &[&str] = &[
    "[server]\n",
    "listen = \"127.0.0.1:0\"\n",
    "api_keys = [\"k\"]\n",
    "[[providers]]\n",
    "name = \"p\"\n",
    "format = \"openai\"\n",
    "base_url = \"http://x/v1\"\n",
    "[[connections]]\n",
    "id = \"c\"\n",
    "provider = \"p\"\n",
    "api_key = \"sk\"\n",
    "weight = 0\n",
    "weight = -1\n",
    "[[combos]]\n",
    "targets = [{ connection = \"c\", model = \"m\" }]\n",
    "[journal]\n",
    "flush_every_ms = 18446744073709551615\n",
    "=",
    "\"",
    "[",
    "]",
    "{",
    "}",
    "\n",
    "1e999",
];
const SSE: &[&str] = &[
    "data: ",
    "event: ",
    "id: ",
    ": ping",
    "\n",
    "\r\n",
    "\r",
    "\n\n",
    "{\"choices\":[]}",
    "[DONE]",
    "\u{feff}",
    "data",
    ":",
    " ",
];
const JSON: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"model\"",
    "\"stream\"",
    "\"stream_options\"",
    "\"include_usage\"",
    "true",
    "false",
    "null",
    "\"gpt\"",
    "\"\\u00e9\"",
    "\"a\\\"b\"",
    "1",
    " ",
    "\n",
    "\"model\":\"x\"",
];
/// Usage objects and their hostile values, whole and in stream events.
const USAGE: &[&str] = &[
    "{\"usage\":{",
    "data: {\"choices\":[],\"usage\":{",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{",
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{",
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{",
    "\"prompt_tokens\":",
    "\"completion_tokens\":",
    "\"input_tokens\":",
    "\"output_tokens\":",
    "\"cache_read_input_tokens\":",
    "\"cache_creation_input_tokens\":",
    "\"prompt_tokens_details\":{\"cached_tokens\":",
    "18446744073709551615",
    "-5",
    "1.5",
    "1e300",
    "\"12\"",
    "null",
    "true",
    ",",
    "}",
    "}}\n\n",
    "\x01",
    "\u{80}",
];
const HEADERS: &[&str] = &[
    "retry-after: ",
    "retry-after-ms: ",
    "x-ratelimit-reset-requests: ",
    "x-ratelimit-remaining-tokens: ",
    "x-ratelimit-limit-requests: ",
    "anthropic-ratelimit-requests-reset: ",
    "x-ratelimit-reset: ",
    "anthropic-ratelimit-unified-5h-utilization: ",
    "\n",
    "6m0s",
    "1.5s",
    "20ms",
    "1h2m3s",
    "-1",
    "0",
    "99999999999999999999",
    "2025-11-24T12:00:00Z",
    "Mon, 24 Nov 2025 12:00:00 GMT",
    "{\"error\":{\"message\":\"Please try again in 1m30s.\",\"code\":\"insufficient_quota\"}}",
    "\"retryDelay\":\"30s\"",
    "e",
    ".",
    "1e308",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fuzz_config_parse_never_panics(data in near(TOML)) {
        checks::config(&data);
    }

    #[test]
    fn fuzz_sse_parser_keeps_every_byte_in_one_event(data in near(SSE)) {
        checks::sse(&data);
    }

    #[test]
    fn fuzz_body_rewrite_yields_json_with_only_the_model_changed(data in near(JSON)) {
        checks::body_rewrite(&data);
    }

    #[test]
    fn fuzz_header_parsers_and_classifier_never_panic(data in near(HEADERS)) {
        checks::headers_and_classify(&data);
    }

    #[test]
    fn fuzz_sse_relay_masks_keys_echoed_in_error_events(data in prop::collection::vec(any::<u8>(), 1..300)) {
        checks::sse_mask(&data);
    }

    #[test]
    fn fuzz_client_body_reader_with_stalls(data in prop::collection::vec(any::<u8>(), 1..200)) {
        checks::body_reader(&data);
    }

    #[test]
    fn fuzz_usage_parsing_is_always_sane(data in near(USAGE)) {
        checks::usage(&data);
    }

    #[test]
    fn fuzz_all_parsers_on_raw_bytes(data in prop::collection::vec(any::<u8>(), 0..512)) {
        checks::config(&data);
        checks::sse(&data);
        checks::body_rewrite(&data);
        checks::headers_and_classify(&data);
        checks::usage(&data);
    }
}

#[test]
fn body_rewrite_check_accepts_a_real_request() {
    // The checks must be able to fail: a real body parses and is checked end to end.
    let body = br#"{"model":"team","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    assert!(quotaroute::wire::body_rewrite::parse_request(body).is_ok());
    checks::body_rewrite(body);
    checks::sse(b"\x03data: {}\n\nevent: x\ndata: [DONE]\n\n");
}
