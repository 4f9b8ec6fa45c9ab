//! `GET /admin/events`: the dashboard's live feed, as server-sent events. `state` carries the
//! `GET /admin/state` JSON whenever something may have changed (the journal took an event, or
//! a connection took an attempt), at most every `STATE_MIN_GAP`, and at least every
//! `STATE_REFRESH`; `clients` carries the `GET /admin/clients` JSON under the same rules,
//! whenever a client's view may have changed (the ledger's change count, or an attempt);
//! `traffic` carries each connection's attempts and failures of the last second, every second
//! (it doubles as the heartbeat). `state` and `clients` are sent only when their JSON differs
//! from the last one sent.
//!
//! One subscriber is one stream polled by hyper: every `TICK` it reads atomics only (the
//! journal's append count, the connections' attempt counters, the client ledger's change
//! count) and builds the state or the clients only after a change, and it ends when the client goes away, its
//! key stops being the admin key or the node starts to stop. Nobody subscribed: nothing runs.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use quotaroute_actors::Router;
use serde_json::json;

use crate::node::admin::{admin_error, admin_refusal, admin_router, client_views};
use crate::node::app::AppState;
use crate::node::traffic::ConnectionTraffic;

/// How often a subscriber looks for changes (atomic loads only).
const TICK: Duration = Duration::from_millis(200);
/// The least time between two state pushes: coalesces a burst of events into one.
const STATE_MIN_GAP: Duration = Duration::from_millis(400);
/// A state push at least this often, so counted-down times and expiries stay true.
const STATE_REFRESH: Duration = Duration::from_secs(5);
/// How often the traffic counts are pushed.
const TRAFFIC_EVERY: Duration = Duration::from_secs(1);
/// Subscribers one process serves at once (each costs a state build per change).
const MAX_SUBSCRIBERS: usize = 32;

static SUBSCRIBERS: AtomicUsize = AtomicUsize::new(0);

