//! A routed request's intake, before anything is routed: the client's key (and the router,
//! once its journal is replayed), its request id, a JSON `Content-Type`, the body read once
//! (≤ `max_body_bytes`, no silence over `body_timeout_ms`), its `Content-Encoding` undone, and
//! the body parsed (model, stream, the prompt spans affinity can use; a Gemini client's plain
//! text request that needs no spans read into the hub's form by the scan that checks it).

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
use crate::wire::translate::ParsedRequest;

use super::guarded_body::read_guarded;

/// A request taken in: its router and client, its body decoded and parsed.
pub(super) struct Intake {
    pub router: Router,
    /// The client's index in `live.clients`.
    pub client_index: usize,
    pub body: Bytes,
    pub info: RequestInfo,
    /// The body read already for a translation (a Gemini client's plain text request), for
    /// the carry check and the attempt to take.
    pub read: Option<ParsedRequest>,
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
    let (info, read_request) = match named {
        Some((model, stream)) => named_request(&body, model, stream, scan)
            .map_err(|error| read(ApiError::from(error)))?,
        None => (
            parse_request_for(&body, scan).map_err(|error| read(ApiError::from(error)))?,
            None,
        ),
    };
    Ok(Intake {
        router,
        client_index,
        body,
        info,
        read: read_request,
    })
}

/// A body whose model its path names: it must be a JSON object, and the model a name the
/// router takes (the same rules as a body's `model`). With it, the body read into the hub's
/// form when that read was the check.
fn named_request(
    body: &Bytes,
    model: String,
    stream: bool,
    scan: PromptScan,
) -> Result<(RequestInfo, Option<ParsedRequest>), BodyError> {
    // Only a body long enough for its prefix to name a group needs its spans (a Gemini body
    // has no hint among them). Any other that is a Gemini plain text request is checked by
    // the scan that reads it into the hub's form: a translation then takes that form rather
    // than reading the body a second time (and one the scan declined is not scanned again).
    let scanned = match scan {
        PromptScan::Everything => None,
        PromptScan::Nothing | PromptScan::HintsOnly => {
            Some(ParsedRequest::scanned_gemini(body.clone()))
        }
    };
    let spans = match &scanned {
        Some(read) if read.holds_scanned() => PromptSpans::default(),
        _ => checked_spans(body)?,
    };
    if model.is_empty() {
        return Err(BodyError::MissingModel);
    }
    if let Some(problem) = model_name_problem(&model) {
        return Err(BodyError::InvalidModel(problem));
    }
    Ok((RequestInfo::named(model, stream, spans), scanned))
}

/// The spans of a Gemini body that must be a JSON object (refused when it is not).
fn checked_spans(body: &[u8]) -> Result<PromptSpans, BodyError> {
    // A body read as a Gemini request for its spans is a JSON object; any other is checked
    // without building it (the body goes upstream as its bytes).
    if let Some(spans) = gemini_prompt_read(body) {
        return Ok(spans);
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .map_err(|error| BodyError::InvalidJson(error.to_string()))?;
    if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
        return Err(BodyError::NotAnObject);
    }
    Ok(PromptSpans::default())
}

/// Whether the request carries one of the client keys (`x-api-key` too on `/v1/messages`).
pub fn client_authorized(live: &LiveConfig, headers: &HeaderMap, allow_x_api_key: bool) -> bool {
    client_gate::authenticated_client(live, headers, allow_x_api_key).is_some()
}

/// The client's own `x-request-id`, when it is one the router may repeat.
pub(super) fn client_request_id(headers: &HeaderMap) -> Option<std::sync::Arc<str>> {
    let id = headers.get(reply::REQUEST_ID)?.to_str().ok()?;
    let valid = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    valid.then(|| std::sync::Arc::from(id))
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
        if model.is_empty() {
            return Err(BodyError::MissingModel);
        }
        if let Some(problem) = model_name_problem(model) {
            return Err(BodyError::InvalidModel(problem));
        }
        let spans = crate::wire::body_rewrite::gemini_prompt_spans(body);
        Ok(RequestInfo::named(model.to_owned(), false, spans))
    }

    /// Gemini bodies, and whether the scan of a plain text request reads them.
    const NAMED_BODIES: [(&[u8], bool); 19] = [
        (br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[]}"#, false),
        (br#" {"systemInstruction":{"parts":[{"text":"s"}]},"contents":[]} "#, true),
        (br#"{}"#, false),
        // The bench's request; escapes, non-ASCII and whitespace in a plain one.
        (br#"{"systemInstruction":{"parts":[{"text":"You are a helpful assistant."}]},"contents":[{"role":"user","parts":[{"text":"Say hello in one short sentence."}]}],"generationConfig":{"maxOutputTokens":64,"temperature":0}}"#, true),
        (b"\n{ \"contents\" : [ {\"parts\":[{\"text\":\"caf\\u00e9 \\\"q\\\" \xc3\xbc\"}]} ] }\r\n", true),
        // Members of another shape: no spans, still a JSON object.
        (br#"{"contents":"not a list"}"#, false),
        (br#"{"contents":[],"contents":[]}"#, false),
        (br#"{"tools":[],"generationConfig":{"temperature":0.5},"labels":{"a":"b"}}"#, false),
        (br#"{"contents":[],"generationConfig":{"topP":1e-3}}"#, false),
        // Not an object, or not JSON.
        (br#"[{"contents":[]}]"#, false),
        (br#""text""#, false),
        (br#"{"contents":[}"#, false),
        (br#"{"contents":[]} trailing"#, false),
        (br#"{"contents":[]"#, false),
        (br#"{"contents":[{"parts":[{"text":"a"}]}],}"#, false),
        (b"\x0c{\"contents\":[]}", false),
        (b"", false),
        (b"{\"contents\":[{\"parts\":[{\"text\":\"\xff\"}]}]}", false),
        (b"{\"contents\":[{\"parts\":[{\"text\":\"a\tb\"}]}]}", false),
    ];

    #[test]
    fn a_named_body_read_once_is_refused_and_spanned_as_when_checked_apart() {
        let scans = [
            PromptScan::Everything,
            PromptScan::HintsOnly,
            PromptScan::Nothing,
        ];
        for ((body, plain), scan) in NAMED_BODIES
            .into_iter()
            .flat_map(|case| scans.map(|scan| (case, scan)))
        {
            for model in ["gemini-2.5-flash", ""] {
                let once = named_request(&Bytes::from_static(body), model.to_owned(), false, scan);
                let twice = named_request_checked_twice(body, model);
                let shown = format!("{scan:?} {model:?} {}", String::from_utf8_lossy(body));
                match (once, twice) {
                    (Ok((once, read)), Ok(twice)) => {
                        // Scanned only when no span is needed; read into the form (and then
                        // with no spans) when it is plain text.
                        let scanned = scan != PromptScan::Everything;
                        assert_eq!(read.is_some(), scanned, "{shown}");
                        let expect_read = plain && scanned;
                        let holds = read.as_ref().is_some_and(ParsedRequest::holds_scanned);
                        assert_eq!(holds, expect_read, "{shown}");
                        let spans = if expect_read {
                            PromptSpans::default()
                        } else {
                            twice.prompt
                        };
                        assert_eq!(once.prompt, spans, "{shown}");
                        assert_eq!(once.model, twice.model, "{shown}");
                    }
                    (Err(once), Err(twice)) => {
                        assert_eq!(once.to_string(), twice.to_string(), "{shown}");
                    }
                    (once, twice) => {
                        panic!("{shown}: {:?} against {:?}", once.is_ok(), twice.is_ok())
                    }
                }
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
