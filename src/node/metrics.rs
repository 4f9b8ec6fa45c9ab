//! Prometheus metrics through the `metrics` facade: counters and histograms recorded on the
//! request path, gauges (breaker state, cooldowns, lockouts, in-flight, journal lag, paces and
//! the forecast) computed
//! from the router's state when `/metrics` is scraped, so they cost nothing per request.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use metrics::{counter, gauge, histogram, Counter, Histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use quotaroute_actors::{AdminState, Router};
use quotaroute_journal::OutcomeClass;
use rustc_hash::FxHashMap;

use crate::cluster::status::ClusterStatus;
use crate::node::endpoint::Endpoint;
use crate::node::traffic::ConnectionTraffic;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// How often histogram samples are folded into their buckets when nobody scrapes. Until then
/// each sample waits in the exporter's queue (8 bytes, in blocks of 64 freed a collection
/// later): at 17k requests/s and two histograms a request, 5 s of them were a ~3 MB sawtooth
/// in the node's RSS; 0.5 s keeps a tenth of it, for two wakeups a second of this thread.
const UPKEEP_EVERY: Duration = Duration::from_millis(500);

/// Installs the process-wide recorder once (tests start many nodes in one process), with a
/// thread that runs the exporter's upkeep: histogram samples queue until a render or an upkeep
/// folds them, so without it a node nobody scrapes grows with every observation.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5,
                    1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                ])
                .ok()?;
            let handle = builder.install_recorder().ok()?;
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                })
                .ok()?;
            Some(handle)
        })
        .clone()
}

/// `quotaroute_requests_total` handles by (endpoint, status), registered on first use: a
/// registration hashes and allocates its labels, a cached handle only increments. FxHash: the
/// keys are the router's own labels and status codes, looked up once per request.
static REQUESTS: OnceLock<Mutex<FxHashMap<(&'static str, u16), Counter>>> = OnceLock::new();
static OVERHEAD: OnceLock<Histogram> = OnceLock::new();

pub fn request_finished(endpoint: Endpoint, status: u16) {
    let key = (endpoint.label(), status);
    let cache = REQUESTS.get_or_init(Mutex::default);
    let Ok(mut cache) = cache.lock() else {
        return;
    };
    cache
        .entry(key)
        .or_insert_with(|| {
            counter!(
                "quotaroute_requests_total",
                "endpoint" => key.0,
                "status" => key.1.to_string()
            )
        })
        .increment(1);
}

/// `quotaroute_translated_requests_total` handles by direction (behaviour §14), registered
/// once: a translated request only increments.
static TRANSLATED: OnceLock<Vec<Counter>> = OnceLock::new();

/// One upstream request served through translation in `direction`.
pub fn translated(direction: crate::wire::translate::Direction) {
    use crate::wire::translate::Direction;
    let counters = TRANSLATED.get_or_init(|| {
        Direction::ALL
            .iter()
            .map(|d| counter!("quotaroute_translated_requests_total", "direction" => d.label()))
            .collect()
    });
    if let Some(counter) = Direction::ALL
        .iter()
        .position(|d| *d == direction)
        .and_then(|i| counters.get(i))
    {
        counter.increment(1);
    }
}

/// One connection's attempt counters (one per class) and its provider's latency histogram,
/// registered when the config is loaded so an attempt only increments and records.
#[derive(Clone)]
pub struct AttemptMetrics {
    by_class: Vec<Counter>,
    latency: Histogram,
    /// Input tokens of successes: read from the upstream's prompt cache, written to it, and
    /// neither (behaviour §10: each connection's cached share).
    pub input_tokens: InputTokenCounters,
    /// The same attempts as plain atomics the dashboard can read back.
    pub traffic: Arc<ConnectionTraffic>,
}

impl std::fmt::Debug for AttemptMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptMetrics").finish_non_exhaustive()
    }
}

/// Every class, in the order of `AttemptMetrics::by_class`.
const CLASSES: [OutcomeClass; 11] = [
    OutcomeClass::Success,
    OutcomeClass::ModelUnavailable,
    OutcomeClass::ClientError,
    OutcomeClass::AuthFailed,
    OutcomeClass::Billing,
    OutcomeClass::QuotaExhausted,
    OutcomeClass::Forbidden,
    OutcomeClass::RateLimited,
    OutcomeClass::Timeout,
    OutcomeClass::ServerError,
    OutcomeClass::Network,
];

