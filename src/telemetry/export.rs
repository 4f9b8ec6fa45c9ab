//! The export path: bounded buffers the request path only ever appends to under a short lock,
//! each thread to its own of [`SHARDS`] (no channel send, no task wake-up per span, no lock
//! shared by the workers), and one task that takes the whole buffer every
//! [`BATCH_DELAY`] (sooner when [`MAX_BATCH`] spans are waiting or a flush is asked for) and
//! POSTs it to the collector as OTLP/HTTP protobuf, [`MAX_BATCH`] spans per export, one export at
//! a time, each bounded by [`EXPORT_TIMEOUT`]. A full buffer drops the span; an export that fails
//! or times out drops its batch: both are counted (`quotaroute_trace_spans_dropped_total{reason}`),
//! neither ever waits or retries, so a slow or dead collector costs a request nothing.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use metrics::Counter;
use tokio::sync::{oneshot, Notify};
use url::Url;

use crate::telemetry::finished::{encode_into, FinishedSpan};

/// Spans waiting for export; past this a span is dropped (and counted).
pub const MAX_QUEUED_SPANS: usize = 4096;
/// The most spans in one export; this many waiting wakes the export task early.
pub const MAX_BATCH: usize = 512;
/// The longest a span waits for its export.
pub const BATCH_DELAY: Duration = Duration::from_millis(500);
/// The longest one export may take (connect, send, answer).
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest export body buffer kept for the next export (a batch of long spans may need
/// more once; it is not kept).
const MAX_KEPT_BODY_BYTES: usize = 4 << 20;
/// The most of a collector's answer read (it is only drained, so the connection is reused).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// How many buffers the request path's threads append to: each thread keeps to one (assigned
/// in turn at its first span), so the runtime's workers do not pass one lock's cache line back
/// and forth twice per request.
const SHARDS: usize = 4;

/// One buffer of finished spans, on a cache line of its own.
#[repr(align(128))]
#[derive(Default)]
struct Shard(Mutex<Waiting>);

thread_local! {
    /// This thread's buffer.
    static SHARD: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS
    };
}

/// What the request path and the export task share.
struct Shared {
    /// Finished spans not yet taken by the export task, at most
    /// [`MAX_QUEUED_SPANS`] / [`SHARDS`] in each buffer.
    waiting: [Shard; SHARDS],
    /// Flushes asked for since the export task last took the buffer.
    flushes: Mutex<Vec<oneshot::Sender<()>>>,
    /// Wakes the export task before its next tick (a full batch, a flush, the queue's end).
    wake: Notify,
    closed: AtomicBool,
    counters: Counters,
}

/// Finished spans in batches of at most [`MAX_BATCH`]: a full batch is closed and a new one
/// begun, so a span is never moved again to grow a buffer, and each batch is one export.
#[derive(Default)]
struct Waiting {
    batches: Vec<Vec<FinishedSpan>>,
    spans: usize,
    /// Exported batches, emptied, to be filled again: a batch's buffer is allocated once, not
    /// per export (an allocator that returns freed pages at once would fault it in anew).
    spare: Vec<Vec<FinishedSpan>>,
}

impl Shared {
    fn new() -> Self {
        Shared {
            waiting: Default::default(),
            flushes: Mutex::new(Vec::new()),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            counters: Counters::register(),
        }
    }
}

/// The request path's end of the queue.
pub struct SpanQueue {
    shared: Arc<Shared>,
}

struct Counters {
    queue_full: Counter,
    export_failed: Counter,
    exported: Counter,
}

impl Counters {
    fn register() -> Self {
        let dropped = |reason: &'static str| metrics::counter!("quotaroute_trace_spans_dropped_total", "reason" => reason);
        Counters {
            queue_full: dropped("queue_full"),
            export_failed: dropped("export_failed"),
            exported: metrics::counter!("quotaroute_trace_spans_exported_total"),
        }
    }
}

impl SpanQueue {
    /// The queue, and its export task on the current runtime.
    pub fn start(traces_url: Url, service_name: String) -> Self {
        let shared = Arc::new(Shared::new());
        let exporter = Exporter {
            client: client(),
            traces_url,
            service_name,
            shared: shared.clone(),
            body_buffer: Arc::default(),
        };
        tokio::spawn(exporter.run());
        SpanQueue { shared }
    }

