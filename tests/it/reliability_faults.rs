//! Issue 7 §3: every fault of the mock, streaming and not, on ONE key (`oa-1`) of the 3-key
//! combo `team`. Whenever another key can serve, the client sees success (except a stream that
//! was already committed, which ends in one SSE error event), and the state the node learned
//! matches behaviour §4–§7: a lockout of that model only, a cooldown, a disabled key, or
//! nothing at all for client errors.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use crate::support;

use std::time::Duration;

use quotaroute_mock::{Fault, ResetForm, Rule};
use serde_json::{json, Value};
use support::*;

/// Timeouts small enough for a stall to outlast them. `request_timeout_ms` bounds the whole
/// request; `first_token_timeout_ms` bounds one streaming try.
const TIMEOUTS: &str = "request_timeout_ms = 1500\nfirst_token_timeout_ms = 300\n";
const STALL_MS: u64 = 2500;

/// What the node must have learned about `oa-1` (and nothing about the others).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Learned {
    /// A lockout of `gpt-4o-mini` on oa-1 with this reason, remaining within the range (ms).
    Lockout(&'static str, u64, u64),
    /// oa-1 disabled with this reason.
    Disabled(&'static str),
    /// oa-1 cooling down (timeout, server and network failures).
    Cooldown,
    /// Nothing learned (client errors, faults that do not fire).
    Nothing,
}

/// What the client of the request that hit oa-1 sees.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Client {
    /// A success served by another key.
    Success,
    /// The upstream's status passed through, no failover.
    Status(u16),
    /// One 200 stream that ends in an SSE error event (committed before the failure).
    StreamEndsInError,
}

struct Case {
    name: &'static str,
    fault: Fault,
    stream: bool,
    client: Client,
    learned: Learned,
}

fn cases() -> Vec<Case> {
    use Client::*;
    use Learned::*;
    let rate = |name: &'static str, reset: ResetForm, low: u64, high: u64| {
        (
            name,
            Fault::Status429 { reset },
            Success,
            Lockout("rate_limited", low, high),
        )
    };
    let table: Vec<(&'static str, Fault, Client, Learned)> = vec![
        rate("429 retry-after s", ResetForm::RetryAfterSeconds(120), 110_000, 120_000),
        rate("429 retry-after date", ResetForm::RetryAfterHttpDate(120), 105_000, 121_000),
        rate("429 retry-after-ms", ResetForm::RetryAfterMs(120_000), 110_000, 120_000),
        rate("429 x-ratelimit-reset", ResetForm::OpenAiResetHeaders("2m0s".into()), 110_000, 120_000),
        rate("429 anthropic reset", ResetForm::AnthropicResetRfc3339(120), 105_000, 121_000),
        rate("429 body retryDelay", ResetForm::BodyRetryDelay(120), 110_000, 120_000),
        rate("429 try again in", ResetForm::MessageTryAgainIn("2m0s".into()), 110_000, 120_000),
        // No reset: backoff base 1 s (n = 1).
        rate("429 no reset", ResetForm::None, 1, 1_000),
        ("429 insufficient_quota", Fault::InsufficientQuota429, Success, Disabled("billing")),
        ("400 model not found", Fault::Status(400), Success, Lockout("not_found", 110_000, 120_000)),
        (
            "400 context length (client error)",
            Fault::Custom {
                status: 400,
                body: r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#.into(),
            },
            Status(400),
            Nothing,
        ),
        ("401", Fault::Status(401), Success, Disabled("auth")),
        ("402", Fault::Status(402), Success, Disabled("billing")),
        ("403 forbidden", Fault::Status(403), Success, Disabled("auth")),
        ("404", Fault::Status(404), Success, Lockout("not_found", 110_000, 120_000)),
        ("500", Fault::Status(500), Success, Cooldown),
        ("502", Fault::Status(502), Success, Cooldown),
        ("503", Fault::Status(503), Success, Cooldown),
        ("504", Fault::Status(504), Success, Cooldown),
        ("529", Fault::Status(529), Success, Cooldown),
        ("connection reset", Fault::ConnectionReset, Success, Cooldown),
        ("bad json 200", Fault::BadJson200, Success, Cooldown),
    ];
    let mut cases = Vec::new();
    for (name, fault, client, learned) in table {
        for stream in [false, true] {
            cases.push(Case {
                name,
                fault: fault.clone(),
                stream,
                client,
                learned,
            });
        }
    }
    // A stall outlasts the streaming try's first-token timeout: fail over, cooldown. Without a
    // stream the only bound is `request_timeout_ms`, which the stall also outlasts: the whole
    // request times out (504) before any failover — there is no per-try timeout (see report).
    cases.push(Case {
        name: "stall",
        fault: Fault::Stall { ms: STALL_MS },
        stream: true,
        client: Client::Success,
        learned: Learned::Cooldown,
    });
    cases.push(Case {
        name: "stall",
        fault: Fault::Stall { ms: STALL_MS },
        stream: false,
        client: Client::Status(504),
        learned: Learned::Cooldown,
    });
    // Stream faults: only on streams; a non-streaming request never sees them.
    for (name, fault, client, learned) in [
        (
            "stream fails before content",
            Fault::StreamFailBeforeContent,
            Client::Success,
            Learned::Cooldown,
        ),
        (
            "stream fails after content",
            Fault::StreamFailAfterContent,
            Client::StreamEndsInError,
            Learned::Cooldown,
        ),
        (
            "garbage sse",
            Fault::GarbageSse,
            Client::Success,
            Learned::Cooldown,
        ),
    ] {
        cases.push(Case {
            name,
            fault: fault.clone(),
            stream: true,
            client,
            learned,
        });
        cases.push(Case {
            name,
            fault,
            stream: false,
            client: Client::Success,
            learned: Learned::Nothing,
        });
    }
    cases
}