impl AttemptMetrics {
    /// Registers `connection`'s handles (call after [`install`]).
    pub fn register(provider: &str, connection: &str) -> Self {
        let by_class = CLASSES
            .iter()
            .map(|class| {
                counter!(
                    "quotaroute_attempts_total",
                    "provider" => provider.to_string(),
                    "connection" => connection.to_string(),
                    "class" => class.as_str()
                )
            })
            .collect();
        let latency =
            histogram!("quotaroute_upstream_latency_seconds", "provider" => provider.to_string());
        let input = |cache: &'static str| {
            counter!(
                "quotaroute_input_tokens_total",
                "provider" => provider.to_string(),
                "connection" => connection.to_string(),
                "cache" => cache
            )
        };
        AttemptMetrics {
            input_tokens: InputTokenCounters {
                cached: input("read"),
                cache_write: input("write"),
                uncached: input("none"),
            },
            by_class,
            latency,
            traffic: Arc::default(),
        }
    }
}

/// `quotaroute_input_tokens_total{cache="read"|"write"|"none"}` of one connection.
#[derive(Clone)]
pub struct InputTokenCounters {
    cached: Counter,
    cache_write: Counter,
    uncached: Counter,
}

impl InputTokenCounters {
    /// Counts one success's input tokens (`tokens_in` includes the cache reads and writes).
    pub fn record(&self, tokens_in: u64, cached: u64, cache_write: u64) {
        self.cached.increment(cached);
        self.cache_write.increment(cache_write);
        self.uncached
            .increment(tokens_in.saturating_sub(cached.saturating_add(cache_write)));
    }
}

pub fn attempt(metrics: &AttemptMetrics, class: OutcomeClass, latency: Duration) {
    if let Some(index) = CLASSES.iter().position(|c| *c == class) {
        if let Some(counter) = metrics.by_class.get(index) {
            counter.increment(1);
        }
    }
    metrics.latency.record(latency.as_secs_f64());
    metrics.traffic.record(class == OutcomeClass::Success);
}

pub fn overhead(overhead_us: u64) {
    OVERHEAD
        .get_or_init(|| histogram!("quotaroute_router_overhead_seconds"))
        .record(overhead_us as f64 / 1e6);
}

/// Sets the cluster gauges and counters from its status (`[cluster]` only).
static QUEUE_WAIT: OnceLock<Histogram> = OnceLock::new();

/// A request that queued for a permit (behaviour §11): its wait, and whether it ended in
/// `pool_busy`. Nothing is recorded for requests that did not queue (`waited_ms` 0, granted).
pub fn queue_wait(waited_ms: u64, pool_busy: bool) {
    if pool_busy {
        counter!("quotaroute_pool_busy_total").increment(1);
    } else if waited_ms == 0 {
        return;
    }
    QUEUE_WAIT
        .get_or_init(|| histogram!("quotaroute_queue_wait_seconds"))
        .record(waited_ms as f64 / 1e3);
}

/// The (combo, client) pairs of the `quotaroute_queued` gauge set at the last scrape: a pair
/// nobody waits in any more is set back to 0 rather than left at its last count.
static QUEUED_SEEN: OnceLock<Mutex<std::collections::BTreeSet<(String, String)>>> = OnceLock::new();

fn publish_queued(counts: &[quotaroute_actors::QueuedCount]) {
    let Ok(mut seen) = QUEUED_SEEN.get_or_init(Mutex::default).lock() else {
        return;
    };
    let now: std::collections::BTreeSet<(String, String)> = counts
        .iter()
        .map(|c| (c.combo.clone(), c.client.clone()))
        .collect();
    for (combo, client) in seen.difference(&now) {
        gauge!("quotaroute_queued", "combo" => combo.clone(), "client" => client.clone()).set(0.0);
    }
    for count in counts {
        gauge!("quotaroute_queued", "combo" => count.combo.clone(), "client" => count.client.clone())
            .set(count.queued as f64);
    }
    *seen = now;
}

pub fn publish_cluster(status: &ClusterStatus) {
    use std::sync::atomic::Ordering::Relaxed;
    gauge!("quotaroute_cluster_redis_up").set(if status.redis_up() { 1.0 } else { 0.0 });
    gauge!("quotaroute_cluster_peers").set(status.peers().len() as f64);
    counter!("quotaroute_cluster_events_published_total").absolute(status.published.load(Relaxed));
    counter!("quotaroute_cluster_events_applied_total").absolute(status.applied.load(Relaxed));
    counter!("quotaroute_cluster_events_skipped_total").absolute(status.skipped.load(Relaxed));
    counter!("quotaroute_cluster_leases_granted_total")
        .absolute(status.leases_granted.load(Relaxed));
    counter!("quotaroute_cluster_leases_refused_total")
        .absolute(status.leases_refused.load(Relaxed));
    counter!("quotaroute_cluster_lease_errors_total").absolute(status.lease_errors.load(Relaxed));
    counter!("quotaroute_cluster_events_refused_total").absolute(status.refused.load(Relaxed));
    counter!("quotaroute_cluster_events_clamped_total").absolute(status.clamped.load(Relaxed));
    gauge!("quotaroute_cluster_publish_backlog_events")
        .set(status.publish_backlog.load(Relaxed) as f64);
    gauge!("quotaroute_cluster_apply_lag_seconds")
        .set(status.last_lag_ms.load(Relaxed) as f64 / 1000.0);
}

