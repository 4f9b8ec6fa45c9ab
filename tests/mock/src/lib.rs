//! quotaroute-mock: a faithful mock of the OpenAI and Anthropic APIs, for tests, the load bench
//! and the demo. Its own crate (a dev-dependency of the tests, a dependency of the `demo` and
//! `mock-upstream` commands only): it imports nothing of the router, and the router's modules
//! cannot reach into it.
//!
//! Layout:
//! - `state` — [`MockUpstream`], the cloneable handle: rules, per-key budgets, request counts,
//!   the compression mode, stored responses;
//! - `fault` — [`Fault`], [`ResetForm`], [`Rule`]: what can go wrong and when;
//! - `exchange` — which endpoint a path is and the deterministic reply a request gets;
//! - `openai`, `anthropic` — success shapes, JSON and SSE;
//! - `tool_calls` — a prompt saying `mock-tool-call:NAME {args}` gets a call of that offered
//!   tool (all three APIs, JSON and streams with the arguments in pieces);
//! - `error_bodies` — the providers' real error bodies (upstream-errors.md);
//! - `gemini`, `gemini_api`, `gemini_errors` — Google's Gemini API (below): routes and success
//!   shapes, one request's answer, Google's `google.rpc` error bodies;
//! - `rate_headers` — `x-ratelimit-*` / `anthropic-ratelimit-*` and reset formats;
//! - `plan_windows` — [`SubscriptionPlan`]: a key's rolling 5-hour and weekly windows
//!   ([`MockUpstream::set_plan`]), reported as Anthropic's unified or Codex's headers;
//! - `stored`, `stored_api` — the Responses API's stored responses and their endpoints;
//! - `encrypted` — encrypted reasoning and compaction items, readable only by their key;
//! - `compression` — [`Compression`] and `Accept-Encoding` negotiation; `encoder` — the codecs
//!   (async-compression), whole bodies and event by event; `delivery` — the last step of every
//!   upstream answer, its `Content-Encoding`;
//! - `auth` — [`KeyGate`] (only the newest key of a prefix passes) and the OAuth token
//!   endpoint (short-lived access tokens, rotating refresh tokens); `auth_api` — the mock's
//!   methods that set them and the `POST /oauth/token` handler;
//! - `verdict` — what a fault makes of a request (an error answer or a shaped success);
//! - `handler` — one request: fault → response; `server` — accept loop, `TCP_NODELAY`, resets.
//!
//! Endpoints (matched by path suffix, so any prefix such as `/v1` works): `POST
//! …/chat/completions`, `…/completions`, `…/embeddings`, `…/responses` (OpenAI) and
//! `…/messages`, `…/messages/count_tokens` (Anthropic: `{"input_tokens": N}`, N from the body's
//! size; no tokens charged to the budget). Every `POST …/responses` that completes is stored under
//! its key (the last 10 000; not with `"store": false`): `GET`/`DELETE …/responses/{id}`,
//! `GET …/responses/{id}/input_items` (`order`, `limit`, `after`) and `POST
//! …/responses/{id}/cancel` find it for that key only, any other key gets OpenAI's 404; a
//! `previous_response_id` the key has not stored is OpenAI's 400 `previous_response_not_found`.
//! Responses objects and stream events carry the public schema's fields (the request's
//! parameters repeated); `include: ["reasoning.encrypted_content"]` gives the reasoning item an
//! `encrypted_content` only that key can read (and `reasoning.summary` a summary text; on Chat
//! Completions `reasoning_effort` gives the answer a `reasoning_content`), `POST …/responses/compact` answers a
//! `response.compaction` whose compaction item is encrypted the same way (so does a
//! `…/responses` whose `input` ends with `{"type": "compaction_trigger"}`, Codex's inline
//! compaction: one compaction item is its whole output), and a request whose
//! `input` carries an item another key made is OpenAI's 400 `invalid_encrypted_content`
//! (`encrypted`).
//! The key comes from `Authorization: Bearer` or `x-api-key` and is echoed in `x-mock-key`;
//! headers set for a key ([`MockUpstream::set_response_headers`], e.g. Codex's `x-codex-*`
//! windows) go on every answer to it.
//!
//! Gemini (Google's paths, any prefix: AI Studio's `/v1beta/models/{model}:{method}` or Vertex
//! AI's `…/publishers/google/models/{model}:{method}`): `:generateContent`,
//! `:streamGenerateContent` (SSE with `?alt=sse`, else one JSON array sent chunk by chunk),
//! `:countTokens`, `:embedContent`, `:batchEmbedContents`, and `GET …/models[/{model}]` under
//! `/v1beta` or a publisher. The key comes from `x-goog-api-key`, `?key=` or Bearer (Vertex). A
//! prompt's `mock-tool-call:NAME {args}` gets a `functionCall` part (no id) of a declared
//! function; `thinkingConfig` charges `thoughtsTokenCount` and signs the first answer part with
//! a `thoughtSignature` (`includeThoughts`: a thought part first) that only that key's account
//! accepts back (any other gets 400 "Corrupted thought signature."); `usageMetadata` counts cached
//! tokens from the key's prompt cache. Errors are Google's: a key the gate refuses is 400
//! `API_KEY_INVALID`, no key 403, a spent budget 429 `QuotaFailure` per minute, `Status(n)`
//! Google's body for n (503 "The model is overloaded"), and the `Gemini*` faults the per-day or
//! per-minute quota (with `Help` and `RetryInfo`), a bad key, a suspended one (403
//! `CONSUMER_SUSPENDED`) and a `SAFETY` finish. Every request's head (path, query, headers) is
//! kept for tests ([`MockUpstream::recent_heads`]).
//!
//! Compression, like a CDN in front of the provider: off by default; in another mode every
//! upstream answer (success, error, event stream) gets `Vary: Accept-Encoding` and, when the
//! request's `Accept-Encoding` allows it, `Content-Encoding` (streams are compressed and flushed
//! event by event). In process: [`MockUpstream::set_compression`].
//!
//! Control API: `POST /mock/rules` (JSON list of [`Rule`], replaces), `GET`/`DELETE /mock/rules`,
//! `GET`/`DELETE /mock/stats`, `POST /mock/budgets` (`{"key", "requests_limit",
//! "tokens_limit", "reset_ms"}`), `POST /mock/compression` (`{"mode": "off" | "auto" | "gzip" |
//! "deflate" | "br" | "zstd"}`) and `GET /mock/compression` (the same shape). `POST
//! /oauth/token` is the OAuth endpoint (configured in process: [`MockUpstream::set_oauth`]);
//! a key the gate or the issued tokens refuse gets the provider's 401
//! ([`MockUpstream::set_key_gate`]).

