//! The publisher task: sends this node's shared events to the stream, strictly in journal
//! order, and says it is alive. It is the only writer of `keys::published` (the last seq it
//! sent), so a restart resumes after it, re-reading its own journal.
//!
//! Nothing is lost while Redis is down or slow, or while the tap's queue overflows: the queue
//! is then dropped and the publisher re-reads the journal from its last published seq once
//! Redis answers. When Redis comes back empty (a new `run_id`: restarted without
//! persistence), everything published into the lost stream is published again; peers apply
//! each (origin, seq) once, so repeats are harmless. Each entry says whether it is sent for the
//! first time (`fresh`): only what comes off the live queue is; whatever is re-read from the
//! journal may repeat (`peer_progress` orders the one by the stream, the other by its seq).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quotaroute_actors::policy::peer_merge::is_shared;
use quotaroute_journal::{Envelope, Journal};
use tokio::sync::mpsc;

use crate::cluster::keys;
use crate::cluster::link::{run_id, Link};
use crate::cluster::status::ClusterStatus;
use crate::cluster::tap::Outgoing;
use crate::cluster::target::Target;
use crate::cluster::wire;
use quotaroute_actors::SharedClock;

use crate::journal_reader::JournalReader;

/// Events sent per pipeline at most.
const BATCH: usize = 256;
/// How often the node says it is alive and checks Redis' identity.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// With no marker in Redis (a first start, or a Redis that lost everything while this node
/// was down too), the shared events of this much of the journal are published again: peers
/// apply what they lack and pass over what they have.
pub const REPUBLISH_LOOKBACK_MS: u64 = 3_600_000;

pub struct Publisher {
    node_id: String,
    link: Link,
    queue: mpsc::Receiver<Outgoing>,
    dropped_upto: Arc<AtomicU64>,
    status: Arc<ClusterStatus>,
    journal: JournalReader,
    /// The router's clock: the marks it compares are the journal's times.
    clock: SharedClock,
    /// The journal's end at start: with no marker, everything up to it is re-read.
    start_seq: u64,
    /// While re-reading without a marker: only events from this time on are published.
    republish_since_ms: u64,
    /// `None` until the marker was read from Redis.
    last_published: Option<u64>,
    /// Redis' `run_id` when this node last published, and the first seq published under it.
    epoch: Option<String>,
    epoch_first_seq: Option<u64>,
    last_heartbeat: Option<Instant>,
}