pub async fn events(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let router = match admin_router(&app, &headers) {
        Ok(router) => router,
        Err(refusal) => return *refusal,
    };
    let Some(slot) = Subscription::take() else {
        return admin_error(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_subscribers",
            &format!("at most {MAX_SUBSCRIBERS} dashboards at once"),
        );
    };
    let mut feed = Feed {
        app,
        headers,
        router,
        _slot: slot,
        tick: None,
        queue: VecDeque::from([Bytes::from_static(b"retry: 2000\n\n")]),
        last_state: None,
        last_state_json: String::new(),
        seen: Seen::default(),
        last_clients: None,
        last_clients_json: String::new(),
        clients_seen: ClientsSeen::default(),
        traffic_at: Instant::now(),
        traffic: HashMap::new(),
        done: false,
    };
    // The baseline the first traffic push counts from.
    feed.traffic_since_last();
    let stream = futures_util::stream::unfold(feed, |mut feed| async move {
        let chunk = feed.next().await?;
        Some((Ok::<Bytes, Infallible>(chunk), feed))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    // Proxies such as nginx would otherwise hold the events back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// One of the `MAX_SUBSCRIBERS` slots, given back when the stream is dropped.
struct Subscription;

impl Subscription {
    fn take() -> Option<Subscription> {
        SUBSCRIBERS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_SUBSCRIBERS).then_some(n + 1)
            })
            .ok()
            .map(|_| Subscription)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        SUBSCRIBERS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the last state push had seen: a difference means the state may have changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Seen {
    journal_appended: u64,
    attempts: u64,
}

/// What the last clients push had seen: a difference means a client's view may have changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ClientsSeen {
    ledger_changes: u64,
    attempts: u64,
}

/// Whether a push last made at `last` is due at `now`: at once the first time, after a change
/// no sooner than `STATE_MIN_GAP`, and at least every `STATE_REFRESH`.
fn push_due(last: Option<Instant>, changed: bool, now: Instant) -> bool {
    match last {
        None => true,
        Some(at) => {
            let since = now.duration_since(at);
            (changed && since >= STATE_MIN_GAP) || since >= STATE_REFRESH
        }
    }
}

/// One connection's counters at the last traffic push (the `Arc` tells a reload's fresh
/// counters from the old ones).
struct TrafficMark {
    counters: Arc<ConnectionTraffic>,
    attempts: u64,
    failures: u64,
}

struct Feed {
    app: AppState,
    headers: HeaderMap,
    router: Router,
    _slot: Subscription,
    tick: Option<tokio::time::Interval>,
    queue: VecDeque<Bytes>,
    last_state: Option<Instant>,
    last_state_json: String,
    seen: Seen,
    last_clients: Option<Instant>,
    last_clients_json: String,
    clients_seen: ClientsSeen,
    traffic_at: Instant,
    traffic: HashMap<String, TrafficMark>,
    done: bool,
}

impl Feed {
    /// The next chunk of the stream; `None` ends it.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(chunk) = self.queue.pop_front() {
                return Some(chunk);
            }
            if self.done {
                return None;
            }
            let tick = self.tick.get_or_insert_with(|| {
                let mut tick = tokio::time::interval(TICK);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick
            });
            tick.tick().await;
            self.poll().await;
        }
    }

    async fn poll(&mut self) {
        if self.app.stopping() {
            // The node is draining: end the stream so it does not hold the drain.
            self.queue.push_back(event(
                "error",
                &json!({"reason": "stopping", "message": "the node is stopping"}).to_string(),
            ));
            self.done = true;
            return;
        }
        if admin_refusal(&self.app, &self.headers).is_some() {
            // The admin key changed (a reload): this key may no longer watch.
            self.queue.push_back(event(
                "error",
                &json!({"reason": "key", "message": "the admin key changed; sign in again"})
                    .to_string(),
            ));
            self.done = true;
            return;
        }
        let now = Instant::now();
        let seen = Seen {
            journal_appended: self.router.journal_stats().appended,
            attempts: self.total_attempts(),
        };
        if push_due(self.last_state, seen != self.seen, now) {
            self.last_state = Some(now);
            self.seen = seen;
            match self.router.state_live().await {
                Ok(state) => match serde_json::to_value(&state).and_then(|mut value| {
                    // Each combo's affinity hit rate, as `/admin/state` gives it.
                    value["affinity"] = json!(self.app.inner.affinity.views());
                    // Each priming connection's last and next prime (behaviour §13).
                    value["primes"] = json!(crate::node::prime_driver::views(
                        &self.app,
                        self.router.clock().now_ms()
                    ));
                    serde_json::to_string(&value)
                }) {
                    Ok(text) if text != self.last_state_json => {
                        self.queue.push_back(event("state", &text));
                        self.last_state_json = text;
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "dashboard state not rendered"),
                },
                Err(error) => tracing::warn!(%error, "dashboard state not read"),
            }
        }
        let clients_seen = ClientsSeen {
            ledger_changes: self.app.live().clients.changes(),
            attempts: seen.attempts,
        };
        if push_due(self.last_clients, clients_seen != self.clients_seen, now) {
            self.last_clients = Some(now);
            self.clients_seen = clients_seen;
            let views = client_views(&self.app, &self.router).await;
            match serde_json::to_string(&json!({ "clients": views })) {
                Ok(text) if text != self.last_clients_json => {
                    self.queue.push_back(event("clients", &text));
                    self.last_clients_json = text;
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "dashboard clients not rendered"),
            }
        }
        if now.duration_since(self.traffic_at) >= TRAFFIC_EVERY {
            let interval = now.duration_since(self.traffic_at);
            self.traffic_at = now;
            let traffic = self.traffic_since_last();
            self.queue.push_back(event(
                "traffic",
                &json!({
                    "interval_ms": interval.as_millis() as u64,
                    "connections": traffic,
                })
                .to_string(),
            ));
        }
    }

    fn total_attempts(&self) -> u64 {
        self.app
            .live()
            .attempt_metrics
            .values()
            .map(|m| m.traffic.read().0)
            .sum()
    }

    /// Attempts and failures per connection since the last call, by connection id.
    fn traffic_since_last(&mut self) -> Vec<serde_json::Value> {
        let live = self.app.live();
        let mut ids: Vec<&String> = live.attempt_metrics.keys().collect();
        ids.sort();
        let mut out = Vec::with_capacity(ids.len());
        let mut marks = HashMap::with_capacity(ids.len());
        for id in ids {
            let Some(metrics) = live.attempt_metrics.get(id) else {
                continue;
            };
            let (attempts, failures) = metrics.traffic.read();
            let (attempts_then, failures_then) = match self.traffic.get(id) {
                Some(mark) if Arc::ptr_eq(&mark.counters, &metrics.traffic) => {
                    (mark.attempts, mark.failures)
                }
                // First sample, or counters new since a reload: a baseline, no rate yet.
                _ => (attempts, failures),
            };
            out.push(json!({
                "id": id,
                "attempts": attempts.saturating_sub(attempts_then),
                "failures": failures.saturating_sub(failures_then),
            }));
            marks.insert(
                id.clone(),
                TrafficMark {
                    counters: metrics.traffic.clone(),
                    attempts,
                    failures,
                },
            );
        }
        self.traffic = marks;
        out
    }
}

/// One SSE event; `data` is one line of JSON.
fn event(name: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}
