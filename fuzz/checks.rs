//! The invariants fuzzed by `fuzz/` (cargo-fuzz, `bench/fuzz.sh`) and checked by the
//! proptest-over-bytes tests in `tests/it/reliability_parsers.rs`: one copy, included by both with
//! `#[path]`. Each function takes arbitrary bytes and panics only when an invariant breaks.
//! Owns no parser: it only drives the crate's own.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test support: not every test calls every helper, and a failed step fails loudly"
)]

use http::{HeaderMap, HeaderName, HeaderValue};
use quotaroute::wire::body_rewrite::{parse_request, rewrite};
use quotaroute::wire::sse::SseParser;
use quotaroute::wire::stream_watch::{StreamFormat, StreamUsage};
use quotaroute::wire::upstream_mask::mask_sse_event;
use quotaroute::wire::usage::response_usage;
use quotaroute::wire::usage_check::checked_usage;
use quotaroute_actors::policy::classify::{classify, classify_stream_error, UpstreamReply};
use quotaroute_actors::policy::rate_limit_headers::readings_from_headers;
use quotaroute_actors::policy::reset_hint;
use quotaroute_journal::ApiFormat;

/// A fixed "now" (2025-11-24): the parsers take time as a parameter.
pub const NOW_MS: u64 = 1_764_000_000_000;

/// Config text: never a panic, whatever the TOML.
pub fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = quotaroute::config::parse(text, "fuzz.toml", &|_| Some("sk-env-value".into()));
    }
}

/// SSE: fed in chunks whose sizes come from the input itself, every byte of a stream that
/// parses lands in exactly one event's `raw`, in order.
pub fn sse(data: &[u8]) {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(split % 17) + 1;
    let mut parser = SseParser::with_max_event_bytes(4096);
    let mut events = Vec::new();
    let mut ok = true;
    for piece in stream.chunks(chunk) {
        if parser.feed(piece, &mut events).is_err() {
            ok = false;
            break;
        }
    }
    if ok {
        match parser.finish() {
            Ok(last) => events.extend(last),
            Err(_) => ok = false,
        }
    }
    if ok {
        let joined: Vec<u8> = events.iter().flat_map(|e| e.raw.iter().copied()).collect();
        assert_eq!(
            joined, stream,
            "raw bytes of the events differ from the stream"
        );
    }
}

/// Body rewrite: a body that parses is rewritten into JSON whose top-level `model` is the
/// upstream model, the rest unchanged; `stream_options.include_usage` is true when forced.
pub fn body_rewrite(data: &[u8]) {
    let Ok(info) = parse_request(data) else {
        return;
    };
    let upstream_model = "up\"stream/\u{e9}\\model";
    for force in [false, true] {
        let out = rewrite(data, &info, upstream_model, force);
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap_or_else(|error| {
            panic!(
                "rewrite produced invalid JSON ({error}): {}",
                String::from_utf8_lossy(&out)
            )
        });
        assert_eq!(value["model"], upstream_model);
        let original: serde_json::Value = serde_json::from_slice(data).unwrap();
        if force && info.stream {
            assert_eq!(value["stream_options"]["include_usage"], true);
        }
        let (mut a, mut b) = (original.clone(), value.clone());
        for v in [&mut a, &mut b] {
            if let Some(object) = v.as_object_mut() {
                object.remove("model");
                object.remove("stream_options");
            }
        }
        assert_eq!(a, b, "rewrite changed more than model/stream_options");
    }
}

/// The headers in `data` (one `name: value` per line; invalid ones skipped).
pub fn header_map(data: &[u8]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for line in data.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name),
            HeaderValue::from_bytes(value.trim_ascii()),
        ) {
            headers.append(name, value);
        }
    }
    headers
}

