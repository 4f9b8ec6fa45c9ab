//! Hostile input (issue 26, contract "Hostile input and bounds"): the real binary against a
//! hostile upstream that echoes the key it was sent everywhere it can (headers, error bodies,
//! SSE error events split across writes), sends bodies past every bound and CORS headers of its
//! own; and clients that send huge model names, junk `provider/model` names, idle sockets and
//! stalled bodies. Each test names the finding it covers (s1 … s9).

#![expect(
    clippy::too_many_lines,
    reason = "one hostile scenario per test, step by step"
)]
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::reliability_support::{journal_envelopes, raw_exchange, raw_status, sigterm};
use crate::support::{admin_journal_all, admin_text, wait_ready, ADMIN_KEY, CLIENT_KEY};

/// The keys the node sends the hostile upstream, one per connection.
fn key_of(connection: &str) -> String {
    format!("sk-hostile-{connection}-Zx81KqP0w9vB")
}

const CONNECTIONS: [(&str, &str); 4] = [
    ("oa-1", "openai"),
    ("oa-2", "openai"),
    ("an-1", "anthropic"),
    ("an-2", "anthropic"),
];

/// What the hostile upstream saw: each request's headers.
#[derive(Clone, Default)]
struct Seen {
    headers: Arc<Mutex<Vec<HeaderMap>>>,
}

/// The key a request to the upstream carried.
fn presented_key(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .unwrap_or("")
        .to_string()
}

fn chat_completion(model: &str, padding: usize) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        "padding": "a".repeat(padding),
    })
    .to_string()
}

/// Sends `parts` as the body, one write each, a little apart (so the node reads them apart).
fn dribbled(parts: Vec<Vec<u8>>) -> Body {
    let stream = futures_util::stream::unfold(parts.into_iter(), |mut parts| async move {
        let part = parts.next()?;
        tokio::time::sleep(Duration::from_millis(15)).await;
        Some((Ok::<Bytes, std::io::Error>(Bytes::from(part)), parts))
    });
    Body::from_stream(stream)
}

/// Splits `text` into two writes in the middle of `key`.
fn split_in_key(text: &str, key: &str) -> Vec<Vec<u8>> {
    let at = text.find(key).unwrap() + key.len() / 2;
    vec![
        text.as_bytes()[..at].to_vec(),
        text.as_bytes()[at..].to_vec(),
    ]
}

