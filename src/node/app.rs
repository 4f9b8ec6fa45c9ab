//! The node's shared state, handed to every HTTP handler: the router (set once the journal is
//! replayed), the live config (swapped on reload), the metrics and the
//! journal reader for the admin API.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use arc_swap::ArcSwap;
use metrics_exporter_prometheus::PrometheusHandle;
use quotaroute_actors::Router;
use quotaroute_journal::SledJournal;

use crate::cluster::Handle as ClusterHandle;
use crate::journal_reader::JournalReader;
use crate::node::edge_counters::EdgeCounters;
use crate::node::live::LiveConfig;

pub struct AppInner {
    router: OnceLock<Router>,
    pub live: ArcSwap<LiveConfig>,
    pub metrics: Option<PrometheusHandle>,
    /// A read handle on the journal, set once it is open and taken at stop so the journal's
    /// directory is released.
    journal_reader: JournalReader,
    /// The config file, for SIGHUP and `POST /admin/reload`.
    pub config_path: Option<PathBuf>,
    pub started: Instant,
    request_counter: AtomicU64,
    /// Set when the node starts to stop, so endless responses (the dashboard's event feed)
    /// end instead of holding the drain until `shutdown_grace_ms`.
    stopping: AtomicBool,
    /// Distinguishes request ids of this process from another's.
    id_prefix: String,
    /// `[cluster]`: the link to the other nodes, for `/admin/state` and `/metrics`.
    cluster: OnceLock<Arc<ClusterHandle>>,
    /// `[telemetry]`: the span sampler and export queue; unset = no tracing.
    telemetry: OnceLock<Arc<crate::telemetry::Tracer>>,
    /// What the accept loop refused and closed.
    pub edge: Arc<EdgeCounters>,
    /// Bytes (as KiB permits) of upstream bodies read whole that all requests hold at once
    /// (`server.max_upstream_buffer_bytes`).
    pub upstream_buffer: tokio::sync::Semaphore,
    /// Each combo's affinity outcomes and cached input since start (never journaled).
    pub affinity: crate::node::combo_affinity::AffinityTable,
    /// `[responses] store = true`: the router's response store (behaviour §14), open while the
    /// node runs; taken at stop so its directory is released.
    response_store: arc_swap::ArcSwapOption<crate::node::response_store::ResponseStore>,
    /// When each connection's window was last primed (behaviour §13).
    pub primes: crate::node::prime_plan::PrimeBook,
}

/// Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub inner: Arc<AppInner>,
}

impl AppState {
    pub fn new(
        live: LiveConfig,
        metrics: Option<PrometheusHandle>,
        config_path: Option<PathBuf>,
    ) -> Self {
        let upstream_buffer_kib = live.max_upstream_buffer_kib;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ u64::from(std::process::id()).rotate_left(32);
        AppState {
            inner: Arc::new(AppInner {
                router: OnceLock::new(),
                live: ArcSwap::from_pointee(live),
                metrics,
                journal_reader: JournalReader::default(),
                config_path,
                started: Instant::now(),
                request_counter: AtomicU64::new(0),
                stopping: AtomicBool::new(false),
                id_prefix: format!("qr-{:012x}", seed & 0xffff_ffff_ffff),
                cluster: OnceLock::new(),
                telemetry: OnceLock::new(),
                edge: Arc::new(EdgeCounters::default()),
                upstream_buffer: tokio::sync::Semaphore::new(upstream_buffer_kib),
                affinity: crate::node::combo_affinity::AffinityTable::default(),
                response_store: arc_swap::ArcSwapOption::empty(),
                primes: crate::node::prime_plan::PrimeBook::default(),
            }),
        }
    }

    /// The router, once the journal has been replayed.
    pub fn router(&self) -> Option<&Router> {
        self.inner.router.get()
    }

    /// Marks the node ready: from now on requests are routed and `/healthz` says ready.
    pub fn set_router(&self, router: Router) {
        // Credential events recorded while the journal replayed go first.
        self.inner
            .live
            .load()
            .credentials
            .journal()
            .attach(router.clone());
        let _ = self.inner.router.set(router);
    }

