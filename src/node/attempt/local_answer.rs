//! The answers a try gives without sending anything (behaviour §14): a request that cannot be
//! carried to the target's format is refused (400 in the client's shape, a client error: no
//! failover, no state), and a `count_tokens` for a target that has none is counted here.

use bytes::Bytes;
use http::header::{HeaderMap, CONTENT_TYPE};
use http::StatusCode;
use quotaroute_actors::AttemptResult;
use quotaroute_journal::OutcomeClass;

use crate::api_error::{ApiError, ApiErrorKind};
use crate::wire::translate::{Direction, TranslateError};

use super::shape::{Attempted, Payload, Translation};

/// A request that cannot be carried to `direction`'s target format: 400 in the client's
/// shape, before anything is sent (behaviour §14). A client error: no failover, no state.
pub(super) fn refused(direction: Direction, error: &TranslateError) -> Attempted {
    let kind = match error {
        TranslateError::Unsupported { .. } => ApiErrorKind::UnsupportedParameter,
        TranslateError::Invalid(_) => ApiErrorKind::InvalidRequest,
    };
    let error = ApiError::new(kind, error.to_string());
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    let mut result = AttemptResult::failure(OutcomeClass::ClientError, Some(400));
    result.error_code = Some(kind.code().to_string());
    result.message = Some(format!("not sent: {}", error.message));
    result.translated = Some(direction.label().to_string());
    Attempted {
        result,
        payload: Payload::Answer {
            status: StatusCode::BAD_REQUEST,
            headers,
            body: Bytes::from(error.body(direction.client_is_anthropic())),
        },
        translation: Some(Translation {
            direction,
            dropped: Vec::new(),
            thinking_restored: 0,
        }),
        bills_client: false,
        sent: false,
    }
}

/// A local count of one API's `count_tokens` body: Anthropic's (`input_tokens`) or Google's
/// (`totalTokens`).
pub(super) type LocalCount = fn(&[u8]) -> Result<serde_json::Value, TranslateError>;

/// Local counts run on tokio's blocking pool, at most this many at once per process: each is
/// bounded CPU (`count_tokens`' `EXACT_BYTES`), and never on an async worker, so a client
/// sending large bodies to count waits behind its own kind, not in front of every request.
static LOCAL_COUNTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// A `count_tokens` answered by the router's own tokenizer estimate (no upstream request),
/// counted off the async workers; past `deadline` waiting for its turn it is a 429
/// `pool_busy` that the client may retry.
pub(super) async fn counted_locally(
    body: &Bytes,
    deadline: tokio::time::Instant,
    count: LocalCount,
) -> Attempted {
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    let counted = match tokio::time::timeout_at(deadline, LOCAL_COUNTS.acquire()).await {
        Ok(Ok(permit)) => {
            let body = body.clone();
            let counted = tokio::task::spawn_blocking(move || count(&body)).await;
            drop(permit);
            counted.map_err(|_| "the local count ended abnormally")
        }
        _ => Err("local token counting is busy until the request's deadline"),
    };
    let error = match counted {
        Ok(Ok(counted)) => {
            return Attempted {
                result: AttemptResult::success(200, 0, 0),
                payload: Payload::Answer {
                    status: StatusCode::OK,
                    headers,
                    body: Bytes::from(counted.to_string()),
                },
                translation: None,
                bills_client: false,
                sent: false,
            }
        }
        Ok(Err(error)) => ApiError::new(ApiErrorKind::InvalidRequest, error.to_string()),
        Err(busy) => ApiError::new(ApiErrorKind::PoolBusy, busy),
    };
    let status = error.status();
    let mut result = AttemptResult::failure(OutcomeClass::ClientError, Some(status.as_u16()));
    result.message = Some(format!("not sent: {}", error.message));
    Attempted {
        result,
        payload: Payload::Answer {
            status,
            headers,
            body: Bytes::from(error.body(true)),
        },
        translation: None,
        bills_client: false,
        sent: false,
    }
}
