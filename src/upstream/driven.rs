//! An upstream response body as the router reads it: from an HTTP/1.1 connection the body
//! holds and reads itself (`h1_conn`, no task of its own: a body chunk costs one poll of the
//! relaying task), or from hyper's HTTP/2 connection, which runs as its own task.
//!
//! Owns [`UpstreamIncoming`] and its error, which says which connection broke, and
//! [`H1Body`], which hands its connection back to the pool at the body's end.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};

use crate::upstream::h1_conn::{BodyError, H1Conn};
use crate::upstream::h1_framing::Framing;
use crate::upstream::h1_head::ResponseHead;
use crate::upstream::pool::{HostId, Pool};

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

/// A response body read from its HTTP/1.1 connection, which it holds until the body's end and
/// then puts back in the pool, host `host` (unless the upstream will close it). Dropped
/// unread, it drops the connection, which closes it.
pub struct H1Body {
    conn: Option<H1Conn>,
    framing: Framing,
    keep_alive: bool,
    pool: Arc<Pool>,
    host: HostId,
}

impl H1Body {
    pub fn new(conn: H1Conn, head: &ResponseHead, pool: Arc<Pool>, host: HostId) -> Self {
        let mut body = H1Body {
            conn: Some(conn),
            framing: head.framing.clone(),
            keep_alive: head.keep_alive,
            pool,
            host,
        };
        if body.framing.is_done() {
            body.finish();
        }
        body
    }

    /// The body has no more bytes to give.
    fn is_end(&self) -> bool {
        self.framing.is_done()
    }

    /// How many bytes are still to come, when the head said.
    fn remaining(&self) -> Option<u64> {
        match self.framing {
            Framing::Length(left) => Some(left),
            Framing::Done => Some(0),
            _ => None,
        }
    }

    /// The body's next bytes; `None` at its end.
    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BodyError>>> {
        let Some(conn) = self.conn.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = std::task::ready!(conn.poll_body(&mut self.framing, cx));
        match &polled {
            Some(Ok(_)) if self.framing.is_done() => self.finish(),
            Some(Ok(_)) => {}
            None => self.finish(),
            // A connection that broke mid-body is not reused.
            Some(Err(_)) => {
                self.conn = None;
                self.framing = Framing::Done;
            }
        }
        Poll::Ready(polled)
    }

    /// The body ended: its connection goes back to the pool when it can carry another request,
    /// else it closes.
    fn finish(&mut self) {
        self.framing = Framing::Done;
        if let Some(conn) = self.conn.take() {
            if self.keep_alive && conn.is_reusable() {
                self.pool.checkin(self.host, conn);
            }
        }
    }
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