    /// The running cluster, when `[cluster]` is configured.
    pub fn cluster(&self) -> Option<&Arc<ClusterHandle>> {
        self.inner.cluster.get()
    }

    pub fn set_cluster(&self, cluster: Arc<ClusterHandle>) {
        let _ = self.inner.cluster.set(cluster);
    }

    /// The tracer, when `[telemetry]` is configured.
    pub fn telemetry(&self) -> Option<&Arc<crate::telemetry::Tracer>> {
        self.inner.telemetry.get()
    }

    pub fn set_telemetry(&self, tracer: Arc<crate::telemetry::Tracer>) {
        let _ = self.inner.telemetry.set(tracer);
    }

    /// A read handle on the journal while the node holds it open.
    pub fn journal_reader(&self) -> Option<SledJournal> {
        self.inner.journal_reader.get()
    }

    pub fn set_journal_reader(&self, reader: Option<SledJournal>) {
        self.inner.journal_reader.set(reader);
    }

    /// The journal's read handle itself, for a part of the node that reads it on its own.
    pub fn journal_handle(&self) -> JournalReader {
        self.inner.journal_reader.clone()
    }

    /// The router's response store, when `[responses] store = true` (behaviour §14).
    pub fn response_store(&self) -> Option<Arc<crate::node::response_store::ResponseStore>> {
        self.inner.response_store.load_full()
    }

    pub fn set_response_store(
        &self,
        store: Option<Arc<crate::node::response_store::ResponseStore>>,
    ) {
        self.inner.response_store.store(store);
    }

    /// Marks the node as stopping (see [`AppState::stopping`]).
    pub fn set_stopping(&self) {
        self.inner.stopping.store(true, Ordering::Relaxed);
    }

    /// Whether the node has begun to stop.
    pub fn stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::Relaxed)
    }

    pub fn live(&self) -> arc_swap::Guard<Arc<LiveConfig>> {
        self.inner.live.load()
    }

    /// A new request id, unique within and across processes: `<prefix>-<counter in hex>`,
    /// shared by every part of the request that names it (headers, route, records).
    pub fn next_request_id(&self) -> Arc<str> {
        let n = self.inner.request_counter.fetch_add(1, Ordering::Relaxed);
        request_id(&self.inner.id_prefix, n)
    }
}

/// The longest id written on the stack; a longer prefix goes through `format!`.
const REQUEST_ID_ON_STACK: usize = 64;

/// `<prefix>-<n in lowercase hex>`, written digit by digit on the stack and then shared: one
/// allocation per request (the shared string's), and `format!`'s machinery costs more than
/// the id.
fn request_id(prefix: &str, n: u64) -> Arc<str> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - (n | 1).leading_zeros()).div_ceil(4) as usize;
    let mut written = [0u8; REQUEST_ID_ON_STACK];
    let Some(id) = written.get_mut(..prefix.len() + 1 + digits) else {
        return Arc::from(format!("{prefix}-{n:x}"));
    };
    let (head, hex) = id.split_at_mut(prefix.len() + 1);
    head[..prefix.len()].copy_from_slice(prefix.as_bytes());
    head[prefix.len()] = b'-';
    for (slot, digit) in hex.iter_mut().zip((0..digits).rev()) {
        *slot = HEX[((n >> (4 * digit)) & 0xf) as usize];
    }
    // The prefix is a `str` and the rest ASCII: always UTF-8.
    std::str::from_utf8(id).map_or_else(|_| Arc::from(format!("{prefix}-{n:x}")), Arc::from)
}

#[cfg(test)]
mod tests {
    use super::request_id;

    #[test]
    fn request_ids_are_the_prefix_and_the_counter_in_hex() {
        for n in [
            0,
            1,
            9,
            10,
            15,
            16,
            255,
            256,
            0xdead_beef,
            u64::MAX >> 4,
            u64::MAX,
        ] {
            assert_eq!(&*request_id("qr-5f3a", n), format!("qr-5f3a-{n:x}"), "{n}");
        }
        // A prefix too long for the stack: the same id, through `format!`.
        let long = "p".repeat(60);
        for n in [0, 0xdead_beef, u64::MAX] {
            assert_eq!(&*request_id(&long, n), format!("{long}-{n:x}"), "{n}");
        }
    }
}