/// Every header parser, the reset hints and the classifier: never a panic, and every reset
/// found is a real time (not before now, not absurdly far away on overflow).
pub fn headers_and_classify(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let now = NOW_MS;
    let _ = reset_hint::retry_after(&text, now);
    let _ = reset_hint::retry_after_ms(&text);
    let _ = reset_hint::go_duration_ms(&text);
    let _ = reset_hint::rfc3339_ms(&text);
    let _ = reset_hint::unix_time_ms(&text);
    let _ = reset_hint::reset_epoch_or_delta(&text, now);
    let _ = reset_hint::any_reset_ms(&text, now);
    let _ = reset_hint::message_wait_ms(&text);
    let body: Option<serde_json::Value> = serde_json::from_slice(data).ok();
    if let Some(body) = &body {
        let _ = reset_hint::body_reset_ms(body, now);
        let _ = classify_stream_error(body);
    }
    let headers = header_map(data);
    let _ = reset_hint::retry_after_headers_ms(&headers, now);
    let _ = reset_hint::upstream_reset_ms(&headers, body.as_ref(), now);
    let _ = readings_from_headers(&headers, "gpt-4o-mini", now);
    let status = data
        .first_chunk::<2>()
        .map(|b| 100 + u16::from_be_bytes(*b) % 500);
    for format in [ApiFormat::Openai, ApiFormat::Anthropic] {
        let classification = classify(
            &UpstreamReply {
                status,
                headers: &headers,
                body: data,
                transport: None,
                format,
            },
            now,
        );
        assert_eq!(classification.status, status);
    }
}

/// The key the SSE mask check hides in its streams.
pub const ECHOED_KEY: &str = "sk-echoed-Qw3rTy8Uio0pAsDf";

/// SSE relay masking: a stream whose error event (OpenAI `data: {"error":…}` or Anthropic
/// `event: error`) echoes the key among arbitrary text, fed in chunks whose sizes come from the
/// input: after the relay's mask, no event holds the key, and an event without the key is
/// relayed byte for byte.
pub fn sse_mask(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let noise: String = String::from_utf8_lossy(rest)
        .chars()
        .filter(|c| !c.is_control() && *c != '"' && *c != '\\')
        .take(200)
        .collect();
    let mid = (0..=noise.len() / 2)
        .rev()
        .find(|&at| noise.is_char_boundary(at))
        .unwrap_or(0);
    let (before, after) = noise.split_at(mid);
    let stream = if split % 2 == 0 {
        format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{before}\"}}}}]}}\n\n\
             data: {{\"error\":{{\"message\":\"{before}{ECHOED_KEY}{after}\",\"type\":\"server_error\"}}}}\n\n"
        )
    } else {
        format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"delta\":{{\"text\":\"{before}\"}}}}\n\n\
             event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"api_error\",\"message\":\"{after} {ECHOED_KEY} {before}\"}}}}\n\n"
        )
    };
    let chunk = usize::from(split / 2 % 23) + 1;
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for piece in stream.as_bytes().chunks(chunk) {
        parser.feed(piece, &mut events).unwrap();
    }
    events.extend(parser.finish().unwrap());
    let mut relayed = Vec::new();
    for event in &events {
        let error = event.event.as_deref() == Some("error") || event.data.contains("\"error\"");
        let masked = mask_sse_event(&event.raw, &[ECHOED_KEY], error);
        assert!(
            !String::from_utf8_lossy(&masked).contains(ECHOED_KEY),
            "the key survived the mask: {}",
            String::from_utf8_lossy(&masked)
        );
        if !String::from_utf8_lossy(&event.raw).contains(ECHOED_KEY) && !error {
            assert_eq!(masked, event.raw, "an event without the key changed");
        }
        relayed.extend_from_slice(&masked);
    }
    // Still whole events: the client's parser reads as many as were sent.
    let mut client = SseParser::new();
    let mut seen = Vec::new();
    client.feed(&relayed, &mut seen).unwrap();
    seen.extend(client.finish().unwrap());
    assert_eq!(seen.len(), events.len());
}

