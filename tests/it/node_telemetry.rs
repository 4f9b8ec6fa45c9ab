//! `[telemetry]` end to end against a real OTLP/HTTP receiver (a small axum server decoding
//! `ExportTraceServiceRequest` with the collector's own protobuf types): the spans arrive with
//! their parents (the client's `traceparent`, then the request span), the GenAI and
//! `quotaroute.*` attributes, the upstream gets the attempt span's `traceparent`, no key and no
//! prompt text appear anywhere; a failover shows two attempt spans; and a dead or stalled
//! collector costs requests nothing.

#![expect(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};
use prost::Message;
use serde_json::json;

use crate::support::{Harness, ADMIN_KEY, CLIENT_KEY};

const REC_KEY: &str = "sk-rec-upstream-secret-1111";
const BAD_KEY: &str = "sk-rec-upstream-secret-bad0";
const PROMPT: &str = "a prompt no span may carry";
const TEAM_KEY: &str = "sk-qr-team-a-client-key-7777";
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// What the OTLP receiver got: every export decoded, with its resource attributes.
#[derive(Clone, Default)]
struct Collector {
    exports: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

impl Collector {
    async fn start() -> (String, Collector) {
        let collector = Collector::default();
        let app = axum::Router::new()
            .route("/v1/traces", post(receive))
            .with_state(collector.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, collector)
    }

    fn spans(&self) -> Vec<Span> {
        self.exports
            .lock()
            .unwrap()
            .iter()
            .flat_map(|export| &export.resource_spans)
            .flat_map(|resource| &resource.scope_spans)
            .flat_map(|scope| scope.spans.clone())
            .collect()
    }

    /// Waits (bounded) until `count` spans matching `keep` have arrived.
    async fn wait_for(&self, count: usize, keep: impl Fn(&Span) -> bool) -> Vec<Span> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let spans: Vec<Span> = self.spans().into_iter().filter(&keep).collect();
            if spans.len() >= count || Instant::now() > until {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn receive(
    State(collector): State<Collector>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Vec<u8>) {
    assert_eq!(headers["content-type"], "application/x-protobuf");
    let export = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
    collector.exports.lock().unwrap().push(export);
    (StatusCode::OK, Vec::new())
}

/// One upstream request: its `authorization` and its `traceparent`.
type Seen = (String, Option<String>);

/// An OpenAI-shaped upstream that records each request's key and `traceparent`; `BAD_KEY`
/// always gets a 503.
#[derive(Clone, Default)]
struct Upstream {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    async fn start() -> (String, Upstream) {
        let upstream = Upstream::default();
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(upstream.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, upstream)
    }
}

async fn answer(State(upstream): State<Upstream>, headers: HeaderMap) -> (StatusCode, String) {
    let key = headers["authorization"].to_str().unwrap().to_owned();
    let traceparent = headers
        .get("traceparent")
        .map(|value| value.to_str().unwrap().to_owned());
    upstream
        .seen
        .lock()
        .unwrap()
        .push((key.clone(), traceparent));
    if key.ends_with(BAD_KEY) {
        let body = json!({"error": {"message": "overloaded", "type": "server_error"}});
        return (StatusCode::SERVICE_UNAVAILABLE, body.to_string());
    }
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-rec-2025-01-01",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28,
                  "prompt_tokens_details": {"cached_tokens": 5}}
    });
    (StatusCode::OK, body.to_string())
}

/// The standard config plus a `rec` provider on `upstream` (combos `rec` and `recfail`, whose
/// first target always answers 503) and `telemetry` as given.
fn config(text: String, upstream: &str, telemetry: &str) -> String {
    format!(
        r#"{text}
[[providers]]
name = "rec"
format = "openai"
base_url = "{upstream}/v1"

[[connections]]
id = "rec-1"
provider = "rec"
api_key = "{REC_KEY}"

[[connections]]
id = "rec-bad"
provider = "rec"
api_key = "{BAD_KEY}"

[[combos]]
name = "rec"
targets = [{{ connection = "rec-1", model = "gpt-rec" }}]

[[combos]]
name = "recfail"
strategy = "priority"
targets = [{{ connection = "rec-bad", model = "gpt-rec" }}, {{ connection = "rec-1", model = "gpt-rec" }}]

[[clients]]
id = "team-a"
key = "{TEAM_KEY}"

{telemetry}
"#
    )
}

