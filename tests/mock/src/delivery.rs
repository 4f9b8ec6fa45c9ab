//! The last step of every upstream answer, as a CDN in front of the provider would take it: the
//! body's `Content-Encoding` (negotiated from the mode and `Accept-Encoding`, or broken on
//! purpose by a fault) and the headers that go with it.
//!
//! Owns re-encoding a finished response; it never changes status, other headers or the plain
//! bytes. Event streams stay incremental: compressed and flushed event by event.

use std::io;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};

use super::compression::{Compression, Encoding};
use super::encoder;

/// A fault's say over the encoding, attached to a response as an extension by `handler`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ForcedEncoding {
    /// `Content-Encoding: gzip` over gzip data cut short.
    CorruptGzip,
    /// `Content-Encoding: gzip` over the plain body.
    MislabelledGzip,
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

fn data_stream(body: Body) -> impl Stream<Item = io::Result<Bytes>> + Send + Unpin {
    body.into_data_stream()
        .map(|chunk| chunk.map_err(io::Error::other))
}

/// The response re-encoded for a request that sent `accept_encoding` while the mock is in
/// `mode`; a fault's [`ForcedEncoding`] extension overrides both.
pub(crate) async fn deliver(
    response: Response,
    mode: Compression,
    accept_encoding: Option<&str>,
) -> Response {
    let forced = response.extensions().get::<ForcedEncoding>().copied();
    let (mut parts, body) = response.into_parts();
    let streaming = is_event_stream(&parts.headers);
    if mode != Compression::Off || forced.is_some() {
        parts
            .headers
            .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    let encoding = match forced {
        Some(_) => Some(Encoding::Gzip),
        None => mode.negotiate(accept_encoding),
    };
    let Some(encoding) = encoding else {
        return Response::from_parts(parts, body);
    };
    parts.headers.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(encoding.token()),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = match (forced, streaming) {
        (Some(ForcedEncoding::MislabelledGzip), _) => body,
        (Some(ForcedEncoding::CorruptGzip), true) => {
            let frames: Vec<Bytes> = data_stream(body)
                .take_while(|frame| std::future::ready(frame.is_ok()))
                .filter_map(|frame| std::future::ready(frame.ok()))
                .collect()
                .await;
            match encoder::truncated_gzip_frames(&frames).await {
                Ok(chunks) => Body::from_stream(futures_util::stream::iter(
                    chunks.into_iter().map(Ok::<_, io::Error>),
                )),
                Err(error) => return encoding_failed(&error),
            }
        }
        (Some(ForcedEncoding::CorruptGzip), false) => {
            let plain = match axum::body::to_bytes(body, usize::MAX).await {
                Ok(plain) => plain,
                Err(error) => return encoding_failed(&io::Error::other(error)),
            };
            match encoder::truncated_gzip(&plain).await {
                Ok(cut) => Body::from(cut),
                Err(error) => return encoding_failed(&error),
            }
        }
        (None, true) => Body::from_stream(encoder::compress_stream(encoding, data_stream(body))),
        (None, false) => {
            let plain = match axum::body::to_bytes(body, usize::MAX).await {
                Ok(plain) => plain,
                Err(error) => return encoding_failed(&io::Error::other(error)),
            };
            match encoder::compress(encoding, &plain).await {
                Ok(compressed) => Body::from(compressed),
                Err(error) => return encoding_failed(&error),
            }
        }
    };
    Response::from_parts(parts, body)
}

/// A codec failed on an in-memory body (it does not happen in practice): a plain 500.
fn encoding_failed(error: &io::Error) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("mock upstream: could not encode the body: {error}"),
    )
        .into_response()
}
