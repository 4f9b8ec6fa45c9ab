//! Issue 13: credentials that change while the node runs — a key command that prints a new
//! token each run, a key file rewritten during load, an OAuth token endpoint that rotates
//! refresh tokens, expiry during a stream, a 401 storm that causes exactly one refresh, a
//! hanging command, garbage from the token endpoint — each against the mock on loopback,
//! whose key gate accepts only the newest key and whose token endpoint issues short-lived
//! tokens.
//!
//! The long run of the issue's "done when" (a token that expires every minute, 10 minutes of
//! load) is `long_run_token_expiring_every_minute`, ignored here: run it by hand with
//! `cargo test --test it node_credentials::long_run -- --ignored --nocapture`.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use crate::support;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quotaroute_mock::{Accepted, Fault, KeyGate, MockUpstream, OAuthSettings, Rule};

use quotaroute_actors::{SharedClock, SystemClock};
use serde_json::{json, Value};
use support::*;

/// A node on `standard_config` plus `extra`, against a mock the caller has set up already
/// (so the first credential loads find it ready).
async fn start_node(mock_base: String, mock: MockUpstream, extra: &str) -> Harness {
    let extra = extra.to_string();
    Harness::on_mock(mock_base, mock, |text| text + &extra, Arc::new(SystemClock)).await
}

/// One connection `id` of provider `openai` with `source` (TOML lines), and a combo `rot` of
/// it alone.
fn rotating(id: &str, source: &str) -> String {
    format!(
        "\n[[connections]]\nid = \"{id}\"\nprovider = \"openai\"\n{source}\n\n[[combos]]\nname = \"rot\"\ntargets = [{{ connection = \"{id}\", model = \"gpt-4o-mini\" }}]\n"
    )
}

/// The journaled events of `kind` about `connection`, waiting (on real time, a bounded poll)
/// until there is at least one: what a moved clock set off runs on its own tasks.
async fn wait_for_events(harness: &Harness, kind: &str, connection: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = events(harness, kind, connection).await;
        if !found.is_empty() || Instant::now() > deadline {
            return found;
        }
        tokio::task::yield_now().await;
    }
}

/// Every journaled event of `kind` about `connection`, once the journal is durable.
async fn events(harness: &Harness, kind: &str, connection: &str) -> Vec<Value> {
    let router = harness.node.as_ref().unwrap().app.router().unwrap().clone();
    router.flush().await.unwrap();
    let mut found = Vec::new();
    let mut since = 0;
    loop {
        let page = harness
            .admin_text(&format!("/admin/journal?since_seq={since}&limit=10000"))
            .await;
        let page: Vec<Value> = page
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let Some(last) = page.last() else {
            return found;
        };
        since = last["seq"].as_u64().unwrap() + 1;
        found.extend(
            page.into_iter()
                .filter(|event| event["kind"] == kind && event["connection"] == connection),
        );
    }
}

