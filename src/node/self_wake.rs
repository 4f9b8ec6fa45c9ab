//! A client connection's wake-ups of itself, taken in the poll that made them: the future is
//! polled again at once instead of its task being handed back to tokio.
//!
//! Why: a client connection's task runs hyper's server, the handler and (`upstream::driven`)
//! the upstream connection in one poll, and these wake each other through wakers that are all
//! this task's own: the handler reading the request body tells hyper's dispatcher it wants more
//! (`want`), the upstream connection answers the future waiting beside it (a oneshot), the body
//! taken wakes the upstream dispatcher. tokio queues a task woken while it runs as a *yield*
//! (to the back of the run queue, not the LIFO slot) and wakes a parked sibling worker to steal
//! it: at one connection that was ~1.8 futex or eventfd wake-ups per request and as many
//! context switches of a worker that woke for nothing (`bench/wakeups.sh`,
//! docs/measurements.md). Here the poll that woke itself is simply repeated, at most
//! [`MAX_REPOLLS`] times and only while the task's cooperative budget lasts, after which the
//! task yields as before (so one connection cannot hold a worker). A wake-up from anywhere
//! else — the socket, a timer, an actor's reply — reaches the task's waker as before.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// Polls in a row of one task poll that woke itself before the task yields to the scheduler.
pub const MAX_REPOLLS: usize = 4;

/// The future is being polled: a wake-up now is its own.
const POLLING: u8 = 1;
/// It woke itself during this poll.
const WOKEN: u8 = 2;

/// What the inner future's waker reaches: the poll state and the task's own waker.
struct Shared {
    state: AtomicU8,
    task: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & POLLING == 0 {
                self.task.wake();
                return;
            }
            match self.state.compare_exchange_weak(
                state,
                state | WOKEN,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }
}

/// Runs `future`, polling it again in place whenever a poll of it woke its own waker.
pub async fn absorbing<F: Future>(future: F) -> F::Output {
    let shared = Arc::new(Shared {
        state: AtomicU8::new(0),
        task: AtomicWaker::new(),
    });
    let inner_waker = Waker::from(shared.clone());
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(move |cx| poll_absorbing(&shared, &inner_waker, future.as_mut(), cx)).await
}

fn poll_absorbing<F: Future>(
    shared: &Shared,
    inner_waker: &Waker,
    mut future: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    shared.task.register(cx.waker());
    let mut inner = Context::from_waker(inner_waker);
    let mut repolls = 0;
    loop {
        shared.state.store(POLLING, Ordering::Release);
        if let Poll::Ready(output) = future.as_mut().poll(&mut inner) {
            shared.state.store(0, Ordering::Release);
            return Poll::Ready(output);
        }
        if shared
            .state
            .compare_exchange(POLLING, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Poll::Pending;
        }
        // It woke itself while it ran: again now, unless its turn is over.
        if repolls == MAX_REPOLLS || !tokio::task::coop::has_budget_remaining() {
            shared.state.store(0, Ordering::Release);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        repolls += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A task waker that counts its wake-ups.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Wakes itself on each of its first `self_wakes` polls, then finishes; counts its polls.
    struct SelfWaking {
        self_wakes: usize,
        polls: Arc<AtomicUsize>,
    }

    impl Future for SelfWaking {
        type Output = usize;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            let polls = self.polls.fetch_add(1, Ordering::SeqCst) + 1;
            if self.self_wakes == 0 {
                return Poll::Ready(polls);
            }
            self.self_wakes -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    fn self_waking(self_wakes: usize) -> (SelfWaking, Arc<AtomicUsize>) {
        let polls = Arc::new(AtomicUsize::new(0));
        let future = SelfWaking {
            self_wakes,
            polls: polls.clone(),
        };
        (future, polls)
    }

    #[tokio::test]
    async fn a_poll_that_woke_itself_is_repeated_without_waking_the_task() {
        let (future, polls) = self_waking(2);
        let task = Arc::new(Counting::default());
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut absorbed = std::pin::pin!(absorbing(future));
        assert_eq!(absorbed.as_mut().poll(&mut cx), Poll::Ready(3));
        assert_eq!(polls.load(Ordering::SeqCst), 3);
        assert_eq!(task.0.load(Ordering::SeqCst), 0, "the task was not woken");
    }

    #[tokio::test]
    async fn past_the_repolls_the_task_yields_to_the_scheduler() {
        let (future, polls) = self_waking(MAX_REPOLLS + 3);
        let task = Arc::new(Counting::default());
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut absorbed = std::pin::pin!(absorbing(future));
        assert!(absorbed.as_mut().poll(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), MAX_REPOLLS + 1);
        assert_eq!(
            task.0.load(Ordering::SeqCst),
            1,
            "woken once, to be polled again"
        );
        assert_eq!(
            absorbed.as_mut().poll(&mut cx),
            Poll::Ready(MAX_REPOLLS + 4)
        );
    }

    #[tokio::test]
    async fn a_wake_up_after_the_poll_reaches_the_task() {
        let polls = Arc::new(AtomicUsize::new(0));
        let stored = Arc::new(std::sync::Mutex::new(None::<Waker>));
        let seen = polls.clone();
        let keep = stored.clone();
        let future = std::future::poll_fn(move |cx| {
            if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                *keep.lock().unwrap() = Some(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        });
        let task = Arc::new(Counting::default());
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut absorbed = std::pin::pin!(absorbing(future));
        assert!(absorbed.as_mut().poll(&mut cx).is_pending());
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
        // From another thread, as the I/O driver or an actor would.
        let inner = stored.lock().unwrap().take().unwrap();
        std::thread::spawn(move || inner.wake()).join().unwrap();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        assert_eq!(absorbed.as_mut().poll(&mut cx), Poll::Ready(()));
    }
}
