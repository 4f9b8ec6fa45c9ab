//! The node's stop as each client connection sees it: hyper's graceful shutdown begun on the
//! connection once the node starts to stop, and the wait until every watched connection ended.
//!
//! Why not hyper-util's `GracefulShutdown`: its watcher polls a `watch` channel's `changed()`
//! beside the connection on every poll, and a waiting `Notified` takes its `Notify`'s lock each
//! time it is polled, a lock that all connections' polls share: ~1.1k instructions per request
//! on the bench (docs/measurements.md, 2026-12-07). Here a connection registers its waker once
//! (again only if its waker changes), and a poll reads one flag.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Waker;

use rustc_hash::FxHashMap;
use tokio::sync::Notify;

/// Starts the stop of every connection it watches, and waits for them to end; its clones are
/// one watch.
#[derive(Clone, Default)]
pub struct StopWatch {
    shared: Arc<Shared>,
}

/// What the watch and its connections share.
#[derive(Default)]
struct Shared {
    stopping: AtomicBool,
    /// Connections watched and not yet dropped.
    open: AtomicUsize,
    /// Told when the last watched connection is dropped.
    drained: Notify,
    wakers: Mutex<Wakers>,
}

/// The waker of each connection that was polled, by the number its registration holds.
#[derive(Default)]
struct Wakers {
    next_id: u64,
    by_id: FxHashMap<u64, Waker>,
}

impl StopWatch {
    /// A watch with no connection.
    pub fn new() -> Self {
        Self::default()
    }

    /// A place for one connection, counted open from now (an accepted connection, before its
    /// first bytes) until it is dropped or the connection it watches ends: a stop waits for it.
    pub fn enter(&self) -> Entry {
        self.shared.open.fetch_add(1, Ordering::AcqRel);
        Entry {
            registration: Registration {
                shared: Arc::clone(&self.shared),
                waker: None,
            },
        }
    }

    /// Tells every watched connection to stop (each finishes the request it is serving), then
    /// waits until all of them have ended.
    pub async fn stop(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let wakers: Vec<Waker> = {
            let mut registered = self.shared.lock_wakers();
            registered.by_id.drain().map(|(_, waker)| waker).collect()
        };
        wakers.into_iter().for_each(Waker::wake);
        loop {
            let drained = self.shared.drained.notified();
            let mut drained = std::pin::pin!(drained);
            drained.as_mut().enable();
            if self.shared.open.load(Ordering::Acquire) == 0 {
                return;
            }
            drained.await;
        }
    }

    /// Connections watched and not yet ended.
    pub fn open(&self) -> usize {
        self.shared.open.load(Ordering::Acquire)
    }
}

/// One connection's place in the watch, from its accept; see [`StopWatch::enter`].
pub struct Entry {
    registration: Registration,
}

impl Entry {
    /// `work`'s output, or `None` once the watch stops first. A connection that has not sent
    /// its first bytes (a client pool's spare) or finished its TLS handshake is idle: hyper
    /// closes its own idle connections at a stop, and this closes the ones not handed to it yet
    /// rather than let them hold the drain until their header timeout.
    pub async fn unless_stopped<T>(&mut self, work: impl Future<Output = T>) -> Option<T> {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            if self.registration.stopped(cx.waker()) {
                return std::task::Poll::Ready(None);
            }
            work.as_mut().poll(cx).map(Some)
        })
        .await
    }

    /// `connection`, begun on its graceful shutdown (`shut_down`) once the watch stops,
    /// whether the stop came before its first poll or during it.
    pub fn watch<C: Future, S: FnMut(Pin<&mut C>)>(
        self,
        connection: C,
        mut shut_down: S,
    ) -> impl Future<Output = C::Output> {
        let mut registration = self.registration;
        async move {
            let mut connection = std::pin::pin!(connection);
            let mut shut = false;
            std::future::poll_fn(|cx| {
                if !shut && registration.stopped(cx.waker()) {
                    shut = true;
                    shut_down(connection.as_mut());
                }
                connection.as_mut().poll(cx)
            })
            .await
        }
    }
}

impl Shared {
    fn lock_wakers(&self) -> std::sync::MutexGuard<'_, Wakers> {
        self.wakers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A connection's place in the watch: its waker while it waits, its count while it lives.
struct Registration {
    shared: Arc<Shared>,
    /// The id and waker registered, once polled.
    waker: Option<(u64, Waker)>,
}

impl Registration {
    /// Whether the watch has stopped, `current` registered first: a stop that sets the flag
    /// after this read finds the waker and wakes the connection.
    #[inline]
    fn stopped(&mut self, current: &Waker) -> bool {
        self.keep(current);
        self.shared.stopping.load(Ordering::Acquire)
    }

