//! One request on a Gemini route, start to finish: the key (`x-goog-api-key`, `?key=` or a
//! Vertex Bearer token), the fault, and Google's answer — `GenerateContentResponse` JSON or a
//! stream in the framing the query asked for, `countTokens`, embeddings, the models list, or
//! Google's error bodies (`gemini_errors`): a key the gate refuses is 400 `API_KEY_INVALID`, a
//! spent budget 429 with a per-minute `QuotaFailure`, a `thoughtSignature` another account made
//! 400 `INVALID_ARGUMENT` "Corrupted thought signature.".
//!
//! Owns the Gemini routes' answers; shapes are `gemini`'s, bodies `gemini_errors`'.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::error_bodies::ErrorReply;
use super::event_stream::event_stream;
use super::exchange::StreamEnding;
use super::fault::{Fault, ResetForm};
use super::gemini::{self, Framing, GeminiMethod, GeminiRoute, GeminiTurn};
use super::gemini_errors;
use super::rate_headers::{insert, Dialect};
use super::state::MockUpstream;
use super::verdict::{error_response, fault_verdict, with_forced, SuccessShape, Verdict};

/// The retry delay a spent budget's or a plain 429 fault's quota error gives without one.
const DEFAULT_RETRY_DELAY_S: u64 = 60;

/// The key as Google reads it: `x-goog-api-key`, then `?key=`, then `Authorization: Bearer`
/// (Vertex AI's access tokens).
fn read_key(headers: &HeaderMap, query: Option<&str>) -> String {
    let header_key = headers
        .get("x-goog-api-key")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let query_key = query.and_then(|query| {
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "key")
            .map(|(_, value)| value.into_owned())
    });
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_owned);
    header_key
        .or(query_key)
        .or(bearer)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn json_response(body: &Value, mut headers: HeaderMap) -> Response {
    insert(
        &mut headers,
        header::CONTENT_TYPE.as_str(),
        "application/json; charset=UTF-8",
    );
    (StatusCode::OK, headers, body.to_string()).into_response()
}

/// The retry delay a reset form gives a Google quota error, in seconds.
fn retry_delay_s(reset: &ResetForm) -> Option<u64> {
    match reset {
        ResetForm::RetryAfterSeconds(seconds)
        | ResetForm::RetryAfterHttpDate(seconds)
        | ResetForm::AnthropicResetRfc3339(seconds)
        | ResetForm::BodyRetryDelay(seconds) => Some(*seconds),
        ResetForm::RetryAfterMs(ms) => Some(ms.div_ceil(1000)),
        ResetForm::OpenAiResetHeaders(_) | ResetForm::MessageTryAgainIn(_) => {
            Some(DEFAULT_RETRY_DELAY_S)
        }
        ResetForm::Several(forms) => forms.iter().find_map(retry_delay_s),
        ResetForm::None => None,
    }
}

