//! Refusals real clients act on (behaviour §7, issues #34, #36 and #50): a client whose month
//! budget is spent is answered 429 `budget_exceeded` with a `Retry-After` of weeks, a pool whose
//! every account is locked for an hour 429 `all_targets_locked`, and so is the first request to
//! meet a pool whose every account answers 429 for an hour (`Retry-After`, reset headers only,
//! or both: `node_spent_pool`), though it was the upstreams that said so. Each real client — the
//! official SDKs (openai-python, anthropic-python, openai-node, @anthropic-ai/sdk, with their
//! default retries), Claude Code (`claude -p`) and Codex (`codex exec`) — must stop at once
//! (one refused request, bounded wall time) and show the reset time, where before they slept
//! on it or retried. Without the clients installed each test says so and does nothing else.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::node_spent_pool::{spent_pool, HourLong};
use crate::support::clients::*;
use crate::support::*;
use quotaroute_mock::Rule;

const KEY_A: &str = "sk-qr-refused-team-a-secret";

/// Stopping at once: well under the SDKs' backoff and any sleep on `Retry-After`.
const AT_ONCE: Duration = Duration::from_secs(20);

/// A node whose client `id` has spent its month budget (one request crosses it). Each test has
/// its own client id: the node's metrics are the process's, shared by the tests running at once.
async fn spent_client(id: &'static str) -> Harness {
    let harness = Harness::start_editing(|text| {
        text + &format!(
            r#"
[[clients]]
id = "{id}"
key = "{KEY_A}"
budget_usd = 0.001
budget_period = "month"

[[prices]]
model = "gpt-4o-mini"
input = 150.0
output = 600.0

[[prices]]
model = "claude-3-5-haiku"
input = 150.0
output = 600.0
"#
        )
    })
    .await;
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(KEY_A)
        .json(&json!({"model": "team", "messages": [{"role": "user", "content": "spend it"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    harness.settle().await;
    let refused = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(KEY_A)
        .json(&json!({"model": "team", "messages": [{"role": "user", "content": "more"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "x-should-retry"), "false");
    harness
}

/// A node whose every account (both combos, both formats) is locked for an hour by the
/// upstreams' 429s, with `id` a client without limits: the next request is the router's own
/// 429 `all_targets_locked`, not to be retried.
async fn locked_pool(id: &'static str) -> Harness {
    let harness = Harness::start_editing(|text| {
        text + &format!(
            r#"
[[clients]]
id = "{id}"
key = "{KEY_A}"
"#
        )
    })
    .await;
    harness.mock.set_rules(vec![Rule::rate_limited(3_600)]);
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": "team", "messages": [{"role": "user", "content": "lock it"}]}),
        ),
        (
            "/v1/messages",
            json!({"model": "claude", "max_tokens": 8, "messages": [{"role": "user", "content": "lock it"}]}),
        ),
    ] {
        let response = harness
            .client
            .post(harness.url(path))
            .bearer_auth(KEY_A)
            .header("x-api-key", KEY_A)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 429, "{path}");
    }
    harness.settle().await;
    let refused = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(KEY_A)
        .json(&json!({"model": "team", "messages": [{"role": "user", "content": "more"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "x-should-retry"), "false");
    harness
}

/// What is counted to see that a client did not retry: its refusals for the budget, or every
/// request it made (each one of a locked or spent pool is refused).
#[derive(Clone, Copy, Debug)]
enum Refusal {
    Budget,
    LockedPool,
    /// Nothing learned yet: the client's first request meets every account's 429.
    SpentPool(HourLong),
}

impl Refusal {
    async fn count(self, harness: &Harness, id: &str) -> u64 {
        match self {
            Refusal::Budget => budget_refusals(harness, id).await,
            Refusal::LockedPool | Refusal::SpentPool(_) => client_requests(harness, id).await,
        }
    }

    /// Every way an hour-long 429 can reach the client first.
    fn spent_pools() -> impl Iterator<Item = Refusal> {
        HourLong::ALL.into_iter().map(Refusal::SpentPool)
    }
}

/// How many of client `id`'s requests were admitted (`quotaroute_client_requests_total`).
async fn client_requests(harness: &Harness, id: &str) -> u64 {
    let metrics = harness.admin_text("/metrics").await;
    metrics
        .lines()
        .find(|line| {
            line.starts_with("quotaroute_client_requests_total{")
                && line.contains(&format!("client=\"{id}\""))
        })
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

/// How many of client `id`'s requests the node refused for its budget so far (`/metrics`).
async fn budget_refusals(harness: &Harness, id: &str) -> u64 {
    let metrics = harness.admin_text("/metrics").await;
    metrics
        .lines()
        .find(|line| {
            line.starts_with("quotaroute_client_limited_total{")
                && line.contains(&format!("client=\"{id}\""))
                && line.contains("limit=\"budget_usd\"")
        })
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

/// Runs `command` against spent client `id` and checks it stopped at once: one refusal (no
/// retry), within [`AT_ONCE`], and what it printed holds each of `shows` (the refusal and the
/// reset time).
async fn stops_at_once(
    harness: &Harness,
    (id, refusal): (&str, Refusal),
    what: &str,
    command: Command,
    shows: &[&str],
) {
    let before = refusal.count(harness, id).await;
    let run = tokio::task::spawn_blocking(move || run_bounded(command, Duration::from_secs(90)))
        .await
        .unwrap();
    let refusals = refusal.count(harness, id).await - before;
    let what = format!("{what} ({refusal:?})");
    eprintln!(
        "{what}: stopped after {:.2?}, {refusals} refused request(s)",
        run.elapsed
    );
    assert!(!run.timed_out, "{what} hung: {}", run.describe());
    assert!(
        run.elapsed < AT_ONCE,
        "{what} took {:.2?}: {}",
        run.elapsed,
        run.describe()
    );
    assert_eq!(refusals, 1, "{what} retried: {}", run.describe());
    let printed = format!("{}\n{}", run.stdout, run.stderr);
    for shown in shows {
        assert!(
            printed.contains(shown),
            "{what} did not show `{shown}`: {}",
            run.describe()
        );
    }
}

/// What a client prints of the router's refusal: the spend against the budget and the reset time.
const SDK_SHOWS: &[&str] = &["of its budget_usd $0.0010", "UTC, in "];

fn sdk_python() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("QUOTAROUTE_SDK_PYTHON") {
        return Some(PathBuf::from(path));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-sdk/bin/python");
    venv.exists().then_some(venv)
}

/// One Python SDK call with the SDK's default retries; prints the error it raised.
fn python_command(python: &PathBuf, base: &str, script: &str) -> Command {
    let mut command = clean_command(python);
    command
        .env("HOME", std::env::temp_dir())
        .env("BASE", base)
        .env("KEY", KEY_A)
        .args(["-c", script]);
    command
}

const OPENAI_PY: &str = r#"
import os, openai
client = openai.OpenAI(base_url=os.environ["BASE"] + "/v1", api_key=os.environ["KEY"])
try:
    client.chat.completions.create(model="team", messages=[{"role": "user", "content": "hi"}])
    print("no error")
except openai.APIStatusError as error:
    print(type(error).__name__, error)
"#;

const ANTHROPIC_PY: &str = r#"
import os, anthropic
client = anthropic.Anthropic(base_url=os.environ["BASE"], api_key=os.environ["KEY"])
try:
    client.messages.create(model="claude", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    print("no error")
except anthropic.APIStatusError as error:
    print(type(error).__name__, error)
"#;

impl Refusal {
    /// A node refusing client `id` this way.
    async fn harness(self, id: &'static str) -> Harness {
        match self {
            Refusal::Budget => spent_client(id).await,
            Refusal::LockedPool => locked_pool(id).await,
            Refusal::SpentPool(form) => spent_pool(form, &client_without_limits(id)).await,
        }
    }

    /// What an SDK or Claude Code prints of the refusal: the reset time in words, and for the
    /// budget the spend against it.
    fn sdk_shows(self) -> &'static [&'static str] {
        match self {
            Refusal::Budget => SDK_SHOWS,
            Refusal::LockedPool => &["every account of this model is", "UTC, in "],
            Refusal::SpentPool(_) => &["every account of this model is", "UTC, in 1 h"],
        }
    }
}

/// Client `id` with key [`KEY_A`] and no limits.
fn client_without_limits(id: &str) -> String {
    format!("\n[[clients]]\nid = \"{id}\"\nkey = \"{KEY_A}\"\n")
}

async fn openai_python(id: &'static str, refusal: Refusal) {
    let Some(python) = sdk_python() else {
        return not_installed("the Python SDK venv", ".ci/run creates .venv-sdk");
    };
    let harness = refusal.harness(id).await;
    let command = python_command(&python, &harness.base, OPENAI_PY);
    stops_at_once(
        &harness,
        (id, refusal),
        "openai-python",
        command,
        refusal.sdk_shows(),
    )
    .await;
}

async fn anthropic_python(id: &'static str, refusal: Refusal) {
    let Some(python) = sdk_python() else {
        return not_installed("the Python SDK venv", ".ci/run creates .venv-sdk");
    };
    let harness = refusal.harness(id).await;
    let command = python_command(&python, &harness.base, ANTHROPIC_PY);
    stops_at_once(
        &harness,
        (id, refusal),
        "anthropic-python",
        command,
        refusal.sdk_shows(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_stops_at_once_on_a_spent_budget() {
    openai_python("openai-python", Refusal::Budget).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_stops_at_once_on_a_pool_locked_for_an_hour() {
    openai_python("openai-python-locked", Refusal::LockedPool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_stops_at_once_on_a_spent_pool_it_meets_first() {
    for refusal in Refusal::spent_pools() {
        openai_python("openai-python-spent", refusal).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_python_stops_at_once_on_a_spent_budget() {
    anthropic_python("anthropic-python", Refusal::Budget).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_python_stops_at_once_on_a_pool_locked_for_an_hour() {
    anthropic_python("anthropic-python-locked", Refusal::LockedPool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_python_stops_at_once_on_a_spent_pool_it_meets_first() {
    for refusal in Refusal::spent_pools() {
        anthropic_python("anthropic-python-spent", refusal).await;
    }
}

fn node_modules() -> PathBuf {
    clients_dir().join("node_modules")
}

const INSTALL: &str = "npm ci --ignore-scripts --prefix tests/clients";

/// One Node SDK call with the SDK's default retries (an ES module run in `tests/clients`).
fn node_command(base: &str, script: &str) -> Command {
    let mut command = clean_command("node");
    command
        .current_dir(clients_dir())
        .env("BASE", base)
        .env("KEY", KEY_A)
        .args(["--input-type=module", "-e", script]);
    command
}

const OPENAI_NODE: &str = r#"
import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: process.env.KEY });
try {
  await client.chat.completions.create({ model: "team", messages: [{ role: "user", content: "hi" }] });
  console.log("no error");
} catch (error) {
  console.log(error.constructor.name, error.message);
}
"#;

const ANTHROPIC_NODE: &str = r#"
import Anthropic from "@anthropic-ai/sdk";
const client = new Anthropic({ baseURL: process.env.BASE, apiKey: process.env.KEY });
try {
  await client.messages.create({ model: "claude", max_tokens: 8, messages: [{ role: "user", content: "hi" }] });
  console.log("no error");
} catch (error) {
  console.log(error.constructor.name, error.message);
}
"#;

async fn openai_node(id: &'static str, refusal: Refusal) {
    if !node_modules().join("openai").is_dir() {
        return not_installed("openai-node", INSTALL);
    }
    let harness = refusal.harness(id).await;
    let command = node_command(&harness.base, OPENAI_NODE);
    stops_at_once(
        &harness,
        (id, refusal),
        "openai-node",
        command,
        refusal.sdk_shows(),
    )
    .await;
}

async fn anthropic_node(id: &'static str, refusal: Refusal) {
    if !node_modules().join("@anthropic-ai/sdk").is_dir() {
        return not_installed("@anthropic-ai/sdk", INSTALL);
    }
    let harness = refusal.harness(id).await;
    let command = node_command(&harness.base, ANTHROPIC_NODE);
    stops_at_once(
        &harness,
        (id, refusal),
        "@anthropic-ai/sdk",
        command,
        refusal.sdk_shows(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_node_stops_at_once_on_a_spent_budget() {
    openai_node("openai-node", Refusal::Budget).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_node_stops_at_once_on_a_pool_locked_for_an_hour() {
    openai_node("openai-node-locked", Refusal::LockedPool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_node_stops_at_once_on_a_spent_pool_it_meets_first() {
    for refusal in Refusal::spent_pools() {
        openai_node("openai-node-spent", refusal).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_node_sdk_stops_at_once_on_a_spent_budget() {
    anthropic_node("anthropic-node", Refusal::Budget).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_node_sdk_stops_at_once_on_a_pool_locked_for_an_hour() {
    anthropic_node("anthropic-node-locked", Refusal::LockedPool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_node_sdk_stops_at_once_on_a_spent_pool_it_meets_first() {
    for refusal in Refusal::spent_pools() {
        anthropic_node("anthropic-node-spent", refusal).await;
    }
}

/// Claude Code's native binary (see `node_clients.rs`).
fn claude_binary() -> Option<PathBuf> {
    let root = node_modules().join("@anthropic-ai");
    [
        "linux-x64",
        "linux-x64-musl",
        "linux-arm64",
        "darwin-arm64",
        "darwin-x64",
    ]
    .iter()
    .map(|p| root.join(format!("claude-code-{p}/claude")))
    .find(|path| path.is_file())
}

async fn claude_code(id: &'static str, refusal: Refusal) {
    let Some(binary) = claude_binary() else {
        return not_installed("Claude Code (@anthropic-ai/claude-code)", INSTALL);
    };
    let harness = refusal.harness(id).await;
    let home = client_home("qr-refused-claude-");
    let mut command = clean_command(binary);
    // Claude Code's own retry settings are left at their defaults.
    command
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .env("ANTHROPIC_BASE_URL", &harness.base)
        .env("ANTHROPIC_API_KEY", KEY_A)
        .env("ANTHROPIC_MODEL", "claude")
        .env("ANTHROPIC_SMALL_FAST_MODEL", "claude")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .args(["-p", "say pong", "--output-format", "json"]);
    stops_at_once(
        &harness,
        (id, refusal),
        "claude -p",
        command,
        refusal.sdk_shows(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_stops_at_once_on_a_spent_budget() {
    claude_code("claude-code", Refusal::Budget).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_stops_at_once_on_a_pool_locked_for_an_hour() {
    claude_code("claude-code-locked", Refusal::LockedPool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_stops_at_once_on_a_spent_pool_it_meets_first() {
    for refusal in Refusal::spent_pools() {
        claude_code("claude-code-spent", refusal).await;
    }
}

async fn codex(id: &'static str, refusal: Refusal) {
    let launcher = node_modules().join("@openai/codex/bin/codex.js");
    if !launcher.is_file() {
        return not_installed("Codex CLI (@openai/codex)", INSTALL);
    }
    let harness = refusal.harness(id).await;
    let home = client_home("qr-refused-codex-");
    let codex_home = home.path().join("codex");
    let work = home.path().join("work");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mut command = clean_command("node");
    command
        .arg(&launcher)
        .current_dir(&work)
        .env("HOME", home.path())
        .env("CODEX_HOME", &codex_home)
        .env("CODEX_API_KEY", KEY_A)
        .env("RUST_LOG", "off")
        .args(["exec", "--json", "--skip-git-repo-check", "--ephemeral"])
        .args(["-s", "danger-full-access", "-m", "team"]);
    for setting in [
        format!("openai_base_url=\"{}/v1\"", harness.base),
        "check_for_update_on_startup=false".to_string(),
        "analytics.enabled=false".to_string(),
        "features.plugins=false".to_string(),
        "features.remote_plugin=false".to_string(),
        "features.apps=false".to_string(),
    ] {
        command.args(["-c", &setting]);
    }
    command.arg("say pong");
    // Codex prints its own words for `usage_limit_reached`, with the reset time it read from
    // `resets_at` ("You've hit your usage limit. Try again at 4:42 PM.").
    stops_at_once(
        &harness,
        (id, refusal),
        "codex exec",
        command,
        &["usage limit", "Try again at"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_stops_at_once_on_a_spent_budget() {
    codex("codex", Refusal::Budget).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_stops_at_once_on_a_pool_locked_for_an_hour() {
    codex("codex-locked", Refusal::LockedPool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_stops_at_once_on_a_spent_pool_it_meets_first() {
    for refusal in Refusal::spent_pools() {
        codex("codex-spent", refusal).await;
    }
}
