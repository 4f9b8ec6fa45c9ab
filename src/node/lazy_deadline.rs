//! A read bounded by a deadline whose timer is set only when the read must wait: most reads of
//! a body find their bytes already there, and arming a timer (and reading the clock for it)
//! for those is work for nothing.

use std::future::Future;
use std::task::Poll;

use tokio::time::{error::Elapsed, Instant};

/// `read`'s output, or `Elapsed` once `by()` passes. `read` is polled first, with the task's
/// own waker; `by` is asked and the timer set only when that poll is pending.
pub async fn read_by<F: Future>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_ready_read_never_asks_for_its_deadline() {
        let out = read_by(|| unreachable!("no timer for a ready read"), async { 7 }).await;
        assert_eq!(out.ok(), Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_that_waits_past_its_deadline_is_elapsed() {
        let by = Instant::now() + Duration::from_millis(50);
        let never = std::future::pending::<()>();
        assert!(read_by(|| by, never).await.is_err());
        assert!(Instant::now() >= by);
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_that_waits_less_than_its_deadline_is_read() {
        let by = Instant::now() + Duration::from_millis(50);
        let soon = tokio::time::sleep(Duration::from_millis(10));
        assert!(read_by(|| by, soon).await.is_ok());
    }
}