/// Google's error for a fault that is one (`None`: the fault shapes the answer instead).
fn fault_error(fault: &Fault, key: &str, model: &str) -> Option<ErrorReply> {
    match fault {
        Fault::Status(status) => Some(gemini_errors::for_status(*status, model)),
        Fault::Status429 { reset } => Some(match retry_delay_s(reset) {
            Some(seconds) => gemini_errors::quota(false, model, seconds),
            None => gemini_errors::for_status(429, model),
        }),
        Fault::InsufficientQuota429 => Some(gemini_errors::for_status(429, model)),
        other => gemini_errors::for_fault(other, key, model),
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "the mock's Gemini request, checked in the order Google checks it"
)]
pub(crate) async fn answer(
    mock: &MockUpstream,
    method: &Method,
    route: GeminiRoute,
    uri: &Uri,
    request_headers: &HeaderMap,
    body: &Bytes,
    mut headers: HeaderMap,
) -> Response {
    let key = read_key(request_headers, uri.query());
    let _in_progress = mock.enter(&key);
    mock.record_head(method, uri, request_headers);
    if let Ok(value) = HeaderValue::from_str(&key) {
        headers.insert("x-mock-key", value);
    }
    let (model, gemini_method) = match route {
        GeminiRoute::Method { model, method } => (model, method),
        GeminiRoute::ListModels | GeminiRoute::GetModel(_) if *method != Method::GET => {
            return error_response(
                gemini_errors::body(405, "UNIMPLEMENTED", "Method not allowed.", Vec::new()),
                headers,
            );
        }
        _ if key.is_empty() => return error_response(gemini_errors::no_key(), headers),
        _ if !mock.key_admitted(&key) => {
            return error_response(gemini_errors::key_invalid(), headers)
        }
        GeminiRoute::ListModels => return json_response(&gemini::models_list(), headers),
        GeminiRoute::GetModel(id) => {
            return match gemini::model_get(&id) {
                Some(model) => json_response(&model, headers),
                None => error_response(gemini_errors::for_status(404, &id), headers),
            }
        }
    };
    mock.record_body(uri.path(), body);
    if *method != Method::POST {
        return error_response(
            gemini_errors::body(405, "UNIMPLEMENTED", "Method not allowed.", Vec::new()),
            headers,
        );
    }
    let Ok(parsed) = serde_json::from_slice::<Value>(body) else {
        let reply = gemini_errors::body(
            400,
            "INVALID_ARGUMENT",
            "Invalid JSON payload received. Unexpected token.",
            Vec::new(),
        );
        return error_response(reply, headers);
    };
    let streaming = gemini_method == GeminiMethod::Stream;
    let mut turn = GeminiTurn::from_request(&model, &parsed, body.len());
    let generates = matches!(gemini_method, GeminiMethod::Generate | GeminiMethod::Stream);
    let tokens = if generates {
        turn.total_tokens()
    } else if gemini_method == GeminiMethod::CountTokens {
        0
    } else {
        turn.prompt_tokens
    };
    let refused_signature = generates
        .then(|| gemini::refused_signature(&parsed, &key))
        .flatten();
    let tokens = if refused_signature.is_some() {
        0
    } else {
        tokens
    };
    let admission = mock.admit(&key, &model, streaming, tokens);
    turn.sequence = admission.sequence;
    if key.is_empty() {
        return error_response(gemini_errors::no_key(), headers);
    }
    if !mock.key_admitted(&key) {
        return error_response(gemini_errors::key_invalid(), headers);
    }
    let spent = admission.budget_exhausted
        || admission
            .rate
            .plan
            .is_some_and(|plan| plan.spent_until_ms.is_some());
    if spent {
        let seconds = admission.rate.budget.reset_ms.div_ceil(1000).max(1);
        return error_response(gemini_errors::quota(false, &model, seconds), headers);
    }
    if let (None, Some(message)) = (&admission.fault, refused_signature) {
        let reply = gemini_errors::body(400, "INVALID_ARGUMENT", &message, Vec::new());
        return error_response(reply, headers);
    }
    if let Some(reply) = admission
        .fault
        .as_ref()
        .and_then(|fault| fault_error(fault, &key, &model))
    {
        return error_response(reply, headers);
    }
    turn.safety_block = admission.fault == Some(Fault::GeminiSafety);
    let fault = admission
        .fault
        .filter(|fault| *fault != Fault::GeminiSafety);
    let shape = match fault_verdict(
        fault,
        Dialect::OpenAi,
        &key,
        &model,
        streaming,
        &admission.rate,
        &mut headers,
    )
    .await
    {
        Verdict::Answer(response) => return response,
        Verdict::Succeed(shape) => shape,
    };
    match gemini_method {
        GeminiMethod::CountTokens => {
            let counted = parsed.get("generateContentRequest").unwrap_or(&parsed);
            let tokens = (counted.to_string().len() as u64).div_ceil(4).max(1);
            return json_response(&gemini::count_tokens_body(tokens), headers);
        }
        GeminiMethod::Embed => return json_response(&gemini::embed_body(&parsed), headers),
        GeminiMethod::BatchEmbed => {
            return json_response(&gemini::batch_embed_body(&parsed), headers)
        }
        GeminiMethod::Generate | GeminiMethod::Stream => {}
    }
    let cache = mock.prompt_cache(&key, &parsed);
    turn.cached_tokens = cache.read.min(turn.prompt_tokens);
    if turn.thinking {
        turn.thought_signature = Some(gemini::thought_signature(&key));
    }
    if !streaming {
        let response = json_response(&turn.json_body(), headers);
        return with_forced(response, shape.forced);
    }
    stream(
        &turn,
        Framing::from_query(uri.query()),
        headers,
        shape,
        mock.events_sent_counter(),
    )
}

/// A `streamGenerateContent` answer in `framing`, shaped by the fault.
fn stream(
    turn: &GeminiTurn,
    framing: Framing,
    mut headers: HeaderMap,
    shape: SuccessShape,
    events_sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> Response {
    let (content_chunks, tail) = match shape.ending {
        StreamEnding::Complete => (usize::MAX, None),
        StreamEnding::FailBeforeContent => (
            0,
            Some(json!({"error": {"code": 503, "status": "UNAVAILABLE",
                                   "message": "The model is overloaded. Please try again later."}})),
        ),
        StreamEnding::FailAfterContent => (2, None),
    };
    let chunks = turn.stream_chunks(content_chunks);
    let mut frames = framing.frames(&chunks, tail.as_ref());
    if shape.abort {
        // A cut stream never closes its array.
        if let Some(last) = frames.last_mut() {
            if framing == Framing::JsonArray {
                last.truncate(last.trim_end_matches(']').len());
            }
        }
    }
    insert(
        &mut headers,
        header::CONTENT_TYPE.as_str(),
        framing.content_type(),
    );
    event_stream(frames, headers, shape, events_sent)
}
