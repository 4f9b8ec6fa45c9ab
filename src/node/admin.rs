//! The admin API (`/admin/*`, contract "Admin API"): state, lockouts, clearing, breaker reset,
//! pushed usage, reload and the journal as NDJSON. Off (404) without `admin_key`; 401 without a
//! key; 403 with any other key. Every change is journaled by the router with `by: "admin"`.

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use quotaroute_actors::policy::exec_key::split_exec_key;
use quotaroute_actors::{QueuedCount, Router};
use quotaroute_journal::{envelope_to_json, Journal};
use serde::Deserialize;
use serde_json::json;

use crate::clients::ledger::ClientView;
use crate::node::app::AppState;
use crate::node::reload;
use crate::time_parse::parse_rfc3339;

/// Why an admin request is refused, if it is.
pub fn admin_refusal(app: &AppState, headers: &HeaderMap) -> Option<Response> {
    let live = app.live();
    let Some(admin_key) = &live.admin_key else {
        return Some(admin_error(
            StatusCode::NOT_FOUND,
            "not_found",
            "the admin API is off (no server.admin_key)",
        ));
    };
    let presented = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        None => Some(admin_error(
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            "missing admin key (Authorization: Bearer <admin_key>)",
        )),
        Some(key) if admin_key.matches(key.trim()) => None,
        Some(_) => Some(admin_error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this key is not the admin key",
        )),
    }
}

pub fn admin_error(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({"error": {"message": message, "type": "admin_error", "code": code}}),
    )
}

/// An admin query string, or the 400 `invalid_query` that says what was wrong (`what`: the
/// rule it breaks; `None`: the extractor's own words).
pub fn admin_query<T>(
    query: Result<Query<T>, QueryRejection>,
    what: Option<&str>,
) -> Result<T, Box<Response>> {
    query.map(|Query(query)| query).map_err(|rejection| {
        let message = match what {
            Some(what) => format!("{what}: {rejection}"),
            None => rejection.to_string(),
        };
        Box::new(admin_error(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            &message,
        ))
    })
}

pub fn json_response(status: StatusCode, value: &serde_json::Value) -> Response {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The router for an admin request that may be served (the dashboard's handlers use this; the
/// ones here use `guard!`, which returns early the same way).
pub fn admin_router(
    app: &AppState,
    headers: &HeaderMap,
) -> Result<quotaroute_actors::Router, Box<Response>> {
    if let Some(refusal) = admin_refusal(app, headers) {
        return Err(Box::new(refusal));
    }
    app.router().cloned().ok_or_else(|| {
        Box::new(admin_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "starting",
            "the router is replaying its journal",
        ))
    })
}

macro_rules! guard {
    ($app:expr, $headers:expr) => {{
        match admin_router(&$app, &$headers) {
            Ok(router) => router,
            Err(refusal) => return *refusal,
        }
    }};
}

fn internal(error: impl std::fmt::Display) -> Response {
    admin_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        &error.to_string(),
    )
}

fn unknown(what: &str, name: &str) -> Response {
    admin_error(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!("unknown {what} `{name}`"),
    )
}

/// `GET /admin/state?at_ms=T`: the view at a later instant (see `Router::state_at`).
#[derive(Debug, Deserialize)]
pub struct StateQuery {
    at_ms: Option<u64>,
}

pub async fn state(
    State(app): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<StateQuery>, QueryRejection>,
) -> Response {
    let router = guard!(app, headers);
    let query = match admin_query(
        query,
        Some("at_ms must be a whole number of Unix milliseconds"),
    ) {
        Ok(query) => query,
        Err(refusal) => return *refusal,
    };
    let now_ms = router.clock().now_ms();
    let at_ms = query.at_ms.unwrap_or(now_ms);
    if at_ms < now_ms {
        return admin_error(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            "at_ms is in the past: a node knows its state from now on (the past is `quotaroute replay --state-at`)",
        );
    }
    // Now: with each window's newest upstream reading; a later instant: the journaled view
    // exactly, as two views at one instant are compared (behaviour §12).
    let view = match query.at_ms {
        None => router.state_live().await,
        Some(_) => router.state_at(at_ms).await,
    };
    match view {
        Ok(state) => match serde_json::to_value(&state) {
            Ok(mut value) => {
                // Where each connection's key comes from and how fresh it is (never the key).
                value["credentials"] = json!(app.live().credentials.views());
                // Each combo's affinity hit rate since start: live counters, never journaled,
                // so only in the view of now (a later instant's is the journaled view).
                if query.at_ms.is_none() {
                    value["affinity"] = json!(app.inner.affinity.views());
                    // Each priming connection's last and next prime (behaviour §13).
                    value["primes"] = json!(crate::node::prime_driver::views(&app, now_ms));
                }
                if let (Some(cluster), Some(object)) = (app.cluster(), value.as_object_mut()) {
                    object.insert("cluster".to_owned(), cluster.status.to_json());
                }
                json_response(StatusCode::OK, &value)
            }
            Err(error) => internal(error),
        },
        Err(error) => internal(error),
    }
}

