//! The export path: a bounded queue the request path only ever `try_send`s to, and one task
//! that gathers batches (up to [`MAX_BATCH`] spans or [`BATCH_DELAY`]) and POSTs each to the
//! collector as OTLP/HTTP protobuf, one export at a time, each bounded by [`EXPORT_TIMEOUT`].
//! A full queue drops the span; an export that fails or times out drops its batch: both are
//! counted (`quotaroute_trace_spans_dropped_total{reason}`), neither ever waits or retries, so
//! a slow or dead collector costs a request nothing.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use metrics::Counter;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use url::Url;

use crate::telemetry::finished::{encode, FinishedSpan};

/// Spans waiting for export; past this a span is dropped (and counted).
pub const MAX_QUEUED_SPANS: usize = 4096;
/// The most spans in one export.
pub const MAX_BATCH: usize = 512;
/// The longest a span waits for its batch to fill.
pub const BATCH_DELAY: Duration = Duration::from_millis(500);
/// The longest one export may take (connect, send, answer).
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a collector's answer read (it is only drained, so the connection is reused).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

enum Queued {
    Span(FinishedSpan),
    /// Export what is queued now, then answer.
    Flush(oneshot::Sender<()>),
}

/// The request path's end of the queue.
pub struct SpanQueue {
    sender: mpsc::Sender<Queued>,
    counters: Arc<Counters>,
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
        let (sender, receiver) = mpsc::channel(MAX_QUEUED_SPANS);
        let counters = Arc::new(Counters::register());
        let exporter = Exporter {
            client: client(),
            traces_url,
            service_name,
            counters: counters.clone(),
        };
        tokio::spawn(exporter.run(receiver));
        SpanQueue { sender, counters }
    }

    /// Queues `span`, or drops and counts it when the queue is full: never waits.
    pub fn push(&self, span: FinishedSpan) {
        if self.sender.try_send(Queued::Span(span)).is_err() {
            self.counters.queue_full.increment(1);
        }
    }

    /// Exports what is queued, waiting at most `within` (at stop).
    pub async fn flush(&self, within: Duration) {
        let (done, exported) = oneshot::channel();
        if self.sender.try_send(Queued::Flush(done)).is_ok() {
            let _ = tokio::time::timeout(within, exported).await;
        }
    }
}

type ExportClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

struct Exporter {
    client: ExportClient,
    traces_url: Url,
    service_name: String,
    counters: Arc<Counters>,
}

impl Exporter {
    async fn run(self, mut receiver: mpsc::Receiver<Queued>) {
        let mut batch: Vec<FinishedSpan> = Vec::with_capacity(MAX_BATCH);
        while let Some(first) = receiver.recv().await {
            let mut flushed: Option<oneshot::Sender<()>> = None;
            match first {
                Queued::Span(span) => batch.push(span),
                Queued::Flush(done) => flushed = Some(done),
            }
            let full_by = Instant::now() + BATCH_DELAY;
            while flushed.is_none() && batch.len() < MAX_BATCH {
                match tokio::time::timeout_at(full_by, receiver.recv()).await {
                    Ok(Some(Queued::Span(span))) => batch.push(span),
                    Ok(Some(Queued::Flush(done))) => flushed = Some(done),
                    Ok(None) | Err(_) => break,
                }
            }
            if !batch.is_empty() {
                self.export(std::mem::take(&mut batch)).await;
            }
            if let Some(done) = flushed {
                let _ = done.send(());
            }
        }
    }

    async fn export(&self, spans: Vec<FinishedSpan>) {
        let count = spans.len() as u64;
        let body = encode(spans, &self.service_name);
        match tokio::time::timeout(EXPORT_TIMEOUT, self.post(body)).await {
            Ok(Ok(())) => self.counters.exported.increment(count),
            Ok(Err(reason)) => {
                self.counters.export_failed.increment(count);
                tracing::debug!(
                    collector = %crate::wire::upstream_mask::mask_url(self.traces_url.as_str()),
                    spans = count,
                    reason,
                    "trace export failed: spans dropped"
                );
            }
            Err(_) => {
                self.counters.export_failed.increment(count);
                tracing::debug!(spans = count, "trace export timed out: spans dropped");
            }
        }
    }

    async fn post(&self, body: Vec<u8>) -> Result<(), String> {
        let request = http::Request::post(self.traces_url.as_str())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(Bytes::from(body)))
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
