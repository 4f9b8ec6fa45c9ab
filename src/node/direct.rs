//! The routed endpoints' fast path: a POST to one of them (`endpoint::ROUTED`), or to one of
//! Google's `models/{model}:{method}` paths (`gemini_paths`), is answered here, ahead of the
//! route table, by the same two layers the table wraps it in — plain errors outside, CORS
//! inside — around the table's own handler. The answer is the table's; what is skipped is its
//! per-request work (the path lookup, a clone of each layer's boxed service and a box for each
//! layer's future, copied in), about a tenth of a request's instructions, and a Google
//! client's key is remembered by its connection as any other client's is.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;

use crate::node::app::AppState;
use crate::node::endpoint::Endpoint;
use crate::node::known_key::KnownKey;
use crate::node::{cors, gemini_paths, plain_errors, routed};

/// What a request taking this path is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Direct {
    /// A routed endpoint's path.
    Routed(Endpoint),
    /// One of Google's model paths: what follows `/models/` (`{model}:{method}`), as the
    /// table's `{*rest}` reads it.
    Google(String),
}

/// The prefixes of Google's model paths the table serves with `gemini_paths::post`.
const GOOGLE_MODELS: [&str; 2] = ["/v1beta/models/", "/v1/models/"];

/// What `request` is for, when it takes this path: a POST to a routed path or to one of
/// Google's model paths. A Google path whose rest the table would read otherwise than as it
/// is (percent-encoded, empty, or starting with `/`) is left to the table.
pub fn route_of(request: &Request) -> Option<Direct> {
    if request.method() != http::Method::POST {
        return None;
    }
    let path = request.uri().path();
    if let Some(endpoint) = Endpoint::at(path) {
        return Some(Direct::Routed(endpoint));
    }
    let rest = GOOGLE_MODELS
        .iter()
        .find_map(|prefix| path.strip_prefix(prefix))?;
    let as_is = !rest.is_empty() && !rest.starts_with('/') && !rest.contains('%');
    as_is.then(|| Direct::Google(rest.to_owned()))
}

/// `request` (for `direct`) answered as the route table would answer it; `known`: the key
/// its connection presented last.
pub async fn answer(
    app: AppState,
    direct: Direct,
    request: Request,
    known: Arc<KnownKey>,
) -> Response {
    plain_errors::around(&app, request, |request| {
        let handler_app = app.clone();
        cors::around(&app, request, |request| async move {
            match direct {
                Direct::Routed(endpoint) => {
                    routed::handle_on(handler_app, endpoint, request, known).await
                }
                Direct::Google(rest) => {
                    gemini_paths::answer_post(handler_app, &rest, request, Some(known)).await
                }
            }
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
                route_of(&request("POST", path)),
                Some(Direct::Routed(endpoint)),
                "{path}"
            );
            assert_eq!(route_of(&request("GET", path)), None, "GET {path}");
        }
        // With a query the path is the same; any other path is the table's.
        assert_eq!(
            route_of(&request("POST", "/v1/messages?beta=true")),
            Some(Direct::Routed(Endpoint::Messages))
        );
        for path in [
            "/v1/chat/completions/",
            "/v1/responses/resp_1",
            "/v1/models",
            "/v1beta/models",
            "/admin/reload",
        ] {
            assert_eq!(route_of(&request("POST", path)), None, "{path}");
        }
    }

    #[test]
    fn a_post_to_a_google_model_path_takes_it_with_the_rest_the_table_reads() {
        for (path, rest) in [
            (
                "/v1beta/models/gemini-2.5-flash:generateContent",
                "gemini-2.5-flash:generateContent",
            ),
            (
                "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=k",
                "gemini-2.5-flash:streamGenerateContent",
            ),
            ("/v1/models/pool:countTokens", "pool:countTokens"),
            // Not a method the router routes: the handler's own 404, as the table's.
            ("/v1beta/models/x:nope", "x:nope"),
        ] {
            assert_eq!(
                route_of(&request("POST", path)),
                Some(Direct::Google(rest.to_owned())),
                "{path}"
            );
            assert_eq!(route_of(&request("GET", path)), None, "GET {path}");
        }
        // What the table would decode, or might not match at all, stays the table's.
        for path in [
            "/v1beta/models/",
            "/v1beta/models//x:generateContent",
            "/v1beta/models/openai%2Fgpt-4o:generateContent",
            "/v1beta/modelsx:generateContent",
        ] {
            assert_eq!(route_of(&request("POST", path)), None, "{path}");
        }
    }
}