pub async fn lockouts(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let router = guard!(app, headers);
    match router.state().await {
        Ok(state) => json_response(StatusCode::OK, &json!({ "lockouts": state.lockouts() })),
        Err(error) => internal(error),
    }
}

/// `GET /admin/clients` (behaviour §11): each client's in-flight and queued requests, its
/// windows' usage against their limits, and its spend against its budget. Never a key.
pub async fn clients(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let router = guard!(app, headers);
    let views = client_views(&app, &router).await;
    json_response(StatusCode::OK, &json!({ "clients": views }))
}

/// Every client's view now, as `/admin/clients` and the dashboard's `clients` event show it.
pub async fn client_views(app: &AppState, router: &Router) -> Vec<ClientView> {
    let now_ms = router.clock().now_ms();
    // The fair queue's waiters (behaviour §11), summed over the combos, per client.
    let queued = router.queued().await;
    let shared = app
        .cluster()
        .map(|cluster| &*cluster.client_leases as &dyn crate::clients::SharedCounts);
    app.live().clients.views(
        now_ms,
        |client| QueuedCount::of_client(&queued, client) as u64,
        shared,
    )
}

/// `POST /admin/clients/{id}/reset` (behaviour §11): clears the client's spend and usage
/// windows of the current period, journaled as `admin_action` `reset_client` by `admin` (folded
/// back in on restart, so the spend does not come back); 404 for an unknown client.
pub async fn reset_client(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let router = guard!(app, headers);
    let live = app.live();
    let Some(index) = live.clients.index_of(&id) else {
        return unknown("client", &id);
    };
    let now_ms = router.clock().now_ms();
    live.clients.reset(index, now_ms);
    router.record_client_reset(&id);
    tracing::info!(client = &*id, "client spend and windows reset by admin");
    json_response(StatusCode::OK, &json!({"client": id, "reset": true}))
}

pub async fn clear_lockout(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path((connection, model)): Path<(String, String)>,
) -> Response {
    let router = guard!(app, headers);
    match router.clear_lockout(&connection, &model).await {
        Ok(true) => json_response(
            StatusCode::OK,
            &json!({"cleared": true, "connection": connection, "model": model}),
        ),
        Ok(false) => admin_error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no lockout for `{connection}` / `{model}`"),
        ),
        Err(quotaroute_actors::RouterError::UnknownConnection(id)) => unknown("connection", &id),
        Err(error) => internal(error),
    }
}

/// `POST /admin/connections/{id}/clear?readings=1`: also forget the header readings.
#[derive(Debug, Deserialize)]
pub struct ClearQuery {
    #[serde(default)]
    readings: u8,
}

pub async fn clear_connection(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<ClearQuery>, QueryRejection>,
) -> Response {
    let router = guard!(app, headers);
    let query = match admin_query(query, Some("readings must be 0 or 1")) {
        Ok(query) if query.readings <= 1 => query,
        Ok(_) => {
            return admin_error(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                "readings must be 0 or 1",
            )
        }
        Err(refusal) => return *refusal,
    };
    let cleared = match router.clear_connection(&id).await {
        Ok(cleared) => cleared,
        Err(quotaroute_actors::RouterError::UnknownConnection(id)) => {
            return unknown("connection", &id)
        }
        Err(error) => return internal(error),
    };
    if query.readings == 0 {
        return json_response(
            StatusCode::OK,
            &json!({"cleared": cleared, "connection": id}),
        );
    }
    match router.clear_readings(&id).await {
        Ok(forgotten) => json_response(
            StatusCode::OK,
            &json!({"cleared": cleared || forgotten > 0, "connection": id, "readings_forgotten": forgotten}),
        ),
        Err(error) => internal(error),
    }
}