async fn hostile(State(seen): State<Seen>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    seen.headers.lock().unwrap().push(parts.headers.clone());
    let key = presented_key(&parts.headers);
    let body = body.collect().await.unwrap().to_bytes();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = request["model"].as_str().unwrap_or("").to_string();
    let stream = request["stream"] == true;
    let anthropic = parts.uri.path().ends_with("/messages");
    let mut response = match model.as_str() {
        "error-echo" => {
            let mut response = Response::new(Body::from(
                json!({"error": {"message": format!("Incorrect API key provided: {key}"), "type": "invalid_request_error", "code": "invalid_api_key"}}).to_string(),
            ));
            *response.status_mut() = StatusCode::UNAUTHORIZED;
            response
        }
        "huge" => Response::new(Body::from(vec![b' '; 65 * 1024 * 1024])),
        "big" => Response::new(Body::from(chat_completion(&model, 40 * 1024 * 1024))),
        "long-line" if stream => {
            let line = format!("data: {{\"x\":\"{}\"}}\n\n", "a".repeat(2 * 1024 * 1024));
            let mut response = Response::new(Body::from(line));
            response.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("text/event-stream"),
            );
            response
        }
        _ if stream && anthropic => {
            let text = format!(
                "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_1\",\"usage\":{{\"input_tokens\":3,\"output_tokens\":1}}}}}}\n\n\
                 event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"hi\"}}}}\n\n\
                 event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"overloaded for key {key}\"}}}}\n\n"
            );
            let mut parts = split_in_key(&text, &key);
            // The content goes first, in its own write, so the stream commits before the error.
            let content_end = text.find("event: error").unwrap();
            let first = parts[0].split_off(content_end);
            parts.insert(1, first);
            let mut response = Response::new(dribbled(parts));
            response.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("text/event-stream"),
            );
            response
        }
        _ if stream => {
            let text = format!(
                "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"hi\"}}}}]}}\n\n\
                 data: {{\"error\":{{\"message\":\"Incorrect API key provided: {key}\",\"type\":\"invalid_request_error\"}}}}\n\n"
            );
            let mut parts = split_in_key(&text, &key);
            let content_end = text.find("data: {\"error\"").unwrap();
            let first = parts[0].split_off(content_end);
            parts.insert(1, first);
            let mut response = Response::new(dribbled(parts));
            response.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("text/event-stream"),
            );
            response
        }
        _ if anthropic => Response::new(Body::from(
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                   "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 3, "output_tokens": 1}})
            .to_string(),
        )),
        _ => Response::new(Body::from(chat_completion(&model, 0))),
    };
    let headers = response.headers_mut();
    if !headers.contains_key("content-type") {
        headers.insert(
            "content-type",
            http::HeaderValue::from_static("application/json"),
        );
    }
    // Every header it can echo the key in, and CORS of its own.
    if let Ok(value) = http::HeaderValue::from_str(&key) {
        headers.insert("x-request-id", value.clone());
        headers.insert("x-echo-key", value);
    }
    headers.insert(
        "access-control-allow-origin",
        http::HeaderValue::from_static("*"),
    );
    headers.insert(
        "access-control-allow-credentials",
        http::HeaderValue::from_static("true"),
    );
    headers.insert("x-powered-by", http::HeaderValue::from_static("Express"));
    response
}

async fn start_hostile() -> (String, Seen) {
    let seen = Seen::default();
    let app = axum::Router::new()
        .fallback(hostile)
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, seen)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real binary on a fixed port in front of `upstream`, with `server_extra` in `[server]`.
struct Node {
    child: Child,
    base: String,
    addr: String,
    dir: tempfile::TempDir,
    config: PathBuf,
    log: PathBuf,
}

impl Node {
    async fn start(upstream: &str, server_extra: &str) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut text = format!(
            r#"
[server]
listen = "127.0.0.1:{port}"
api_keys = ["{CLIENT_KEY}"]
admin_key = "{ADMIN_KEY}"
# Long enough for s8's eight 40 MiB answers, two at a time, in a debug build on a busy
# machine: a 504 there would say the machine was slow, not that the bound failed.
request_timeout_ms = 120000
shutdown_grace_ms = 1000
{server_extra}

[journal]
path = "{journal}"
flush_every_ms = 10

[[providers]]
name = "openai"
format = "openai"
base_url = "{upstream}/v1"

[[providers]]
name = "anthropic"
format = "anthropic"
base_url = "{upstream}/v1"
"#,
            journal = dir.path().join("journal").display()
        );
        for (id, provider) in CONNECTIONS {
            text.push_str(&format!(
                "\n[[connections]]\nid = \"{id}\"\nprovider = \"{provider}\"\napi_key = \"{}\"\n",
                key_of(id)
            ));
        }
        text.push_str(
            r#"
[[combos]]
name = "team"
targets = [{ connection = "oa-1", model = "gpt-4o-mini" }, { connection = "oa-2", model = "gpt-4o-mini" }]

[[combos]]
name = "claude"
targets = [{ connection = "an-1", model = "claude-sonnet-4-5" }, { connection = "an-2", model = "claude-sonnet-4-5" }]
"#,
        );
        let config = dir.path().join("quotaroute.toml");
        std::fs::write(&config, text).unwrap();
        let log = dir.path().join("node.log");
        let child = Command::new(env!("CARGO_BIN_EXE_quotaroute"))
            .args(["serve", "--config"])
            .arg(&config)
            .env("RUST_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        let addr = format!("127.0.0.1:{port}");
        let base = format!("http://{addr}");
        wait_ready(&reqwest::Client::new(), &base).await;
        Node {
            child,
            base,
            addr,
            dir,
            config,
            log,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A `/proc/<pid>/status` field in kB (`VmRSS`, `VmHWM`).
    fn status_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{field}:")))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse().ok())
            .unwrap()
    }

    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(|dir| dir.count())
            .unwrap_or(0)
    }

