//! An upstream response body as the router reads it: from an HTTP/1.1 connection the body
//! holds and reads itself (`h1_conn`, no task of its own: a body chunk costs one poll of the
//! relaying task), or from hyper's HTTP/2 connection, which runs as its own task.
//!
//! Owns [`UpstreamIncoming`] and its error, which says which connection broke.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};

use crate::upstream::h1_conn::{BodyError, H1Body};

/// An upstream response body.
pub enum UpstreamIncoming {
    /// Read from the HTTP/1.1 connection it holds.
    Http1(H1Body),
    /// hyper's body of an HTTP/2 stream.
    Http2(Incoming),
}

/// Why an upstream body stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum IncomingError {
    #[error(transparent)]
    Http1(#[from] BodyError),
    #[error(transparent)]
    Http2(#[from] hyper::Error),
}

impl HttpBody for UpstreamIncoming {
    type Data = Bytes;
    type Error = IncomingError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, IncomingError>>> {
        match self.get_mut() {
            UpstreamIncoming::Http1(body) => body
                .poll_data(cx)
                .map(|data| data.map(|data| data.map(Frame::data).map_err(IncomingError::from))),
            UpstreamIncoming::Http2(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(IncomingError::from))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpstreamIncoming::Http1(body) => body.is_end(),
            UpstreamIncoming::Http2(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamIncoming::Http1(body) => body
                .remaining()
                .map_or_else(SizeHint::default, SizeHint::with_exact),
            UpstreamIncoming::Http2(body) => body.size_hint(),
        }
    }
}

impl std::fmt::Debug for UpstreamIncoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let protocol = match self {
            UpstreamIncoming::Http1(_) => "HTTP/1.1",
            UpstreamIncoming::Http2(_) => "HTTP/2",
        };
        f.debug_tuple("UpstreamIncoming").field(&protocol).finish()
    }
}
