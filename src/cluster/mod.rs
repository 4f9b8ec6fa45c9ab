//! Several nodes sharing what they learn through Redis (issue #14, behaviour §9). Absent
//! `[cluster]`, nothing here runs and the router has no tap: one node, exactly as before.
//!
//! # Layout
//! - [`config`] — `[cluster]`: `redis_url`, `node_id`, `lease_size`, validated by key;
//! - [`keys`] — the Redis names (only ids and counts go there, never a secret);
//! - [`wire`] — one stream entry ↔ one journaled event, with the reasons an entry is skipped;
//! - [`target`] — which Redis `redis_url` names (one server, TLS, a Redis Cluster) and its trust;
//! - [`link`] — one lazily reconnected Redis connection per task, bounded in time;
//! - [`lua_numbers`] — the lease scripts' numbers: integer strings, saturating counters;
//! - [`tap`] — the recorder's tap: shared events onto a bounded queue, successes onto leases;
//! - [`publisher`] — queue (or journal, after an outage) → `XADD`, in journal order;
//! - [`tail`] — `XREAD` → `Router::apply_peer` (the same reducers as local events);
//! - [`peer_bounds`] — what an entry may say: this node's own caps and name bounds;
//! - [`seq_guard`] — sane seqs: one beyond any journal is refused (the rest is `peer_progress`);
//! - [`leases`] — configured limits across nodes: this node's leases and their spending;
//! - [`lease_task`] — refills them from the shared counters (one Lua script), journals refusals;
//! - [`client_leases`] — clients' limits and budgets across nodes: leases the admission spends;
//! - [`client_lease_task`] — refills them and syncs every node's spend (one Lua script);
//! - [`status`] — Redis up/down, peers and counts for `/admin/state` and `/metrics`.
//!
//! No request waits on Redis: the tap only queues and counts, every Redis call is in one of
//! the three tasks here. What each node keeps to itself, and why: its breakers (a provider's
//! health as seen from this node's network path; one node's broken route must not open every
//! node's breaker), its in-flight counts (live requests of this process: a permit is released
//! by the process that holds it, and a shared count would leak when a node dies), and its DRR
//! deficits (fairness of this node's own decision sequence; sharing them would need a
//! round-trip per decision and the sum of per-node fair sequences is fair anyway).

pub mod client_lease_task;
pub mod client_leases;
pub mod config;
pub mod keys;
mod lease_rounds;
pub mod lease_task;
pub mod leases;
pub mod link;
pub mod lua_numbers;
pub mod peer_bounds;
pub mod publisher;
pub mod seq_guard;
pub mod status;
pub mod tail;
pub mod tap;
pub mod target;
pub mod wire;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use quotaroute_actors::{EventTap, Router, Topology};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::clients::ClientConfig;
use crate::cluster::client_lease_task::ClientLeaseTask;
use crate::cluster::client_leases::ClientLeases;
use crate::cluster::config::ClusterConfig;
use crate::cluster::lease_task::LeaseTask;
use crate::cluster::leases::Leases;
use crate::cluster::peer_bounds::PeerBounds;
use crate::cluster::publisher::Publisher;
use crate::cluster::status::ClusterStatus;
use crate::cluster::tail::Tail;
use crate::cluster::tap::{ClusterTap, Outgoing, QUEUE_EVENTS};
use crate::cluster::target::Target;
use crate::journal_reader::JournalReader;

/// How long a starting node reads the stream before it reports ready regardless.
const CATCH_UP_BUDGET: Duration = Duration::from_secs(10);

/// Why the cluster could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cluster.redis_url: {0}")]
    Url(String),
}

/// The cluster before the router runs: its tap goes into `Router::start_with_tap`.
pub struct Prepared {
    config: ClusterConfig,
    client: Target,
    tap: Arc<ClusterTap>,
    queue: mpsc::Receiver<Outgoing>,
    dropped_upto: Arc<AtomicU64>,
    leases: Arc<Leases>,
    client_leases: Arc<ClientLeases>,
    status: Arc<ClusterStatus>,
    peer_bounds: Arc<PeerBounds>,
}

