//! `Credential`: one connection's current key or token, readable on the request path without
//! awaiting anything (an `ArcSwap`), and refreshed in a single flight: however many requests
//! ask at once (50 requests that all got a 401), one load runs and all of them get its
//! outcome; requests on other connections never wait, each connection has its own flight.
//!
//! A failed load keeps the last good credential until it expires (OAuth) or for good (a file
//! or a command, whose keys do not say), journals `credential_failed` with a precise reason
//! (once per distinct reason, so a vanished file polled every second is one event), and logs
//! it at `warn`. A load journals `credential_refreshed` (a key file only when its content
//! changed). Neither ever carries the secret.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use quotaroute_actors::SharedClock;
use quotaroute_journal::{CredentialFailed, CredentialRefreshed, Event};

use crate::config::{CredentialSource, Secret};
use crate::credentials::error::CredentialError;
use crate::credentials::journal::CredentialJournal;
use crate::credentials::loaded::{CredentialView, Echoes, Loaded, Trigger};
use crate::credentials::oauth::OAuthGrant;
use crate::credentials::{command, file, schedule};
use crate::upstream::client::UpstreamClient;

/// How a source is loaded.
enum Loader {
    Static,
    File(std::path::PathBuf),
    Command {
        argv: Vec<String>,
        ttl_ms: u64,
        timeout: Duration,
    },
    OAuth(Box<OAuthGrant>),
}

/// The single flight's memory: the last load's outcome (shared with whoever waited for it)
/// and the last failure journaled (to journal each distinct failure once).
#[derive(Default)]
struct Flight {
    last: Option<Result<Arc<Loaded>, CredentialError>>,
    journaled_failure: Option<String>,
    consecutive_failures: u32,
}

/// One connection's credential.
pub struct Credential {
    pub connection: String,
    pub provider: String,
    source: CredentialSource,
    loader: Loader,
    current: ArcSwapOption<Loaded>,
    /// The secret before the current one, still masked out of upstream bodies that echo it.
    previous: ArcSwapOption<Loaded>,
    flight: tokio::sync::Mutex<Flight>,
    /// Completed loads, read before waiting for the flight: changed = someone loaded meanwhile.
    loads: AtomicU64,
    journal: Arc<CredentialJournal>,
    /// The last failed load (when, and why), cleared by a good one: a request finding no
    /// usable credential within [`ON_DEMAND_RETRY_MS`] of it gets that error instead of
    /// loading again (the watch retries on its own schedule).
    last_failure: ArcSwapOption<(u64, CredentialError)>,
    /// The task keeping it fresh (`watch`), stopped when the credential is dropped.
    watch: std::sync::Mutex<Option<tokio::task::AbortHandle>>,
    /// The router's clock: expiry, refresh times and the journal's `at` are on it.
    pub(crate) clock: SharedClock,
}

impl Drop for Credential {
    fn drop(&mut self) {
        if let Ok(mut watch) = self.watch.lock() {
            if let Some(task) = watch.take() {
                task.abort();
            }
        }
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("connection", &self.connection)
            .field("source", &self.source.kind())
            .finish_non_exhaustive()
    }
}

/// How long after a failed load a request that needs a credential waits for the next try
/// instead of loading itself (so a broken source is not run at the request rate).
pub const ON_DEMAND_RETRY_MS: u64 = 1_000;

impl Credential {
    /// A connection's credential; a static key is loaded at once, the others on their first
    /// [`Credential::refresh`] (the watch starts with one). `client` reaches an OAuth
    /// connection's token endpoint (its provider's client: CA file, egress proxy).
    pub fn new(
        connection: &str,
        provider: &str,
        source: &CredentialSource,
        client: &UpstreamClient,
        journal: Arc<CredentialJournal>,
        clock: SharedClock,
    ) -> Self {
        let loader = match source {
            CredentialSource::Static { .. } => Loader::Static,
            CredentialSource::File { path } => Loader::File(path.clone()),
            CredentialSource::Command {
                argv,
                ttl_ms,
                timeout_ms,
            } => Loader::Command {
                argv: argv.clone(),
                ttl_ms: *ttl_ms,
                timeout: Duration::from_millis(*timeout_ms),
            },
            CredentialSource::OAuth(oauth) => {
                Loader::OAuth(Box::new(OAuthGrant::new(oauth.clone(), client.clone())))
            }
        };
        let current = source
            .static_key()
            .map(|key| Arc::new(Loaded::new(key.clone(), 1, clock.now_ms(), None, None)));
        Self {
            connection: connection.to_owned(),
            provider: provider.to_owned(),
            source: source.clone(),
            loader,
            current: ArcSwapOption::new(current),
            previous: ArcSwapOption::empty(),
            flight: tokio::sync::Mutex::new(Flight::default()),
            loads: AtomicU64::new(0),
            journal,
            last_failure: ArcSwapOption::empty(),
            watch: std::sync::Mutex::new(None),
            clock: clock.clone(),
        }
    }

