//! The node's small handlers: `/`, health, metrics, the model list, the Responses WebSocket
//! refusal, stored responses' paths and the 404 in the OpenAI error shape. Which handler
//! serves which path is `crate::routes`' (above the node and the dashboard).

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use serde_json::json;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::admin::{self, json_response};
use crate::node::app::AppState;
use crate::node::client_gate;
use crate::node::metrics;
use crate::node::reply;
use crate::node::stored_response;
use quotaroute_actors::policy::implicit_combo::ImplicitCombo;

pub(crate) async fn not_found(request: Request) -> Response {
    let path = request.uri().path().to_string();
    if path.starts_with("/admin/") {
        return admin::admin_error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no admin path {path}"),
        );
    }
    let anthropic = request.headers().contains_key("anthropic-version");
    reply::error_only(
        &ApiError::new(
            ApiErrorKind::NotFound,
            format!("no such endpoint: {} {path}", request.method()),
        ),
        anthropic,
    )
}

pub(crate) async fn stored(
    State(app): State<AppState>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    stored_response::handle(app, id, request).await
}

/// `GET /v1/responses` is how Codex opens the Responses API's WebSocket mode. quotaroute
/// serves that API over HTTP: 426 makes Codex fall back to `POST` + SSE at once, where 404 or
/// 405 cost it seven retries over about six seconds (measured with Codex 0.171). 426 whether
/// or not `Upgrade` arrived: a proxy in front of the node may drop it (a hop-by-hop header),
/// and a `GET` on this path without an id has no other meaning.
pub(crate) async fn responses_websocket() -> Response {
    let mut response = json_response(
        StatusCode::UPGRADE_REQUIRED,
        &json!({"error": {
            "message": "quotaroute serves the Responses API over HTTP: POST /v1/responses (with \"stream\": true for events); its WebSocket mode is not supported",
            "type": "invalid_request_error",
            "code": "websocket_not_supported",
        }}),
    );
    response.headers_mut().insert(
        http::header::UPGRADE,
        http::HeaderValue::from_static("HTTP/1.1"),
    );
    response
}

/// `GET /` and `HEAD /`: clients' connectivity checks.
pub(crate) async fn root() -> Response {
    json_response(
        StatusCode::OK,
        &json!({"name": "quotaroute", "version": env!("CARGO_PKG_VERSION")}),
    )
}

pub(crate) async fn healthz(State(app): State<AppState>) -> Response {
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

pub(crate) async fn metrics_text(State(app): State<AppState>, headers: HeaderMap) -> Response {
    if !app.live().metrics_public {
        if let Some(refusal) = admin::admin_refusal(&app, &headers) {
            return refusal;
        }
    }
    let Some(handle) = &app.inner.metrics else {
        return admin::admin_error(StatusCode::NOT_FOUND, "not_found", "metrics are off");
    };
    if let Some(cluster) = app.cluster() {
        metrics::publish_cluster(&cluster.status);
    }
    let text = metrics::render(handle, app.router()).await;
    let mut response = Response::new(Body::from(text));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

/// One entry of the model list: a combo, or a `provider/model` name.
struct ListedModel {
    id: String,
    owned_by: String,
}

/// Every model name client `client` may send: combos first, then `provider/model` names.
fn listed_models(app: &AppState, client: usize) -> Vec<ListedModel> {
    let Some(topology) = app.router().and_then(|r| r.topology()) else {
        return Vec::new();
    };
    let mut data = every_model(&topology);
    // Only what the client may use (its `models`, behaviour §11): a restricted client learns
    // no other combo or upstream model name.
    let live = app.live();
    data.retain(|model| live.clients.may_use(client, &model.id));
    data
}

/// The names of [`listed_models`] (Google's model list, `gemini_paths`).
pub(crate) fn listed_model_ids(app: &AppState, client: usize) -> Vec<String> {
    listed_models(app, client)
        .into_iter()
        .map(|model| model.id)
        .collect()
}

/// Every combo, then every `provider/model` a connection lists or a combo targets.
fn every_model(topology: &quotaroute_actors::Topology) -> Vec<ListedModel> {
    let mut data: Vec<ListedModel> = topology
        .combos
        .iter()
        .map(|combo| ListedModel {
            id: combo.name.clone(),
            owned_by: "quotaroute".to_string(),
        })
        .collect();
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
            data.push(ListedModel {
                id: ImplicitCombo::new(&provider, &model).name(),
                owned_by: provider,
            });
        }
    }
    data
}

/// One model in OpenAI's shape, or in Anthropic's when the client sent `anthropic-version`.
fn model_json(app: &AppState, model: &ListedModel, anthropic: bool) -> serde_json::Value {
    if anthropic {
        let created = std::time::SystemTime::now() - app.inner.started.elapsed();
        json!({
            "type": "model",
            "id": model.id,
            "display_name": model.id,
            "created_at": humantime::format_rfc3339_seconds(created).to_string(),
        })
    } else {
        json!({"id": model.id, "object": "model", "owned_by": model.owned_by})
    }
}

pub(crate) async fn models(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let anthropic = headers.contains_key("anthropic-version");
    let Some(client) = client_gate::authenticated_client(&app.live(), &headers, true) else {
        return reply::error_only(
            &ApiError::new(ApiErrorKind::InvalidApiKey, "missing or invalid API key"),
            anthropic,
        );
    };
    let listed = listed_models(&app, client);
    let data: Vec<serde_json::Value> = listed
        .iter()
        .map(|model| model_json(&app, model, anthropic))
        .collect();
    if anthropic {
        return json_response(
            StatusCode::OK,
            &json!({
                "data": data,
                "has_more": false,
                "first_id": listed.first().map(|m| m.id.clone()),
                "last_id": listed.last().map(|m| m.id.clone()),
            }),
        );
    }
    json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
}

/// `GET /v1/models/{id}`: one model of the list (the id may hold a `/`).
pub(crate) async fn model_by_id(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let anthropic = headers.contains_key("anthropic-version");
    let Some(client) = client_gate::authenticated_client(&app.live(), &headers, true) else {
        return reply::error_only(
            &ApiError::new(ApiErrorKind::InvalidApiKey, "missing or invalid API key"),
            anthropic,
        );
    };
    match listed_models(&app, client)
        .iter()
        .find(|model| model.id == id)
    {
        Some(model) => json_response(StatusCode::OK, &model_json(&app, model, anthropic)),
        None => reply::error_only(
            &ApiError::new(
                ApiErrorKind::ModelNotFound,
                format!("model `{id}` not found: no combo and no provider/model of that name"),
            ),
            anthropic,
        ),
    }
}
