//! Behaviour §11 "Every path is governed" (#34): stored-response calls and continuations pass
//! the client's admission, a stored response belongs to the client that created it (another
//! client gets the 404 of an id that does not exist and nothing goes upstream), and the
//! ownership survives a restart.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

const ALICE: &str = "sk-qr-client-alice-secret";
const BOB: &str = "sk-qr-client-bob-secret";

fn two_clients(bob_limits: &str) -> String {
    format!(
        r#"
[[clients]]
id = "alice"
key = "{ALICE}"

[[clients]]
id = "bob"
key = "{BOB}"
{bob_limits}
"#
    )
}

async fn create_as(harness: &Harness, key: &str) -> (String, String) {
    let response = harness
        .client
        .post(harness.url("/v1/responses"))
        .bearer_auth(key)
        .json(&json!({"model": "team", "input": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let connection = header(&response, "x-quotaroute-connection");
    let value: Value = response.json().await.unwrap();
    (value["id"].as_str().unwrap().to_string(), connection)
}

async fn call_as(harness: &Harness, key: &str, method: Method, path: &str) -> reqwest::Response {
    harness
        .client
        .request(method, harness.url(path))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
}

/// The four stored-response calls on `id`.
fn stored_calls(id: &str) -> [(Method, String); 4] {
    [
        (Method::GET, format!("/v1/responses/{id}")),
        (Method::GET, format!("/v1/responses/{id}/input_items")),
        (Method::POST, format!("/v1/responses/{id}/cancel")),
        (Method::DELETE, format!("/v1/responses/{id}")),
    ]
}

/// An answer's body with the id it names replaced, to compare two answers for two ids.
async fn body_without(response: reqwest::Response, id: &str) -> (u16, String) {
    let status = response.status().as_u16();
    (status, response.text().await.unwrap().replace(id, "ID"))
}

/// Bob's four calls on alice's response, and a continuation of it, against the node at
/// `harness`: each answered as for an id that never existed, none reaching the upstream.
async fn assert_bob_sees_nothing(harness: &Harness, alice_id: &str, connection: &str) {
    let upstream_before = harness.mock.stats();
    for (method, path) in stored_calls(alice_id) {
        let never = path.replace(alice_id, "resp_never_made");
        let (status, body) =
            body_without(call_as(harness, BOB, method.clone(), &path).await, alice_id).await;
        let (never_status, never_body) = body_without(
            call_as(harness, BOB, method.clone(), &never).await,
            "resp_never_made",
        )
        .await;
        assert_eq!(status, 404, "{method} {path}: {body}");
        assert_eq!(
            (status, &body),
            (never_status, &never_body),
            "{method} {path}"
        );
        assert!(!body.contains(connection), "{body}");
        assert!(!body.contains("alice"), "{body}");
    }
    let response = harness
        .client
        .post(harness.url("/v1/responses"))
        .bearer_auth(BOB)
        .json(&json!({"model": "team", "input": "and then?", "previous_response_id": alice_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(header(&response, "x-quotaroute-connection"), "");
    let value: Value = response.json().await.unwrap();
    assert_eq!(
        value["error"]["code"], "previous_response_not_found",
        "{value}"
    );
    assert_eq!(
        value["error"]["message"],
        format!("Previous response with id '{alice_id}' not found.")
    );
    let upstream_after = harness.mock.stats();
    assert_eq!(
        upstream_after.total, upstream_before.total,
        "nothing went upstream"
    );
    assert_eq!(
        upstream_after.stored_lookups.len(),
        upstream_before.stored_lookups.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bobs_four_calls_on_alices_response_are_404_and_reach_no_upstream_even_after_a_restart() {
    let mut harness = Harness::start_with(&two_clients("")).await;
    let (alice_id, connection) = create_as(&harness, ALICE).await;
    assert_bob_sees_nothing(&harness, &alice_id, &connection).await;

    // Alice still has all of it: her continuation and her GET go to her account.
    let response = harness
        .client
        .post(harness.url("/v1/responses"))
        .bearer_auth(ALICE)
        .json(&json!({"model": "team", "input": "and then?", "previous_response_id": alice_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-quotaroute-connection"), connection);
    let response = call_as(
        &harness,
        ALICE,
        Method::GET,
        &format!("/v1/responses/{alice_id}"),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-quotaroute-connection"), connection);

    // The owner is journaled with the binding, and a restart keeps it.
    harness.settle().await;
    let events = harness.journal_events().await;
    assert!(events.iter().any(|e| e["kind"] == "response_bound"
        && e["response_id"] == json!(alice_id)
        && e["client"] == "alice"));
    let config = quotaroute::config::load(&harness.config_path).unwrap();
    harness.stop().await;
    let node = quotaroute::node::RunningNode::start(
        config,
        quotaroute::node::NodeOptions {
            config_path: Some(harness.config_path.clone()),
            config_text: std::fs::read_to_string(&harness.config_path).unwrap(),
            clock: std::sync::Arc::new(quotaroute::actors::SystemClock),
            listen: None,
        },
    )
    .await
    .unwrap();
    harness.base = format!("http://{}", node.addr);
    harness.node = Some(node);
    assert_bob_sees_nothing(&harness, &alice_id, &connection).await;
    let response = call_as(
        &harness,
        ALICE,
        Method::GET,
        &format!("/v1/responses/{alice_id}"),
    )
    .await;
    assert_eq!(response.status(), 200);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_past_requests_per_min_is_refused_on_its_own_stored_response() {
    let harness = Harness::start_with(&two_clients("requests_per_min = 2")).await;
    let (bob_id, _) = create_as(&harness, BOB).await;
    let response = call_as(
        &harness,
        BOB,
        Method::GET,
        &format!("/v1/responses/{bob_id}"),
    )
    .await;
    assert_eq!(response.status(), 200, "the second request of the minute");
    let upstream_before = harness.mock.stats().total;
    for (method, path) in stored_calls(&bob_id) {
        let response = call_as(&harness, BOB, method.clone(), &path).await;
        assert_eq!(response.status(), 429, "{method} {path}");
        assert!(response.headers().contains_key("retry-after"));
        let value: Value = response.json().await.unwrap();
        assert_eq!(value["error"]["code"], "client_rate_limited", "{value}");
    }
    assert_eq!(
        harness.mock.stats().total,
        upstream_before,
        "nothing went upstream"
    );
    // The refusals are bob's: alice is served.
    let (alice_id, _) = create_as(&harness, ALICE).await;
    let response = call_as(
        &harness,
        ALICE,
        Method::GET,
        &format!("/v1/responses/{alice_id}"),
    )
    .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_response_outside_the_clients_models_is_refused() {
    let harness = Harness::start_with(&two_clients("")).await;
    let (bob_id, _) = create_as(&harness, BOB).await;
    // A reload narrows bob's models: his own response is then outside them.
    let text = std::fs::read_to_string(&harness.config_path)
        .unwrap()
        .replace(
            &format!("key = \"{BOB}\"\n"),
            &format!("key = \"{BOB}\"\nmodels = [\"claude\"]\n"),
        );
    std::fs::write(&harness.config_path, text).unwrap();
    assert_eq!(harness.admin_post("/admin/reload").await.status(), 200);
    let before = harness.mock.stats().total;
    let response = call_as(
        &harness,
        BOB,
        Method::GET,
        &format!("/v1/responses/{bob_id}"),
    )
    .await;
    assert_eq!(response.status(), 403);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "model_not_allowed", "{value}");
    assert_eq!(harness.mock.stats().total, before);
}

async fn chat_in_session(harness: &Harness, key: &str, model: &str, session: &str) {
    let response = harness
        .client
        .post(harness.url("/v1/chat/completions"))
        .bearer_auth(key)
        .header("x-quotaroute-affinity", session)
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

fn listed_clients(page: &Value) -> Vec<String> {
    page["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["client"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_new_groups_do_not_evict_anothers_and_max_groups_bounds_the_node() {
    // Three clients (alice, bob, and `default` of server.api_keys): a share of 12 / 3 = 4.
    let harness = Harness::start_with(&format!(
        "{}\n[affinity]\nmax_groups = 12\n",
        two_clients("")
    ))
    .await;
    for session in ["a-1", "a-2"] {
        chat_in_session(&harness, ALICE, "team", session).await;
    }
    // Bob opens 30 conversations over two combos (an implicit one too).
    for n in 0..30 {
        let model = if n % 2 == 0 {
            "team"
        } else {
            "openai/gpt-4o-mini"
        };
        chat_in_session(&harness, BOB, model, &format!("b-{n}")).await;
    }
    let listed = harness.admin_get("/admin/affinity?limit=100").await;
    let clients = listed_clients(&listed);
    assert_eq!(
        clients.iter().filter(|c| *c == "alice").count(),
        2,
        "alice's groups survive: {listed}"
    );
    assert_eq!(
        clients.iter().filter(|c| *c == "bob").count(),
        4,
        "{listed}"
    );
    assert!(listed["total"].as_u64().unwrap() <= 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_affinity_pages_with_limit_and_a_cursor() {
    let harness = Harness::start().await;
    for n in 0..25 {
        let model = if n % 3 == 0 {
            "openai/gpt-4o-mini"
        } else {
            "team"
        };
        chat_in_session(&harness, CLIENT_KEY, model, &format!("s-{n}")).await;
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut after: Option<String> = None;
    let mut pages = Vec::new();
    loop {
        let path = match &after {
            None => "/admin/affinity?limit=10".to_string(),
            Some(cursor) => format!("/admin/affinity?limit=10&after={cursor}"),
        };
        let page = harness.admin_get(&path).await;
        assert_eq!(page["total"], 25, "{page}");
        let groups = page["groups"].as_array().unwrap();
        pages.push(groups.len());
        for group in groups {
            assert!(
                seen.insert((group["combo"].to_string(), group["digest"].to_string())),
                "listed twice: {group}"
            );
        }
        match page["next"].as_str() {
            Some(next) => after = Some(urlencode(next)),
            None => break,
        }
    }
    assert_eq!(pages, vec![10, 10, 5]);
    assert_eq!(seen.len(), 25);
    // The default page is 1,000; a bad limit or cursor is a clear 400.
    assert_eq!(
        harness.admin_get("/admin/affinity").await["groups"]
            .as_array()
            .unwrap()
            .len(),
        25
    );
    for bad in ["limit=0", "limit=10001", "after=nonsense", "limit=ten"] {
        let response = harness
            .client
            .get(harness.url(&format!("/admin/affinity?{bad}")))
            .bearer_auth(ADMIN_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{bad}");
    }
}

/// `%`-encodes what a cursor may hold beyond URL-safe characters (`:` and `/`).
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// #34: continuations of one stored response used to skip the fair queue and run over their
/// connection's cap (22 at once against `max_concurrent = 2`). Now they wait for that
/// connection's slots like any request, and all are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuations_wait_in_the_fair_queue_and_keep_their_connections_cap() {
    use quotaroute_mock::{Fault, Rule};
    let (mock_base, mock) = start_mock().await;
    let harness = Harness::on_mock(
        mock_base,
        mock,
        |text| {
            let mut text = text.replace("name = \"team\"\n", "name = \"team\"\nqueue_ms = 10000\n");
            for id in ["oa-1", "oa-2", "oa-3"] {
                text = text.replace(
                    &format!("id = \"{id}\"\n"),
                    &format!("id = \"{id}\"\nmax_concurrent = 2\n"),
                );
            }
            text + &two_clients("")
        },
        std::sync::Arc::new(quotaroute::actors::SystemClock),
    )
    .await;
    let (alice_id, connection) = create_as(&harness, ALICE).await;
    harness
        .mock
        .set_rules(vec![Rule::always(Fault::Latency { ms: 200 })]);
    harness.mock.reset_stats();
    let continuation = |n: usize| {
        let client = harness.client.clone();
        let url = harness.url("/v1/responses");
        let id = alice_id.clone();
        tokio::spawn(async move {
            let response = client
                .post(url)
                .bearer_auth(ALICE)
                .json(&json!({"model": "team", "input": format!("turn {n}"), "previous_response_id": id}))
                .send()
                .await
                .unwrap();
            (
                response.status().as_u16(),
                header(&response, "x-quotaroute-connection"),
            )
        })
    };
    let turns: Vec<_> = (0..10).map(continuation).collect();
    for turn in turns {
        let (status, served_by) = turn.await.unwrap();
        assert_eq!(status, 200, "waited, then served");
        assert_eq!(served_by, connection);
    }
    let peak = harness
        .mock
        .stats()
        .max_in_flight_for(&upstream_key(&connection));
    assert!(peak <= 2, "{connection} ran {peak} continuations at once");
    assert!(peak >= 1);
}

async fn post_as(harness: &Harness, key: &str, path: &str, body: Value) -> (u16, Value) {
    let response = harness
        .client
        .post(harness.url(path))
        .bearer_auth(key)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn code(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or("-")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_and_embeddings_pass_the_clients_models_and_limits() {
    let harness = Harness::start_with(&format!(
        "\n[[clients]]\nid = \"alice\"\nkey = \"{ALICE}\"\nmodels = [\"team\"]\n\n[[clients]]\nid = \"bob\"\nkey = \"{BOB}\"\nrequests_per_min = 2\n"
    ))
    .await;
    let count = json!({"model": "claude", "messages": [{"role": "user", "content": "hi"}]});
    let embed = json!({"model": "team", "input": "hello"});
    let before = harness.mock.stats().total;
    let (status, answer) =
        post_as(&harness, ALICE, "/v1/messages/count_tokens", count.clone()).await;
    assert_eq!(
        (status, code(&answer)),
        (403, "model_not_allowed"),
        "{answer}"
    );
    assert_eq!(
        harness.mock.stats().total,
        before,
        "refused before the upstream"
    );
    assert_eq!(
        post_as(&harness, ALICE, "/v1/embeddings", embed.clone())
            .await
            .0,
        200
    );

    assert_eq!(
        post_as(&harness, BOB, "/v1/embeddings", embed.clone())
            .await
            .0,
        200
    );
    assert_eq!(
        post_as(&harness, BOB, "/v1/messages/count_tokens", count.clone())
            .await
            .0,
        200
    );
    let before = harness.mock.stats().total;
    for (path, body) in [
        ("/v1/embeddings", &embed),
        ("/v1/messages/count_tokens", &count),
    ] {
        let (status, answer) = post_as(&harness, BOB, path, body.clone()).await;
        assert_eq!(
            (status, code(&answer)),
            (429, "client_rate_limited"),
            "{path}: {answer}"
        );
    }
    assert_eq!(
        harness.mock.stats().total,
        before,
        "refused before the upstream"
    );
}