    /// Where it comes from, as configured (a reload keeps a credential whose source is equal).
    pub fn source(&self) -> &CredentialSource {
        &self.source
    }

    /// The task that keeps it fresh; aborted when the credential is dropped.
    pub(crate) fn set_watch(&self, task: tokio::task::AbortHandle) {
        if let Ok(mut watch) = self.watch.lock() {
            if let Some(old) = watch.replace(task) {
                old.abort();
            }
        }
    }

    /// Stops the watch (the node stops; the credential itself stays readable).
    pub fn stop_watch(&self) {
        if let Ok(mut watch) = self.watch.lock() {
            if let Some(task) = watch.take() {
                task.abort();
            }
        }
    }

    /// What the watch's timed loads are called: `changed` (a key file's poll), `ttl` (a
    /// command), `expiring` (OAuth); `None` for a static key, which has no watch.
    pub(crate) fn timed_trigger(&self) -> Option<Trigger> {
        match self.loader {
            Loader::Static => None,
            Loader::File(_) => Some(Trigger::Changed),
            Loader::Command { .. } => Some(Trigger::Ttl),
            Loader::OAuth(_) => Some(Trigger::Expiring),
        }
    }

    /// Whether a 401 can be answered by loading it again (every source but a static key).
    pub fn refreshable(&self) -> bool {
        !matches!(self.loader, Loader::Static)
    }

    /// The credential as it is now, without waiting (`None` before the first load worked).
    pub fn current(&self) -> Option<Arc<Loaded>> {
        self.current.load_full()
    }

    /// Its state for the admin API.
    pub fn view(&self) -> CredentialView {
        let current = self.current();
        CredentialView {
            connection: self.connection.clone(),
            provider: self.provider.clone(),
            source: self.source.kind(),
            generation: current.as_ref().map_or(0, |loaded| loaded.generation),
            loaded_at_ms: current.as_ref().map(|loaded| loaded.loaded_at_ms),
            expires_at_ms: current.as_ref().and_then(|loaded| loaded.expires_at_ms),
            refresh_at_ms: current.as_ref().and_then(|loaded| loaded.refresh_at_ms),
            last_error: self
                .last_failure
                .load()
                .as_deref()
                .map(|(_, error)| error.to_string()),
        }
    }

    /// The secrets an upstream might echo back (the current one and the one before it),
    /// without copying them: for the per-response header scan.
    pub fn echoes(&self) -> Echoes {
        Echoes {
            current: self.current.load_full(),
            previous: self.previous.load_full(),
        }
    }

    /// The secrets an upstream might echo back: the current one and the one before it.
    pub fn secrets(&self) -> Vec<Secret> {
        let mut secrets = Vec::with_capacity(2);
        if let Some(current) = self.current.load().as_ref() {
            secrets.push(current.secret.clone());
        }
        if let Some(previous) = self.previous.load().as_ref() {
            secrets.push(previous.secret.clone());
        }
        secrets
    }

    /// A credential a request can send now: the current one unless it is missing or expired,
    /// in which case this request waits for (or joins) a load of this connection only.
    pub async fn usable(&self) -> Result<Arc<Loaded>, CredentialError> {
        let current = self.current();
        match &current {
            Some(loaded) if !loaded.expired(self.clock.now_ms()) => return Ok(loaded.clone()),
            _ => {}
        }
        if let Some(failure) = self.last_failure.load().as_deref() {
            let (failed_at_ms, error) = failure;
            if self.clock.now_ms().saturating_sub(*failed_at_ms) < ON_DEMAND_RETRY_MS {
                return Err(match &current {
                    Some(expired) => CredentialError::Expired {
                        expired_at_ms: expired.expires_at_ms.unwrap_or(*failed_at_ms),
                        last_error: error.to_string(),
                    },
                    None => error.clone(),
                });
            }
        }
        let trigger = if current.is_some() {
            Trigger::Expired
        } else {
            Trigger::Start
        };
        let loaded = self
            .refresh(trigger, current.as_ref().map(|loaded| loaded.generation))
            .await?;
        match loaded.expires_at_ms {
            Some(expired_at_ms) if self.clock.now_ms() >= expired_at_ms => {
                Err(CredentialError::Expired {
                    expired_at_ms,
                    last_error: "the new token was already expired".into(),
                })
            }
            _ => Ok(loaded),
        }
    }

