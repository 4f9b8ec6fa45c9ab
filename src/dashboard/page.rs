//! `GET /ui` (contract): the operator's dashboard, a static page compiled into the binary
//! (`src/node/ui/`: HTML, CSS and plain JavaScript, no framework, no build step). The page asks
//! for the admin key, keeps it in the tab's `sessionStorage`, and calls the admin API with it:
//! `/admin/events` for live state, `/admin/timeline.svg` for the incident picture, the existing
//! admin actions for its buttons. Like every admin path it is 404 when the admin API is off;
//! the page itself needs no key (it holds none).

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::{HeaderValue, StatusCode};

use crate::node::admin::admin_error;
use crate::node::app::AppState;

const INDEX_HTML: &str = include_str!("ui/index.html");
const DASHBOARD_CSS: &str = include_str!("ui/dashboard.css");
const DASHBOARD_JS: &str = include_str!("ui/dashboard.js");

/// Only this origin's scripts, styles and calls; the timeline arrives as a `blob:` image.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub async fn index(State(app): State<AppState>) -> Response {
    asset(&app, INDEX_HTML, "text/html; charset=utf-8")
}

pub async fn stylesheet(State(app): State<AppState>) -> Response {
    asset(&app, DASHBOARD_CSS, "text/css; charset=utf-8")
}

pub async fn script(State(app): State<AppState>) -> Response {
    asset(&app, DASHBOARD_JS, "text/javascript; charset=utf-8")
}

fn asset(app: &AppState, body: &'static str, content_type: &'static str) -> Response {
    if app.live().admin_key.is_none() {
        return admin_error(
            StatusCode::NOT_FOUND,
            "not_found",
            "the admin API is off (no server.admin_key)",
        );
    }
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    headers.insert(
        http::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        http::header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    response
}
