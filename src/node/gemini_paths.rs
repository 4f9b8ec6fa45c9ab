//! Google's client paths (behaviour §15): `POST /v1beta/models/{model}:{method}` (and under
//! `/v1/`) routed like any request with the model its path names, `GET …/models[/{model}]` in
//! Google's shape. The client's key comes in `x-goog-api-key`, `?key=` or Bearer; it is taken
//! out of the request (header and query) before anything reads it, so a key in the query is
//! never logged, journaled, traced or sent on. The router's own errors are Google's shape.

use std::borrow::Cow;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::response::Response;
use bytes::BytesMut;
use http::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use http::{StatusCode, Uri};
use serde_json::json;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::admin::json_response;
use crate::node::app::AppState;
use crate::node::client_gate;
use crate::node::endpoint::Endpoint;
use crate::node::gemini_array::array_framed;
use crate::node::google_errors::{google_error, in_google_shape};
use crate::node::http as small;
use crate::node::known_key::KnownKey;
use crate::node::routed;

const X_GOOG_API_KEY: HeaderName = HeaderName::from_static("x-goog-api-key");
const X_GOOG_API_CLIENT: HeaderName = HeaderName::from_static("x-goog-api-client");

/// What the google-genai SDKs and Gemini CLI may call: every method the router routes.
const METHODS: [&str; 5] = [
    "generateContent",
    "streamGenerateContent",
    "countTokens",
    "embedContent",
    "batchEmbedContents",
];

/// `POST …/models/{model}:{method}`.
pub(crate) async fn post(
    State(app): State<AppState>,
    Path(rest): Path<String>,
    request: Request,
) -> Response {
    answer_post(app, &rest, request, None).await
}

/// `POST …/models/{rest}` answered (`rest`: `{model}:{method}`); `known`: the key the
/// request's connection presented last, when the connection keeps one (`node::direct`).
pub(crate) async fn answer_post(
    app: AppState,
    rest: &str,
    request: Request,
    known: Option<Arc<KnownKey>>,
) -> Response {
    let Some((model, endpoint)) = rest
        .rsplit_once(':')
        .and_then(|(model, method)| Some((model, Endpoint::gemini(method)?)))
    else {
        let path = request.uri().path();
        return google_error(&ApiError::new(
            ApiErrorKind::NotFound,
            format!("no such endpoint: POST {path} (Google's paths are models/{{model}}:{{method}}, method one of {})", METHODS.join(", ")),
        ));
    };
    let model = model.strip_prefix("models/").unwrap_or(model).to_owned();
    let (request, sse) = key_as_bearer(request);
    let response = routed::handle_named(app, endpoint, request, Some(model), known).await;
    let response = in_google_shape(response).await;
    if endpoint == Endpoint::GeminiStream && !sse && response.status().is_success() {
        return array_framed(response);
    }
    response
}

/// `GET /v1beta/models`: the models the client may name, in Google's list shape.
pub(crate) async fn models(State(app): State<AppState>, request: Request) -> Response {
    let (request, _) = key_as_bearer(request);
    let Some(client) = client_of(&app, request.headers()) else {
        return google_error(&unknown_key());
    };
    let models: Vec<serde_json::Value> = small::listed_model_ids(&app, client)
        .iter()
        .map(|id| model_json(id))
        .collect();
    json_response(StatusCode::OK, &json!({ "models": models }))
}

/// `GET /v1beta/models/{model}`: one of them (`provider/model` with its `/` as is or `%2F`).
pub(crate) async fn model(
    State(app): State<AppState>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let (request, _) = key_as_bearer(request);
    let Some(client) = client_of(&app, request.headers()) else {
        return google_error(&unknown_key());
    };
    let id = id.strip_prefix("models/").unwrap_or(&id);
    match small::listed_model_ids(&app, client)
        .iter()
        .find(|listed| *listed == id)
    {
        Some(found) => json_response(StatusCode::OK, &model_json(found)),
        None => google_error(&ApiError::new(
            ApiErrorKind::ModelNotFound,
            format!("model `{id}` not found: no combo and no provider/model of that name"),
        )),
    }
}

/// `GET /v1/models`: Google's list for a Google client, else OpenAI's (or Anthropic's).
pub(crate) async fn v1_models(State(app): State<AppState>, request: Request) -> Response {
    if is_google_client(request.headers(), request.uri()) {
        return models(State(app), request).await;
    }
    small::models(State(app), request.headers().clone()).await
}

/// `GET /v1/models/{id}`: Google's model for a Google client, else OpenAI's (or Anthropic's).
pub(crate) async fn v1_model(
    State(app): State<AppState>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    if is_google_client(request.headers(), request.uri()) {
        return model(State(app), Path(id), request).await;
    }
    small::model_by_id(State(app), Path(id), request.headers().clone()).await
}

/// One model in Google's shape.
fn model_json(id: &str) -> serde_json::Value {
    json!({
        "name": format!("models/{id}"),
        "displayName": id,
        "supportedGenerationMethods": METHODS,
    })
}