    /// Loads the credential again, in one flight with every concurrent caller. `seen` is the
    /// generation the caller used: when a newer one is already current, that is the answer
    /// and nothing is loaded. After a failed load the answer is the last good credential while
    /// it has not expired, except for a caller that just got a 401 with it: that one gets the
    /// error.
    pub async fn refresh(
        &self,
        trigger: Trigger,
        seen: Option<u64>,
    ) -> Result<Arc<Loaded>, CredentialError> {
        let loads_before = self.loads.load(Ordering::Acquire);
        let mut flight = self.flight.lock().await;
        if self.loads.load(Ordering::Acquire) != loads_before {
            // A load finished while this caller waited for it: share its outcome.
            if let Some(last) = flight.last.clone() {
                drop(flight);
                return self.answer(trigger, last);
            }
        }
        if let (Some(seen), Some(current)) = (seen, self.current()) {
            if current.generation != seen {
                return Ok(current);
            }
        }
        let outcome = self.load(trigger, &mut flight).await;
        flight.last = Some(outcome.clone());
        self.loads.fetch_add(1, Ordering::Release);
        drop(flight);
        self.answer(trigger, outcome)
    }

    /// A load's outcome as `trigger`'s caller sees it: after a failure, the last good
    /// credential while it has not expired — except after a 401, which proved it bad.
    fn answer(
        &self,
        trigger: Trigger,
        outcome: Result<Arc<Loaded>, CredentialError>,
    ) -> Result<Arc<Loaded>, CredentialError> {
        match outcome {
            Err(error) if trigger != Trigger::Unauthorized => match self.current() {
                Some(current) if !current.expired(self.clock.now_ms()) => Ok(current),
                _ => Err(error),
            },
            other => other,
        }
    }

    /// Consecutive failed loads so far (0 after a success), for the watch's backoff.
    pub async fn consecutive_failures(&self) -> u32 {
        self.flight.lock().await.consecutive_failures
    }

