//! The simulator's clients sharing a full pool (behaviour §11): a seeded schedule of clients
//! of different weights arriving one by one or in floods on a combo with `queue_ms`, waiters
//! that disconnect, permits released, the clock moving, and fair windows — driven through a
//! real `Router` on a `ManualClock`, invariants checked after every step. Like `engine.rs` it
//! sees only what an embedding program sees (`Router::route`, `Router::queued`, `AdminState`).
//!
//! # Invariants (letters continue `engine.rs`'s)
//! - **q1** no connection runs over its `max_concurrent` because of the queue: in-flight ≤ cap,
//!   and in-flight = the decisions the simulator holds (no permit leaked to a dead waiter).
//! - **q2** while two clients both wait, grants follow their weights within one
//!   (`|granted_a·Σw − N·w_a| < Σw` over every prefix of a fair window).
//! - **q3** a queued request is granted or answered `PoolBusy` by its `queue_ms`; `PoolBusy`
//!   before then only when the queue was full (`waited_ms` 0).
//! - **q4** `Router::queued` counts exactly the live waiters per client; a disconnected one
//!   leaves it at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use quotaroute_actors::actor::combo::GRANT_ROUND_MS;
use quotaroute_actors::{
    ClientTag, Clock, ComboSpec, ConnectionSpec, Decision, ManualClock, ProviderSpec,
    RequestEvents, RouteError, RouteRequest, Router, RouterOptions, Topology,
};
use quotaroute_journal::{ApiFormat, AuthKind, MemoryJournal, WriterConfig};
use tokio::task::JoinHandle;

use crate::engine::{Failure, Rng, T0};

/// A client of the run: id and weight.
#[derive(Debug, Clone)]
struct SimClient {
    id: &'static str,
    weight: u32,
}

const CLIENT_IDS: [&str; 3] = ["heavy", "light", "third"];

/// What a clients run did.
#[derive(Debug, Clone, Default)]
pub struct ClientStats {
    pub steps: u64,
    /// Requests answered (granted or `PoolBusy`).
    pub answered: u64,
    pub granted: u64,
    pub pool_busy: u64,
    pub disconnects: u64,
    pub fair_windows: u64,
    pub fair_grants: u64,
}

impl ClientStats {
    pub fn add(&mut self, other: &ClientStats) {
        self.steps += other.steps;
        self.answered += other.answered;
        self.granted += other.granted;
        self.pool_busy += other.pool_busy;
        self.disconnects += other.disconnects;
        self.fair_windows += other.fair_windows;
        self.fair_grants += other.fair_grants;
    }
}

/// A request the simulator sent that has no answer yet.
struct Waiting {
    client: usize,
    sent_at_ms: u64,
    task: JoinHandle<Result<Decision, RouteError>>,
}

struct ClientSim {
    seed: u64,
    step: usize,
    clock: Arc<ManualClock>,
    router: Router,
    clients: Vec<SimClient>,
    caps: BTreeMap<String, u32>,
    queue_ms: u64,
    held: Vec<(usize, Decision)>,
    waiting: Vec<Waiting>,
    next_id: u64,
    stats: ClientStats,
}

/// Two connections of one provider with `max_concurrent` 1–2, combo `shared` over them with
/// `queue_ms` 500–5 000.
fn clients_topology(rng: &mut Rng) -> (Topology, BTreeMap<String, u32>, u64) {
    let provider = ProviderSpec::new("pq", ApiFormat::Openai, AuthKind::ApiKey);
    let mut caps = BTreeMap::new();
    let connections: Vec<ConnectionSpec> = ["q1", "q2"]
        .iter()
        .map(|id| {
            let mut c = ConnectionSpec::new(id, "pq", AuthKind::ApiKey, rng.range(1, 2) as u32);
            let cap = rng.range(1, 2) as u32;
            c.max_concurrent = Some(cap);
            caps.insert(id.to_string(), cap);
            c
        })
        .collect();
    let queue_ms = rng.range(500, 5_000);
    let mut shared = ComboSpec::quota_share("shared", &[("q1", "m", 1), ("q2", "m", 1)]);
    shared.queue_ms = queue_ms;
    let topology = Topology::new(
        vec![provider],
        connections,
        vec![shared],
        "sim-clients",
        "0",
    );
    (topology, caps, queue_ms)
}