fn unknown_key() -> ApiError {
    ApiError::new(
        ApiErrorKind::InvalidApiKey,
        "API key not valid. Please pass a valid API key.",
    )
}

fn client_of(app: &AppState, headers: &HeaderMap) -> Option<usize> {
    client_gate::authenticated_client(&app.live(), headers, false)
}

/// A request from a Google client: its key in `x-goog-api-key` or the query, or its SDK's
/// `x-goog-api-client` header.
fn is_google_client(headers: &HeaderMap, uri: &Uri) -> bool {
    headers.contains_key(X_GOOG_API_KEY)
        || headers.contains_key(X_GOOG_API_CLIENT)
        || query_pairs(uri).any(|(name, _)| name == "key")
}

/// The query's pairs, decoded as `application/x-www-form-urlencoded` reads them.
fn query_pairs(uri: &Uri) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(decoded_pair)
}

/// One `name=value` pair of a query, decoded. A pair with no `+` and no `%` decodes to itself,
/// so only the others go through the decoder (~700 instructions a pair, three reads a request).
fn decoded_pair(pair: &str) -> (Cow<'_, str>, Cow<'_, str>) {
    if !pair.bytes().any(|byte| byte == b'+' || byte == b'%') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        return (Cow::Borrowed(name), Cow::Borrowed(value));
    }
    url::form_urlencoded::parse(pair.as_bytes())
        .next()
        .unwrap_or_default()
}

/// What the router reads of a Google path's query, in one pass over its pairs: the client's
/// key (the first pair named `key`), whether it asks for SSE (`alt=sse`), and how long the
/// query is without its `key` pairs and empty pairs (when it has a `key`).
#[derive(Default)]
struct QueryRead<'a> {
    key: Option<Cow<'a, str>>,
    sse: bool,
    /// `Some(bytes)` when a `key` pair is in the query: the kept pairs' bytes, each with the
    /// `?` or `&` before it.
    kept_len: Option<usize>,
}

fn read_query(uri: &Uri) -> QueryRead<'_> {
    let mut read = QueryRead::default();
    let mut kept_len = 0;
    let mut keyed = false;
    for pair in uri.query().unwrap_or("").split('&') {
        if pair.is_empty() {
            continue;
        }
        let (name, value) = decoded_pair(pair);
        if name == "key" {
            keyed = true;
            read.key.get_or_insert(value);
            continue;
        }
        read.sse |= name == "alt" && value == "sse";
        kept_len += 1 + pair.len();
    }
    read.kept_len = keyed.then_some(kept_len);
    read
}

/// `request` with the client's key (`x-goog-api-key`, else `?key=`, else its Bearer) as its
/// `Authorization: Bearer`, and no `x-goog-api-key` header or `key` parameter left; and whether
/// its query asks for SSE (`alt=sse`).
fn key_as_bearer(mut request: Request) -> (Request, bool) {
    let header_key = request.headers_mut().remove(X_GOOG_API_KEY);
    let query = read_query(request.uri());
    let key = (header_key.as_ref())
        .and_then(|value| value.to_str().ok())
        .or(query.key.as_deref());
    let bearer = key.and_then(bearer_value);
    let (sse, kept_len) = (query.sse, query.kept_len);
    if let Some(kept_len) = kept_len {
        *request.uri_mut() = without_key(request.uri(), kept_len);
    }
    if let Some(value) = bearer {
        request.headers_mut().insert(AUTHORIZATION, value);
    }
    (request, sse)
}

/// `Bearer {key}` as a sensitive header value, built in one buffer; `None` for a key a header
/// cannot carry.
fn bearer_value(key: &str) -> Option<HeaderValue> {
    let key = key.trim();
    let mut bytes = BytesMut::with_capacity(BEARER.len() + key.len());
    bytes.extend_from_slice(BEARER);
    bytes.extend_from_slice(key.as_bytes());
    let mut value = HeaderValue::from_maybe_shared(bytes.freeze()).ok()?;
    value.set_sensitive(true);
    Some(value)
}

const BEARER: &[u8] = b"Bearer ";