    /// Queues `span`, or drops and counts it when the buffer is full: never waits on the
    /// export, and wakes the export task only when a batch fills.
    pub fn push(&self, span: FinishedSpan) {
        let shard = SHARD.try_with(|shard| *shard).unwrap_or(0);
        let filled = {
            let Ok(mut waiting) = self.shared.waiting[shard].0.lock() else {
                return;
            };
            if waiting.spans >= MAX_QUEUED_SPANS / SHARDS {
                drop(waiting);
                self.shared.counters.queue_full.increment(1);
                return;
            }
            waiting.spans += 1;
            if waiting
                .batches
                .last()
                .is_none_or(|batch| batch.len() == MAX_BATCH)
            {
                let batch = (waiting.spare.pop()).unwrap_or_else(|| Vec::with_capacity(MAX_BATCH));
                waiting.batches.push(batch);
            }
            let batches = &mut waiting.batches;
            match batches.last_mut() {
                Some(batch) => {
                    batch.push(span);
                    batch.len() == MAX_BATCH
                }
                None => false,
            }
        };
        if filled {
            self.shared.wake.notify_one();
        }
    }

    /// Exports what is queued, waiting at most `within` (at stop).
    pub async fn flush(&self, within: Duration) {
        let (done, exported) = oneshot::channel();
        if let Ok(mut flushes) = self.shared.flushes.lock() {
            flushes.push(done);
        }
        self.shared.wake.notify_one();
        let _ = tokio::time::timeout(within, exported).await;
    }
}

impl Drop for SpanQueue {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.wake.notify_one();
    }
}

type ExportClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

struct Exporter {
    client: ExportClient,
    traces_url: Url,
    service_name: String,
    shared: Arc<Shared>,
    /// The last export's body buffer, back from hyper once the body was sent.
    body_buffer: Arc<Mutex<Vec<u8>>>,
}

impl Exporter {
    async fn run(self) {
        loop {
            let _ = tokio::time::timeout(BATCH_DELAY, self.shared.wake.notified()).await;
            let closed = self.shared.closed.load(Ordering::Acquire);
            // The flushes first: every span queued before a flush was asked is in the buffer.
            let flushes = self
                .shared
                .flushes
                .lock()
                .map(|mut flushes| std::mem::take(&mut *flushes))
                .unwrap_or_default();
            for shard in &self.shared.waiting {
                let batches = shard
                    .0
                    .lock()
                    .map(|mut waiting| {
                        waiting.spans = 0;
                        std::mem::take(&mut waiting.batches)
                    })
                    .unwrap_or_default();
                let mut emptied = Vec::with_capacity(batches.len());
                for mut batch in batches {
                    self.export(&batch).await;
                    batch.clear();
                    emptied.push(batch);
                }
                if let Ok(mut waiting) = shard.0.lock() {
                    let room = MAX_QUEUED_SPANS / SHARDS / MAX_BATCH + 1;
                    emptied.truncate(room.saturating_sub(waiting.spare.len()));
                    waiting.spare.append(&mut emptied);
                }
            }
            for done in flushes {
                let _ = done.send(());
            }
            if closed {
                return;
            }
        }
    }

    async fn export(&self, spans: &[FinishedSpan]) {
        let count = spans.len() as u64;
        let mut buffer = self
            .body_buffer
            .lock()
            .map(|mut kept| std::mem::take(&mut *kept))
            .unwrap_or_default();
        let start = encode_into(spans, &self.service_name, &mut buffer);
        let body = Bytes::from_owner(BatchBody {
            buffer,
            start,
            home: self.body_buffer.clone(),
        });
        match tokio::time::timeout(EXPORT_TIMEOUT, self.post(body)).await {
            Ok(Ok(())) => self.shared.counters.exported.increment(count),
            Ok(Err(reason)) => {
                self.shared.counters.export_failed.increment(count);
                tracing::debug!(
                    collector = %crate::wire::upstream_mask::mask_url(self.traces_url.as_str()),
                    spans = count,
                    reason,
                    "trace export failed: spans dropped"
                );
            }
            Err(_) => {
                self.shared.counters.export_failed.increment(count);
                tracing::debug!(spans = count, "trace export timed out: spans dropped");
            }
        }
    }