impl ClientSim {
    async fn new(seed: u64) -> ClientSim {
        let mut rng = Rng::new(seed ^ 0xc1_1e47);
        let (topology, caps, queue_ms) = clients_topology(&mut rng);
        let clients = CLIENT_IDS
            .iter()
            .map(|id| SimClient {
                id,
                weight: rng.range(1, 3) as u32,
            })
            .collect();
        let clock = ManualClock::new(T0);
        let router = Router::start(
            topology,
            Box::new(MemoryJournal::new()),
            RouterOptions {
                writer: WriterConfig::default(),
                snapshot_every_events: 0,
                request_events: RequestEvents::All,
                clock: clock.clone(),
            },
        )
        .await
        .unwrap_or_else(|e| panic!("router starts: {e}"));
        ClientSim {
            seed,
            step: 0,
            clock,
            router,
            clients,
            caps,
            queue_ms,
            held: Vec::new(),
            waiting: Vec::new(),
            next_id: 0,
            stats: ClientStats::default(),
        }
    }

    fn fail(&self, invariant: &'static str, detail: String) -> Failure {
        Failure {
            seed: self.seed,
            step: self.step,
            invariant,
            detail,
        }
    }

    fn capacity(&self) -> usize {
        self.caps.values().map(|&c| c as usize).sum()
    }

    /// Lets the actors and every request task run to quiescence.
    async fn settle(&self) {
        for _ in 0..4 {
            let _ = self.router.settle().await;
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
        }
    }

    /// A grant round passes (`GRANT_ROUND_MS` on the clock), then everything runs.
    async fn grant_round(&self) {
        self.settle().await;
        self.clock.advance(GRANT_ROUND_MS);
        self.settle().await;
    }

    fn send(&mut self, client: usize) {
        self.next_id += 1;
        let request = RouteRequest {
            request_id: format!("{}-{}", self.clients[client].id, self.next_id).into(),
            model: "shared".into(),
            format: ApiFormat::Openai,
            translatable: false,
            cannot_carry: Vec::new(),
            only_connection: None,
            encrypted_maker: None,
            affinity: None,
            client: ClientTag {
                id: Arc::from(self.clients[client].id),
                weight: self.clients[client].weight,
                class: Default::default(),
            },
        };
        let router = self.router.clone();
        self.waiting.push(Waiting {
            client,
            sent_at_ms: self.clock.now_ms(),
            task: tokio::spawn(async move { router.route(request).await }),
        });
    }

    /// Collects the answered requests (q3 on each): granted ones are held, in the order they
    /// were sent; returns the clients granted.
    async fn collect(&mut self) -> Result<Vec<usize>, Failure> {
        let now = self.clock.now_ms();
        let mut granted = Vec::new();
        let mut still = Vec::new();
        for waiting in std::mem::take(&mut self.waiting) {
            if !waiting.task.is_finished() {
                if now >= waiting.sent_at_ms + self.queue_ms {
                    return Err(self.fail(
                        "q3",
                        format!(
                            "a {} request sent at {} is still waiting at {now} (queue_ms {})",
                            self.clients[waiting.client].id, waiting.sent_at_ms, self.queue_ms
                        ),
                    ));
                }
                still.push(waiting);
                continue;
            }
            let answer = waiting
                .task
                .await
                .map_err(|e| self.fail("q3", format!("request task: {e}")))?;
            match answer {
                Ok(decision) => {
                    self.stats.granted += 1;
                    granted.push(waiting.client);
                    self.held.push((waiting.client, decision));
                }
                Err(RouteError::PoolBusy { waited_ms, .. }) => {
                    self.stats.pool_busy += 1;
                    let due = waiting.sent_at_ms + self.queue_ms;
                    if waited_ms != 0 && now < due {
                        return Err(
                            self.fail("q3", format!("PoolBusy at {now} before the deadline {due}"))
                        );
                    }
                }
                Err(other) => return Err(self.fail("q3", format!("unexpected {other:?}"))),
            }
        }
        self.waiting = still;
        Ok(granted)
    }

    /// q1 and q4 on the current state.
    async fn check(&self) -> Result<(), Failure> {
        let state = self
            .router
            .state()
            .await
            .map_err(|e| self.fail("router-responds", e.to_string()))?;
        for connection in &state.connections {
            let cap = self.caps.get(&connection.id).copied().unwrap_or(u32::MAX);
            let held = self
                .held
                .iter()
                .filter(|(_, d)| d.current().is_some_and(|t| *t.connection == *connection.id))
                .count() as u32;
            if connection.in_flight > cap || connection.in_flight != held {
                return Err(self.fail(
                    "q1",
                    format!(
                        "{}: in flight {}, cap {cap}, held {held}",
                        connection.id, connection.in_flight
                    ),
                ));
            }
        }
        let queued = self.router.queued().await;
        for (i, client) in self.clients.iter().enumerate() {
            let counted = quotaroute_actors::QueuedCount::of_client(&queued, client.id);
            let live = self.waiting.iter().filter(|w| w.client == i).count();
            if counted != live {
                return Err(self.fail(
                    "q4",
                    format!("{}: queued {counted}, waiting {live}", client.id),
                ));
            }
        }
        Ok(())
    }

