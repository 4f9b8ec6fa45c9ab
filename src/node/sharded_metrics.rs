//! The recorder behind the `metrics` facade: Prometheus's exporter, with every counter and
//! histogram recorded first into a shard of the recording thread's own and folded into the
//! exporter when `/metrics` is rendered (and by the upkeep thread). Gauges go straight through.
//!
//! Why: the exporter's counter adds to one atomic and its generation that every thread shares,
//! and its histogram pushes each sample onto one shared queue. A request records ~6 counters
//! and 2 histograms, so at every request those cache lines moved between the workers: the bench
//! read ~7 % more CPU per request with them than with none (docs/measurements.md, 2026-12-07,
//! "Shared lines"). A shard is written by the threads that drew it only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use metrics_exporter_prometheus::PrometheusRecorder;

/// Shards per counter or histogram: each thread that records draws one, in turn.
const SHARDS: usize = 8;

/// Samples a histogram's shard holds before the thread recording folds them itself, so a
/// node nobody scrapes holds a bounded number between two upkeeps.
const HELD_SAMPLES: usize = 1_024;

/// One cache line's worth, so two shards never share a line.
#[repr(align(64))]
#[derive(Default)]
struct Line<T>(T);

/// The exporter's recorder, its counters and histograms sharded.
pub struct ShardedRecorder {
    shared: Arc<Registered>,
}

/// Every sharded handle made, by key: `counter!` at a call site registers on each call, and
/// each must reach the same shards.
struct Registered {
    inner: PrometheusRecorder,
    counters: Mutex<HashMap<Key, Arc<ShardedCounter>>>,
    histograms: Mutex<HashMap<Key, Arc<ShardedHistogram>>>,
}

/// Folds what the shards hold into the exporter: call before rendering.
#[derive(Clone)]
pub struct Folder {
    shared: Arc<Registered>,
}

impl ShardedRecorder {
    /// Wraps `inner`; [`ShardedRecorder::folder`] folds into it.
    pub fn new(inner: PrometheusRecorder) -> Self {
        Self {
            shared: Arc::new(Registered {
                inner,
                counters: Mutex::default(),
                histograms: Mutex::default(),
            }),
        }
    }