fn connection<'a>(state: &'a Value, id: &str) -> &'a Value {
    state["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap()
}

/// Runs one case on a fresh node; returns a failure description instead of panicking, so the
/// table reports every mismatch at once.
async fn run(case: &Case) -> Result<(), String> {
    let harness = Harness::start_with("").await;
    // The fresh node's config with small timeouts (reload keeps the journal and the state).
    let text = std::fs::read_to_string(&harness.config_path)
        .unwrap()
        .replace(
            "request_timeout_ms = 10000\nfirst_token_timeout_ms = 3000\n",
            TIMEOUTS,
        );
    std::fs::write(&harness.config_path, text).unwrap();
    let reload = harness.admin_post("/admin/reload").await;
    assert_eq!(reload.status(), 200);
    let oa1 = upstream_key("oa-1");
    harness
        .mock
        .set_rules(vec![Rule::always(case.fault.clone()).for_key(oa1.clone())]);
    let body = json!({"model": "team", "stream": case.stream, "messages": [{"role": "user", "content": "hi"}]});
    let mut seen = Vec::new();
    // Until oa-1 has been tried once (weights 2:1:1: within the first few requests).
    for _ in 0..6 {
        let hits_before = harness.mock.stats().for_key(&oa1);
        let response = harness
            .post_json("/v1/chat/completions", body.clone())
            .await;
        let status = response.status().as_u16();
        let served_by = header(&response, "x-quotaroute-connection");
        let text = response.text().await.unwrap_or_default();
        let hit = harness.mock.stats().for_key(&oa1) > hits_before;
        let error_event = text.contains("\"error\"");
        let done = text.contains("[DONE]");
        seen.push(format!("{status} via {served_by} hit={hit}"));
        let expected = if hit { case.client } else { Client::Success };
        let ok = match expected {
            Client::Success => {
                status == 200
                    && (served_by != "oa-1" || case.learned == Learned::Nothing)
                    && !error_event
                    && (!case.stream || done)
            }
            Client::Status(code) => status == code,
            Client::StreamEndsInError => {
                status == 200
                    && error_event
                    && text.matches("data: [DONE]").count() <= 1
                    && text.contains("\"delta\"")
            }
        };
        if !ok {
            return Err(format!(
                "expected {expected:?}, got {status} via {served_by}: {}",
                text.chars().take(300).collect::<String>()
            ));
        }
        if hit {
            break;
        }
    }
    if harness.mock.stats().for_key(&oa1) == 0 {
        return Err(format!("oa-1 was never tried: {seen:?}"));
    }
    harness.settle().await;
    let state = harness.admin_get("/admin/state").await;
    for other in ["oa-2", "oa-3"] {
        let c = connection(&state, other);
        if !c["lockouts"].as_array().unwrap().is_empty()
            || !c["disabled"].is_null()
            || c["cooldown_remaining_ms"] != 0
        {
            return Err(format!("{other} learned something: {c}"));
        }
    }
    for provider in state["providers"].as_array().unwrap() {
        if provider["breaker"] != "CLOSED" {
            return Err(format!("one bad key moved a breaker: {provider}"));
        }
    }
    let c = connection(&state, "oa-1");
    let lockouts = c["lockouts"].as_array().unwrap();
    let cooling = c["cooldown_remaining_ms"].as_u64().unwrap() > 0;
    let learned_ok = match case.learned {
        Learned::Lockout(reason, low, high) => {
            let remaining = lockouts
                .first()
                .and_then(|l| l["remaining_ms"].as_u64())
                .unwrap_or(0);
            lockouts.len() == 1
                && lockouts[0]["model"] == "gpt-4o-mini"
                && lockouts[0]["reason"] == reason
                && (low..=high).contains(&remaining)
                && c["disabled"].is_null()
                && !cooling
        }
        Learned::Disabled(reason) => {
            c["disabled"]["reason"] == reason && lockouts.is_empty() && !cooling
        }
        Learned::Cooldown => cooling && lockouts.is_empty() && c["disabled"].is_null(),
        Learned::Nothing => {
            !cooling && lockouts.is_empty() && c["disabled"].is_null() && c["cooldown_level"] == 0
        }
    };
    if !learned_ok {
        return Err(format!("expected {:?}, learned {c}", case.learned));
    }
    if let Learned::Lockout(..) = case.learned {
        // §4: a 429 (or 404) locks only that model: oa-1 still serves another one.
        harness.mock.clear_rules();
        let before = harness.mock.stats().for_key_model(&oa1, "gpt-4o");
        let mut served = false;
        for _ in 0..4 {
            let response = harness.chat("openai/gpt-4o").await;
            if response.status() != 200 {
                return Err(format!("openai/gpt-4o failed: {}", response.status()));
            }
            served |= header(&response, "x-quotaroute-connection") == "oa-1";
        }
        if !served || harness.mock.stats().for_key_model(&oa1, "gpt-4o") == before {
            return Err("oa-1 stopped serving other models".into());
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_s4_s7_every_mock_fault_on_one_key_streaming_and_not() {
    let cases = cases();
    assert_eq!(cases.len(), 52);
    // Four cases at a time: each has its own node and mock.
    let mut failures = Vec::new();
    let started = std::time::Instant::now();
    for chunk in cases.chunks(4) {
        let results = futures_util::future::join_all(chunk.iter().map(|case| async move {
            tokio::time::timeout(Duration::from_secs(20), run(case))
                .await
                .unwrap_or_else(|_| Err("timed out".into()))
        }))
        .await;
        for (case, result) in chunk.iter().zip(results) {
            if let Err(why) = result {
                failures.push(format!("{} (stream={}): {why}", case.name, case.stream));
            }
        }
    }
    println!("{} fault cases in {:?}", cases.len(), started.elapsed());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