/// `uri` without its `key` parameter (the others kept as they came, empty pairs dropped);
/// `kept_len`: the kept pairs' bytes with their separators ([`QueryRead::kept_len`]), so the
/// new URI's buffer is its exact size (a `Bytes` of a `Vec` with room to spare takes a second
/// allocation).
fn without_key(uri: &Uri, kept_len: usize) -> Uri {
    let path = uri.path();
    let query = uri.query().unwrap_or("");
    let mut rebuilt = String::with_capacity(path.len() + kept_len);
    rebuilt.push_str(path);
    let mut separator = '?';
    for pair in query.split('&') {
        if !pair.is_empty() && decoded_pair(pair).0 != "key" {
            rebuilt.push(separator);
            rebuilt.push_str(pair);
            separator = '&';
        }
    }
    Uri::try_from(rebuilt).unwrap_or_else(|_| Uri::from_static("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    /// Queries as clients send them and as they might: plain pairs, `+` and `%` escapes in a
    /// name or a value, an escaped `key`, no `=`, empty pairs, several `key`s, `sse` that is
    /// no `alt`.
    const QUERIES: [&str; 14] = [
        "",
        "key=AIza-client",
        "alt=sse&key=AIza-client",
        "key=a+b%2Fc&alt=sse",
        "%6Bey=escaped-name&alt=sse",
        "k%65y=x&key=second",
        "ke+y=not-a-key&key=k",
        "key&alt",
        "&&key=k&&alt=sse&",
        "alt=s%73e&key=%E2%9C%93",
        "key=%ZZ&x=%",
        "a=1&key=one&key=two&b=2",
        "x=sse&key=k&alt=json",
        "alt=sse&alt=json",
    ];

    #[test]
    fn a_query_is_read_as_the_form_decoder_reads_it() {
        for query in QUERIES {
            let uri: Uri = format!("/v1beta/models/m:generateContent?{query}")
                .parse()
                .unwrap();
            let ours: Vec<(String, String)> = query_pairs(&uri)
                .map(|(name, value)| (name.into_owned(), value.into_owned()))
                .collect();
            let decoder: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
                .map(|(name, value)| (name.into_owned(), value.into_owned()))
                .collect();
            assert_eq!(ours, decoder, "{query}");
            // The one pass reads the first `key` and `alt=sse` as the decoder's pairs say them.
            let read = read_query(&uri);
            let first_key = decoder.iter().find(|(name, _)| name == "key");
            assert_eq!(
                read.key.as_deref(),
                first_key.map(|(_, value)| value.as_str()),
                "{query}"
            );
            let sse = decoder
                .iter()
                .any(|(name, value)| name == "alt" && value == "sse");
            assert_eq!(read.sse, sse, "{query}");
            // What is left once the key moves: every pair the decoder names `key` is gone, the
            // others stay as they came.
            let left = without_key(&uri, read.kept_len.unwrap_or(0));
            let kept: Vec<&str> = query
                .split('&')
                .filter(|pair| {
                    !pair.is_empty()
                        && url::form_urlencoded::parse(pair.as_bytes())
                            .next()
                            .is_none_or(|(name, _)| name != "key")
                })
                .collect();
            assert_eq!(left.query().unwrap_or(""), kept.join("&"), "{query}");
            // Its length was known before it was written: the kept pairs, each after its `?`
            // or `&`; none when no `key` is in the query (then the URI is kept as it came).
            let kept_len = kept.iter().map(|pair| 1 + pair.len()).sum::<usize>();
            assert_eq!(read.kept_len, first_key.map(|_| kept_len), "{query}");
            assert_eq!(left.path(), "/v1beta/models/m:generateContent");
        }
    }

    #[test]
    fn the_key_moves_from_the_query_or_header_to_bearer_and_leaves_the_uri() {
        let request = http::Request::builder()
            .uri("/v1beta/models/fast:streamGenerateContent?alt=sse&key=AIza-client")
            .body(Body::empty())
            .unwrap();
        let (request, sse) = key_as_bearer(request);
        assert!(sse);
        assert_eq!(
            request.uri(),
            "/v1beta/models/fast:streamGenerateContent?alt=sse"
        );
        assert_eq!(request.headers()[AUTHORIZATION], "Bearer AIza-client");
        assert!(request.headers()[AUTHORIZATION].is_sensitive());

        let request = http::Request::builder()
            .uri("/v1beta/models/fast:generateContent")
            .header("x-goog-api-key", "goog-client")
            .header("authorization", "Bearer other")
            .body(Body::empty())
            .unwrap();
        let (request, sse) = key_as_bearer(request);
        assert!(!sse);
        assert_eq!(request.headers()[AUTHORIZATION], "Bearer goog-client");
        assert!(!request.headers().contains_key("x-goog-api-key"));

        // An escaped key is sent decoded; a key no header can carry leaves no Bearer of it.
        let request = http::Request::builder()
            .uri("/v1beta/models/fast:generateContent?k%65y=+a%2Bb+&alt=sse")
            .body(Body::empty())
            .unwrap();
        let (request, sse) = key_as_bearer(request);
        assert!(sse);
        assert_eq!(request.uri(), "/v1beta/models/fast:generateContent?alt=sse");
        assert_eq!(request.headers()[AUTHORIZATION], "Bearer a+b");
        let request = http::Request::builder()
            .uri("/v1beta/models/fast:generateContent?key=a%0Ab")
            .body(Body::empty())
            .unwrap();
        let (request, _) = key_as_bearer(request);
        assert_eq!(request.uri(), "/v1beta/models/fast:generateContent");
        assert!(!request.headers().contains_key(AUTHORIZATION));
    }
}
