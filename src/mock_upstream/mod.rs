//! A faithful mock of the OpenAI and Anthropic APIs, for tests, the load bench and the demo.
//!
//! Layout:
//! - `state` — [`MockUpstream`], the cloneable handle: rules, per-key budgets, request counts;
//! - `fault` — [`Fault`], [`ResetForm`], [`Rule`]: what can go wrong and when;
//! - `exchange` — which endpoint a path is and the deterministic reply a request gets;
//! - `openai`, `anthropic` — success shapes, JSON and SSE;
//! - `error_bodies` — the providers' real error bodies (upstream-errors.md);
//! - `rate_headers` — `x-ratelimit-*` / `anthropic-ratelimit-*` and reset formats;
//! - `handler` — one request: fault → response; `server` — accept loop, `TCP_NODELAY`, resets.
//!
//! Endpoints (matched by path suffix, so any prefix such as `/v1` works): `POST
//! …/chat/completions`, `…/completions`, `…/embeddings`, `…/responses` (OpenAI) and
//! `…/messages` (Anthropic). The key comes from `Authorization: Bearer` or `x-api-key` and is
//! echoed in `x-mock-key`. Control API: `POST /mock/rules` (JSON list of [`Rule`], replaces),
//! `GET`/`DELETE /mock/rules`, `GET`/`DELETE /mock/stats`, `POST /mock/budgets`
//! (`{"key", "requests_limit", "tokens_limit", "reset_ms"}`).

mod anthropic;
mod error_bodies;
mod exchange;
mod fault;
mod handler;
mod openai;
mod rate_headers;
mod server;
mod state;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

pub use error_bodies::masked_key;
pub use fault::{Fault, ResetForm, Rule};
pub use rate_headers::openai_duration;
pub use state::{Admission, MockStats, MockUpstream, RateBudget, RateSnapshot};

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
        .fallback(handler::upstream)
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
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
