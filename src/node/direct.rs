//! The routed endpoints' fast path: a POST to one of them (`endpoint::ROUTED`) is answered here,
//! ahead of the route table, by the same two layers the table wraps it in — plain errors
//! outside, CORS inside — around `routed::handle`. The answer is the table's; what is skipped
//! is its per-request work (the path lookup, a clone of each layer's boxed service and a box
//! for each layer's future), about a tenth of a request's instructions.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;

use crate::node::app::AppState;
use crate::node::endpoint::Endpoint;
use crate::node::known_key::KnownKey;
use crate::node::{cors, plain_errors, routed};

/// The endpoint `request` is for, when it takes this path: a POST to a routed path.
pub fn endpoint_of(request: &Request) -> Option<Endpoint> {
    if request.method() != http::Method::POST {
        return None;
    }
    Endpoint::at(request.uri().path())
}

/// `request` (for `endpoint`) answered as the route table would answer it; `known`: the key
/// its connection presented last.
pub async fn answer(
    app: AppState,
    endpoint: Endpoint,
    request: Request,
    known: Arc<KnownKey>,
) -> Response {
    plain_errors::around(&app, request, |request| {
        cors::around(&app, request, |request| {
            routed::handle_on(app.clone(), endpoint, request, known)
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(method: &str, path: &str) -> Request {
        http::Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap()
    }

    #[test]
    fn only_a_post_to_a_routed_path_takes_the_fast_path() {
        for (path, endpoint) in crate::node::endpoint::ROUTED {
            assert_eq!(
                endpoint_of(&request("POST", path)),
                Some(endpoint),
                "{path}"
            );
            assert_eq!(endpoint_of(&request("GET", path)), None, "GET {path}");
        }
        // With a query the path is the same; any other path is the table's.
        assert_eq!(
            endpoint_of(&request("POST", "/v1/messages?beta=true")),
            Some(Endpoint::Messages)
        );
        for path in [
            "/v1/chat/completions/",
            "/v1/responses/resp_1",
            "/v1/models",
            "/admin/reload",
        ] {
            assert_eq!(endpoint_of(&request("POST", path)), None, "{path}");
        }
    }
}