    /// Registers `current` unless the waker registered already wakes the same task (every
    /// poll of the connection asks: inlined, that answer is two compares).
    #[inline]
    fn keep(&mut self, current: &Waker) {
        if !matches!(&self.waker, Some((_, registered)) if registered.will_wake(current)) {
            self.register(current);
        }
    }

    /// Registers `current` in place of the waker registered, if any.
    #[cold]
    fn register(&mut self, current: &Waker) {
        match &mut self.waker {
            Some((id, registered)) => {
                registered.clone_from(current);
                let mut wakers = self.shared.lock_wakers();
                if let Some(slot) = wakers.by_id.get_mut(id) {
                    slot.clone_from(current);
                }
            }
            None => {
                let mut wakers = self.shared.lock_wakers();
                let id = wakers.next_id;
                wakers.next_id += 1;
                wakers.by_id.insert(id, current.clone());
                drop(wakers);
                self.waker = Some((id, current.clone()));
            }
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some((id, _)) = self.waker.take() {
            self.shared.lock_wakers().by_id.remove(&id);
        }
        if self.shared.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.drained.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Poll};
    use std::time::Duration;

    /// A connection that ends only once told to shut down.
    #[derive(Default)]
    struct Until {
        shut: bool,
        waker: Option<Waker>,
    }

    impl Future for Until {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.shut {
                Poll::Ready(())
            } else {
                self.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    fn shut(until: Pin<&mut Until>) {
        until.get_mut().shut = true;
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_wakes_each_waiting_connection_and_waits_for_it() {
        let watch = StopWatch::new();
        let first = tokio::spawn(watch.enter().watch(Until::default(), shut));
        let second = tokio::spawn(watch.enter().watch(Until::default(), shut));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(watch.open(), 2);
        assert!(!first.is_finished() && !second.is_finished());
        tokio::time::timeout(Duration::from_secs(1), watch.stop())
            .await
            .expect("the stop waits only for the connections to end");
        assert_eq!(watch.open(), 0);
        assert!(first.await.is_ok() && second.await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_first_polled_after_the_stop_shuts_down_at_once() {
        let watch = StopWatch::new();
        let late = watch.enter().watch(Until::default(), shut);
        let stopped = tokio::spawn(async move {
            let stop = watch.stop();
            stop.await;
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            !stopped.is_finished(),
            "a watched connection holds the stop"
        );
        late.await;
        tokio::time::timeout(Duration::from_secs(1), stopped)
            .await
            .expect("the stop ends once the last connection ends")
            .expect("no panic");
    }

    /// A connection accepted before the stop and watched only after it (its first bytes came
    /// late) is counted from its accept: the stop waits for it, and it is shut at once.
    #[tokio::test(start_paused = true)]
    async fn an_entry_made_before_the_stop_holds_it_until_its_connection_ends() {
        let watch = StopWatch::new();
        let entry = watch.enter();
        let stopping = watch.clone();
        let stopped = tokio::spawn(async move { stopping.stop().await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!stopped.is_finished(), "the entry holds the stop");
        entry.watch(Until::default(), shut).await;
        tokio::time::timeout(Duration::from_secs(1), stopped)
            .await
            .expect("the stop ends once the connection ends")
            .expect("no panic");
        let dropped = watch.enter();
        drop(dropped);
        assert_eq!(watch.open(), 0, "an entry dropped unwatched is not open");
    }

    #[tokio::test(start_paused = true)]
    async fn work_unless_stopped_ends_at_the_stop_and_no_longer_holds_it() {
        let watch = StopWatch::new();
        let mut entry = watch.enter();
        let waiting =
            tokio::spawn(async move { entry.unless_stopped(std::future::pending::<()>()).await });
        let mut done = watch.enter();
        assert_eq!(done.unless_stopped(async { 7 }).await, Some(7));
        drop(done);
        tokio::time::sleep(Duration::from_millis(10)).await;
        tokio::time::timeout(Duration::from_secs(1), watch.stop())
            .await
            .expect("the waiting work ends at the stop and its entry is dropped");
        assert_eq!(waiting.await.expect("no panic"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_with_nothing_watched_returns_at_once() {
        let watch = StopWatch::new();
        tokio::time::timeout(Duration::from_millis(1), watch.stop())
            .await
            .expect("nothing to wait for");
    }
}