/// Waits until `connection`'s credential has had its first load (the admin view).
async fn wait_loaded(harness: &Harness, connection: &str) {
    let started = Instant::now();
    loop {
        let state = harness.admin_get("/admin/state").await;
        let loaded =
            state["credentials"].as_array().unwrap().iter().any(|view| {
                view["connection"] == connection && view["generation"].as_u64() >= Some(1)
            });
        if loaded {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{connection} never loaded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn triggers(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| event["trigger"].as_str().unwrap().to_owned())
        .collect()
}

/// What a load saw.
#[derive(Debug, Default)]
struct Tally {
    ok: AtomicU64,
    failures: Mutex<Vec<String>>,
}

impl Tally {
    fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    fn failures(&self) -> Vec<String> {
        self.failures.lock().unwrap().clone()
    }
}

/// `workers` clients in closed loops on combo `model` for `length`, every other request a
/// stream; `during` runs beside them (e.g. rewrites a key file).
async fn load<F: std::future::Future<Output = ()>>(
    harness: &Harness,
    model: &str,
    workers: usize,
    length: Duration,
    during: F,
) -> Arc<Tally> {
    paced_load(harness, model, (workers, Duration::ZERO), length, during).await
}

/// `load` with each client pausing `pace` between requests (a long run that leaves the
/// machine's other work its share).
async fn paced_load<F: std::future::Future<Output = ()>>(
    harness: &Harness,
    model: &str,
    (workers, pace): (usize, Duration),
    length: Duration,
    during: F,
) -> Arc<Tally> {
    let tally = Arc::new(Tally::default());
    let until = Instant::now() + length;
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let (client, url, tally, model) = (
            harness.client.clone(),
            harness.url("/v1/chat/completions"),
            tally.clone(),
            model.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = worker;
            while Instant::now() < until {
                if !pace.is_zero() {
                    tokio::time::sleep(pace).await;
                }
                n += 1;
                let stream = n % 2 == 0;
                let sent = client
                    .post(&url)
                    .bearer_auth(CLIENT_KEY)
                    .json(&json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}))
                    .send()
                    .await;
                let outcome = match sent {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let body = response.text().await.unwrap_or_default();
                        let complete = if stream {
                            body.contains("[DONE]")
                        } else {
                            body.contains("chat.completion")
                        };
                        if status == 200 && complete {
                            Ok(())
                        } else {
                            Err(format!("{status} stream={stream}: {body}"))
                        }
                    }
                    Err(error) => Err(format!("client error: {error}")),
                };
                match outcome {
                    Ok(()) => {
                        tally.ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(failure) => tally.failures.lock().unwrap().push(failure),
                }
            }
        }));
    }
    during.await;
    for task in tasks {
        task.await.unwrap();
    }
    tally
}

/// A key command (for TOML, a literal-string argv) that counts its runs in `dir/runs` (replaced
/// whole, so the test never reads it half written), publishes `tok-<run>` as the only key the mock accepts (`dir/accepted`), then prints it.
fn rotating_command(dir: &Path) -> String {
    format!(
        "api_key_command = ['/bin/sh', '-c', 'n=$(cat {d}/runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > {d}/runs.new; mv {d}/runs.new {d}/runs; echo tok-$n-secretpart > {d}/accepted.new; mv {d}/accepted.new {d}/accepted; echo tok-$n-secretpart']",
        d = dir.display()
    )
}

