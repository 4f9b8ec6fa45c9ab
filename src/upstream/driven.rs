//! An HTTP/1.1 upstream connection driven by the request that holds it, not by a task of its
//! own: the wait for the response head and every read of the body poll the connection
//! themselves, and the body hands the connection back to the pool once it has been read to the
//! end (as pingora does). A body chunk then costs one poll of the relaying task, not a wake-up
//! of a connection task and another of the relay's (hyper's body channel holds one chunk).
//!
//! Owns [`head_wait`] (the head, with the connection polled beside it) and [`UpstreamIncoming`]
//! (the body as the router reads it: hyper's, plus the connection that fills it).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};

use crate::upstream::pool::{HostId, Http1Conn, Pool};

/// Waits for a response head on the HTTP/1.1 connection `conn`, polling it (it writes the
/// request and reads the head) beside hyper's answer future `sending`. Yields the connection
/// with the answer while it still runs.
pub async fn head_wait<F, T, E>(sending: F, conn: Http1Conn) -> Result<(T, Option<Http1Conn>), E>
where
    F: Future<Output = Result<T, E>>,
{
    let mut sending = std::pin::pin!(sending);
    let mut conn = Some(conn);
    std::future::poll_fn(move |cx| {
        // The connection first, so the answer future finds the head in the same poll.
        if conn
            .as_mut()
            .is_some_and(|running| running.drive(cx).is_ready())
        {
            // Ended (closed or failed): hyper hands the answer future its error.
            conn = None;
        }
        // With this task's own waker: tokio's oneshot under the answer future may return
        // Pending when the task's cooperative budget is spent, and then wakes that waker to be
        // polled again.
        match sending.as_mut().poll(cx) {
            Poll::Ready(Ok(answer)) => Poll::Ready(Ok((answer, conn.take()))),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// An HTTP/1.1 connection lent to one response body, and where it goes back.
pub struct Driving {
    conn: Http1Conn,
    pool: Arc<Pool>,
    host: HostId,
}

impl Driving {
    pub fn new(conn: Http1Conn, pool: Arc<Pool>, host: HostId) -> Self {
        Driving { conn, pool, host }
    }
}

/// An upstream response body: hyper's, and for HTTP/1.1 the connection that fills it, polled
/// before each read and put back in the pool at the body's end (dropped with the body when it
/// is left unread: the connection then closes).
pub struct UpstreamIncoming {
    body: Incoming,
    driving: Option<Driving>,
}

impl UpstreamIncoming {
    /// A body whose connection runs on its own (HTTP/2's shared one), or has ended.
    pub fn detached(body: Incoming) -> Self {
        UpstreamIncoming {
            body,
            driving: None,
        }
    }

    /// A body read from the HTTP/1.1 connection in `driving`, which this body polls.
    pub fn driven(body: Incoming, driving: Driving) -> Self {
        UpstreamIncoming {
            body,
            driving: Some(driving),
        }
    }

    /// Polls the connection; forgets it when it has ended.
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(driving) = &mut self.driving {
            if driving.conn.drive(cx).is_ready() {
                self.driving = None;
            }
        }
    }

    /// The body was read to its end: the connection goes back to the pool (whose next taker
    /// polls it first, which finishes this exchange and notices a close).
    fn give_back(&mut self) {
        if let Some(driving) = self.driving.take() {
            driving.pool.checkin(driving.host, driving.conn);
        }
    }
}

impl HttpBody for UpstreamIncoming {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if this.driving.is_none() {
            return Pin::new(&mut this.body).poll_frame(cx);
        }
        // Only the connection fills this body (or, having ended and been dropped, has closed
        // it), and it runs in no other task: reading needs no waker of its own (one would only
        // wake this task again for nothing). What the connection already delivered is taken
        // first; it is polled for more only when there is none.
        let mut unwoken = Context::from_waker(Waker::noop());
        let mut polled = Pin::new(&mut this.body).poll_frame(&mut unwoken);
        if polled.is_pending() {
            this.drive(cx);
            polled = Pin::new(&mut this.body).poll_frame(&mut unwoken);
        }
        match &polled {
            Poll::Ready(None) => this.give_back(),
            // A connection that broke mid-body is not reused.
            Poll::Ready(Some(Err(_))) => this.driving = None,
            Poll::Ready(Some(Ok(_))) if this.body.is_end_stream() => this.give_back(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl std::fmt::Debug for UpstreamIncoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamIncoming")
            .field("driven", &self.driving.is_some())
            .finish_non_exhaustive()
    }
}
