//! The loop both lease tasks (connections' and clients') run: a round whenever a lease asks
//! for a refill or every `TICK`, and a pause after a round Redis failed.

use std::time::Duration;

use tokio::sync::Notify;

/// How often a lease task looks at its leases without being woken.
pub(crate) const TICK: Duration = Duration::from_millis(250);
/// The pause after a round that Redis failed, so a dead Redis is not hammered.
const AFTER_FAILURE: Duration = Duration::from_millis(500);

/// A lease task: what wakes it and one pass over its due leases (`false` on a Redis error).
pub(crate) trait LeaseRounds {
    fn wake(&self) -> &Notify;
    fn one_round(&mut self) -> impl std::future::Future<Output = bool> + Send;
}

/// Runs `task`'s rounds until the task is aborted.
pub(crate) async fn run_rounds(mut task: impl LeaseRounds) {
    loop {
        tokio::select! {
            () = task.wake().notified() => {}
            () = tokio::time::sleep(TICK) => {}
        }
        if !task.one_round().await {
            tokio::time::sleep(AFTER_FAILURE).await;
        }
    }
}