fn runs(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("runs")).map_or(0, |text| text.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_command_prints_a_new_token_each_run_and_only_the_newest_is_served() {
    let files = tempfile::tempdir().unwrap();
    let (mock_base, mock) = start_mock().await;
    mock.set_key_gate(Some(KeyGate {
        prefix: "tok-".into(),
        accepted: Accepted::File(files.path().join("accepted")),
    }));
    let source = format!("{}\napi_key_ttl_ms = 700", rotating_command(files.path()));
    let harness = start_node(mock_base, mock.clone(), &rotating("cmd-1", &source)).await;

    let tally = load(&harness, "rot", 4, Duration::from_secs(4), async {}).await;
    assert!(tally.failures().is_empty(), "{:?}", tally.failures());
    assert!(tally.ok() > 20, "{}", tally.ok());
    let refreshed = events(&harness, "credential_refreshed", "cmd-1").await;
    let ttl_runs = triggers(&refreshed)
        .iter()
        .filter(|trigger| *trigger == "ttl")
        .count();
    assert!(ttl_runs >= 3, "the command ran on its TTL: {refreshed:?}");
    assert_eq!(refreshed[0]["trigger"], "start");
    assert_eq!(refreshed[0]["source"], "command");
    // Every run is journaled (one more may have started since the journal was read).
    let journaled = refreshed.len() as u64;
    let ran = runs(files.path());
    assert!(
        (journaled..=journaled + 1).contains(&ran),
        "{journaled} journaled, {ran} runs"
    );
    // The mock really refuses every key but the newest.
    let stale = harness
        .client
        .post(format!("{}/v1/chat/completions", harness.mock_base))
        .bearer_auth("tok-1-secretpart")
        .json(&json!({"model": "gpt-4o-mini", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 401);
    let state = harness.admin_get("/admin/state").await;
    assert!(connection(&state, "cmd-1")["disabled"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_file_rewritten_during_load_serves_every_request() {
    let files = tempfile::tempdir().unwrap();
    let key_file = files.path().join("key");
    std::fs::write(&key_file, "sk-file-1-secretpart\n").unwrap();
    let (mock_base, mock) = start_mock().await;
    let gate = |keys: &[&str]| {
        Some(KeyGate {
            prefix: "sk-file-".into(),
            accepted: Accepted::Keys(keys.iter().map(|key| (*key).to_owned()).collect()),
        })
    };
    mock.set_key_gate(gate(&["sk-file-1-secretpart"]));
    let source = format!("api_key_file = '{}'", key_file.display());
    let harness = start_node(mock_base, mock.clone(), &rotating("file-1", &source)).await;

    let rotations = async {
        for n in 2..=5 {
            tokio::time::sleep(Duration::from_millis(700)).await;
            let (old, new) = (
                format!("sk-file-{}-secretpart", n - 1),
                format!("sk-file-{n}-secretpart"),
            );
            // The new key is issued, then written the way editors and scripts do it (truncate,
            // then write: a reader can see it empty), then the old one is revoked before the
            // node's next poll can have seen the file.
            mock.set_key_gate(gate(&[&old, &new]));
            let mut file = std::fs::File::create(&key_file).unwrap();
            tokio::time::sleep(Duration::from_millis(30)).await;
            std::io::Write::write_all(&mut file, format!("{new}\n").as_bytes()).unwrap();
            drop(file);
            tokio::time::sleep(Duration::from_millis(100)).await;
            mock.set_key_gate(gate(&[&new]));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let tally = load(&harness, "rot", 4, Duration::from_secs(4), rotations).await;
    assert!(tally.failures().is_empty(), "{:?}", tally.failures());
    assert!(tally.ok() > 20, "{}", tally.ok());
    let refreshed = events(&harness, "credential_refreshed", "file-1").await;
    assert_eq!(refreshed[0]["trigger"], "start");
    assert_eq!(
        refreshed.len(),
        5,
        "the start and each of 4 rewrites once: {refreshed:?}"
    );
    assert!(refreshed
        .iter()
        .all(|event| event["source"] == "file" && event["expires_at_ms"].is_null()));
    let state = harness.admin_get("/admin/state").await;
    assert!(connection(&state, "file-1")["disabled"].is_null());
    // The file vanishes: the last good key stays in use.
    std::fs::remove_file(&key_file).unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(harness.chat("rot").await.status(), 200);
    let failed = events(&harness, "credential_failed", "file-1").await;
    let vanished: Vec<_> = failed
        .iter()
        .filter(|event| {
            event["error"]
                .as_str()
                .unwrap()
                .starts_with(&format!("cannot read the key file {}", key_file.display()))
        })
        .collect();
    assert_eq!(
        vanished.len(),
        1,
        "one event for a vanished file: {failed:?}"
    );
}

fn oauth_source(files: &Path, mock_base: &str) -> String {
    format!(
        "[connections.oauth]\ntoken_url = \"{mock_base}/oauth/token\"\nclient_id = \"quotaroute-test\"\nrefresh_token_file = \"{}\"",
        files.join("refresh_token").display()
    )
}

async fn start_oauth(lifetime_ms: u64) -> (Harness, tempfile::TempDir) {
    start_oauth_on(lifetime_ms, Arc::new(SystemClock)).await
}

/// [`start_oauth`] with the router (and so the credentials) on `clock`.
async fn start_oauth_on(lifetime_ms: u64, clock: SharedClock) -> (Harness, tempfile::TempDir) {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("refresh_token"), "mock-rt-0-initial\n").unwrap();
    let (mock_base, mock) = start_mock().await;
    mock.set_oauth(Some(OAuthSettings {
        client_id: "quotaroute-test".into(),
        refresh_token: "mock-rt-0-initial".into(),
        lifetime_ms,
        rotate: true,
        garbage: false,
    }));
    let source = oauth_source(files.path(), &mock_base);
    let extra = rotating("oauth-1", &source);
    let harness = Harness::on_mock(mock_base, mock, |text| text + &extra, clock).await;
    (harness, files)
}

/// The issue's "done when", at test size: a token that lives `lifetime_ms` under `workers`
/// clients (each pausing `pace` between requests) for `length`; returns (requests, failures,
/// refreshes).
async fn expiring_token_load(
    lifetime_ms: u64,
    (workers, pace): (usize, Duration),
    length: Duration,
) -> (u64, Vec<String>, u64) {
    let (harness, files) = start_oauth(lifetime_ms).await;
    let tally = paced_load(&harness, "rot", (workers, pace), length, async {}).await;
    let refreshed = events(&harness, "credential_refreshed", "oauth-1").await;
    assert!(refreshed
        .iter()
        .all(|event| event["source"] == "oauth" && event["expires_at_ms"].as_u64().is_some()));
    let in_file = std::fs::read_to_string(files.path().join("refresh_token")).unwrap();
    let stats = harness.mock.oauth_stats();
    assert_eq!(
        stats.refused, 0,
        "no refresh token was used twice: {stats:?}"
    );
    // Every token issued was journaled (one more may have come since the journal was read).
    let journaled = refreshed.len() as u64;
    assert!(
        (journaled..=journaled + 1).contains(&stats.issued),
        "{journaled} journaled, {stats:?}"
    );
    // The rotated refresh token was written back, whole and private (the operator's file was
    // 0644).
    if stats.issued == journaled {
        assert_eq!(
            Some(in_file.trim().to_owned()),
            harness.mock.oauth_refresh_token()
        );
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(files.path().join("refresh_token"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    (tally.ok(), tally.failures(), stats.issued)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_token_expiring_every_1500_ms_serves_12_s_of_load_without_a_failure() {
    let (ok, failures, refreshes) =
        expiring_token_load(1_500, (4, Duration::ZERO), Duration::from_secs(12)).await;
    println!(
        "requests {ok}, failures {}, refreshes {refreshes}",
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert!(ok > 100, "{ok}");
    // 12 s of 1.5 s tokens refreshed at 80 %: about 10 refreshes, none on a 401.
    assert!((8..=14).contains(&refreshes), "{refreshes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "10 minutes: the issue's long run, by hand"]
async fn long_run_token_expiring_every_minute() {
    let minutes: u64 = std::env::var("QR_LONG_RUN_MINUTES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(10);
    let started = Instant::now();
    let (ok, failures, refreshes) = expiring_token_load(
        60_000,
        (8, Duration::from_millis(20)),
        Duration::from_secs(minutes * 60),
    )
    .await;
    println!(
        "long run: {minutes} min ({:.0} s), token lifetime 60 s, 8 clients pausing 20 ms: requests {ok}, failures {}, refreshes {refreshes}",
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{:?}",
        &failures[..failures.len().min(10)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_outlives_the_token_it_started_with() {
    let (harness, _files) = start_oauth(1_000).await;
    harness.mock.set_rules(vec![Rule::always(Fault::SlowStart {
        events: 3,
        pause_ms: 2_000,
    })
    .times(1)]);
    let started = Instant::now();
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "rot", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(2_000));
    assert!(body.contains("[DONE]"), "the stream ended cleanly: {body}");
    // The token it started with expired meanwhile; the next request has a fresh one.
    assert_eq!(harness.chat("rot").await.status(), 200);
    let issued = harness.mock.oauth_stats().issued;
    assert!(issued >= 3, "{issued}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_storm_of_50_concurrent_requests_causes_exactly_one_refresh() {
    let files = tempfile::tempdir().unwrap();
    let current = files.path().join("current");
    std::fs::write(&current, "storm-1-secretpart").unwrap();
    let (mock_base, mock) = start_mock().await;
    let gate = |key: &str| {
        Some(KeyGate {
            prefix: "storm-".into(),
            accepted: Accepted::Keys(vec![key.to_owned()]),
        })
    };
    mock.set_key_gate(gate("storm-1-secretpart"));
    let source = format!(
        "api_key_command = ['/bin/sh', '-c', 'echo run >> {d}/runs.log; sleep 2; cat {d}/current']",
        d = files.path().display()
    );
    let harness = start_node(mock_base, mock.clone(), &rotating("cmd-storm", &source)).await;
    assert_eq!(harness.chat("rot").await.status(), 200);

    // The upstream rotates the key; the command now prints the new one.
    std::fs::write(&current, "storm-2-secretpart").unwrap();
    mock.set_key_gate(gate("storm-2-secretpart"));
    mock.reset_stats();
    let requests = (0..50).map(|_| {
        let (client, url) = (harness.client.clone(), harness.url("/v1/chat/completions"));
        tokio::spawn(async move {
            let response = client
                .post(url)
                .bearer_auth(CLIENT_KEY)
                .json(&json!({"model": "rot", "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap();
            (
                response.status().as_u16(),
                header(&response, "x-quotaroute-attempts"),
            )
        })
    });
    for answer in futures_util::future::join_all(requests).await {
        assert_eq!(
            answer.unwrap(),
            (200, "1".to_owned()),
            "served, as one attempt"
        );
    }
    let run_count = std::fs::read_to_string(files.path().join("runs.log"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(run_count, 2, "the start and one refresh for the 50");
    let refreshed = events(&harness, "credential_refreshed", "cmd-storm").await;
    assert_eq!(triggers(&refreshed), ["start", "unauthorized"]);
    let stats = mock.stats();
    assert_eq!(stats.for_key("storm-1-secretpart"), 50);
    assert_eq!(stats.for_key("storm-2-secretpart"), 50);
    let state = harness.admin_get("/admin/state").await;
    assert!(connection(&state, "cmd-storm")["disabled"].is_null());
    assert!(events(&harness, "connection_disabled", "cmd-storm")
        .await
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_401_to_a_fresh_credential_disables_the_connection() {
    let files = tempfile::tempdir().unwrap();
    let (mock_base, mock) = start_mock().await;
    // The mock accepts no key the command ever prints.
    mock.set_key_gate(Some(KeyGate {
        prefix: "tok-".into(),
        accepted: Accepted::Keys(Vec::new()),
    }));
    let harness = start_node(
        mock_base,
        mock.clone(),
        &rotating("cmd-bad", &rotating_command(files.path())),
    )
    .await;
    let response = harness.chat("rot").await;
    assert_eq!(response.status(), 502);
    assert_eq!(
        runs(files.path()),
        2,
        "the start, then one refresh after the 401"
    );
    assert_eq!(mock.stats().total, 2, "the stale key, then the fresh one");
    let disabled = events(&harness, "connection_disabled", "cmd-bad").await;
    assert_eq!(disabled.len(), 1, "{disabled:?}");
    let failed = events(&harness, "request_failed", "cmd-bad").await;
    assert_eq!(
        failed.len(),
        1,
        "only the fresh credential's 401 is reported: {failed:?}"
    );
    assert_eq!(failed[0]["class"], "auth_failed");
    assert_eq!(failed[0]["attempt"], 2, "the retry was an upstream request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_command_is_killed_and_other_connections_never_wait() {
    let (mock_base, mock) = start_mock().await;
    let source =
        "api_key_command = ['/bin/sh', '-c', 'exec sleep 60']\napi_key_command_timeout_ms = 1500";
    let harness = start_node(mock_base, mock, &rotating("cmd-hang", source)).await;
    let started = Instant::now();
    let hanging = harness.chat("rot");
    let others = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut slowest = Duration::ZERO;
        for _ in 0..10 {
            let sent = Instant::now();
            assert_eq!(harness.chat("team").await.status(), 200);
            slowest = slowest.max(sent.elapsed());
        }
        slowest
    };
    let (response, slowest) = tokio::join!(hanging, others);
    assert!(slowest < Duration::from_millis(500), "{slowest:?}");
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("did not exit within 1500 ms and was killed"),
        "{message}"
    );
    // The key command's name is the operator's (journal, log), never the client's.
    assert!(!message.contains("/bin/sh"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let failed = events(&harness, "credential_failed", "cmd-hang").await;
    assert!(!failed.is_empty());
    assert_eq!(
        failed[0]["error"],
        "the key command `/bin/sh` did not exit within 1500 ms and was killed"
    );
    assert!(failed[0]["last_good_until_ms"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_the_token_endpoint_keeps_the_last_token_until_it_expires() {
    // The router's clock, which the credentials read: the test moves it to the refresh and to
    // the expiry instead of sleeping until them.
    let clock = quotaroute_actors::ManualClock::new(quotaroute_actors::Clock::now_ms(&SystemClock));
    let (harness, _files) = start_oauth_on(3_000, clock.clone()).await;
    assert_eq!(harness.chat("rot").await.status(), 200);
    let oauth_view = |state: &Value| {
        state["credentials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|view| view["connection"] == "oauth-1")
            .unwrap()
            .clone()
    };
    let view = oauth_view(&harness.admin_get("/admin/state").await);
    let expires_at = view["expires_at_ms"].as_u64().unwrap();
    let refresh_at = view["refresh_at_ms"].as_u64().unwrap();
    assert_eq!(expires_at - refresh_at, 600, "refreshed at 80 % of 3 s");
    harness.mock.set_oauth_garbage(true);
    let move_to = |at_ms: u64| {
        let now = quotaroute_actors::Clock::now_ms(clock.as_ref());
        clock.advance(at_ms.saturating_sub(now));
    };
    // The refresh at 80 % gets garbage: the token still serves until it expires.
    move_to(refresh_at + 200);
    let failed = wait_for_events(&harness, "credential_failed", "oauth-1").await;
    assert_eq!(harness.chat("rot").await.status(), 200);
    assert!(!failed.is_empty(), "the failed refresh is journaled");
    let error = failed[0]["error"].as_str().unwrap();
    assert!(
        error.contains("answered garbage: HTTP 200 with a body that is not a JSON object"),
        "{error}"
    );
    assert_eq!(failed[0]["trigger"], "expiring");
    assert_eq!(failed[0]["last_good_until_ms"].as_u64(), Some(expires_at));
    // The admin API shows it too: the source, until when the token serves, the last error.
    let state = harness.admin_get("/admin/state").await;
    let view = oauth_view(&state);
    assert_eq!(view["source"], "oauth");
    assert_eq!(view["expires_at_ms"].as_u64(), Some(expires_at));
    assert!(
        view["last_error"].as_str().unwrap().contains("garbage"),
        "{view}"
    );
    let static_view = state["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|view| view["connection"] == "oa-1")
        .unwrap();
    assert_eq!(static_view["source"], "static");
    assert!(static_view["expires_at_ms"].is_null());
    move_to(expires_at + 300);
    // Past its expiry nothing is sent with it: a clear error of the router's.
    let response = harness.chat("rot").await;
    assert_eq!(response.status(), 502);
    let body = response.text().await.unwrap();
    assert!(body.contains("expired"), "{body}");
    // The endpoint recovers: the next retry brings a token and requests are served again.
    harness.mock.set_oauth_garbage(false);
    let recovered = Instant::now();
    loop {
        // The watch's next retry and the connection's cooldown are both on the moved clock.
        clock.advance(1_000);
        tokio::task::yield_now().await;
        let state = harness.admin_get("/admin/state").await;
        let cooling = connection(&state, "oauth-1")["cooldown_remaining_ms"]
            .as_u64()
            .unwrap_or(0);
        if cooling == 0 && harness.chat("rot").await.status() == 200 {
            break;
        }
        assert!(
            recovered.elapsed() < Duration::from_secs(10),
            "never recovered"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_an_unchanged_credential_and_starts_a_changed_one_anew() {
    let files = tempfile::tempdir().unwrap();
    let (mock_base, mock) = start_mock().await;
    let harness = start_node(
        mock_base,
        mock,
        &rotating("cmd-r", &rotating_command(files.path())),
    )
    .await;
    assert_eq!(harness.chat("rot").await.status(), 200);
    assert_eq!(runs(files.path()), 1);
    // Same source (another key changed): the command does not run again.
    let text = std::fs::read_to_string(&harness.config_path).unwrap();
    std::fs::write(
        &harness.config_path,
        text.replace("weight = 2\n", "weight = 3\n"),
    )
    .unwrap();
    assert_eq!(harness.admin_post("/admin/reload").await.status(), 200);
    assert_eq!(harness.chat("rot").await.status(), 200);
    assert_eq!(
        runs(files.path()),
        1,
        "an unchanged source keeps its credential"
    );
    // A changed source (one more argument) is a new credential: it loads from the start.
    let changed = text.replace("echo tok-$n-secretpart']", "echo tok-$n-secretpart', 'sh']");
    assert_ne!(changed, text);
    std::fs::write(&harness.config_path, changed).unwrap();
    assert_eq!(harness.admin_post("/admin/reload").await.status(), 200);
    assert_eq!(harness.chat("rot").await.status(), 200);
    assert_eq!(runs(files.path()), 2);
    let refreshed = events(&harness, "credential_refreshed", "cmd-r").await;
    assert_eq!(triggers(&refreshed), ["start", "start"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_after_a_401_spends_the_upstream_budget_and_never_disables_without_it() {
    let files = tempfile::tempdir().unwrap();
    let current = files.path().join("current");
    std::fs::write(&current, "storm-1-secretpart").unwrap();
    let (mock_base, mock) = start_mock().await;
    mock.set_key_gate(Some(KeyGate {
        prefix: "storm-".into(),
        accepted: Accepted::Keys(vec!["storm-2-secretpart".into()]),
    }));
    let source = format!("api_key_command = ['/bin/cat', '{}']", current.display());
    let extra = format!(
        "\n[defaults]\nmax_upstream_requests = 1\n{}",
        rotating("cmd-budget", &source)
    );
    let harness = start_node(mock_base, mock.clone(), &extra).await;
    wait_loaded(&harness, "cmd-budget").await;
    // The first key is refused; the command now prints one the mock accepts, but the one
    // upstream request this request may make is spent.
    std::fs::write(&current, "storm-2-secretpart").unwrap();
    let response = harness.chat("rot").await;
    assert_eq!(response.status(), 502);
    let body = response.text().await.unwrap();
    assert!(body.contains("no upstream request is left"), "{body}");
    assert_eq!(mock.stats().total, 1);
    let state = harness.admin_get("/admin/state").await;
    assert!(connection(&state, "cmd-budget")["disabled"].is_null());
    let failed = events(&harness, "request_failed", "cmd-budget").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["class"], "network");
}

/// Two same-target rules in one request (issue 51): a 401 refreshes the command's key, and the
/// fresh key's try meets an encrypted item no account can read, so it goes once more without
/// it — three upstream requests to the one target, one answer, nothing disabled or failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_and_an_unreadable_item_are_each_retried_once_on_one_target() {
    let files = tempfile::tempdir().unwrap();
    let current = files.path().join("current");
    std::fs::write(&current, "storm-1-secretpart").unwrap();
    let (mock_base, mock) = start_mock().await;
    mock.set_key_gate(Some(KeyGate {
        prefix: "storm-".into(),
        accepted: Accepted::Keys(vec!["storm-2-secretpart".into()]),
    }));
    let source = format!("api_key_command = ['/bin/cat', '{}']", current.display());
    let harness = start_node(mock_base, mock.clone(), &rotating("cmd-both", &source)).await;
    wait_loaded(&harness, "cmd-both").await;
    // The loaded key is refused now; the command prints the accepted one.
    std::fs::write(&current, "storm-2-secretpart").unwrap();
    let user = |text: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
    // An item the router never sealed, made for a key none of its accounts have.
    let foreign =
        json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAAbm90LW91cnM"});
    let response = harness
        .post_json(
            "/v1/responses",
            json!({
                "model": "rot",
                "input": [user("first"), foreign, user("again")],
                "include": ["reasoning.encrypted_content"],
                "store": false,
            }),
        )
        .await;
    assert_eq!(response.status(), 200);
    // One attempt of the client's (as after a lone 401's refresh): its retries on the same
    // target are not attempts, though each spent an upstream request.
    assert_eq!(header(&response, "x-quotaroute-attempts"), "1");
    let stats = mock.stats();
    assert_eq!(stats.for_key("storm-1-secretpart"), 1, "the 401");
    assert_eq!(
        stats.for_key("storm-2-secretpart"),
        2,
        "the 400 refusing the item, then the answer without it"
    );
    let succeeded = events(&harness, "request_succeeded", "cmd-both").await;
    assert_eq!(succeeded.len(), 1);
    assert_eq!(succeeded[0]["attempt"], 3, "{}", succeeded[0]);
    assert_eq!(succeeded[0]["items_left_out"], 1, "{}", succeeded[0]);
    assert!(events(&harness, "request_failed", "cmd-both")
        .await
        .is_empty());
    assert!(events(&harness, "connection_disabled", "cmd-both")
        .await
        .is_empty());
}
