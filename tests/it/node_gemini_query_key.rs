//! A client key in the query string (`?key=`, Google's habit, behaviour §15) appears nowhere:
//! the real binary at `RUST_LOG=debug` serves Google's paths — JSON, both stream framings,
//! countTokens, an unknown model, a spent pool, the models list — to a client whose key is
//! only ever in the URL, with traces exported to a collector; then the key is searched for in
//! the logs, the journal (NDJSON), every admin output, `/metrics`, every exported span and
//! every request head the upstream received.

#![expect(
    clippy::too_many_lines,
    reason = "each test is one scenario against the real node, in the order it happens"
)]

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use quotaroute_mock::{Fault, Rule};
use serde_json::json;

use crate::reliability_support::spawn_node;
use crate::support::{
    admin_journal_all, admin_text, free_port, standard_config, start_mock, upstream_key,
    wait_ready, ADMIN_KEY,
};

/// The client key, only ever sent in a query string.
const QUERY_KEY: &str = "AIzaSy-QUERYSWEEP-client-0123456789";

/// Every OTLP export's raw bytes (span strings are stored as they are in protobuf).
#[derive(Clone, Default)]
struct Collector {
    exports: Arc<Mutex<Vec<Bytes>>>,
}

async fn receive(State(collector): State<Collector>, body: Bytes) -> &'static str {
    collector.exports.lock().unwrap().push(body);
    ""
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_the_query_string_appears_nowhere() {
    let (mock_base, mock) = start_mock().await;
    let collector = Collector::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(receive))
        .with_state(collector.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!(
        r#"
[[providers]]
name = "google"
format = "gemini"
base_url = "{mock_base}/v1beta"

[[connections]]
id = "gm-1"
provider = "google"
api_key = "{gm1}"

[[connections]]
id = "gm-2"
provider = "google"
api_key = "{gm2}"

[[combos]]
name = "gemini"
targets = [
  {{ connection = "gm-1", model = "gemini-2.5-flash" }},
  {{ connection = "gm-2", model = "gemini-2.5-flash" }},
]

[[clients]]
id = "gem-client"
key = "{QUERY_KEY}"

[telemetry]
otlp_endpoint = "{collector_url}"
service_name = "qr-sweep"
"#,
        gm1 = upstream_key("gm-1"),
        gm2 = upstream_key("gm-2"),
    );
    let text = standard_config(&mock_base, &dir.path().join("journal"), &extra).replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config_path = dir.path().join("quotaroute.toml");
    std::fs::write(&config_path, &text).unwrap();
    let log_path = dir.path().join("node.log");
    let mut node = spawn_node(&config_path, "debug", Some(&log_path));
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_ready(&client, &base).await;

    let hello = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let mut seen: Vec<(String, String)> = Vec::new();
    let call = |path: &str| {
        let url = format!(
            "{base}{path}{}key={QUERY_KEY}",
            if path.contains('?') { "&" } else { "?" }
        );
        let request = client.post(url).json(&hello);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let headers = format!("{:?}", response.headers());
            (status, headers, response.text().await.unwrap())
        }
    };
    let mut statuses = Vec::new();
    for path in [
        "/v1beta/models/gemini:generateContent",
        "/v1beta/models/gemini:streamGenerateContent?alt=sse",
        "/v1beta/models/gemini:streamGenerateContent",
        "/v1/models/gemini:countTokens",
        "/v1beta/models/nope:generateContent",
    ] {
        let (status, headers, body) = call(path).await;
        statuses.push(status);
        seen.push((format!("{path} headers"), headers));
        seen.push((format!("{path} body"), body));
    }
    assert_eq!(statuses, vec![200, 200, 200, 200, 404], "{seen:?}");
    // A spent pool: the router's own 429.
    mock.set_rules(vec![Rule::always(Fault::GeminiQuota {
        per_day: true,
        retry_delay_s: 22,
    })]);
    for _ in 0..3 {
        let (status, headers, body) = call("/v1beta/models/gemini:generateContent").await;
        seen.push((format!("spent {status} headers"), headers));
        seen.push((format!("spent {status} body"), body));
    }
    mock.clear_rules();
    let models = client
        .get(format!("{base}/v1beta/models?key={QUERY_KEY}"))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    seen.push(("models".into(), models.text().await.unwrap()));

    // Give the journal and the span exporter their flush.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    seen.push(("journal".into(), admin_journal_all(&client, &base).await));
    for path in [
        "/admin/state",
        "/admin/lockouts",
        "/admin/clients",
        "/admin/affinity",
        "/metrics",
    ] {
        seen.push((path.into(), admin_text(&client, &base, path).await));
    }
    let heads = mock.recent_heads();
    assert!(!heads.is_empty());
    for head in &heads {
        seen.push(("upstream head".into(), head.clone()));
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &node.id().to_string()])
        .status();
    let _ = node.wait();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.contains("upstream attempt"),
        "the log is at debug: {log}"
    );
    seen.push(("log".into(), log));
    let exports = collector.exports.lock().unwrap().clone();
    assert!(!exports.is_empty(), "spans were exported");
    for export in &exports {
        assert!(
            !contains(export, QUERY_KEY),
            "the key is in an exported span"
        );
    }
    // The client was named (the key was read), and the key itself nowhere.
    let journal = &seen.iter().find(|(label, _)| label == "journal").unwrap().1;
    assert!(journal.contains("gem-client"), "{journal}");
    for (label, text) in &seen {
        assert!(
            !text.contains(QUERY_KEY),
            "the query key is in {label}: {text}"
        );
        assert!(
            !text.contains("QUERYSWEEP"),
            "part of the key is in {label}: {text}"
        );
    }
    let _ = ADMIN_KEY;
}