pub async fn reset_breaker(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let router = guard!(app, headers);
    match router.reset_breaker(&name).await {
        Ok(_) => json_response(
            StatusCode::OK,
            &json!({"provider": name, "breaker": "CLOSED"}),
        ),
        Err(quotaroute_actors::RouterError::UnknownProvider(name)) => unknown("provider", &name),
        Err(error) => internal(error),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsagePush {
    window: String,
    used_pct: f64,
    resets_at: Option<String>,
}

pub async fn push_usage(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let router = guard!(app, headers);
    let push: UsagePush = match serde_json::from_slice(&body) {
        Ok(push) => push,
        Err(error) => {
            return admin_error(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                &format!("expected {{\"window\",\"used_pct\",\"resets_at\"}}: {error}"),
            )
        }
    };
    let window_ok = push.window == "5h"
        || push.window == "7d"
        || push
            .window
            .strip_prefix("7d:")
            .is_some_and(|m| !m.is_empty());
    if !window_ok {
        return admin_error(
            StatusCode::BAD_REQUEST,
            "invalid_window",
            "window must be \"5h\", \"7d\" or \"7d:<model>\"",
        );
    }
    if !(0.0..=100.0).contains(&push.used_pct) || push.used_pct.is_nan() {
        return admin_error(
            StatusCode::BAD_REQUEST,
            "invalid_used_pct",
            "used_pct must be within 0..=100",
        );
    }
    let resets_at_ms = match push.resets_at.as_deref().map(parse_rfc3339) {
        None => None,
        Some(Some(ms)) => Some(ms),
        Some(None) => {
            return admin_error(
                StatusCode::BAD_REQUEST,
                "invalid_resets_at",
                "resets_at must be an RFC 3339 time",
            )
        }
    };
    match router
        .push_usage(&id, &push.window, push.used_pct, resets_at_ms)
        .await
    {
        Ok(()) => json_response(
            StatusCode::OK,
            &json!({"connection": id, "window": push.window}),
        ),
        Err(quotaroute_actors::RouterError::UnknownConnection(id)) => unknown("connection", &id),
        Err(error) => internal(error),
    }
}

pub async fn reload_config(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let _router = guard!(app, headers);
    match reload::reload(&app).await {
        Ok(summary) => json_response(
            StatusCode::OK,
            &json!({"reloaded": true, "summary": summary}),
        ),
        Err(errors) => admin_error(StatusCode::BAD_REQUEST, "invalid_config", &errors),
    }
}

/// `GET /admin/affinity?connection=ID&limit=N&after=CURSOR`.
#[derive(Debug, serde::Deserialize)]
pub struct AffinityQuery {
    connection: Option<String>,
    limit: Option<usize>,
    /// The `next` of the previous page.
    after: Option<String>,
}

/// Groups one `GET /admin/affinity` lists when it names no `limit`, and the most it may ask
/// for: a page, like `/admin/journal`'s (a node may hold `affinity.max_groups`, 1,000,000).
pub const AFFINITY_PAGE_DEFAULT: usize = 1_000;
pub const AFFINITY_PAGE_MAX: usize = 10_000;

/// A page cursor: the last group's digest (16 hex digits), `:`, then its combo's name.
fn affinity_cursor(combo: &str, group: u64) -> String {
    format!("{group:016x}:{combo}")
}

fn parse_affinity_cursor(cursor: &str) -> Option<(String, u64)> {
    let (digest, combo) = cursor.split_at_checked(16)?;
    let combo = combo.strip_prefix(':')?;
    Some((combo.to_owned(), u64::from_str_radix(digest, 16).ok()?))
}

/// `GET /admin/affinity`: the bound conversations (behaviour §10) — digest, client, combo,
/// target, last use, turns; never prompt text (the node never kept any). Paged by (combo,
/// digest): `limit` (default 1,000, at most 10,000) and `after` (the previous page's `next`,
/// `null` on the last page); `total` counts every matching group. Each combo copies only its
/// part of the page.
pub async fn affinity(
    State(app): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<AffinityQuery>, QueryRejection>,
) -> Response {
    let router = guard!(app, headers);
    let query = match admin_query(
        query,
        Some("connection must be a connection id, limit a whole number, after a `next` cursor"),
    ) {
        Ok(query) => query,
        Err(refusal) => return *refusal,
    };
    let limit = query.limit.unwrap_or(AFFINITY_PAGE_DEFAULT);
    if limit == 0 || limit > AFFINITY_PAGE_MAX {
        return admin_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            &format!("limit must be between 1 and {AFFINITY_PAGE_MAX}"),
        );
    }
    let after = match query.after.as_deref().map(parse_affinity_cursor) {
        None => None,
        Some(Some(after)) => Some(after),
        Some(None) => {
            return admin_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "after must be the `next` of a previous page",
            )
        }
    };
    let page = match router
        .affinity_page(
            after,
            quotaroute_actors::AffinityPageQuery {
                after: None,
                limit,
                connection: query.connection,
                now_ms: router.clock().now_ms(),
                ttl_ms: app.live().affinity.ttl_ms,
            },
        )
        .await
    {
        Ok(page) => page,
        Err(error) => {
            return admin_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                &error.to_string(),
            )
        }
    };
    let next = (page.groups.len() == limit)
        .then(|| page.groups.last())
        .flatten()
        .map(|(combo, group, _)| affinity_cursor(combo, *group));
    let groups: Vec<serde_json::Value> = page
        .groups
        .iter()
        .map(|(combo, group, binding)| {
            let (connection, model) =
                split_exec_key(&binding.exec_key).unwrap_or((&binding.exec_key, ""));
            json!({
                "digest": format!("{group:016x}"),
                "client": &*binding.client,
                "combo": combo,
                "connection": connection,
                "model": model,
                "bound_at_ms": binding.bound_at_ms,
                "last_used_ms": binding.last_used_ms,
                "turns": binding.turns,
            })
        })
        .collect();
    json_response(
        StatusCode::OK,
        &json!({"total": page.matching, "groups": groups, "next": next}),
    )
}