mod anthropic;
mod auth;
mod auth_api;
mod compression;
mod delivery;
mod encoder;
mod encrypted;
mod error_bodies;
mod event_stream;
mod exchange;
mod fault;
mod gemini;
mod gemini_api;
mod gemini_errors;
mod handler;
mod missing_route;
mod openai;
mod plan_windows;
mod prompt_cache;
mod rate_headers;
mod route_table;
mod server;
mod state;
mod stored;
mod stored_api;
mod thinking;
mod tool_calls;
mod verdict;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

pub use auth::{Accepted, KeyGate, OAuthSettings, OAuthStats, ACCESS_TOKEN_PREFIX};
pub use compression::{Compression, Encoding, UnknownCompression};
pub use error_bodies::masked_key;
pub use exchange::reply_text;
pub use fault::{Fault, ResetForm, Rule};
pub use gemini::thought_signature as gemini_thought_signature;
pub use plan_windows::{PlanWindow, SubscriptionPlan, FIVE_HOURS_MS, WEEK_MS};
pub use rate_headers::openai_duration;
pub use route_table::Route404;
pub use state::{Admission, MockStats, MockUpstream, RateBudget, RateSnapshot, StoredLookup};
pub use stored::STORED_LIMIT;

/// Serves the mock on `listener` until the task is aborted. Every accepted socket gets
/// `TCP_NODELAY`.
pub async fn serve(listener: tokio::net::TcpListener, state: MockUpstream) {
    server::accept_loop(listener, router(state)).await;
}

