//! The task that keeps one credential fresh without any request waiting: a key file is read
//! every second (a change is picked up within one poll), a command runs again when its TTL
//! is up, an OAuth token is refreshed before it expires; a failed load is retried with a
//! capped backoff (never later than the last good token's expiry).
//!
//! The task holds the credential weakly: a reload that drops the credential (its source
//! changed, or the connection left) ends it, and so does its abort when dropped.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::credentials::credential::Credential;
use crate::credentials::loaded::Trigger;
use crate::credentials::{file, schedule};

/// Starts the watch of `credential` (nothing for a static key, or outside a tokio runtime:
/// loads then happen when requests need them).
pub fn start(credential: &Arc<Credential>) {
    let Some(timed) = credential.timed_trigger() else {
        return;
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let task = runtime.spawn(run(Arc::downgrade(credential), timed));
    credential.set_watch(task.abort_handle());
}

async fn run(credential: Weak<Credential>, timed: Trigger) {
    if let Some(credential) = credential.upgrade() {
        let _ = credential.refresh(Trigger::Start, None).await;
    }
    loop {
        let Some((delay, trigger, seen)) = next(&credential, timed).await else {
            return;
        };
        // On the router's clock: a test that moves it moves refreshes and expiry with it.
        let Some(clock) = credential
            .upgrade()
            .map(|credential| credential.clock.clone())
        else {
            return;
        };
        clock
            .sleep_ms(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX))
            .await;
        let Some(credential) = credential.upgrade() else {
            return;
        };
        let _ = credential.refresh(trigger, seen).await;
    }
}

/// How long to sleep, then which load to run (`seen`: skip it if a request refreshed in the
/// meantime).
async fn next(
    credential: &Weak<Credential>,
    timed: Trigger,
) -> Option<(Duration, Trigger, Option<u64>)> {
    let credential = credential.upgrade()?;
    if timed == Trigger::Changed {
        return Some((file::POLL_INTERVAL, Trigger::Changed, None));
    }
    let now = credential.clock.now_ms();
    let current = credential.current();
    let failures = credential.consecutive_failures().await;
    if failures > 0 || current.is_none() {
        let expires = current.as_ref().and_then(|loaded| loaded.expires_at_ms);
        let wait = schedule::retry_after_ms(failures.max(1), now, expires);
        let trigger = if current.is_some() {
            timed
        } else {
            Trigger::Start
        };
        return Some((Duration::from_millis(wait), trigger, None));
    }
    let loaded = current?;
    let due = loaded.refresh_at_ms?;
    Some((
        Duration::from_millis(due.saturating_sub(now)),
        timed,
        Some(loaded.generation),
    ))
}