    fn journal_bytes(&self) -> u64 {
        fn size(path: &Path) -> u64 {
            std::fs::read_dir(path)
                .map(|dir| {
                    dir.flatten()
                        .map(|entry| {
                            let meta = entry.metadata().unwrap();
                            if meta.is_dir() {
                                size(&entry.path())
                            } else {
                                meta.len()
                            }
                        })
                        .sum()
                })
                .unwrap_or(0)
        }
        size(&self.dir.path().join("journal"))
    }

    /// Stops the node (SIGTERM) and returns its log.
    fn stop(mut self) -> (String, tempfile::TempDir) {
        sigterm(&self.child);
        let _ = self.child.wait();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        (log, dir)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

async fn chat(client: &reqwest::Client, base: &str, body: Value) -> reqwest::Response {
    client
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// Every key the node holds for the hostile upstream must be nowhere in `text`.
fn assert_no_key(what: &str, text: &str) {
    for (id, _) in CONNECTIONS {
        let key = key_of(id);
        assert!(
            !text.contains(&key),
            "{what} holds the key of {id}:\n{text}"
        );
        // Half a key is a leak too (a split that was not caught).
        assert!(
            !text.contains(&key[..key.len() / 2 + 4]),
            "{what} holds part of the key of {id}"
        );
    }
}

fn headers_text(headers: &HeaderMap) -> String {
    headers
        .iter()
        .map(|(name, value)| format!("{name}: {}\n", String::from_utf8_lossy(value.as_bytes())))
        .collect()
}

/// s1: a 0.9 MB model name is refused at the edge (400 `invalid_model`), never journaled or
/// echoed: 200 of them leave the journal and the memory where 200 ordinary requests left them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s1_huge_model_names_are_refused_and_cost_nothing() {
    let (upstream, _seen) = start_hostile().await;
    let node = Node::start(&upstream, "").await;
    let client = client();
    // Ordinary requests of the same size: a long prompt and a normal name.
    let huge = "m".repeat(900 * 1024);
    for _ in 0..200 {
        let body = json!({"model": "team", "messages": [{"role": "user", "content": huge}]});
        let response = chat(&client, &node.base, body).await;
        assert_eq!(response.status(), 200);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (journal_before, rss_before) = (node.journal_bytes(), node.status_kb("VmRSS"));
    for _ in 0..200 {
        let response = chat(&client, &node.base, json!({"model": huge, "messages": []})).await;
        assert_eq!(response.status(), 400);
        assert!(response.headers().get("x-quotaroute-model").is_none());
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_model");
        assert!(
            body["error"]["message"].as_str().unwrap().len() < 200,
            "the name is not echoed"
        );
    }
    // Control characters are refused the same way, on both formats.
    let response = chat(
        &client,
        &node.base,
        json!({"model": "team\r\nx-evil: 1", "messages": []}),
    )
    .await;
    assert_eq!(response.status(), 400);
    let response = client
        .post(format!("{}/v1/messages", node.base))
        .header("x-api-key", CLIENT_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "m".repeat(257), "max_tokens": 1, "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["code"], "invalid_model");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (journal_after, rss_after) = (node.journal_bytes(), node.status_kb("VmRSS"));
    eprintln!(
        "journal {journal_before} -> {journal_after} bytes; RSS {rss_before} -> {rss_after} kB"
    );
    assert!(
        journal_after <= journal_before + journal_before / 20,
        "journal grew {journal_before} -> {journal_after}"
    );
    assert!(
        rss_after <= rss_before + rss_before / 20,
        "RSS grew {rss_before} -> {rss_after} kB"
    );
    let journal = admin_journal_all(&client, &node.base).await;
    assert!(!journal.contains("mmmmmmmmmmmmmmmm"));
}

/// s2, s5, s9 and the secrets sweep: the hostile upstream echoes the key in every header it
/// sends, in error bodies, and in SSE error events after the stream began (split across its
/// writes, OpenAI and Anthropic); none of it reaches a client, a log line, the journal or an
/// admin answer. Its CORS and `X-Powered-By` stay behind; the client's `api-key` never goes up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_s5_s9_a_key_echoing_upstream_leaks_nothing() {
    let (upstream, seen) = start_hostile().await;
    let node = Node::start(&upstream, "").await;
    let client = client();
    let mut everything = String::new();

    // A success: the key is in its `x-request-id` and another header.
    let response = client
        .post(format!("{}/v1/chat/completions", node.base))
        .bearer_auth(CLIENT_KEY)
        .header("api-key", "sk-client-azure-style-key-000")
        .header("origin", "https://evil.example")
        .json(&json!({"model": "team", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["x-quotaroute-upstream-request-id"], "***");
    assert_eq!(headers["x-echo-key"], "***");
    for name in [
        "access-control-allow-origin",
        "access-control-allow-credentials",
        "x-powered-by",
    ] {
        assert!(headers.get(name).is_none(), "{name} reached the client");
    }
    everything += &headers_text(&headers);
    everything += &response.text().await.unwrap();
    let upstream_saw = seen.headers.lock().unwrap().clone();
    assert!(upstream_saw.iter().all(|h| h.get("api-key").is_none()));

    // Streams whose error event after content echoes the key, split mid-key.
    for _ in 0..4 {
        let response = chat(
            &client,
            &node.base,
            json!({"model": "team", "stream": true, "messages": []}),
        )
        .await;
        assert_eq!(response.status(), 200);
        everything += &headers_text(response.headers());
        let text = response.text().await.unwrap();
        assert!(text.contains("\"hi\""), "{text}");
        assert!(text.contains("Incorrect API key provided: ***"), "{text}");
        everything += &text;
        clear(&client, &node, &["oa-1", "oa-2"]).await;
        let response = client
            .post(format!("{}/v1/messages", node.base))
            .header("x-api-key", CLIENT_KEY)
            .header("anthropic-version", "2023-06-01")
            .json(&json!({"model": "claude", "stream": true, "max_tokens": 5, "messages": []}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        everything += &headers_text(response.headers());
        let text = response.text().await.unwrap();
        assert!(text.contains("event: error"), "{text}");
        assert!(text.contains("overloaded for key ***"), "{text}");
        everything += &text;
        clear(&client, &node, &["an-1", "an-2"]).await;
    }
    // An error body echoing the key, passed through.
    let response = chat(
        &client,
        &node.base,
        json!({"model": "openai/error-echo", "messages": []}),
    )
    .await;
    // 401 passed through, or 502 once both keys said it (each is then disabled).
    assert!([401, 502].contains(&response.status().as_u16()));
    everything += &headers_text(response.headers());
    everything += &response.text().await.unwrap();

    assert_no_key("what clients got", &everything);

    for path in [
        "/admin/state",
        "/admin/lockouts",
        "/metrics",
        "/admin/journal?since_seq=0&limit=10000",
    ] {
        assert_no_key(path, &admin_text(&client, &node.base, path).await);
    }
    let (log, dir) = node.stop();
    assert!(log.contains("upstream attempt"), "debug logging was on");
    // Each attempt's line names the client (its id, never its key).
    for line in log.lines().filter(|line| line.contains("upstream attempt")) {
        assert!(
            line.contains("client") && line.contains("default"),
            "{line}"
        );
    }
    assert_no_key("the log", &log);
    let journal: String = journal_envelopes(&dir.path().join("journal"))
        .iter()
        .map(|envelope| format!("{envelope:?}\n"))
        .collect();
    assert!(!journal.is_empty());
    assert_no_key("the journal", &journal);
}

/// s3: a flood of junk `provider/model` names cannot crowd out a real one: the implicit combos
/// are a bounded LRU, so `openai/gpt-4o-mini` routes after 3 × the table's size in junk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_junk_provider_model_names_never_lock_out_real_ones() {
    let (upstream, _seen) = start_hostile().await;
    let node = Node::start(&upstream, "max_implicit_combos = 32").await;
    let client = client();
    for n in 0..96 {
        let provider = if n % 2 == 0 { "openai" } else { "anthropic" };
        let path = if n % 2 == 0 {
            "/v1/chat/completions"
        } else {
            "/v1/messages"
        };
        let response = client
            .post(format!("{}{path}", node.base))
            .bearer_auth(CLIENT_KEY)
            .header("anthropic-version", "2023-06-01")
            .json(
                &json!({"model": format!("{provider}/junk-{n}"), "max_tokens": 1, "messages": []}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "junk {n}");
    }
    let state: Value =
        serde_json::from_str(&admin_text(&client, &node.base, "/admin/state").await).unwrap();
    let implicit = state["combos"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"].as_str().unwrap().contains('/'))
        .count();
    assert!(implicit <= 32, "{implicit} implicit combos kept");
    for model in ["openai/gpt-4o-mini", "openai/junk-0", "team"] {
        let response = chat(&client, &node.base, json!({"model": model, "messages": []})).await;
        assert_eq!(response.status(), 200, "{model}");
    }
}

/// Opens `count` sockets to `addr` from a child process (so this process's open-files limit
/// does not bound the flood), holds them `hold_ms`, and says how many the server closed.
fn idle_flood(addr: &str, count: usize, hold_ms: u64) -> Child {
    let script = format!(
        r#"
import socket, time, select, resource
# Each flood may hold as many sockets as its open-files hard limit allows.
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
except (ValueError, OSError):
    hard = soft
socks = []
for _ in range(min({count}, hard - 64)):
    try:
        s = socket.create_connection(("{host}", {port}), timeout=3)
        s.setblocking(False)
        socks.append(s)
    except OSError:
        pass
print("open", len(socks), flush=True)
poller = select.poll()
by_fd = {{}}
for s in socks:
    poller.register(s, select.POLLIN | select.POLLHUP | select.POLLERR)
    by_fd[s.fileno()] = s
closed = set()
deadline = time.time() + {hold_s}
while time.time() < deadline and len(closed) < len(socks):
    for fd, _ in poller.poll(50):
        try:
            gone = by_fd[fd].recv(1) == b""
        except OSError:
            gone = True
        if gone and fd not in closed:
            closed.add(fd)
            poller.unregister(fd)
print("closed", len(closed), flush=True)
"#,
        host = addr.split(':').next().unwrap(),
        port = addr.split(':').nth(1).unwrap(),
        hold_s = hold_ms as f64 / 1000.0,
    );
    Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A flood's process, killed if the test ends early.
struct Flood(Child);

impl Drop for Flood {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// s4: 20,000 sockets that send nothing (no key needed) do not take the node down: past
/// `max_connections` newcomers are closed at once, a client already connected is answered
/// within 100 ms throughout, the idle ones are closed after `header_timeout_ms`, and the node
/// answers new clients again. A body that stalls past `body_timeout_ms` is 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_idle_sockets_and_stalled_bodies_are_closed() {
    let (upstream, _seen) = start_hostile().await;
    let node = Node::start(
        &upstream,
        "header_timeout_ms = 2000\nbody_timeout_ms = 800\nmax_connections = 1024",
    )
    .await;
    let fds_before = node.open_fds();
    // A client with a pooled keep-alive connection, opened before the flood.
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let ping = || {
        chat(
            &client,
            &node.base,
            json!({"model": "team", "messages": []}),
        )
    };
    assert_eq!(ping().await.status(), 200);

    let mut floods: Vec<Flood> = (0..2)
        .map(|_| Flood(idle_flood(&node.addr, 10_000, 5_000)))
        .collect();
    // Each flood says `open N` once its sockets are connected, `closed N` when it ends.
    let (opened_tx, opened_rx) = std::sync::mpsc::channel::<usize>();
    let readers: Vec<_> = floods
        .iter_mut()
        .map(|flood| {
            let stdout = flood.0.stdout.take().unwrap();
            let opened_tx = opened_tx.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                let mut lines = std::io::BufReader::new(stdout).lines();
                let number = |line: Option<std::io::Result<String>>| -> usize {
                    line.and_then(Result::ok)
                        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0)
                };
                let opened = number(lines.next());
                let _ = opened_tx.send(opened);
                (opened, number(lines.next()))
            })
        })
        .collect();
    let mut answers: Vec<Duration> = Vec::new();
    let mut most_fds = 0;
    let flooding = Instant::now();
    // Served throughout the flood, and for a while after every socket is open.
    let mut all_open_at: Option<Instant> = None;
    let mut floods_open = 0;
    while all_open_at.is_none_or(|at| at.elapsed() < Duration::from_millis(500)) {
        assert!(
            flooding.elapsed() < Duration::from_secs(30),
            "the flood never finished"
        );
        let sent = Instant::now();
        assert_eq!(ping().await.status(), 200);
        answers.push(sent.elapsed());
        most_fds = most_fds.max(node.open_fds());
        floods_open += opened_rx.try_iter().count();
        if all_open_at.is_none() && floods_open == 2 {
            all_open_at = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all_open_at = all_open_at.unwrap();
    answers.sort();
    let p90 = answers[answers.len() * 9 / 10];
    let slowest = answers[answers.len() - 1];
    eprintln!(
        "flood open after {:?}: {} answers, p90 {p90:?}, slowest {slowest:?}, most fds {most_fds} (before {fds_before})",
        all_open_at - flooding,
        answers.len()
    );
    // The node (a debug build here) shares 2 cores with the two flooding processes.
    assert!(p90 < Duration::from_millis(100), "p90 {p90:?}");
    assert!(slowest < Duration::from_secs(1), "slowest {slowest:?}");
    assert!(most_fds < fds_before + 1024 + 64, "{most_fds} fds open");
    // After the header timeout the idle sockets are gone and newcomers are served.
    tokio::time::sleep(
        (all_open_at + Duration::from_millis(2700)).saturating_duration_since(Instant::now()),
    )
    .await;
    assert!(node.open_fds() < fds_before + 64, "{} fds", node.open_fds());
    let fresh = reqwest::Client::builder().no_proxy().build().unwrap();
    let sent = Instant::now();
    let response = chat(&fresh, &node.base, json!({"model": "team", "messages": []})).await;
    assert_eq!(response.status(), 200);
    assert!(
        sent.elapsed() < Duration::from_millis(100),
        "{:?}",
        sent.elapsed()
    );
    let mut opened_total = 0;
    for (reader, mut flood) in readers.into_iter().zip(floods) {
        let (opened, closed) = reader.join().unwrap();
        let _ = flood.0.wait();
        eprintln!("flood: {opened} sockets connected, {closed} closed by the node");
        assert_eq!(closed, opened, "every idle socket was closed");
        opened_total += opened;
    }
    assert!(opened_total >= 10_000, "{opened_total}");

    // A keep-alive connection left idle after its answer closes after header_timeout_ms.
    let mut idle = tokio::net::TcpStream::connect(&node.addr).await.unwrap();
    let body = r#"{"model":"team","messages":[]}"#;
    idle.write_all(
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {CLIENT_KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let answered = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(6), idle.read_to_end(&mut answer)).await;
    assert!(
        read.is_ok(),
        "an idle keep-alive connection was never closed"
    );
    assert_eq!(raw_status(&answer), Some(200));
    assert!(
        answered.elapsed() >= Duration::from_millis(1800),
        "{:?}",
        answered.elapsed()
    );

    // A body that stops halfway: 408 after body_timeout_ms, and the connection closes.
    let mut stream = tokio::net::TcpStream::connect(&node.addr).await.unwrap();
    stream
        .write_all(
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {CLIENT_KEY}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"model\":"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let sent = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection was not closed");
    let text = String::from_utf8_lossy(&answer);
    assert_eq!(raw_status(&answer), Some(408), "{text}");
    assert!(text.contains("\"request_timeout\""), "{text}");
    assert!(sent.elapsed() >= Duration::from_millis(700));
}

/// s6: credentials in a `base_url` are a config error that names the key and prints neither the
/// user, the password nor the query; the reload answer says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_credentials_in_base_url_are_refused_without_printing_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    for url in [
        "https://alice:pw-Secret-123@api.example.com/v1",
        "https://api.example.com/v1?key=AIzaSecret123456",
    ] {
        std::fs::write(
            &config,
            format!(
                "[server]\napi_keys = [\"k\"]\n[[providers]]\nname = \"p\"\nformat = \"openai\"\nbase_url = \"{url}\"\n[[connections]]\nid = \"c\"\nprovider = \"p\"\napi_key = \"x\"\n"
            ),
        )
        .unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_quotaroute"))
            .args(["check", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        let text = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(text.contains("providers[0].base_url"), "{text}");
        for secret in ["alice", "pw-Secret-123", "AIzaSecret123456"] {
            assert!(!text.contains(secret), "{secret} printed: {text}");
        }
    }
    // The same through a reload of a running node.
    let (upstream, _seen) = start_hostile().await;
    let node = Node::start(&upstream, "").await;
    let good = std::fs::read_to_string(&node.config).unwrap();
    std::fs::write(
        &node.config,
        good.replace(
            &format!("base_url = \"{upstream}/v1\""),
            &format!(
                "base_url = \"{}\"",
                upstream.replace("http://", "http://bob:pw-Secret-456@")
            ),
        ),
    )
    .unwrap();
    let response = client()
        .post(format!("{}/admin/reload", node.base))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let text = response.text().await.unwrap();
    assert!(text.contains("base_url"), "{text}");
    assert!(
        !text.contains("pw-Secret-456") && !text.contains("bob"),
        "{text}"
    );
}

/// s7: `/admin/journal` pages by default (1,000) and never returns more than 10,000 events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_admin_journal_pages_are_bounded() {
    let (upstream, _seen) = start_hostile().await;
    let node = Node::start(&upstream, "").await;
    let client = client();
    // Enough requests for more than 10,000 events (each success journals at least one).
    let mut total = 0;
    while total <= 10_050 {
        let batch: Vec<_> = (0..64)
            .map(|_| {
                chat(
                    &client,
                    &node.base,
                    json!({"model": "team", "messages": []}),
                )
            })
            .collect();
        for response in futures_util::future::join_all(batch).await {
            assert_eq!(response.status(), 200);
        }
        let last = admin_text(
            &client,
            &node.base,
            "/admin/journal?since_seq=0&limit=10000",
        )
        .await
        .lines()
        .count();
        total = if last == 10_000 {
            admin_journal_all(&client, &node.base).await.lines().count()
        } else {
            last
        };
    }
    let lines = |path: &'static str| {
        let client = client.clone();
        let base = node.base.clone();
        async move { admin_text(&client, &base, path).await.lines().count() }
    };
    assert_eq!(lines("/admin/journal").await, 1_000);
    assert_eq!(lines("/admin/journal?since_seq=0&limit=7").await, 7);
    assert_eq!(
        lines("/admin/journal?since_seq=0&limit=1000000").await,
        10_000
    );
    let response = client
        .get(format!("{}/admin/journal?limit=10000", node.base))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap();
    // Streamed: no length known in advance.
    assert!(response.headers().get("content-length").is_none());
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
}

/// Clears the openai keys' cooldowns (a server error cools them).
async fn clear_openai(client: &reqwest::Client, node: &Node) {
    clear(client, node, &["oa-1", "oa-2"]).await;
}

/// Clears what the connections learned (an error after commit cools or disables them).
async fn clear(client: &reqwest::Client, node: &Node, ids: &[&str]) {
    for id in ids {
        let response = client
            .post(format!("{}/admin/connections/{id}/clear", node.base))
            .bearer_auth(ADMIN_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
}

/// s8: an upstream body over 64 MiB is 502 `upstream_too_large` (a server error that fails
/// over); an SSE line over 1 MiB is an `upstream_error` that says so; several large answers
/// at once stay within `max_upstream_buffer_bytes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s8_upstream_bodies_past_their_bounds() {
    let (upstream, _seen) = start_hostile().await;
    let node = Node::start(&upstream, "max_upstream_buffer_bytes = 100000000").await;
    // Eight 40 MiB answers in a debug build take 16–29 s on a busy 2-core machine: the client
    // waits longer than the others' 30 s, so only the bounds below decide the test.
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap();
    let response = chat(
        &client,
        &node.base,
        json!({"model": "openai/huge", "messages": []}),
    )
    .await;
    assert_eq!(response.status(), 502);
    assert_eq!(response.headers()["x-quotaroute-attempts"], "2");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_too_large", "{body}");
    clear_openai(&client, &node).await;

    let response = chat(
        &client,
        &node.base,
        json!({"model": "openai/long-line", "stream": true, "messages": []}),
    )
    .await;
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_error", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds"),
        "{body}"
    );

    clear_openai(&client, &node).await;
    // Eight 40 MiB answers at once: the shared bound (~95 MiB) lets two through at a time.
    let rss_before = node.status_kb("VmRSS");
    let batch: Vec<_> = (0..8)
        .map(|_| {
            chat(
                &client,
                &node.base,
                json!({"model": "openai/big", "messages": []}),
            )
        })
        .collect();
    let mut statuses = BTreeMap::new();
    for response in futures_util::future::join_all(batch).await {
        let status = response.status().as_u16();
        let _ = response.bytes().await;
        *statuses.entry(status).or_insert(0) += 1;
    }
    let peak = node.status_kb("VmHWM");
    eprintln!("statuses {statuses:?}; RSS {rss_before} kB, peak {peak} kB");
    assert!(
        statuses.get(&200).copied().unwrap_or(0) >= 1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.keys().filter(|s| **s != 200 && **s != 502).count(),
        0,
        "{statuses:?}"
    );
    // Before the bound, 8 × 63 MiB took RSS from 486 to 957 MB.
    assert!(peak < rss_before + 420 * 1024, "peak {peak} kB");
}

/// s9: client-facing errors name the provider and the class, not the upstream's address; a 405
/// and a bad admin path answer JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_router_errors_are_json_and_name_no_address() {
    // An upstream that is not there: every try fails to connect.
    let gone = format!("http://127.0.0.1:{}", free_port());
    let node = Node::start(&gone, "").await;
    let client = client();
    let response = chat(
        &client,
        &node.base,
        json!({"model": "team", "messages": []}),
    )
    .await;
    assert_eq!(response.status(), 502);
    let text = response.text().await.unwrap();
    let port = gone.rsplit(':').next().unwrap();
    assert!(
        !text.contains(port) && !text.contains("127.0.0.1"),
        "{text}"
    );
    assert!(text.contains("openai"), "{text}");

    let response = client
        .get(format!("{}/v1/chat/completions", node.base))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "method_not_allowed");

    let response = client
        .post(format!("{}/admin/connections/%FF%FE/clear", node.base))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_request", "{body}");

    let (raw, _) = raw_exchange(
        &node.addr,
        b"PATCH /v1/messages HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        Duration::from_secs(2),
    )
    .await;
    let raw = String::from_utf8_lossy(&raw);
    assert!(raw.starts_with("HTTP/1.1 405"), "{raw}");
    assert!(raw.contains("\"type\":\"error\""), "{raw}");
}