    /// What folds this recorder's shards.
    pub fn folder(&self) -> Folder {
        Folder {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Folder {
    /// Moves every shard's counts and samples into the exporter.
    pub fn fold(&self) {
        let counters: Vec<Arc<ShardedCounter>> =
            lock(&self.shared.counters).values().cloned().collect();
        counters.iter().for_each(|counter| counter.fold());
        let histograms: Vec<Arc<ShardedHistogram>> =
            lock(&self.shared.histograms).values().cloned().collect();
        histograms.iter().for_each(|histogram| histogram.fold_all());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The calling thread's shard, drawn on its first record.
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

impl Recorder for ShardedRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.shared.inner.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.shared.inner.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.shared.inner.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        let mut counters = lock(&self.shared.counters);
        let counter = counters.entry(key.clone()).or_insert_with(|| {
            Arc::new(ShardedCounter {
                inner: self.shared.inner.register_counter(key, metadata),
                shards: Default::default(),
            })
        });
        Counter::from_arc(Arc::clone(counter))
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.shared.inner.register_gauge(key, metadata)
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        let mut histograms = lock(&self.shared.histograms);
        let histogram = histograms.entry(key.clone()).or_insert_with(|| {
            Arc::new(ShardedHistogram {
                inner: self.shared.inner.register_histogram(key, metadata),
                shards: Default::default(),
            })
        });
        Histogram::from_arc(Arc::clone(histogram))
    }
}

/// A counter's increments, per shard, not yet in the exporter's counter.
struct ShardedCounter {
    inner: Counter,
    shards: [Line<AtomicU64>; SHARDS],
}

impl ShardedCounter {
    fn fold(&self) {
        let pending: u64 = self
            .shards
            .iter()
            .map(|shard| shard.0.swap(0, Ordering::AcqRel))
            .sum();
        if pending > 0 {
            self.inner.increment(pending);
        }
    }
}

impl CounterFn for ShardedCounter {
    fn increment(&self, value: u64) {
        self.shards[shard()].0.fetch_add(value, Ordering::Relaxed);
    }

    fn absolute(&self, value: u64) {
        // Set from an outside count: increments made before it are part of that count.
        self.shards
            .iter()
            .for_each(|shard| shard.0.store(0, Ordering::Release));
        self.inner.absolute(value);
    }
}

/// A histogram's samples, per shard, not yet in the exporter's histogram.
struct ShardedHistogram {
    inner: Histogram,
    shards: [Line<Mutex<Vec<f64>>>; SHARDS],
}

impl ShardedHistogram {
    fn fold_all(&self) {
        self.shards.iter().for_each(|shard| self.fold(&shard.0));
    }

    fn fold(&self, shard: &Mutex<Vec<f64>>) {
        let samples = std::mem::take(&mut *lock(shard));
        samples
            .into_iter()
            .for_each(|sample| self.inner.record(sample));
    }
}

impl HistogramFn for ShardedHistogram {
    fn record(&self, value: f64) {
        let shard = &self.shards[shard()].0;
        let mut samples = lock(shard);
        samples.push(value);
        if samples.len() >= HELD_SAMPLES {
            drop(samples);
            self.fold(shard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::PrometheusBuilder;

    fn recorder() -> (
        ShardedRecorder,
        metrics_exporter_prometheus::PrometheusHandle,
    ) {
        let inner = PrometheusBuilder::new()
            .set_buckets(&[0.001, 1.0])
            .expect("buckets")
            .build_recorder();
        let handle = inner.handle();
        (ShardedRecorder::new(inner), handle)
    }

    /// The value of the line of `text` that starts with `series`.
    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
    }

    #[test]
    fn counts_from_many_threads_are_all_rendered_after_a_fold() {
        let (recorder, handle) = recorder();
        let folder = recorder.folder();
        let recorder = Arc::new(recorder);
        let threads: Vec<_> = (0..SHARDS + 3)
            .map(|_| {
                let recorder = Arc::clone(&recorder);
                std::thread::spawn(move || {
                    let key = Key::from_static_name("served_total");
                    let counter = recorder.register_counter(&key, &metadata());
                    (0..1_000).for_each(|_| counter.increment(1));
                })
            })
            .collect();
        threads
            .into_iter()
            .for_each(|thread| thread.join().expect("no panic"));
        assert_eq!(
            value(&handle.render(), "served_total"),
            Some(0.0),
            "registered, nothing folded yet"
        );
        folder.fold();
        let expected = ((SHARDS + 3) * 1_000) as f64;
        assert_eq!(value(&handle.render(), "served_total"), Some(expected));
        folder.fold();
        assert_eq!(
            value(&handle.render(), "served_total"),
            Some(expected),
            "a second fold adds nothing"
        );
    }

    #[test]
    fn histogram_samples_reach_buckets_sum_and_count() {
        let (recorder, handle) = recorder();
        let key = Key::from_static_name("wait_seconds");
        let histogram = recorder.register_histogram(&key, &metadata());
        let again = recorder.register_histogram(&key, &metadata());
        histogram.record(0.0005);
        again.record(0.5);
        histogram.record(5.0);
        recorder.folder().fold();
        let text = handle.render();
        assert_eq!(value(&text, "wait_seconds_bucket{le=\"0.001\"}"), Some(1.0));
        assert_eq!(value(&text, "wait_seconds_bucket{le=\"1\"}"), Some(2.0));
        assert_eq!(value(&text, "wait_seconds_count"), Some(3.0));
        assert_eq!(value(&text, "wait_seconds_sum"), Some(5.5005));
    }

    #[test]
    fn a_shard_past_its_bound_folds_itself() {
        let (recorder, handle) = recorder();
        let histogram =
            recorder.register_histogram(&Key::from_static_name("held_seconds"), &metadata());
        (0..HELD_SAMPLES).for_each(|_| histogram.record(0.5));
        assert_eq!(
            value(&handle.render(), "held_seconds_count"),
            Some(HELD_SAMPLES as f64)
        );
    }

    #[test]
    fn an_absolute_count_replaces_what_the_shards_held() {
        let (recorder, handle) = recorder();
        let counter =
            recorder.register_counter(&Key::from_static_name("events_total"), &metadata());
        counter.increment(5);
        counter.absolute(42);
        recorder.folder().fold();
        assert_eq!(value(&handle.render(), "events_total"), Some(42.0));
    }

    fn metadata() -> Metadata<'static> {
        Metadata::new(module_path!(), metrics::Level::INFO, None)
    }
}