    async fn load(
        &self,
        trigger: Trigger,
        flight: &mut Flight,
    ) -> Result<Arc<Loaded>, CredentialError> {
        let before = self.current();
        // An OAuth token's lifetime counts from when it was asked for: never later than the
        // endpoint's own clock started it.
        let asked_at = self.clock.now_ms();
        let fresh = match &self.loader {
            Loader::Static => {
                return before.ok_or_else(|| CredentialError::NotLoaded("no key".into()))
            }
            Loader::File(path) => file::read_key(path).await.map(|key| (key, None, None)),
            Loader::Command {
                argv,
                ttl_ms,
                timeout,
            } => command::run(argv, *timeout).await.map(|key| {
                let refresh_at = schedule::command_refresh_at(self.clock.now_ms(), *ttl_ms);
                (key, None, Some(refresh_at))
            }),
            Loader::OAuth(grant) => match grant.refresh().await {
                Ok(issued) => {
                    let issued_at = asked_at;
                    let lifetime_ms = issued
                        .expires_in
                        .map(|lifetime| u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX));
                    let expires_at = lifetime_ms.map(|ms| issued_at.saturating_add(ms));
                    let refresh_at = schedule::oauth_refresh_at(issued_at, lifetime_ms);
                    if let Some(unsaved) = issued.unsaved {
                        self.failed(trigger, &unsaved, expires_at, flight, true);
                    }
                    Ok((issued.access_token, expires_at, Some(refresh_at)))
                }
                Err(error) => Err(error),
            },
        };
        let now = self.clock.now_ms();
        let (secret, expires_at_ms, refresh_at_ms) = match fresh {
            Ok(fresh) => fresh,
            Err(error) => {
                flight.consecutive_failures = flight.consecutive_failures.saturating_add(1);
                self.last_failure
                    .store(Some(Arc::new((now, error.clone()))));
                let last_good = before.as_ref().filter(|loaded| !loaded.expired(now));
                self.failed(
                    trigger,
                    &error,
                    last_good.and_then(|loaded| loaded.expires_at_ms),
                    flight,
                    false,
                );
                return Err(match (&before, last_good) {
                    (Some(expired), None) => CredentialError::Expired {
                        expired_at_ms: expired.expires_at_ms.unwrap_or(now),
                        last_error: error.to_string(),
                    },
                    _ => error,
                });
            }
        };
        flight.consecutive_failures = 0;
        flight.journaled_failure = None;
        self.last_failure.store(None);
        let unchanged = before
            .as_ref()
            .is_some_and(|loaded| loaded.secret == secret);
        if unchanged && matches!(self.loader, Loader::File(_)) {
            // The poll found the same key: nothing happened.
            return before.ok_or_else(|| CredentialError::NotLoaded("no key".into()));
        }
        let generation = match &before {
            Some(loaded) if unchanged => loaded.generation,
            Some(loaded) => loaded.generation + 1,
            None => 1,
        };
        let loaded = Arc::new(Loaded::new(
            secret,
            generation,
            now,
            expires_at_ms,
            refresh_at_ms,
        ));
        if let (Some(before), false) = (&before, unchanged) {
            self.previous.store(Some(Arc::clone(before)));
        }
        self.current.store(Some(loaded.clone()));
        tracing::info!(
            connection = %self.connection,
            source = self.source.kind(),
            trigger = trigger.as_str(),
            expires_at_ms,
            changed = !unchanged,
            "credential refreshed"
        );
        self.journal.record(
            now,
            Event::CredentialRefreshed(CredentialRefreshed {
                provider: self.provider.clone(),
                connection: self.connection.clone(),
                source: self.source.kind().to_owned(),
                trigger: trigger.as_str().to_owned(),
                expires_at_ms,
            }),
        );
        Ok(loaded)
    }

    /// Logs and journals a failed load (each distinct reason once in a row; `always` for a
    /// one-off such as an unsaved rotated refresh token).
    fn failed(
        &self,
        trigger: Trigger,
        error: &CredentialError,
        last_good_until_ms: Option<u64>,
        flight: &mut Flight,
        always: bool,
    ) {
        let reason = error.to_string();
        if !always && flight.journaled_failure.as_deref() == Some(reason.as_str()) {
            tracing::debug!(connection = %self.connection, error = %reason, "credential still failing");
            return;
        }
        if !always {
            flight.journaled_failure = Some(reason.clone());
        }
        tracing::warn!(
            connection = %self.connection,
            source = self.source.kind(),
            trigger = trigger.as_str(),
            error = %reason,
            last_good_until_ms,
            "credential refresh failed"
        );
        self.journal.record(
            self.clock.now_ms(),
            Event::CredentialFailed(CredentialFailed {
                provider: self.provider.clone(),
                connection: self.connection.clone(),
                source: self.source.kind().to_owned(),
                trigger: trigger.as_str().to_owned(),
                error: reason,
                last_good_until_ms,
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// A key command that counts its runs in `dir/runs` and prints `tok-<run>`.
    fn counting_command(dir: &Path) -> CredentialSource {
        let runs = dir.join("runs");
        CredentialSource::Command {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                format!(
                    "n=$(cat {runs} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {runs}; sleep 0.05; echo tok-$n",
                    runs = runs.display()
                ),
            ],
            ttl_ms: 300_000,
            timeout_ms: 5_000,
        }
    }

    fn runs(dir: &Path) -> u32 {
        std::fs::read_to_string(dir.join("runs")).map_or(0, |text| text.trim().parse().unwrap())
    }

    fn credential(source: &CredentialSource) -> (Arc<Credential>, Arc<CredentialJournal>) {
        let journal = Arc::new(CredentialJournal::new());
        let credential = Credential::new(
            "c1",
            "openai",
            source,
            &UpstreamClient::new(),
            journal.clone(),
            Arc::new(quotaroute_actors::SystemClock),
        );
        (Arc::new(credential), journal)
    }

    fn kinds(journal: &CredentialJournal) -> Vec<String> {
        journal
            .waiting()
            .iter()
            .map(|event| match event {
                Event::CredentialRefreshed(e) => format!("refreshed {} {}", e.source, e.trigger),
                Event::CredentialFailed(e) => {
                    format!("failed {} {}: {}", e.source, e.trigger, e.error)
                }
                other => other.kind().to_owned(),
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fifty_concurrent_401s_share_one_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let (credential, journal) = credential(&counting_command(dir.path()));
        let first = credential.usable().await.unwrap();
        assert_eq!((first.secret.expose(), first.generation), ("tok-1", 1));
        let seen = first.generation;
        let refreshes = (0..50).map(|_| {
            let credential = credential.clone();
            tokio::spawn(async move { credential.refresh(Trigger::Unauthorized, Some(seen)).await })
        });
        for refresh in futures_util::future::join_all(refreshes).await {
            let loaded = refresh.unwrap().unwrap();
            assert_eq!((loaded.secret.expose(), loaded.generation), ("tok-2", 2));
        }
        assert_eq!(runs(dir.path()), 2, "one start, one refresh for all 50");
        // A 401 to the old key arriving after the refresh does not run it again.
        let late = credential
            .refresh(Trigger::Unauthorized, Some(1))
            .await
            .unwrap();
        assert_eq!(late.generation, 2);
        assert_eq!(runs(dir.path()), 2);
        assert_eq!(
            kinds(&journal),
            ["refreshed command start", "refreshed command unauthorized"]
        );
        // The replaced key is still masked.
        let secrets: Vec<String> = credential
            .secrets()
            .iter()
            .map(|s| s.expose().to_owned())
            .collect();
        assert_eq!(secrets, ["tok-2", "tok-1"]);
    }

    #[tokio::test]
    async fn a_vanished_file_keeps_the_last_good_key_and_is_journaled_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "sk-file-1\n").unwrap();
        let (credential, journal) = credential(&CredentialSource::File { path: path.clone() });
        assert_eq!(
            credential.usable().await.unwrap().secret.expose(),
            "sk-file-1"
        );
        // Unchanged content: no new generation, no event.
        let same = credential.refresh(Trigger::Changed, None).await.unwrap();
        assert_eq!(same.generation, 1);
        std::fs::remove_file(&path).unwrap();
        for _ in 0..3 {
            let kept = credential.refresh(Trigger::Changed, None).await.unwrap();
            assert_eq!(kept.secret.expose(), "sk-file-1");
        }
        // After a 401 the last good key is no answer.
        let error = credential
            .refresh(Trigger::Unauthorized, Some(1))
            .await
            .unwrap_err();
        assert!(
            error.to_string().starts_with("cannot read the key file"),
            "{error}"
        );
        assert_eq!(
            credential.usable().await.unwrap().secret.expose(),
            "sk-file-1"
        );
        std::fs::write(&path, "sk-file-2").unwrap();
        let changed = credential.refresh(Trigger::Changed, None).await.unwrap();
        assert_eq!(
            (changed.secret.expose(), changed.generation),
            ("sk-file-2", 2)
        );
        let events = kinds(&journal);
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[0], "refreshed file start");
        assert!(
            events[1].starts_with("failed file changed: cannot read the key file"),
            "{events:?}"
        );
        assert_eq!(events[2], "refreshed file changed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hanging_refresh_never_blocks_another_connection() {
        let hanging = CredentialSource::Command {
            argv: vec!["/bin/sh".into(), "-c".into(), "exec sleep 30".into()],
            ttl_ms: 300_000,
            timeout_ms: 1_500,
        };
        let (stuck, journal) = credential(&hanging);
        let (other, _) = credential(&CredentialSource::Static {
            key: Secret::new("sk-static"),
            env: None,
        });
        let started = std::time::Instant::now();
        let waiting = tokio::spawn({
            let stuck = stuck.clone();
            async move { stuck.usable().await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let loaded = tokio::time::timeout(Duration::from_millis(50), other.usable())
            .await
            .expect("the other connection does not wait")
            .unwrap();
        assert_eq!(loaded.secret.expose(), "sk-static");
        let error = waiting.await.unwrap().unwrap_err();
        assert_eq!(
            error.to_string(),
            "the key command `/bin/sh` did not exit within 1500 ms and was killed"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            kinds(&journal),
            ["failed command start: the key command `/bin/sh` did not exit within 1500 ms and was killed"]
        );
    }
}
