//! Upstream sends that leave together: a request whose send finds another one of the same
//! client already under way lets the tasks ready on its worker run first, so the sends of one
//! scheduler round reach the upstream side by side instead of one per request.
//!
//! Why: under load every request does its own work (parse, route, rewrite) and then writes to
//! the upstream. Written one request at a time, each write finds the upstream idle again and
//! wakes it: on loopback that wake-up is paid inside the router's `writev`, and the upstream
//! pays for going back to sleep. tokio's `yield_now` puts the task back only after the
//! worker's other ready tasks and the I/O driver have run, so the writes of one round leave
//! together and the upstream wakes once for them (`bench/cpu-split.sh`). A lone request (no
//! other send under way) does not wait: one connection's latency and wake-ups are unchanged.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many sends of one client are under way: from the yield point to their response head.
#[derive(Debug, Default)]
pub struct SendsUnderWay {
    count: AtomicUsize,
}

/// One send counted as under way until it is dropped (its head arrived, it failed, or its
/// request was cancelled).
#[derive(Debug)]
pub struct UnderWay<'a> {
    sends: &'a SendsUnderWay,
}

impl SendsUnderWay {
    /// Counts a send in. When another is already under way, first lets the worker's ready
    /// tasks (and the I/O driver) run, so this send leaves with theirs.
    pub async fn enter(&self) -> UnderWay<'_> {
        let others = self.count.fetch_add(1, Ordering::Relaxed);
        let under_way = UnderWay { sends: self };
        if others > 0 {
            tokio::task::yield_now().await;
        }
        under_way
    }

    /// Sends under way now.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for UnderWay<'_> {
    fn drop(&mut self) {
        self.sends.count.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        future.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_lone_send_goes_at_once_and_a_second_is_put_back_once() {
        let sends = SendsUnderWay::default();
        let mut first = pin!(sends.enter());
        let Poll::Ready(first) = poll_once(first.as_mut()) else {
            panic!("a lone send waited");
        };
        assert_eq!(sends.count(), 1);
        let mut second = pin!(sends.enter());
        assert!(
            poll_once(second.as_mut()).is_pending(),
            "a send beside another did not let the round run first"
        );
        assert_eq!(sends.count(), 2);
        let Poll::Ready(second) = poll_once(second.as_mut()) else {
            panic!("the second send still waits once polled again");
        };
        drop(first);
        assert_eq!(sends.count(), 1);
        drop(second);
        assert_eq!(sends.count(), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_cancelled_send_is_no_longer_under_way() {
        let sends = SendsUnderWay::default();
        let first = sends.enter().await;
        {
            let mut second = pin!(sends.enter());
            assert!(poll_once(second.as_mut()).is_pending());
            assert_eq!(sends.count(), 2);
        }
        assert_eq!(sends.count(), 1);
        drop(first);
        assert_eq!(sends.count(), 0);
    }
}