impl Publisher {
    #[expect(
        clippy::too_many_arguments,
        reason = "each argument is one input the rule reads; a struct of them would only rename them"
    )]
    pub fn new(
        node_id: String,
        client: Target,
        queue: mpsc::Receiver<Outgoing>,
        dropped_upto: Arc<AtomicU64>,
        status: Arc<ClusterStatus>,
        journal: JournalReader,
        clock: SharedClock,
        start_seq: u64,
    ) -> Self {
        Publisher {
            node_id,
            link: Link::new(client, Duration::from_millis(500)),
            queue,
            dropped_upto,
            status,
            journal,
            clock,
            start_seq,
            republish_since_ms: 0,
            last_published: None,
            epoch: None,
            epoch_first_seq: None,
            last_heartbeat: None,
        }
    }

    pub async fn run(mut self) {
        loop {
            if let Err(error) = self.step().await {
                self.link.reset();
                self.status.set_redis_up(false, &error.to_string());
                self.discard_queue();
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }

    /// Queued events are in the journal too: while Redis is away they are dropped and re-read.
    fn discard_queue(&mut self) {
        while let Ok(item) = self.queue.try_recv() {
            self.dropped_upto.fetch_max(item.seq, Ordering::Relaxed);
        }
    }

    async fn step(&mut self) -> redis::RedisResult<()> {
        let last = match self.last_published {
            Some(last) => last,
            None => {
                let connection = self.link.connection().await?;
                let marker: Option<u64> = redis::cmd("GET")
                    .arg(keys::published(&self.node_id))
                    .query_async(connection)
                    .await?;
                let last = match marker {
                    Some(last) => last,
                    None => {
                        self.republish_since_ms =
                            self.clock.now_ms().saturating_sub(REPUBLISH_LOOKBACK_MS);
                        self.dropped_upto
                            .fetch_max(self.start_seq, Ordering::Relaxed);
                        0
                    }
                };
                tracing::info!(node = %self.node_id, after_seq = last, "cluster: publishing");
                self.last_published = Some(last);
                last
            }
        };
        if self
            .last_heartbeat
            .is_none_or(|at| at.elapsed() >= HEARTBEAT)
            || self.link.take_reconnected()
        {
            self.heartbeat().await?;
        }
        // A heartbeat that found Redis emptied moves the mark back.
        let last = self.last_published.unwrap_or(last);
        let dropped = self.dropped_upto.load(Ordering::Relaxed);
        if dropped > last {
            return self.catch_up_from_journal(last, dropped).await;
        }
        self.status
            .publish_backlog
            .store(self.queue.len() as u64, Ordering::Relaxed);
        let first = match tokio::time::timeout(HEARTBEAT, self.queue.recv()).await {
            Ok(Some(item)) => item,
            Ok(None) => {
                // The router stopped: nothing more will come.
                tokio::time::sleep(HEARTBEAT).await;
                return Ok(());
            }
            Err(_) => return Ok(()),
        };
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match self.queue.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        let batch: Vec<Envelope> = batch
            .into_iter()
            .filter(|item| item.seq > last)
            .map(|item| Envelope {
                schema_version: quotaroute_journal::SCHEMA_VERSION,
                seq: item.seq,
                at_ms: item.at_ms,
                event: item.event,
            })
            .collect();
        let upto = batch.iter().map(|e| e.seq).max().unwrap_or(last);
        if let Err(error) = self.send(&batch, upto, true).await {
            self.dropped_upto.fetch_max(upto, Ordering::Relaxed);
            return Err(error);
        }
        Ok(())
    }

    /// XADDs `batch` (in order) and moves the marker to `upto`, in one pipeline; `fresh` when
    /// none of it was sent before (the live queue, whose seqs are all past the marker).
    async fn send(&mut self, batch: &[Envelope], upto: u64, fresh: bool) -> redis::RedisResult<()> {
        let mut pipe = redis::pipe();
        for envelope in batch {
            let Ok(fields) = wire::encode(
                &self.node_id,
                envelope.seq,
                envelope.at_ms,
                &envelope.event,
                fresh,
            ) else {
                continue;
            };
            pipe.cmd("XADD")
                .arg(keys::STREAM)
                .arg("MAXLEN")
                .arg("~")
                .arg(keys::STREAM_MAX_LEN)
                .arg("*")
                .arg(&fields)
                .ignore();
        }
        pipe.cmd("SET")
            .arg(keys::published(&self.node_id))
            .arg(upto)
            .ignore();
        let connection = self.link.connection().await?;
        pipe.query_async::<()>(connection).await?;
        self.status.set_redis_up(true, "");
        self.status
            .published
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        if self.epoch_first_seq.is_none() {
            self.epoch_first_seq = batch.first().map(|e| e.seq);
        }
        self.last_published = Some(upto);
        Ok(())
    }

    /// Publishes the shared events of the journal after `last`, until `dropped` is covered.
    async fn catch_up_from_journal(&mut self, last: u64, dropped: u64) -> redis::RedisResult<()> {
        let Some(reader) = self.journal.get() else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            return Ok(());
        };
        let since_ms = self.republish_since_ms;
        let read = tokio::task::spawn_blocking(move || {
            let mut shared = Vec::new();
            let mut scanned = last;
            for envelope in reader.read_from(last + 1).flatten() {
                scanned = envelope.seq;
                if is_shared(&envelope.event) && envelope.at_ms >= since_ms {
                    shared.push(envelope);
                    if shared.len() >= BATCH {
                        break;
                    }
                }
            }
            (shared, scanned)
        })
        .await;
        let Ok((shared, scanned)) = read else {
            return Ok(());
        };
        if scanned == last {
            // Not written yet (the journal group-commits): look again shortly.
            tokio::time::sleep(Duration::from_millis(20)).await;
            return Ok(());
        }
        self.status
            .publish_backlog
            .store(dropped.saturating_sub(scanned), Ordering::Relaxed);
        self.send(&shared, scanned, false).await?;
        if scanned >= dropped {
            self.republish_since_ms = 0;
            tracing::info!(node = %self.node_id, upto = scanned, "cluster: published what the journal held while Redis was away");
        }
        Ok(())
    }

    /// Says this node is alive, lists the peers, and notices a Redis that forgot the stream.
    async fn heartbeat(&mut self) -> redis::RedisResult<()> {
        let now = self.clock.now_ms();
        let connection = self.link.connection().await?;
        let id = run_id(connection, keys::STREAM).await?;
        let (_, peers): ((), Vec<String>) = redis::pipe()
            .cmd("ZADD")
            .arg(keys::NODES)
            .arg(now)
            .arg(&self.node_id)
            .cmd("ZRANGEBYSCORE")
            .arg(keys::NODES)
            .arg(now.saturating_sub(keys::PEER_ALIVE_MS))
            .arg("+inf")
            .query_async(connection)
            .await?;
        self.status.set_redis_up(true, "");
        self.status
            .set_peers(peers.into_iter().filter(|p| *p != self.node_id).collect());
        self.last_heartbeat = Some(Instant::now());
        let forgot = self.epoch.as_ref().is_some_and(|epoch| *epoch != id);
        if forgot {
            if let (Some(first), Some(last)) = (self.epoch_first_seq, self.last_published) {
                tracing::warn!(node = %self.node_id, from_seq = first, "cluster: Redis restarted; publishing again what it forgot");
                self.dropped_upto.fetch_max(last, Ordering::Relaxed);
                self.last_published = Some(first.saturating_sub(1));
            }
            self.epoch_first_seq = None;
        }
        self.epoch = Some(id);
        Ok(())
    }
}
