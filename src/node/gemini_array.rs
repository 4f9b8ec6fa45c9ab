//! A Gemini stream the client asked for without `alt=sse` (behaviour §15): the upstream's (and
//! the relay's) SSE events re-framed as one JSON array streamed element by element, as Google
//! does — `[` before the first, `,` between, `]` at the end — never buffered whole.

use axum::body::{Body, BodyDataStream};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::HeaderValue;

use crate::wire::sse::{SseEvent, SseParser};

/// `response` (a committed SSE stream) as one streamed JSON array.
pub fn array_framed(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let framing = Framing {
        body: body.into_data_stream(),
        parser: SseParser::new(),
        events: Vec::new(),
        opened: false,
        closed: false,
    };
    let stream = futures_util::stream::unfold(framing, |mut framing| async move {
        let chunk = framing.next_chunk().await?;
        Some((chunk, framing))
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// The re-framing state of one stream.
struct Framing {
    body: BodyDataStream,
    parser: SseParser,
    events: Vec<SseEvent>,
    /// `[` was written.
    opened: bool,
    /// `]` was written: nothing follows.
    closed: bool,
}

impl Framing {
    /// The next bytes for the client, `None` once the array is closed.
    async fn next_chunk(&mut self) -> Option<Result<Bytes, axum::Error>> {
        loop {
            if self.closed {
                return None;
            }
            let mut out = BytesMut::new();
            match self.body.next().await {
                Some(Ok(data)) => {
                    if self.parser.feed(&data, &mut self.events).is_err() {
                        self.close(&mut out);
                    }
                    self.elements(&mut out);
                }
                Some(Err(error)) => return Some(Err(error)),
                None => {
                    if let Ok(Some(last)) = self.parser.finish() {
                        self.events.push(last);
                    }
                    self.elements(&mut out);
                    self.close(&mut out);
                }
            }
            if !out.is_empty() {
                return Some(Ok(out.freeze()));
            }
        }
    }

    /// Each event's data as one array element.
    fn elements(&mut self, out: &mut BytesMut) {
        for event in self.events.drain(..) {
            let data = event.data.trim();
            if data.is_empty() || self.closed {
                continue;
            }
            out.extend_from_slice(if self.opened { b",\r\n" } else { b"[" });
            self.opened = true;
            out.extend_from_slice(data.as_bytes());
        }
    }

    fn close(&mut self, out: &mut BytesMut) {
        if !self.closed {
            if !self.opened {
                out.extend_from_slice(b"[");
                self.opened = true;
            }
            out.extend_from_slice(b"]");
            self.closed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn events_become_one_json_array_element_by_element() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"data: {\"a\":1}\r\n\r\ndata: {\"b\"")),
            Ok(Bytes::from_static(b":2}\r\n\r\n")),
            Ok(Bytes::from_static(b"data: {\"c\":3}\n\n")),
        ];
        let response = Response::new(Body::from_stream(futures_util::stream::iter(chunks)));
        let framed = array_framed(response);
        assert_eq!(framed.headers()[CONTENT_TYPE], "application/json");
        let bytes = framed.into_body().collect().await.unwrap().to_bytes();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value, serde_json::json!([{"a":1},{"b":2},{"c":3}]));
    }

    #[tokio::test]
    async fn an_empty_stream_is_an_empty_array() {
        let response = Response::new(Body::empty());
        let bytes = array_framed(response)
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(&bytes[..], b"[]");
    }
}