fn telemetry_to(collector: &str) -> String {
    format!("[telemetry]\notlp_endpoint = \"{collector}\"\nservice_name = \"qr-test\"\n")
}

fn attribute<'s>(span: &'s Span, key: &str) -> Option<&'s any_value::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|value| value.value.as_ref())
}

fn text(span: &Span, key: &str) -> String {
    match attribute(span, key) {
        Some(any_value::Value::StringValue(text)) => text.clone(),
        other => panic!("{key}: {other:?} on {}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attribute(span, key) {
        Some(any_value::Value::IntValue(n)) => *n,
        other => panic!("{key}: {other:?} on {}", span.name),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every string any span or resource of `collector` carries.
fn every_string(collector: &Collector) -> Vec<String> {
    let exports = collector.exports.lock().unwrap();
    let mut strings = Vec::new();
    let add = |strings: &mut Vec<String>, attributes: &[KeyValue]| {
        for kv in attributes {
            strings.push(kv.key.clone());
            if let Some(any_value::Value::StringValue(text)) =
                kv.value.as_ref().and_then(|value| value.value.as_ref())
            {
                strings.push(text.clone());
            }
        }
    };
    for resource in exports.iter().flat_map(|export| &export.resource_spans) {
        if let Some(resource) = &resource.resource {
            add(&mut strings, &resource.attributes);
        }
        for span in resource.scope_spans.iter().flat_map(|scope| &scope.spans) {
            add(&mut strings, &span.attributes);
            strings.push(span.name.clone());
        }
    }
    strings
}

#[tokio::test]
async fn a_request_and_its_attempt_arrive_as_parent_and_child_of_the_clients_trace() {
    let (collector_url, collector) = Collector::start().await;
    let (upstream_url, upstream) = Upstream::start().await;
    let harness =
        Harness::start_editing(|text| config(text, &upstream_url, &telemetry_to(&collector_url)))
            .await;
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(TEAM_KEY)
        .header("traceparent", format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"))
        .json(
            &json!({"model": "rec", "prompt_cache_key": "conversation-1",
            "messages": [{"role": "user", "content": PROMPT}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let spans = collector
        .wait_for(2, |span| hex(&span.trace_id) == CLIENT_TRACE)
        .await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let server = spans
        .iter()
        .find(|span| span.kind == SpanKind::Server as i32)
        .expect("a server span");
    let attempt = spans
        .iter()
        .find(|span| span.kind == SpanKind::Client as i32)
        .expect("a client span");
    // The client's span is the request's parent; the request is the attempt's.
    assert_eq!(hex(&server.parent_span_id), CLIENT_SPAN);
    assert_eq!(attempt.parent_span_id, server.span_id);
    assert!(server.start_time_unix_nano <= attempt.start_time_unix_nano);
    assert!(attempt.end_time_unix_nano <= server.end_time_unix_nano);
    assert_eq!(server.name, "chat rec");

    assert_eq!(text(server, "gen_ai.operation.name"), "chat");
    assert_eq!(text(server, "gen_ai.request.model"), "rec");
    assert_eq!(text(server, "gen_ai.response.model"), "gpt-rec-2025-01-01");
    assert_eq!(int(server, "gen_ai.usage.input_tokens"), 21);
    assert_eq!(int(server, "gen_ai.usage.output_tokens"), 7);
    assert_eq!(int(server, "gen_ai.usage.cache_read.input_tokens"), 5);
    assert_eq!(text(server, "quotaroute.combo"), "rec");
    // The client's id from `[[clients]]` (never its key), and how affinity placed the turn.
    assert_eq!(text(server, "quotaroute.client"), "team-a");
    assert_eq!(text(server, "quotaroute.affinity"), "new");
    assert_eq!(int(server, "quotaroute.attempts"), 1);
    assert_eq!(int(server, "http.response.status_code"), 200);
    assert!(attribute(server, "error.type").is_none());

    assert_eq!(text(attempt, "gen_ai.request.model"), "gpt-rec");
    assert_eq!(text(attempt, "gen_ai.response.model"), "gpt-rec-2025-01-01");
    assert_eq!(text(attempt, "server.address"), "127.0.0.1");
    assert_eq!(int(attempt, "http.response.status_code"), 200);
    assert_eq!(text(attempt, "quotaroute.connection"), "rec-1");
    assert!(attribute(attempt, "error.type").is_none());

    // The upstream was sent the attempt span's traceparent, not the client's.
    let seen = upstream.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(
            format!("Bearer {REC_KEY}"),
            Some(format!("00-{CLIENT_TRACE}-{}-01", hex(&attempt.span_id)))
        )]
    );
    // The resource names the service; nothing carries a key or the prompt.
    let strings = every_string(&collector);
    assert!(strings.iter().any(|s| s == "qr-test"), "{strings:?}");
    for string in &strings {
        for secret in [
            REC_KEY, BAD_KEY, CLIENT_KEY, TEAM_KEY, ADMIN_KEY, PROMPT, "Bearer",
        ] {
            assert!(!string.contains(secret), "{string:?} carries {secret}");
        }
    }
}

#[tokio::test]
async fn a_failover_shows_two_attempts_the_failed_one_with_its_class() {
    let (collector_url, collector) = Collector::start().await;
    let (upstream_url, _upstream) = Upstream::start().await;
    let harness =
        Harness::start_editing(|text| config(text, &upstream_url, &telemetry_to(&collector_url)))
            .await;
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "recfail", "messages": [{"role": "user", "content": PROMPT}]}),
        )
        .await;
    assert_eq!(response.status(), 200);

    let spans = collector.wait_for(3, |_| true).await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let server = spans
        .iter()
        .find(|span| span.kind == SpanKind::Server as i32)
        .unwrap();
    // No client traceparent: a new trace, the request its root.
    assert!(server.parent_span_id.is_empty());
    assert_eq!(int(server, "quotaroute.attempts"), 2);
    assert_eq!(int(server, "http.response.status_code"), 200);
    assert!(attribute(server, "error.type").is_none());
    let attempts: Vec<&Span> = spans
        .iter()
        .filter(|span| span.kind == SpanKind::Client as i32)
        .collect();
    assert!(attempts
        .iter()
        .all(|span| span.parent_span_id == server.span_id && span.trace_id == server.trace_id));
    let failed = attempts
        .iter()
        .find(|span| text(span, "quotaroute.connection") == "rec-bad")
        .unwrap();
    assert_eq!(text(failed, "error.type"), "server_error");
    assert_eq!(int(failed, "http.response.status_code"), 503);
    assert_eq!(failed.status.as_ref().map(|status| status.code), Some(2));
    let served = attempts
        .iter()
        .find(|span| text(span, "quotaroute.connection") == "rec-1")
        .unwrap();
    assert!(attribute(served, "error.type").is_none());
    assert!(failed.end_time_unix_nano <= served.start_time_unix_nano);
}

/// The p50 of `count` sequential chat requests to `team`, all of which must succeed.
async fn p50_of(harness: &Harness, count: usize) -> Duration {
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let sent = Instant::now();
        let response = harness.chat("team").await;
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        times.push(sent.elapsed());
    }
    times.sort();
    times[count / 2]
}

#[tokio::test]
async fn a_dead_or_stalled_collector_costs_requests_nothing_and_its_spans_are_counted_dropped() {
    // A port that was just closed: every export is refused.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    // A collector that accepts and never answers: every export times out.
    let stalled = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stalled_url = format!("http://{}", stalled.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = stalled.accept().await {
            held.push(socket);
        }
    });

    let off = Harness::start().await;
    p50_of(&off, 20).await; // warm-up
    let p50_off = p50_of(&off, 200).await;

    let dead = Harness::start_with(&telemetry_to(&format!("http://{closed}"))).await;
    p50_of(&dead, 20).await;
    let p50_dead = p50_of(&dead, 200).await;

    let slow = Harness::start_with(&telemetry_to(&stalled_url)).await;
    p50_of(&slow, 20).await;
    let p50_slow = p50_of(&slow, 200).await;

    // Lenient: the same order of cost (a shared 2-core machine is noisy).
    let bound = p50_off * 3 + Duration::from_millis(3);
    assert!(
        p50_dead <= bound,
        "dead collector p50 {p50_dead:?} vs off {p50_off:?}"
    );
    assert!(
        p50_slow <= bound,
        "stalled collector p50 {p50_slow:?} vs off {p50_off:?}"
    );

    // The refused exports are counted as dropped spans.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = dead.admin_text("/metrics").await;
        let dropped: f64 = metrics
            .lines()
            .find(|line| {
                line.starts_with("quotaroute_trace_spans_dropped_total")
                    && line.contains("reason=\"export_failed\"")
            })
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0);
        if dropped >= 400.0 {
            break;
        }
        assert!(
            Instant::now() < until,
            "dropped spans not counted: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_streamed_answer_ends_its_spans_with_the_stream_and_counts_its_tokens() {
    let (collector_url, collector) = Collector::start().await;
    let harness = Harness::start_with(&telemetry_to(&collector_url)).await;
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "team", "stream": true, "messages": [{"role": "user", "content": PROMPT}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert!(body.contains("data: [DONE]"), "{body}");

    let spans = collector.wait_for(2, |_| true).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let server = spans
        .iter()
        .find(|span| span.kind == SpanKind::Server as i32)
        .unwrap();
    let attempt = spans
        .iter()
        .find(|span| span.kind == SpanKind::Client as i32)
        .unwrap();
    assert_eq!(attempt.parent_span_id, server.span_id);
    for span in [server, attempt] {
        assert!(int(span, "gen_ai.usage.input_tokens") > 0, "{span:#?}");
        assert!(int(span, "gen_ai.usage.output_tokens") > 0, "{span:#?}");
        assert!(attribute(span, "error.type").is_none());
    }
    assert_eq!(text(server, "gen_ai.response.model"), "gpt-4o-mini");
    assert!(text(attempt, "quotaroute.connection").starts_with("oa-"));
}

#[test]
fn check_names_a_bad_endpoint_and_prints_a_good_one_without_its_secrets() {
    let base = |telemetry: &str| format!("[server]\napi_keys = [\"{CLIENT_KEY}\"]\n\n{telemetry}");
    let errors = quotaroute::config::parse(
        &base("[telemetry]\notlp_endpoint = \"ftp://collector.test:4318?token=s3cret\"\n"),
        "t.toml",
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(errors.contains("telemetry.otlp_endpoint"), "{errors}");
    assert!(errors.contains("http or https"), "{errors}");
    assert!(!errors.contains("s3cret"), "{errors}");

    let errors = quotaroute::config::parse(
        &base("[telemetry]\nsample_ratio = 2.0\n"),
        "t.toml",
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(errors.contains("telemetry.otlp_endpoint"), "{errors}");
    assert!(errors.contains("telemetry.sample_ratio"), "{errors}");

    let config = quotaroute::config::parse(
        &base("[telemetry]\notlp_endpoint = \"https://collector.test\"\nsample_ratio = 0.25\n"),
        "t.toml",
        &|_| None,
    )
    .unwrap();
    let summary = config.summary();
    assert!(
        summary.contains("telemetry: traces to https://collector.test/v1/traces as `quotaroute`, sample_ratio 0.25"),
        "{summary}"
    );
}