    async fn step(&mut self, index: usize) -> Result<(), Failure> {
        self.step = index;
        let mut rng = Rng::for_step(self.seed ^ 0xc1_1e47, index);
        match rng.range(0, 99) {
            // A flood from the heavy client.
            0..=14 => {
                for _ in 0..rng.range(2, 8) {
                    self.send(0);
                }
            }
            // One request of any client.
            15..=44 => {
                let client = rng.range(0, 2) as usize;
                self.send(client);
            }
            // A request finishes.
            45..=69 => {
                if !self.held.is_empty() {
                    let at = rng.range(0, self.held.len() as u64 - 1) as usize;
                    self.held.remove(at);
                    self.grant_round().await;
                }
            }
            // A waiter's client disconnects.
            70..=79 => {
                self.settle().await;
                let open: Vec<usize> = (0..self.waiting.len())
                    .filter(|&i| !self.waiting[i].task.is_finished())
                    .collect();
                if !open.is_empty() {
                    let at = open[rng.range(0, open.len() as u64 - 1) as usize];
                    let gone = self.waiting.remove(at);
                    gone.task.abort();
                    let _ = gone.task.await;
                    self.stats.disconnects += 1;
                }
            }
            // Time passes (sometimes past every deadline).
            80..=94 => {
                let by = if rng.chance(20) {
                    self.queue_ms
                } else {
                    rng.range(0, self.queue_ms / 3)
                };
                self.clock.advance(by);
            }
            _ => self.fair_window(&mut rng).await?,
        }
        self.settle().await;
        let queued_before = self.waiting.len() as u64;
        self.collect().await?;
        self.stats.answered += queued_before.saturating_sub(self.waiting.len() as u64);
        self.stats.steps += 1;
        self.check().await
    }

    /// q2: every waiter leaves (its client disconnects), the pool is filled, clients a and b
    /// queue backlogs, then permits are released one at a time and each grant is recorded.
    async fn fair_window(&mut self, rng: &mut Rng) -> Result<(), Failure> {
        self.stats.fair_windows += 1;
        for gone in std::mem::take(&mut self.waiting) {
            gone.task.abort();
            let _ = gone.task.await;
        }
        self.settle().await;
        self.collect().await?;
        while self.held.len() < self.capacity() {
            self.send(2);
            self.settle().await;
            if self.collect().await?.is_empty() {
                break;
            }
        }
        let (a, b) = (0usize, 1usize);
        let backlog = rng.range(4, 10) as usize;
        for _ in 0..backlog {
            self.send(a);
            self.send(b);
        }
        self.settle().await;
        self.collect().await?;
        let (wa, wb) = (
            i64::from(self.clients[a].weight),
            i64::from(self.clients[b].weight),
        );
        let (mut ga, mut gb) = (0i64, 0i64);
        while ga < backlog as i64 && gb < backlog as i64 && !self.held.is_empty() {
            self.held.remove(0);
            self.grant_round().await;
            let granted = self.collect().await?;
            if granted.len() > 1 {
                return Err(self.fail("q2", format!("one release granted {granted:?}")));
            }
            match granted.first() {
                Some(&c) if c == a => ga += 1,
                Some(&c) if c == b => gb += 1,
                Some(_) => return Err(self.fail("q2", "a third client was granted".into())),
                None => break,
            }
            self.stats.fair_grants += 1;
            let n = ga + gb;
            if (ga * (wa + wb) - n * wa).abs() >= wa + wb {
                return Err(self.fail(
                    "q2",
                    format!("after {n} grants a has {ga}, b {gb}, weights {wa}:{wb}"),
                ));
            }
        }
        Ok(())
    }
}

/// Runs `steps` steps of the clients schedule of `seed`.
pub async fn run_clients(seed: u64, steps: usize) -> Result<ClientStats, Failure> {
    let mut sim = ClientSim::new(seed).await;
    for index in 0..steps {
        sim.step(index).await?;
    }
    for waiting in std::mem::take(&mut sim.waiting) {
        waiting.task.abort();
    }
    Ok(sim.stats)
}
