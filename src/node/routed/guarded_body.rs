//! The one guarded reader of a client's body, used by every endpoint that reads one (issue
//! #49: the stored-response calls had their own, with no deadline, and a stalled `cancel` held
//! a connection for good): a declared length over the limit is 413 before a byte is read, an
//! unknown `Content-Encoding` 415 before a byte is read, no silence over `server.body_timeout_ms`
//! between pieces (408), at most `limit` bytes read (413) and at most `limit` once decoded.

use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::header::HeaderMap;
use http_body_util::{BodyExt, Limited};

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::body_pieces::BodyPieces;
use crate::node::lazy_deadline::read_by;
use crate::wire::content_coding::{content_codings, decode_body, CodingError};

/// Why a body was refused, and whether it is still unread (the connection then closes after
/// the answer: the rest of that body would be read as the next request).
pub(crate) struct BodyRefused {
    pub error: ApiError,
    pub body_unread: bool,
}

/// The client's body, decoded, within `limit` bytes and `silence` between pieces.
pub(crate) async fn read_guarded(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
    silence: Duration,
) -> Result<Bytes, BodyRefused> {
    let unread = |error: ApiError| BodyRefused {
        error,
        body_unread: true,
    };
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(unread(ApiError::new(
            ApiErrorKind::RequestTooLarge,
            format!("request body is larger than max_body_bytes ({limit} bytes)"),
        )));
    }
    let codings = content_codings(headers).map_err(|error| {
        unread(ApiError::new(
            ApiErrorKind::UnsupportedContentEncoding,
            error.to_string(),
        ))
    })?;
    let body = read_client_body(body, limit, silence)
        .await
        .map_err(unread)?;
    if codings.is_empty() {
        return Ok(body);
    }
    decode_body(body, &codings, limit)
        .await
        .map_err(|error| BodyRefused {
            error: match error {
                CodingError::TooLarge { limit } => ApiError::new(
                    ApiErrorKind::RequestTooLarge,
                    format!("request body decodes to more than max_body_bytes ({limit} bytes)"),
                ),
                other => ApiError::new(
                    ApiErrorKind::InvalidContentEncoding,
                    format!("request body: {other}"),
                ),
            },
            body_unread: false,
        })
}

/// The client's body, at most `limit` bytes, with no silence longer than `silence` between
/// its pieces (`server.body_timeout_ms`: a stalled body is 408, not a connection held forever).
pub async fn read_client_body(
    body: Body,
    limit: usize,
    silence: Duration,
) -> Result<Bytes, ApiError> {
    let mut body = Limited::new(body, limit);
    let mut pieces = BodyPieces::default();
    loop {
        // A piece already read costs no timer; only a wait is bounded by `silence`.
        let next = read_by(|| tokio::time::Instant::now() + silence, body.frame()).await;
        let frame = match next {
            Err(_) => {
                return Err(ApiError::new(
                    ApiErrorKind::RequestTimeout,
                    format!(
                        "the request body stalled for more than body_timeout_ms ({} ms)",
                        silence.as_millis()
                    ),
                ))
            }
            Ok(None) => break,
            Ok(Some(frame)) => frame,
        };
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    pieces.push(data);
                }
            }
            Err(error) => {
                return Err(
                    if error
                        .downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        ApiError::new(
                            ApiErrorKind::RequestTooLarge,
                            format!("request body is larger than max_body_bytes ({limit} bytes)"),
                        )
                    } else {
                        ApiError::new(ApiErrorKind::InvalidJson, "could not read the request body")
                    },
                )
            }
        }
    }
    Ok(pieces.join())
}
