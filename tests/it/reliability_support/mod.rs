//! Helpers for the reliability tests (issue 7): the node binary as a child process on a fixed
//! port, raw TCP requests for malformed HTTP, and the admin view a journal replay would give.
//! Builds on `tests/support` (the in-process harness), which it must not change.

#![expect(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "test support: not every test calls every helper, and a failed step fails loudly"
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub use crate::support::wait_ready;
use quotaroute_actors::{recover_state, AdminState, Topology};
use quotaroute_journal::{Envelope, Journal, SledJournal, SledOptions};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Starts `quotaroute serve` on `config`, stderr to `stderr_to` (or nowhere).
pub fn spawn_node(config: &Path, rust_log: &str, stderr_to: Option<&Path>) -> Child {
    let stderr = match stderr_to {
        Some(path) => Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap(),
        ),
        None => Stdio::null(),
    };
    Command::new(env!("CARGO_BIN_EXE_quotaroute"))
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// SIGKILL, then reap.
pub fn kill_9(node: &mut Child) {
    node.kill().unwrap();
    node.wait().unwrap();
}

/// SIGTERM through the `kill` command (no libc dependency in tests).
pub fn sigterm(node: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &node.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Every envelope in a (closed) journal directory, in seq order.
pub fn journal_envelopes(path: &Path) -> Vec<Envelope> {
    let journal = SledJournal::open(path, SledOptions::default()).unwrap();
    journal
        .read_from(0)
        .map(|item| item.expect("no damaged record"))
        .collect()
}

/// The learned part of an admin state, without times that move: breaker phase per provider,
/// disabled reason per connection, and (connection, model, reason) of each lockout.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LearnedView {
    pub breakers: BTreeMap<String, String>,
    pub disabled: BTreeMap<String, String>,
    pub lockouts: BTreeSet<(String, String, String)>,
}

impl LearnedView {
    /// From the JSON of `GET /admin/state`.
    pub fn from_json(state: &Value) -> Self {
        let mut view = LearnedView::default();
        for provider in state["providers"].as_array().unwrap() {
            view.breakers.insert(
                provider["name"].as_str().unwrap().to_string(),
                provider["breaker"].as_str().unwrap().to_string(),
            );
        }
        for connection in state["connections"].as_array().unwrap() {
            let id = connection["id"].as_str().unwrap().to_string();
            if let Some(reason) = connection["disabled"]["reason"].as_str() {
                view.disabled.insert(id.clone(), reason.to_string());
            }
            for lock in connection["lockouts"].as_array().unwrap() {
                view.lockouts.insert((
                    id.clone(),
                    lock["model"].as_str().unwrap().to_string(),
                    lock["reason"].as_str().unwrap().to_string(),
                ));
            }
        }
        view
    }

    /// What a replay of the journal at `path` gives at `now_ms`, built the way the admin API
    /// builds its state (same `AdminState::build`, same serialization).
    pub fn from_replay(path: &Path, topology: &Topology, now_ms: u64) -> Self {
        let journal = SledJournal::open(path, SledOptions::default()).unwrap();
        let (state, _report) = recover_state(&journal);
        let admin = AdminState::build(topology, &state, &HashMap::new(), now_ms);
        Self::from_json(&serde_json::to_value(&admin).unwrap())
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Sends raw bytes on a fresh connection and reads what comes back until the server closes
/// or `wait` passes. Returns the bytes read and whether the server closed the connection.
pub async fn raw_exchange(addr: &str, request: &[u8], wait: Duration) -> (Vec<u8>, bool) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The server may answer (and close) before it has read everything: ignore write errors.
    let _ = stream.write_all(request).await;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Ok(Err(_)) => return (out, true),
            Err(_) => return (out, false),
        }
    }
}

/// The status code of a raw HTTP/1.1 response, if one arrived.
pub fn raw_status(response: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(response);
    let line = text.lines().next()?;
    line.split_whitespace().nth(1)?.parse().ok()
}