/// The mock's routes (without the accept loop): control API plus every upstream endpoint.
pub fn router(state: MockUpstream) -> Router {
    Router::new()
        .route(
            "/mock/rules",
            post(replace_rules).delete(clear_rules).get(list_rules),
        )
        .route("/mock/stats", get(stats).delete(reset_stats))
        .route("/mock/budgets", post(set_budget))
        .route("/mock/routes", post(set_routes))
        .route("/oauth/token", post(auth_api::token))
        .route(
            "/mock/compression",
            post(set_compression).get(get_compression),
        )
        .fallback(handler::upstream)
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

/// `POST /mock/routes`: `{"key", "missing": ["/v1/responses/compact"], "style"}` — the
/// routes a key's host lacks and how its 404 reads (`missing_route`).
async fn set_routes(
    State(mock): State<MockUpstream>,
    Json(body): Json<missing_route::RoutesBody>,
) -> StatusCode {
    let missing: Vec<&str> = body.missing.iter().map(String::as_str).collect();
    mock.set_missing_routes(&body.key, &missing);
    mock.set_route_404(&body.key, body.style);
    StatusCode::NO_CONTENT
}

async fn replace_rules(
    State(mock): State<MockUpstream>,
    Json(rules): Json<Vec<Rule>>,
) -> StatusCode {
    mock.set_rules(rules);
    StatusCode::NO_CONTENT
}

async fn clear_rules(State(mock): State<MockUpstream>) -> StatusCode {
    mock.clear_rules();
    StatusCode::NO_CONTENT
}

async fn list_rules(State(mock): State<MockUpstream>) -> Json<Vec<Rule>> {
    Json(mock.rules().into_iter().map(|(rule, _)| rule).collect())
}

async fn stats(State(mock): State<MockUpstream>) -> Json<MockStats> {
    Json(mock.stats())
}

async fn reset_stats(State(mock): State<MockUpstream>) -> StatusCode {
    mock.reset_stats();
    StatusCode::NO_CONTENT
}

/// `POST /mock/budgets`: a key's budget; omitted numbers keep the defaults.
#[derive(Debug, Deserialize)]
struct BudgetRequest {
    key: String,
    requests_limit: Option<u64>,
    tokens_limit: Option<u64>,
    reset_ms: Option<u64>,
}

async fn set_budget(
    State(mock): State<MockUpstream>,
    Json(request): Json<BudgetRequest>,
) -> StatusCode {
    let default = RateBudget::default();
    mock.set_budget(
        &request.key,
        RateBudget {
            requests_limit: request.requests_limit.unwrap_or(default.requests_limit),
            tokens_limit: request.tokens_limit.unwrap_or(default.tokens_limit),
            reset_ms: request.reset_ms.unwrap_or(default.reset_ms),
        },
    );
    StatusCode::NO_CONTENT
}

/// `POST`/`GET /mock/compression`: `{"mode": "off" | "auto" | "gzip" | "deflate" | "br" | "zstd"}`.
#[derive(Debug, Serialize, Deserialize)]
struct CompressionSetting {
    mode: Compression,
}

async fn set_compression(
    State(mock): State<MockUpstream>,
    Json(setting): Json<CompressionSetting>,
) -> StatusCode {
    mock.set_compression(setting.mode);
    StatusCode::NO_CONTENT
}

async fn get_compression(State(mock): State<MockUpstream>) -> Json<CompressionSetting> {
    Json(CompressionSetting {
        mode: mock.compression(),
    })
}
