//! Starting and stopping a node: bind, serve `/healthz` (503) while the journal replays, then
//! route; on stop, refuse new connections, let in-flight requests finish within
//! `shutdown_grace_ms`, record `node_stopped` and flush the journal.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use quotaroute_actors::{Router, RouterError, RouterOptions, SharedClock, SystemClock};
use quotaroute_journal::{JournalError, SledJournal, SledOptions, WriterConfig};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cluster::{self, Cluster};
use crate::config::{self, Config};
use crate::node::accept;
use crate::node::app::AppState;
use crate::node::journal_formats::{self, FormatsRefusal};
use crate::node::live::LiveConfig;
use crate::node::metrics;
use crate::node::reload::digest;
use crate::node::timer_floor;

/// sled page cache of the node's journal. The journal is written in order and read back
/// rarely (replay, the admin API), so little of it needs to stay in memory: with compressed
/// records, 2 MiB instead of 8 lowered the peak at 64 connections by ~4 MB at the same CPU
/// per request (docs/measurements.md, "Memory").
const JOURNAL_CACHE_BYTES: u64 = 2 * 1024 * 1024;
/// The longest a stop waits for the last spans to reach the collector.
const TRACE_FLUSH_AT_STOP: Duration = Duration::from_secs(2);

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot listen on {addr}: {reason}")]
    Bind { addr: SocketAddr, reason: String },
    #[error("cannot open the journal: {0}")]
    Journal(#[from] JournalError),
    #[error("cannot start the router: {0}")]
    Router(String),
    #[error("cannot serve HTTPS: {0}")]
    Tls(String),
    #[error("cannot join the cluster: {0}")]
    Cluster(String),
    /// A journal written by a newer build (behaviour §12).
    #[error(transparent)]
    Formats(#[from] FormatsRefusal),
    /// No seal key: its file in the journal's directory is damaged or cannot be written.
    #[error(transparent)]
    SealKey(#[from] crate::node::seal_secret::SealSecretError),
    /// `[responses] store = true` and its store beside the journal cannot be opened.
    #[error("cannot open the response store at {path}: {reason}")]
    ResponseStore { path: String, reason: String },
}

/// How to run the node beyond what the config says.
pub struct NodeOptions {
    /// The config file (for reloads); `None` for an embedded config.
    pub config_path: Option<PathBuf>,
    /// The config's text, for the digest journaled with `config_loaded`.
    pub config_text: String,
    pub clock: SharedClock,
    /// Overrides `server.listen` (e.g. `demo --listen`, or port 0 in tests).
    pub listen: Option<SocketAddr>,
}

impl NodeOptions {
    pub fn from_file(path: PathBuf, config_text: String) -> Self {
        NodeOptions {
            config_path: Some(path),
            config_text,
            clock: Arc::new(SystemClock),
            listen: None,
        }
    }
}

/// A running node.
pub struct RunningNode {
    pub addr: SocketAddr,
    pub app: AppState,
    stop: watch::Sender<bool>,
    server: JoinHandle<()>,
    /// Keeps a timer pending so request timers cost no runtime unpark (`timer_floor`).
    timer_floor: JoinHandle<()>,
    grace: Duration,
    /// `[cluster]`: the tasks that share state through Redis.
    cluster: Option<Cluster>,
}

/// Folds every readable client charge (a `client_usage`, or a `request_succeeded` carrying
/// one) and admin reset of a client of the journal into `clients`; returns how many.
fn fold_client_usage(clients: &crate::clients::ClientLedger, journal: &SledJournal) -> u64 {
    use quotaroute_journal::Journal as _;
    let mut folded = 0u64;
    let usage = journal
        .read_from(0)
        .filter_map(Result::ok)
        .filter(|envelope| crate::clients::ClientLedger::folds(&envelope.event))
        .inspect(|_| folded += 1);
    // In chunks: the journal may be large, the fold needs each event once.
    let mut chunk = Vec::with_capacity(1024);
    for envelope in usage {
        chunk.push(envelope);
        if chunk.len() == chunk.capacity() {
            clients.fold(chunk.iter());
            chunk.clear();
        }
    }
    clients.fold(chunk.iter());
    folded
}

impl RunningNode {
    /// Starts a node serving the route table `routes` builds (the node's own is
    /// `crate::routes::routes`: `RunningNode::start`): binds first (so `/healthz` answers 503
    /// during replay), then replays the journal and starts routing.
    pub async fn start_with_routes(
        config: Config,
        options: NodeOptions,
        routes: fn(AppState) -> axum::Router,
    ) -> Result<RunningNode, NodeError> {
        let addr = options.listen.unwrap_or(config.server.listen);
        let listener = accept::listen(addr).map_err(|error| NodeError::Bind {
            addr,
            reason: error.to_string(),
        })?;
        let addr = listener.local_addr().map_err(|error| NodeError::Bind {
            addr,
            reason: error.to_string(),
        })?;
        // The recorder first: the live config registers its metric handles with it.
        let metrics = metrics::install();
        let seal_key = crate::node::seal_secret::seal_key(&config)?;
        let app = AppState::new(
            LiveConfig::from_config(&config, options.clock.clone(), seal_key),
            metrics,
            options.config_path.clone(),
        );
        if let Some(telemetry) = &config.telemetry {
            app.set_telemetry(Arc::new(crate::telemetry::Tracer::start(telemetry)));
        }
        let tls = match &config.server.tls {
            Some(tls) => Some(tokio_rustls::TlsAcceptor::from(
                crate::tls_files::server_tls(&tls.cert, &tls.key).map_err(NodeError::Tls)?,
            )),
            None => None,
        };
        let (stop, stopped) = watch::channel(false);
        accept::raise_open_files_limit();
        let limits = accept::EdgeLimits {
            header_timeout: Duration::from_millis(config.server.header_timeout_ms),
            max_connections: usize::try_from(config.server.max_connections).unwrap_or(usize::MAX),
        };
        let server = tokio::spawn(accept::serve(
            listener,
            routes(app.clone()),
            app.clone(),
            stopped,
            tls,
            limits,
            app.inner.edge.clone(),
        ));

        let (router, prepared) = recover_router(&config, &options, &app, addr).await?;
        if config.responses.store {
            app.set_response_store(Some(open_response_store(&config)?));
        }
        // Clients' usage and spend (behaviour §11) are folded from their `client_usage` events.
        if let Some(reader) = app.journal_reader() {
            let folded = fold_client_usage(&app.live().clients, &reader);
            tracing::info!(events = folded, "client usage folded from the journal");
        }
        // A cluster node catches up from the shared stream before it reports ready.
        let cluster = match prepared {
            Some(prepared) => Some(prepared.start(&router, app.journal_handle()).await),
            None => None,
        };
        if let Some(cluster) = &cluster {
            app.set_cluster(cluster.handle());
        }
        app.set_router(router);
        Ok(RunningNode {
            addr,
            app,
            stop,
            server,
            timer_floor: timer_floor::start(),
            grace: Duration::from_millis(config.server.shutdown_grace_ms),
            cluster,
        })
    }

    /// Stops accepting, lets in-flight requests finish (bounded by `shutdown_grace_ms`),
    /// exports the spans still queued (bounded), records `node_stopped`, flushes and closes the
    /// journal (its directory can be opened again as soon as this returns).
    pub async fn stop(self, reason: &str) -> Result<(), NodeError> {
        self.app.set_stopping();
        self.timer_floor.abort();
        let _ = self.stop.send(true);
        if tokio::time::timeout(self.grace, self.server).await.is_err() {
            tracing::warn!("shutdown grace passed with requests still in flight");
        }
        if let Some(cluster) = &self.cluster {
            cluster.stop();
        }
        if let Some(tracer) = self.app.telemetry() {
            tracer.flush(TRACE_FLUSH_AT_STOP).await;
        }
        self.app.set_journal_reader(None);
        // Kept responses on disk, and the store's directory released for the next start.
        if let Some(store) = self.app.response_store() {
            self.app.set_response_store(None);
            if let Err(error) = store.flush() {
                tracing::warn!(%error, "the response store could not be flushed");
            }
        }
        // No key command runs and no token is refreshed once the node has stopped.
        self.app.live().credentials.stop_watches();
        if let Some(router) = self.app.router() {
            router
                .clone()
                .shutdown(reason)
                .await
                .map_err(|error| NodeError::Router(error.to_string()))?;
        }
        Ok(())
    }
}

/// The response store beside the journal (`[responses] store = true`, behaviour §14).
fn open_response_store(
    config: &Config,
) -> Result<Arc<crate::node::response_store::ResponseStore>, NodeError> {
    use crate::node::response_store::{ResponseStore, StoreBounds};
    let path = ResponseStore::path_beside(&config.journal.path);
    let bounds = StoreBounds {
        max_bytes: config.responses.max_bytes,
        ttl_ms: config.responses.ttl_ms,
    };
    let store =
        ResponseStore::open(Some(&path), bounds).map_err(|error| NodeError::ResponseStore {
            path: path.display().to_string(),
            reason: error.to_string(),
        })?;
    tracing::info!(path = %path.display(), bytes = store.total_bytes(), "response store open");
    Ok(Arc::new(store))
}

/// The router, started from the journal (refused when a newer build wrote it), and the
/// cluster's prepared parts when the node is one of several; the recovery logged.
async fn recover_router(
    config: &Config,
    options: &NodeOptions,
    app: &AppState,
    addr: SocketAddr,
) -> Result<(Router, Option<cluster::Prepared>), NodeError> {
    // A journal from a newer build is refused before sled opens (and may tidy) it.
    let formats = journal_formats::this_build();
    journal_formats::check_before_open(&config.journal.path, &formats)?;
    // A small page cache: the journal is written sequentially and read back only on restart.
    let journal = SledJournal::open(
        &config.journal.path,
        SledOptions {
            cache_bytes: JOURNAL_CACHE_BYTES,
        },
    )?;
    app.set_journal_reader(Some(journal.reader()));
    let topology = config::topology::topology(config, &digest(&options.config_text));
    let prepared = match &config.cluster {
        Some(settings) => Some(
            cluster::Prepared::new(settings, &topology, &config.clients)
                .map_err(|error| NodeError::Cluster(error.to_string()))?,
        ),
        None => None,
    };
    let router = Router::start_with_tap(
        topology,
        Box::new(journal),
        RouterOptions {
            writer: WriterConfig {
                flush_every_ms: config.journal.flush_every_ms,
                max_queue_events: config.journal.max_queue_events,
                retention_hours: config.journal.retention_hours,
                ..WriterConfig::default()
            },
            snapshot_every_events: config.journal.snapshot_every_events,
            request_events: config.journal.request_events,
            clock: options.clock.clone(),
        },
        prepared.as_ref().map(cluster::Prepared::tap),
    )
    .await
    .map_err(|error| match error {
        RouterError::NewerJournal(versions) => NodeError::Formats(FormatsRefusal::Newer {
            path: config.journal.path.display().to_string(),
            versions,
        }),
        other => NodeError::Router(other.to_string()),
    })?;
    journal_formats::record(&config.journal.path, &formats);
    let recovery = router.recovery();
    tracing::info!(
        %addr,
        replayed = recovery.events_replayed,
        snapshot_seq = ?recovery.snapshot_seq,
        damaged = recovery.damaged.len(),
        "journal replayed; routing"
    );
    for damage in &recovery.damaged {
        tracing::warn!(seq = damage.seq, reason = %damage.reason, "damaged journal record skipped");
    }
    Ok((router, prepared))
}
