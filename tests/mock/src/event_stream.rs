//! A 200 event stream of prepared frames, as every API's streaming answer is sent: paced,
//! paused before a chosen event, cut after content, or forced into an encoding as the fault's
//! [`SuccessShape`] says, each event counted as sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use super::verdict::{with_forced, SuccessShape};

/// How long a cut stream waits after its last event before the connection aborts.
const STREAM_CUT_PAUSE_MS: u64 = 5;

/// A 200 event stream of `frames` (the content type already in `headers`), paused, cut or
/// forced into an encoding as `shape` says.
pub(crate) fn event_stream(
    frames: Vec<String>,
    headers: HeaderMap,
    shape: SuccessShape,
    events_sent: Arc<AtomicU64>,
) -> Response {
    let pause = shape.pause.or_else(|| {
        shape
            .pause_before_last
            .map(|(last, pause)| (frames.len().saturating_sub(last), pause))
    });
    let every = shape.every;
    let events =
        futures_util::stream::iter(frames.into_iter().enumerate()).then(move |(index, frame)| {
            let events_sent = Arc::clone(&events_sent);
            async move {
                if let Some((after, pause)) = pause {
                    if index == after {
                        tokio::time::sleep(pause).await;
                    }
                }
                if let Some(every) = every {
                    tokio::time::sleep(every).await;
                }
                events_sent.fetch_add(1, Ordering::Relaxed);
                Ok::<_, std::io::Error>(Bytes::from(frame))
            }
        });
    if !shape.abort {
        let response = (StatusCode::OK, headers, Body::from_stream(events)).into_response();
        return with_forced(response, shape.forced);
    }
    // The pause lets hyper flush what was sent before the error aborts the connection;
    // otherwise the client would see a reset before the headers, not a broken stream.
    let cut = futures_util::stream::once(async {
        tokio::time::sleep(Duration::from_millis(STREAM_CUT_PAUSE_MS)).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "mock upstream: stream cut after content",
        ))
    });
    let body = Body::from_stream(events.chain(cut));
    with_forced(
        (StatusCode::OK, headers, body).into_response(),
        shape.forced,
    )
}