/// Events one `GET /admin/journal` returns when it names no `limit`, and the most it may ask
/// for (contract "Hostile input and bounds"): the answer streams, but a page still bounds
/// what one read of the journal costs.
pub const JOURNAL_PAGE_DEFAULT: usize = 1_000;
pub const JOURNAL_PAGE_MAX: usize = 10_000;

/// NDJSON bytes gathered before they are sent on as one chunk.
const JOURNAL_CHUNK_BYTES: usize = 64 * 1024;

/// `GET /admin/journal?since_seq=N&limit=M`.
#[derive(Debug, serde::Deserialize)]
pub struct JournalPage {
    since_seq: Option<u64>,
    limit: Option<usize>,
}

/// The journal as NDJSON, one page of at most `limit` events from `since_seq`, streamed as it
/// is read (the whole page is never held in memory). The next page starts one past the last
/// `seq`; a page shorter than `limit` is the last.
pub async fn journal(
    State(app): State<AppState>,
    headers: HeaderMap,
    page: Result<Query<JournalPage>, QueryRejection>,
) -> Response {
    let router = guard!(app, headers);
    let page = match admin_query(page, Some("since_seq and limit must be whole numbers")) {
        Ok(page) => page,
        Err(refusal) => return *refusal,
    };
    let since_seq = page.since_seq.unwrap_or(0);
    let limit = page
        .limit
        .unwrap_or(JOURNAL_PAGE_DEFAULT)
        .clamp(1, JOURNAL_PAGE_MAX);
    let _ = router.flush().await;
    let Some(reader) = app.journal_reader() else {
        return admin_error(
            StatusCode::NOT_FOUND,
            "not_found",
            "this node has no readable journal",
        );
    };
    let (chunks, receiver) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(4);
    tokio::task::spawn_blocking(move || {
        let mut out = String::with_capacity(JOURNAL_CHUNK_BYTES + 4096);
        for envelope in reader.read_from(since_seq).take(limit).flatten() {
            if let Ok(line) = envelope_to_json(&envelope) {
                out.push_str(&line);
                out.push('\n');
            }
            if out.len() >= JOURNAL_CHUNK_BYTES {
                let chunk = bytes::Bytes::from(std::mem::take(&mut out));
                // The client went away: stop reading.
                if chunks.blocking_send(Ok(chunk)).is_err() {
                    return;
                }
            }
        }
        if !out.is_empty() {
            let _ = chunks.blocking_send(Ok(bytes::Bytes::from(out)));
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-ndjson"),
    );
    response
}
