//! When the relay reads: a burst that already arrived leaves in one client write (bounded by
//! `COALESCE_BYTES`), a read that must wait waits with a deadline, and a deadline as the
//! duration left.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::{error::Elapsed, Instant};

use crate::upstream::body::{BodyError, UpstreamBody};

/// Most upstream bytes gathered into one client write.
pub(super) const COALESCE_BYTES: usize = 64 * 1024;

/// The upstream's next bytes if they are already there; `None`: not yet. No yield: a read of a
/// driven HTTP/1.1 body polls its connection itself, and a yield of a client connection's task
/// is polled again in place (`node::self_wake`), so it let nothing else run before the retry.
pub(super) fn ready_data(body: &mut UpstreamBody) -> Option<Option<Result<Bytes, BodyError>>> {
    body.ready_data()
}

/// `read`'s output, or `Elapsed` once `by()` passes. `read` is polled first and the timer is
/// set (and `by` asked) only when it must wait: most reads of a relayed stream find their bytes
/// already there.
pub(super) async fn read_by<F: Future>(
    by: impl FnOnce() -> Instant,
    read: F,
) -> Result<F::Output, Elapsed> {
    let mut read = std::pin::pin!(read);
    let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(output) => Ok(output),
        Poll::Pending => tokio::time::timeout_at(by(), read).await,
    }
}

/// How long until `deadline`, for timeouts expressed as durations.
pub fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
