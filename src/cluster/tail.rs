//! The tail task: reads the shared stream from where this node's journal says it stopped, and
//! hands every peer's event to the router, which applies it through the same reducers as its
//! own and journals it as `peer_applied` with its origin (a conversation binding goes to its
//! combo, which journals it only when it takes it). Its own entries, entries already
//! applied (each origin's seq once) and bad entries are passed over; bad ones are counted and
//! logged, never fatal.
//!
//! An entry is input, not a peer's word (issue #34): before it is applied, its seq must be one
//! a journal can reach (`seq_guard`), it must be new by the stream's order (`peer_progress`:
//! no forged seq holds back its origin's later entries, issue #49), and what it says within
//! this node's own bounds (`peer_bounds`: times clamped, every block given an end, long or
//! control names refused). A refused entry is never
//! applied nor journaled; it is counted (`events_refused`) and logged, at most once a second
//! with the count of those not logged.
//!
//! One dedicated connection, blocked in `XREAD` (so no other command waits behind it).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quotaroute_actors::policy::peer_progress::{lane, Arrival, PeerProgress};
use quotaroute_actors::Router;
use quotaroute_journal::PeerApplied;
use redis::streams::StreamReadReply;

use crate::cluster::keys;
use crate::cluster::link::{run_id, Link};
use crate::cluster::peer_bounds::PeerBounds;
use crate::cluster::seq_guard;
use crate::cluster::status::ClusterStatus;
use crate::cluster::target::Target;
use crate::cluster::wire;

/// How long one `XREAD` blocks waiting for entries.
const BLOCK_MS: u64 = 1_000;
/// Entries read per `XREAD` at most.
const COUNT: u64 = 512;
/// A refused entry is logged at most this often (the others are counted in the next line).
const REFUSAL_LOG_EVERY_MS: u64 = 1_000;

pub struct Tail {
    node_id: String,
    link: Link,
    router: Router,
    status: Arc<ClusterStatus>,
    progress: PeerProgress,
    cursor: String,
    epoch: Option<String>,
    bounds: Arc<PeerBounds>,
    /// When a refusal was last logged, and how many were refused since without a line.
    refusal_logged_ms: u64,
    refusals_unlogged: u64,
}

impl Tail {
    /// A tail resuming at `progress` (the journal's fold).
    pub fn new(
        node_id: String,
        client: Target,
        router: Router,
        status: Arc<ClusterStatus>,
        progress: PeerProgress,
        bounds: Arc<PeerBounds>,
    ) -> Self {
        let cursor = progress.resume_from().unwrap_or_else(|| "0-0".to_owned());
        Tail {
            bounds,
            refusal_logged_ms: 0,
            refusals_unlogged: 0,
            node_id,
            link: Link::new(client, Duration::from_millis(BLOCK_MS + 2_000)),
            router,
            status,
            progress,
            cursor,
            epoch: None,
        }
    }

    /// Reads everything already in the stream (before the node reports ready), within
    /// `budget`; `false` when Redis did not answer.
    pub async fn catch_up(&mut self, budget: Duration) -> bool {
        let deadline = Instant::now() + budget;
        while Instant::now() < deadline {
            match self.read(None).await {
                Ok(0) => return true,
                Ok(_) => {}
                Err(error) => {
                    self.link.reset();
                    self.status.set_redis_up(false, &error.to_string());
                    return false;
                }
            }
        }
        true
    }

