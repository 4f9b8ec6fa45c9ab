//! A routed request's intake, before anything is routed: the client's key (and the router,
//! once its journal is replayed), its request id, a JSON `Content-Type`, the body read once
//! (≤ `max_body_bytes`, no silence over `body_timeout_ms`), its `Content-Encoding` undone, and
//! the body parsed (model, stream, the prompt spans affinity can use).

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::header::{HeaderMap, CONTENT_TYPE};
use quotaroute_actors::Router;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::app::AppState;
use crate::node::client_gate;
use crate::node::known_key::KnownKey;
use crate::node::live::LiveConfig;
use crate::node::reply;
use crate::wire::affinity_group::PromptSpans;
use crate::wire::body_rewrite::{
    gemini_prompt_read, model_name_problem, parse_request_for, BodyError, PromptScan, RequestInfo,
};

use super::guarded_body::read_guarded;

/// A request taken in: its router and client, its body decoded and parsed.
pub(super) struct Intake {
    pub router: Router,
    /// The client's index in `live.clients`.
    pub client_index: usize,
    pub body: Bytes,
    pub info: RequestInfo,
}

/// Why a request was not taken in, and whether its body is still unread (the connection then
/// closes after the answer: the rest of that body would be read as the next request).
pub(super) struct NotTaken {
    pub error: ApiError,
    pub body_unread: bool,
}

/// Takes in a routed request (`allow_x_api_key`: an Anthropic endpoint; `named`: the model and
/// whether it streams, when the path says them rather than the body, as Google's do; `known`:
/// the key the request's connection presented last).
pub(super) async fn take(
    app: &AppState,
    live: &Arc<LiveConfig>,
    headers: &HeaderMap,
    body: Body,
    (allow_x_api_key, named, known): (bool, Option<(String, bool)>, Option<&KnownKey>),
) -> Result<Intake, NotTaken> {
    let unread = |error: ApiError| NotTaken {
        error,
        body_unread: true,
    };
    let (router, client_index) =
        admitted_router_known(app, live, headers, allow_x_api_key, known).map_err(unread)?;
    if !is_json_content_type(headers) {
        return Err(unread(ApiError::new(
            ApiErrorKind::InvalidJson,
            "the body must be JSON (Content-Type: application/json)",
        )));
    }
    let body = read_guarded(body, headers, live.max_body_bytes, live.body_timeout)
        .await
        .map_err(|refused| NotTaken {
            error: refused.error,
            body_unread: refused.body_unread,
        })?;
    let read = |error: ApiError| NotTaken {
        error,
        body_unread: false,
    };
    // Only the affinity spans `derive_group` can use are collected (behaviour §10).
    let scan = PromptScan::for_body(
        live.affinity.enabled,
        body.len(),
        live.affinity.min_prompt_bytes,
    );
    let info = match named {
        Some((model, stream)) => {
            named_request(&body, model, stream).map_err(|error| read(ApiError::from(error)))?
        }
        None => parse_request_for(&body, scan).map_err(|error| read(ApiError::from(error)))?,
    };
    Ok(Intake {
        router,
        client_index,
        body,
        info,
    })
}

/// A body whose model its path names: it must be a JSON object, and the model a name the
/// router takes (the same rules as a body's `model`).
fn named_request(body: &[u8], model: String, stream: bool) -> Result<RequestInfo, BodyError> {
    // A body read as a Gemini request for its spans is a JSON object; any other is checked
    // without building it (the body goes upstream as its bytes).
    let spans = match gemini_prompt_read(body) {
        Some(spans) => spans,
        None => {
            serde_json::from_slice::<serde::de::IgnoredAny>(body)
                .map_err(|error| BodyError::InvalidJson(error.to_string()))?;
            if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
                return Err(BodyError::NotAnObject);
            }
            PromptSpans::default()
        }
    };
    if model.is_empty() {
        return Err(BodyError::MissingModel);
    }
    if let Some(problem) = model_name_problem(&model) {
        return Err(BodyError::InvalidModel(problem));
    }
    Ok(RequestInfo::named(model, stream, spans))
}

/// Whether the request carries one of the client keys (`x-api-key` too on `/v1/messages`).
pub fn client_authorized(live: &LiveConfig, headers: &HeaderMap, allow_x_api_key: bool) -> bool {
    client_gate::authenticated_client(live, headers, allow_x_api_key).is_some()
}

/// The client's own `x-request-id`, when it is one the router may repeat.
pub(super) fn client_request_id(headers: &HeaderMap) -> Option<String> {
    let id = headers.get(reply::REQUEST_ID)?.to_str().ok()?;
    let valid = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    valid.then(|| id.to_string())
}

const JSON: &[u8] = b"application/json";
const PLUS_JSON: &[u8] = b"+json";

fn is_json_content_type(headers: &HeaderMap) -> bool {
    match headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) {
        None => true,
        // Compared without case and without a lowered copy of the value.
        Some(value) => {
            let value = value.as_bytes();
            value
                .get(..JSON.len())
                .is_some_and(|start| start.eq_ignore_ascii_case(JSON))
                || value
                    .windows(PLUS_JSON.len())
                    .any(|part| part.eq_ignore_ascii_case(PLUS_JSON))
        }
    }
}

/// The router and the client (its index in `live.clients`) of a request with a valid key
/// (`x-api-key` too on Anthropic endpoints), once the journal is replayed.
pub(crate) fn admitted_router(
    app: &AppState,
    live: &Arc<LiveConfig>,
    headers: &HeaderMap,
    allow_x_api_key: bool,
) -> Result<(Router, usize), ApiError> {
    admitted_router_known(app, live, headers, allow_x_api_key, None)
}

