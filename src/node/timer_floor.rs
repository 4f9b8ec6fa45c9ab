//! A timer always pending on the node's runtime, so that a request's own timers (header read,
//! body read, deadline) are never the earliest one and setting them costs no syscall.
//!
//! Why: tokio's time driver unparks the runtime (a `write` to the I/O driver's eventfd, then an
//! `epoll_wait` that returns at once) whenever a timer is set earlier than the one the parked
//! worker sleeps until. A node with nothing else pending paid that on every request that found
//! it idle: 2 writes and 1 epoll_wait of a request's 10 syscalls on one worker
//! (`bench/one-connection.sh`). With this tick pending at most [`TICK`] ahead, any timer of a
//! second or more is later than it, whatever the request rate; the price is one wake-up per
//! [`TICK`] on an idle node (which wakes ~25 times a second already: the journal writer, sled).

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// How far ahead the floor timer is at most; request timers shorter than this still unpark.
pub const TICK: Duration = Duration::from_secs(1);

/// Starts the floor timer on the current runtime; abort the handle at stop.
pub fn start() -> JoinHandle<()> {
    tokio::spawn(async {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
        }
    })
}