    pub async fn run(mut self) {
        loop {
            if let Err(error) = self.read(Some(BLOCK_MS)).await {
                self.link.reset();
                self.status.set_redis_up(false, &error.to_string());
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }

    /// One `XREAD` (blocking up to `block_ms`); returns how many entries it read.
    async fn read(&mut self, block_ms: Option<u64>) -> redis::RedisResult<usize> {
        self.link.connection().await?;
        if self.link.take_reconnected() {
            let connection = self.link.connection().await?;
            let id = run_id(connection, keys::STREAM).await?;
            if self.epoch.as_ref().is_some_and(|epoch| *epoch != id) {
                // A Redis that restarted has a new stream: read it from its start, and the old
                // one's entry ids say nothing of it.
                self.cursor = "0-0".to_owned();
                self.progress.forget_positions();
            }
            self.epoch = Some(id);
        }
        let connection = self.link.connection().await?;
        let mut command = redis::cmd("XREAD");
        if let Some(block_ms) = block_ms {
            command.arg("BLOCK").arg(block_ms);
        }
        command
            .arg("COUNT")
            .arg(COUNT)
            .arg("STREAMS")
            .arg(keys::STREAM)
            .arg(&self.cursor);
        let reply: Option<StreamReadReply> = command.query_async(connection).await?;
        self.status.set_redis_up(true, "");
        let mut read = 0;
        for key in reply.map(|r| r.keys).unwrap_or_default() {
            for entry in key.ids {
                read += 1;
                self.cursor = entry.id.clone();
                self.entry(entry.id, &entry.map);
            }
        }
        Ok(read)
    }

    fn entry(&mut self, id: String, fields: &std::collections::HashMap<String, redis::Value>) {
        let mut remote = match wire::decode(fields) {
            Ok(remote) => remote,
            Err(skip) if skip.is_refusal() => {
                self.refuse(&id, None, &skip);
                return;
            }
            Err(skip) => {
                ClusterStatus::count(&self.status.skipped);
                tracing::warn!(entry = %id, reason = %skip, "cluster: stream entry skipped");
                return;
            }
        };
        if remote.node == self.node_id {
            return;
        }
        let now_ms = self.router.clock().now_ms();
        if let Err(beyond) = seq_guard::check(&remote.node, remote.seq) {
            self.refuse(&id, Some(&remote.node), &beyond);
            return;
        }
        let arrival = Arrival {
            origin: &remote.node,
            lane: &lane(&remote.event),
            origin_seq: remote.seq,
            stream_id: &id,
            fresh: remote.fresh,
        };
        if !self.progress.is_new(&arrival) {
            return;
        }
        match self.bounds.check(&mut remote, now_ms) {
            Ok(false) => {}
            Ok(true) => {
                ClusterStatus::count(&self.status.clamped);
                tracing::debug!(entry = %id, origin = %remote.node, kind = remote.event.kind(), "cluster: stream entry clamped to this node's bounds");
            }
            Err(refusal) => {
                self.refuse(&id, Some(&remote.node), &refusal);
                return;
            }
        }
        let lag_ms = now_ms.saturating_sub(remote.at_ms);
        let applied = PeerApplied {
            origin_node: remote.node,
            origin_seq: remote.seq,
            origin_at_ms: remote.at_ms,
            stream_id: id,
            event: Box::new(remote.event),
        };
        match self.router.apply_peer(applied.clone()) {
            Ok(()) => {
                self.progress.apply(&applied);
                ClusterStatus::count(&self.status.applied);
                self.status.last_lag_ms.store(lag_ms, Ordering::Relaxed);
            }
            Err(quotaroute_actors::RouterError::UnknownCombo(combo)) => {
                // A binding in a combo this node has not made (an implicit `provider/model` it
                // was never asked for): nothing here to keep it for.
                ClusterStatus::count(&self.status.skipped);
                tracing::debug!(entry = %applied.stream_id, %combo, "cluster: binding for a combo this node lacks");
            }
            Err(error) => {
                ClusterStatus::count(&self.status.skipped);
                tracing::warn!(entry = %applied.stream_id, origin = %applied.origin_node, %error, "cluster: stream entry skipped");
            }
        }
    }

    /// Counts a refused entry and logs it (at most once per [`REFUSAL_LOG_EVERY_MS`]; the
    /// reason names lengths, never the oversized text itself).
    fn refuse(&mut self, id: &str, origin: Option<&str>, reason: &dyn std::fmt::Display) {
        ClusterStatus::count(&self.status.refused);
        let now_ms = self.router.clock().now_ms();
        if now_ms < self.refusal_logged_ms.saturating_add(REFUSAL_LOG_EVERY_MS) {
            self.refusals_unlogged += 1;
            return;
        }
        let also = std::mem::take(&mut self.refusals_unlogged);
        self.refusal_logged_ms = now_ms;
        tracing::warn!(entry = %id, origin = origin.unwrap_or("?"), %reason, refused_since_last_line = also, "cluster: stream entry refused (against this node's bounds)");
    }
}