/// [`admitted_router`], the key identified through `known` (the key the request's connection
/// presented last) when there is one.
fn admitted_router_known(
    app: &AppState,
    live: &Arc<LiveConfig>,
    headers: &HeaderMap,
    allow_x_api_key: bool,
    known: Option<&KnownKey>,
) -> Result<(Router, usize), ApiError> {
    let client = match known {
        Some(known) => {
            client_gate::authenticated_client_known(live, headers, allow_x_api_key, known)
        }
        None => client_gate::authenticated_client(live, headers, allow_x_api_key),
    };
    let Some(client) = client else {
        return Err(ApiError::new(
            ApiErrorKind::InvalidApiKey,
            "missing or invalid API key",
        ));
    };
    let router = app.router().cloned().ok_or_else(|| {
        ApiError::new(
            ApiErrorKind::NoAvailableTarget,
            "the router is starting: replaying its journal",
        )
    })?;
    Ok((router, client))
}

/// The part of the client's `/v1/…` path (and query) that follows the provider's `base_url`,
/// without any `key` query parameter: a key in the query string (Google's habit, behaviour
/// §15) is the client's secret and never goes upstream. Other parameters go as they came.
pub(crate) fn upstream_path(uri: &http::Uri) -> Cow<'_, str> {
    let Some(path) = uri.path().strip_prefix("/v1") else {
        return Cow::Borrowed("/");
    };
    // Most requests carry no query: their path is the client's own, borrowed.
    if uri.query().is_none() {
        return Cow::Borrowed(path);
    }
    let kept: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty() && !is_key_parameter(pair))
        .collect();
    if kept.is_empty() {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(format!("{path}?{}", kept.join("&")))
    }
}

/// Whether a raw `name=value` query pair is named `key` (percent-encoded or not).
fn is_key_parameter(pair: &str) -> bool {
    let name = pair.split('=').next().unwrap_or("");
    url::form_urlencoded::parse(name.as_bytes())
        .next()
        .is_some_and(|(decoded, _)| decoded == "key")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

    fn with_content_type(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(value));
        headers
    }

    /// `named_request` as it read a body before its spans' read stood for the JSON check.
    fn named_request_checked_twice(body: &[u8], model: &str) -> Result<RequestInfo, BodyError> {
        serde_json::from_slice::<serde::de::IgnoredAny>(body)
            .map_err(|error| BodyError::InvalidJson(error.to_string()))?;
        if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
            return Err(BodyError::NotAnObject);
        }
        if let Some(problem) = model_name_problem(model) {
            return Err(BodyError::InvalidModel(problem));
        }
        let spans = crate::wire::body_rewrite::gemini_prompt_spans(body);
        Ok(RequestInfo::named(model.to_owned(), false, spans))
    }

    #[test]
    fn a_named_body_read_once_is_refused_and_spanned_as_when_checked_apart() {
        let bodies: [&[u8]; 14] = [
            br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[]}"#,
            br#" {"systemInstruction":{"parts":[{"text":"s"}]},"contents":[]} "#,
            br#"{}"#,
            // Members of another shape: no spans, still a JSON object.
            br#"{"contents":"not a list"}"#,
            br#"{"contents":[],"contents":[]}"#,
            br#"{"tools":[],"generationConfig":{"temperature":0.5},"labels":{"a":"b"}}"#,
            // Not an object, or not JSON.
            br#"[{"contents":[]}]"#,
            br#""text""#,
            br#"{"contents":[}"#,
            br#"{"contents":[]} trailing"#,
            br#"{"contents":[]"#,
            b"\x0c{\"contents\":[]}",
            b"",
            b"{\"contents\":[{\"parts\":[{\"text\":\"\xff\"}]}]}",
        ];
        for body in bodies {
            let once = named_request(body, "gemini-2.5-flash".to_owned(), false);
            let twice = named_request_checked_twice(body, "gemini-2.5-flash");
            let shown = String::from_utf8_lossy(body);
            match (once, twice) {
                (Ok(once), Ok(twice)) => {
                    assert_eq!(once.prompt, twice.prompt, "{shown}");
                    assert_eq!(once.model, twice.model, "{shown}");
                }
                (Err(once), Err(twice)) => {
                    assert_eq!(once.to_string(), twice.to_string(), "{shown}");
                }
                (once, twice) => panic!("{shown}: {:?} against {:?}", once.is_ok(), twice.is_ok()),
            }
        }
    }

    #[test]
    fn json_content_types_are_told_apart_in_any_case() {
        for json in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.api+json",
            "APPLICATION/VND.API+JSON",
        ] {
            assert!(is_json_content_type(&with_content_type(json)), "{json}");
        }
        for other in ["text/plain", "application/jso", "", "multipart/form-data"] {
            assert!(!is_json_content_type(&with_content_type(other)), "{other}");
        }
        assert!(is_json_content_type(&HeaderMap::new()), "no content type");
    }

    #[test]
    fn a_key_in_the_query_string_is_left_out_of_the_upstream_path() {
        let cases = [
            ("/v1/chat/completions", "/chat/completions"),
            ("/v1/chat/completions?key=AIzaX", "/chat/completions"),
            (
                "/v1/chat/completions?%6Bey=AIzaX&a=1",
                "/chat/completions?a=1",
            ),
            ("/v1/x?alt=sse&key=AIzaX&b=2", "/x?alt=sse&b=2"),
            ("/v1/x?keys=1&apikey=2", "/x?keys=1&apikey=2"),
            ("/v1/x?", "/x"),
            ("/other", "/"),
        ];
        for (client, upstream) in cases {
            let uri: http::Uri = client.parse().unwrap();
            assert_eq!(upstream_path(&uri), upstream, "{client}");
        }
    }
}