/// A running cluster node's tasks.
pub struct Cluster {
    handle: Arc<Handle>,
    tasks: Vec<JoinHandle<()>>,
}

/// What the node's handlers reach of a running cluster: its status (admin, metrics), its
/// leases (a reload hands them the new limits; admission spends the clients') and the bounds
/// peers' entries are held to (a reload hands them the new caps).
pub struct Handle {
    pub status: Arc<ClusterStatus>,
    pub leases: Arc<Leases>,
    pub client_leases: Arc<ClientLeases>,
    pub peer_bounds: Arc<PeerBounds>,
}

impl Prepared {
    pub fn new(
        config: &ClusterConfig,
        topology: &Topology,
        clients: &[ClientConfig],
    ) -> Result<Prepared, ClusterError> {
        let client = target::build(&config.redis_url, config.ca_file.as_deref())
            .map_err(ClusterError::Url)?;
        let (sender, queue) = mpsc::channel(QUEUE_EVENTS);
        let dropped_upto = Arc::new(AtomicU64::new(0));
        let leases = Arc::new(Leases::from_topology(topology, config.lease_size));
        let tap = Arc::new(ClusterTap {
            queue: sender,
            dropped_upto: dropped_upto.clone(),
            leases: leases.clone(),
        });
        let status = Arc::new(ClusterStatus::new(&config.node_id));
        let client_leases = Arc::new(ClientLeases::new(
            clients,
            config.lease_size,
            status.clone(),
        ));
        Ok(Prepared {
            peer_bounds: Arc::new(PeerBounds::from_topology(topology)),
            status,
            client_leases,
            config: config.clone(),
            client,
            tap,
            queue,
            dropped_upto,
            leases,
        })
    }

    /// The recorder's tap.
    pub fn tap(&self) -> Arc<dyn EventTap> {
        self.tap.clone()
    }

    /// Catches up from the stream and takes the first leases (the node is not ready yet, so
    /// nothing waits for this but readiness), then starts the publisher, the tail and the
    /// lease task. With Redis down it starts them anyway: they connect when Redis answers.
    pub async fn start(self, router: &Router, journal: JournalReader) -> Cluster {
        let node_id = self.config.node_id.clone();
        let progress = router.peer_progress();
        let mut tail = Tail::new(
            node_id.clone(),
            self.client.clone(),
            router.clone(),
            self.status.clone(),
            progress,
            self.peer_bounds.clone(),
        );
        let caught_up = tail.catch_up(CATCH_UP_BUDGET).await;
        let mut lease_task = LeaseTask::new(
            self.leases.clone(),
            router.clone(),
            self.status.clone(),
            self.client.clone(),
        );
        let mut client_lease_task = ClientLeaseTask::new(
            self.client_leases.clone(),
            self.status.clone(),
            router.clock().clone(),
            self.client.clone(),
        );
        if caught_up {
            lease_task.prime().await;
            client_lease_task.prime().await;
        }
        // What the catch-up handed to the connection actors is applied before ready.
        let _ = router.settle().await;
        tracing::info!(
            node = %node_id,
            redis = if caught_up { "up" } else { "down" },
            applied = self.status.applied.load(std::sync::atomic::Ordering::Relaxed),
            "cluster: caught up from the shared stream"
        );
        let publisher = Publisher::new(
            node_id,
            self.client.clone(),
            self.queue,
            self.dropped_upto,
            self.status.clone(),
            journal,
            router.clock().clone(),
            router.recovery().last_seq,
        );
        // The lease task runs even without limits: a reload may add some.
        let tasks = vec![
            tokio::spawn(publisher.run()),
            tokio::spawn(tail.run()),
            tokio::spawn(lease_task.run()),
            tokio::spawn(client_lease_task.run()),
        ];
        Cluster {
            handle: Arc::new(Handle {
                status: self.status,
                leases: self.leases,
                client_leases: self.client_leases,
                peer_bounds: self.peer_bounds,
            }),
            tasks,
        }
    }
}

impl Cluster {
    pub fn handle(&self) -> Arc<Handle> {
        self.handle.clone()
    }

    /// Stops the tasks (what was not published yet is re-read from the journal on restart).
    pub fn stop(&self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