/// Sets the state gauges from the router, then renders everything.
pub async fn render(handle: &PrometheusHandle, router: Option<&Router>) -> String {
    if let Some(router) = router {
        let now_ms = router.clock().now_ms();
        if let Ok(state) = router.state_at(now_ms).await {
            publish_state(&state);
            publish_forecast(&state, now_ms);
        }
        publish_queued(&router.queued().await);
        let stats = router.journal_stats();
        gauge!("quotaroute_journal_lag_events").set(stats.queue_len as f64);
        gauge!("quotaroute_journal_dropped_events").set(stats.dropped as f64);
        gauge!("quotaroute_journal_write_errors").set(stats.write_errors as f64);
        gauge!("quotaroute_journal_healthy").set(if stats.healthy { 1.0 } else { 0.0 });
        gauge!("quotaroute_journal_durable_seq").set(stats.durable_seq as f64);
    }
    handle.render()
}

/// Seconds from `now_ms` until `at_ms`; `+Inf` when it never comes (lasts to its reset).
fn seconds_until(at_ms: Option<u64>, now_ms: u64) -> f64 {
    at_ms.map_or(f64::INFINITY, |at| {
        at.saturating_sub(now_ms) as f64 / 1000.0
    })
}

/// Pacing's gauges (behaviour §13): each combo target's pace, the seconds until each window
/// and each combo runs out (`+Inf`: it lasts to its reset), and each combo's spare now.
fn publish_forecast(state: &AdminState, now_ms: u64) {
    for connection in &state.connections {
        for bucket in &connection.buckets {
            gauge!(
                "quotaroute_window_runs_out_seconds",
                "connection" => connection.id.clone(),
                "window" => bucket.window.clone()
            )
            .set(seconds_until(bucket.runs_out_at_ms, now_ms));
        }
    }
    for combo in &state.combos {
        gauge!("quotaroute_combo_runs_out_seconds", "combo" => combo.name.clone())
            .set(seconds_until(combo.runs_out_at_ms, now_ms));
        // Spare now (§13): what the combo's windows are forecast to lose at their resets.
        for spare in &combo.spare_now {
            gauge!(
                "quotaroute_combo_spare_now",
                "combo" => combo.name.clone(),
                "window" => spare.window.clone()
            )
            .set(spare.unused_at_reset as f64);
        }
        for target in &combo.targets {
            gauge!(
                "quotaroute_target_pace",
                "combo" => combo.name.clone(),
                "connection" => target.connection.clone(),
                "model" => target.model.clone()
            )
            .set(target.pace);
        }
    }
}

/// The quota windows an upstream names (`quota_window` of a lockout).
const QUOTA_WINDOWS: [&str; 3] = ["day", "hour", "minute"];

fn publish_state(state: &AdminState) {
    for provider in &state.providers {
        let code = match provider.breaker {
            "CLOSED" => 0.0,
            "DEGRADED" => 1.0,
            "HALF_OPEN" => 2.0,
            _ => 3.0,
        };
        gauge!("quotaroute_breaker_state", "provider" => provider.name.clone()).set(code);
        gauge!("quotaroute_breaker_failures", "provider" => provider.name.clone())
            .set(f64::from(provider.failures));
    }
    for connection in &state.connections {
        let id = connection.id.clone();
        gauge!("quotaroute_in_flight", "connection" => id.clone())
            .set(f64::from(connection.in_flight));
        gauge!("quotaroute_cooldown_remaining_seconds", "connection" => id.clone())
            .set(connection.cooldown_remaining_ms as f64 / 1000.0);
        gauge!("quotaroute_connection_disabled", "connection" => id.clone()).set(
            if connection.disabled.is_some() {
                1.0
            } else {
                0.0
            },
        );
        gauge!("quotaroute_lockouts", "connection" => id.clone())
            .set(connection.lockouts.len() as f64);
        // Quota lockouts by the window the upstream named (Google's per-day and per-minute
        // quotas, behaviour §15): how many, and the seconds to the soonest reset (0: none).
        // Every window is set each time, so a lock that ended reads 0, not its last value.
        for window in QUOTA_WINDOWS {
            let locks = connection
                .lockouts
                .iter()
                .filter(|lock| lock.quota_window == Some(window));
            let (count, soonest) = locks.fold((0u32, None::<u64>), |(count, soonest), lock| {
                let soonest = soonest.map_or(lock.remaining_ms, |ms| ms.min(lock.remaining_ms));
                (count + 1, Some(soonest))
            });
            gauge!("quotaroute_quota_lockouts", "connection" => id.clone(), "window" => window)
                .set(f64::from(count));
            gauge!(
                "quotaroute_quota_lockout_reset_seconds",
                "connection" => id.clone(),
                "window" => window
            )
            .set(soonest.unwrap_or(0) as f64 / 1000.0);
        }
    }
}