    async fn post(&self, body: Bytes) -> Result<(), String> {
        let request = http::Request::post(self.traces_url.as_str())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(body))
            .map_err(|error| error.to_string())?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|error| error.to_string())?;
        let status = response.status();
        // Drained (bounded) so the connection goes back to the pool.
        let _ = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("collector answered {status}"))
        }
    }
}

/// An export's body: the encoded batch from `start`, whose buffer goes back to the exporter
/// when hyper drops the body, so the next export writes into memory already in use.
struct BatchBody {
    buffer: Vec<u8>,
    start: usize,
    home: Arc<Mutex<Vec<u8>>>,
}

impl AsRef<[u8]> for BatchBody {
    fn as_ref(&self) -> &[u8] {
        &self.buffer[self.start..]
    }
}

impl Drop for BatchBody {
    fn drop(&mut self) {
        if self.buffer.capacity() <= MAX_KEPT_BODY_BYTES {
            if let Ok(mut home) = self.home.lock() {
                *home = std::mem::take(&mut self.buffer);
            }
        }
    }
}

/// A pooled client trusting the system's roots (the bundled ones when there are none): the
/// providers' trust rules (`upstream::egress::client_tls`), with no extra CA.
fn client() -> ExportClient {
    let tls = crate::upstream::egress::client_tls(&[]);
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.enforce_http(false);
    http.set_connect_timeout(Some(EXPORT_TIMEOUT));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(2)
        .build(https)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::telemetry::answer_usage::AnswerUsage;
    use crate::telemetry::finished::Role;
    use crate::telemetry::trace_context::{SpanId, TraceId};

    fn span(model: &str) -> FinishedSpan {
        FinishedSpan {
            trace_id: TraceId([1; 16]),
            span_id: SpanId([2; 8]),
            parent: None,
            remote_parent: false,
            operation: "chat",
            model: Arc::from(model),
            start_unix_ns: 1,
            end_unix_ns: 2,
            usage: AnswerUsage::default(),
            status: Some(200),
            error: None,
            role: Role::Request {
                client: None,
                affinity: "none",
                attempts: Some(1),
            },
        }
    }

    /// A queue with no export task, so what it holds stays to be read.
    fn queue() -> SpanQueue {
        SpanQueue {
            shared: Arc::new(Shared::new()),
        }
    }

    /// Per shard: how many spans it holds and the models they carry.
    fn held(queue: &SpanQueue) -> Vec<(usize, HashSet<String>)> {
        queue
            .shared
            .waiting
            .iter()
            .map(|shard| {
                let waiting = shard.0.lock().expect("not poisoned");
                let models = waiting
                    .batches
                    .iter()
                    .flatten()
                    .map(|span| span.model.to_string())
                    .collect();
                (waiting.spans, models)
            })
            .collect()
    }

    #[test]
    fn each_thread_keeps_to_one_buffer_and_every_buffer_to_its_share_of_the_bound() {
        let queue = Arc::new(queue());
        let threads: Vec<_> = (0..8)
            .map(|thread| {
                let queue = queue.clone();
                std::thread::spawn(move || {
                    for _ in 0..MAX_QUEUED_SPANS {
                        queue.push(span(&format!("thread-{thread}")));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("pusher");
        }
        let shards = held(&queue);
        let mut seen = HashSet::new();
        for (count, models) in &shards {
            assert!(*count <= MAX_QUEUED_SPANS / SHARDS, "{count}");
            // A thread's spans are all in one buffer.
            for model in models {
                assert!(seen.insert(model.clone()), "{model} in two buffers");
            }
        }
        // Eight threads, each pushing the whole bound, fill every buffer they reached.
        let total: usize = shards.iter().map(|(count, _)| count).sum();
        assert!(total <= MAX_QUEUED_SPANS);
        for (count, models) in &shards {
            if !models.is_empty() {
                assert_eq!(*count, MAX_QUEUED_SPANS / SHARDS);
            }
        }
    }
}