/// The client body reader (`node::routed::read_client_body`): a body whose pieces and stalls
/// come from the input is read whole, or refused as too large (413) once it passes the limit,
/// or as stalled (408) when a silence outlasts `body_timeout_ms` first — never a hang.
pub fn body_reader(data: &[u8]) {
    use quotaroute::internals::ApiErrorKind;
    use std::time::Duration;
    let Some((&limit, ops)) = data.split_first() else {
        return;
    };
    let limit = usize::from(limit) + 16;
    let silence = Duration::from_millis(500);
    // The answer the reader owes, worked out by hand from the ops.
    let mut expected: Result<Vec<u8>, ApiErrorKind> = Ok(Vec::new());
    let mut pieces: Vec<Option<Vec<u8>>> = Vec::new();
    let mut total = 0;
    for (at, &op) in ops.iter().enumerate() {
        if op == 0xFF {
            pieces.push(None);
            if expected.is_ok() {
                expected = Err(ApiErrorKind::RequestTimeout);
            }
            continue;
        }
        let piece: Vec<u8> = (0..usize::from(op % 32) + 1)
            .map(|i| b'a' + ((at + i) % 26) as u8)
            .collect();
        total += piece.len();
        if let Ok(bytes) = expected.as_mut() {
            bytes.extend_from_slice(&piece);
            if total > limit {
                expected = Err(ApiErrorKind::RequestTooLarge);
            }
        }
        pieces.push(Some(piece));
    }
    let stream = futures_util::stream::unfold(pieces.into_iter(), move |mut pieces| async move {
        loop {
            match pieces.next()? {
                None => tokio::time::sleep(silence + Duration::from_millis(1)).await,
                Some(piece) => {
                    return Some((Ok::<_, std::io::Error>(bytes::Bytes::from(piece)), pieces))
                }
            }
        }
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let read = runtime.block_on(quotaroute::node::routed::read_client_body(
        axum::body::Body::from_stream(stream),
        limit,
        silence,
    ));
    match (read, expected) {
        (Ok(bytes), Ok(expected)) => assert_eq!(bytes.to_vec(), expected),
        (Err(error), Err(kind)) => assert_eq!(error.kind, kind, "{error}"),
        (got, expected) => panic!("read {got:?}, expected {expected:?}"),
    }
}

/// Usage parsing (behaviour §11): whatever an upstream puts in a whole body or in stream events
/// of any format, reading never panics, and the checked counts are within `usage_max_tokens`,
/// with cache reads and writes within the prompt. The first byte picks the bound.
pub fn usage(data: &[u8]) {
    let Some((&bound, body)) = data.split_first() else {
        return;
    };
    let max_tokens = 1u64 << (bound % 64);
    let sane = |counts| {
        let (sane, _) = checked_usage(counts, max_tokens);
        assert!(sane.tokens_in <= max_tokens && sane.tokens_out <= max_tokens);
        assert!(sane.tokens_cached <= max_tokens && sane.tokens_cache_write <= max_tokens);
        assert!(sane.tokens_cached + sane.tokens_cache_write <= sane.tokens_in);
    };
    for format in [ApiFormat::Openai, ApiFormat::Anthropic] {
        if let Ok(Some(counts)) = response_usage(format, body) {
            sane(counts);
        }
    }
    let mut events = Vec::new();
    if SseParser::new().feed(body, &mut events).is_err() {
        return;
    }
    for format in [
        StreamFormat::OpenAiChat,
        StreamFormat::OpenAiResponses,
        StreamFormat::Anthropic,
    ] {
        let mut usage = StreamUsage::default();
        for event in &events {
            usage.observe(format, event);
            usage.count_content(format, event);
        }
        sane(quotaroute::wire::usage::TokenCounts {
            tokens_in: usage.tokens_in,
            tokens_out: usage.tokens_out,
            tokens_cached: usage.tokens_cached,
            tokens_cache_write: usage.tokens_cache_write,
            flaws: usage.flaws,
        });
    }
}
