//! Which handler serves which path: the node's client API (behind its CORS layer), its admin
//! API, and the dashboard's pages and feeds, every answer through the node's plain-error layer.
//! Above both the node and the dashboard (`crate::dashboard` imports the node's state; the node
//! never imports the dashboard), so this file is where they meet; [`RunningNode::start`] serves
//! this table.

use axum::extract::{Request, State};
use axum::routing::{delete, get, post};

use crate::dashboard::{events as ui_events, page as ui, timeline as ui_timeline};
use crate::node::admin;
use crate::node::app::AppState;
use crate::node::cors;
use crate::node::endpoint::{Endpoint, ROUTED};
use crate::node::gemini_paths;
use crate::node::http::{healthz, metrics_text, not_found, responses_websocket, root, stored};
use crate::node::plain_errors;
use crate::node::routed;
use crate::node::{NodeError, NodeOptions, RunningNode};

/// The node's routes.
pub fn routes(app: AppState) -> axum::Router {
    let endpoint = |endpoint: Endpoint| {
        post(move |State(app): State<AppState>, request: Request| {
            routed::handle(app, endpoint, request)
        })
    };
    // The routed POSTs are answered ahead of this table by `node::direct`, with the same two
    // layers; they are registered here too, so every other method on their paths gets the
    // table's 405 (and `GET /v1/responses` its WebSocket).
    let client_api = ROUTED
        .into_iter()
        .fold(axum::Router::new(), |table, (path, routed)| {
            table.route(path, endpoint(routed))
        })
        .route("/", get(root))
        .route("/v1/responses", get(responses_websocket))
        .route("/v1/models", get(gemini_paths::v1_models))
        .route(
            "/v1/models/{*id}",
            get(gemini_paths::v1_model).post(gemini_paths::post),
        )
        // Google's client paths (behaviour §15).
        .route("/v1beta/models", get(gemini_paths::models))
        .route(
            "/v1beta/models/{*rest}",
            get(gemini_paths::model).post(gemini_paths::post),
        )
        .route("/v1/responses/{id}", get(stored).delete(stored))
        .route("/v1/responses/{id}/input_items", get(stored))
        .route("/v1/responses/{id}/cancel", post(stored))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            cors::layer,
        ));
    axum::Router::new()
        .merge(client_api)
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .route("/admin/state", get(admin::state))
        .route("/admin/lockouts", get(admin::lockouts))
        .route("/admin/clients", get(admin::clients))
        .route("/admin/clients/{id}/reset", post(admin::reset_client))
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
        .route("/admin/affinity", get(admin::affinity))
        .route("/admin/events", get(ui_events::events))
        .route("/admin/timeline.svg", get(ui_timeline::timeline))
        .route("/ui", get(ui::index))
        .route("/ui/", get(ui::index))
        .route("/ui/dashboard.css", get(ui::stylesheet))
        .route("/ui/dashboard.js", get(ui::script))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            plain_errors::router_answers,
        ))
        .with_state(app)
}

impl RunningNode {
    /// Binds, replays the journal, and serves [`routes`] (see
    /// [`RunningNode::start_with_routes`]).
    pub async fn start(
        config: crate::config::Config,
        options: NodeOptions,
    ) -> Result<RunningNode, NodeError> {
        RunningNode::start_with_routes(config, options, routes).await
    }
}
