//! The node's HTTP surface: which handler serves which path, plus the small ones — health,
//! metrics and the model list. Every path not listed is a 404 in the OpenAI error shape.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::{delete, get, post};
use http::{HeaderMap, StatusCode};
use serde_json::json;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::admin::{self, json_response};
use crate::node::app::AppState;
use crate::node::metrics;
use crate::node::proxy::{self, client_authorized, Endpoint};
use crate::node::reply;

/// The node's routes.
pub fn routes(app: AppState) -> axum::Router {
    let endpoint = |endpoint: Endpoint| {
        post(move |State(app): State<AppState>, request: Request| {
            proxy::handle(app, endpoint, request)
        })
    };
    axum::Router::new()
        .route("/v1/chat/completions", endpoint(Endpoint::ChatCompletions))
        .route("/v1/completions", endpoint(Endpoint::Completions))
        .route("/v1/embeddings", endpoint(Endpoint::Embeddings))
        .route("/v1/responses", endpoint(Endpoint::Responses))
        .route("/v1/messages", endpoint(Endpoint::Messages))
        .route("/v1/models", get(models))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .route("/admin/state", get(admin::state))
        .route("/admin/lockouts", get(admin::lockouts))
        .route(
            "/admin/lockouts/{connection}/{*model}",
            delete(admin::clear_lockout),
        )
        .route(
            "/admin/connections/{id}/clear",
            post(admin::clear_connection),
        )
        .route("/admin/connections/{id}/usage", post(admin::push_usage))
        .route(
            "/admin/providers/{name}/breaker/reset",
            post(admin::reset_breaker),
        )
        .route("/admin/reload", post(admin::reload_config))
        .route("/admin/journal", get(admin::journal))
        .fallback(not_found)
        .with_state(app)
}

async fn not_found(request: Request) -> Response {
    let path = request.uri().path().to_string();
    if path.starts_with("/admin/") {
        return admin::admin_error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no admin path {path}"),
        );
    }
    reply::error_only(
        &ApiError::new(
            ApiErrorKind::ModelNotFound,
            format!("no such endpoint: {path}"),
        ),
        false,
    )
}

async fn healthz(State(app): State<AppState>) -> Response {
    match app.router() {
        Some(router) => {
            let stats = router.journal_stats();
            json_response(
                StatusCode::OK,
                &json!({
                    "status": "ready",
                    "journal": if stats.healthy { "ok" } else { "degraded" },
                    "journal_lag_events": stats.queue_len,
                    "journal_write_errors": stats.write_errors,
                }),
            )
        }
        None => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "replaying"}),
        ),
    }
}

async fn metrics_text(State(app): State<AppState>, headers: HeaderMap) -> Response {
    if !app.live().metrics_public {
        if let Some(refusal) = admin::admin_refusal(&app, &headers) {
            return refusal;
        }
    }
    let Some(handle) = &app.inner.metrics else {
        return admin::admin_error(StatusCode::NOT_FOUND, "not_found", "metrics are off");
    };
    let text = metrics::render(handle, app.router()).await;
    let mut response = Response::new(Body::from(text));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

async fn models(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let live = app.live();
    if !client_authorized(&live, &headers, true) {
        return reply::error_only(
            &ApiError::new(ApiErrorKind::InvalidApiKey, "missing or invalid API key"),
            false,
        );
    }
    let Some(topology) = app.router().and_then(|r| r.topology()) else {
        return json_response(StatusCode::OK, &json!({"object": "list", "data": []}));
    };
    let mut data = Vec::new();
    for combo in &topology.combos {
        data.push(json!({"id": combo.name, "object": "model", "owned_by": "quotaroute"}));
    }
    let mut seen = std::collections::BTreeSet::new();
    let listed = topology.connections.iter().flat_map(|c| {
        c.models
            .iter()
            .flatten()
            .map(move |m| (c.provider.clone(), m.clone()))
    });
    let targeted = topology.combos.iter().flat_map(|combo| {
        combo.targets.iter().filter_map(|t| {
            let connection = topology.connection(&t.connection)?;
            Some((connection.provider.clone(), t.model.clone()))
        })
    });
    for (provider, model) in listed.chain(targeted) {
        if seen.insert((provider.clone(), model.clone())) {
            data.push(json!({"id": format!("{provider}/{model}"), "object": "model", "owned_by": provider}));
        }
    }
    json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
}
