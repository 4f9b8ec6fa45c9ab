//! Routing throughput and latency through the actors (route + report) with 1, 8 and 64
//! concurrent callers on a 16-target combo, and the pure selector alone.
//!
//! `cargo bench -p quotaroute-actors --bench router`. Prints one line per case; bounded to a
//! few seconds per case. Targets (2 cores): ≥ 300k decisions/s; p99 ≤ 20 µs at 8 callers.

// A bench aborts on a broken setup, like a test.
#![expect(
    clippy::expect_used,
    reason = "test code: a failed step fails the test loudly"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quotaroute_actors::policy::drr::DrrDeficits;
use quotaroute_actors::policy::quota_share::{select, Strategy, TargetView};
use quotaroute_actors::{
    AttemptResult, ComboSpec, ConnectionSpec, ProviderSpec, RouteRequest, Router, RouterOptions,
    SystemClock, Topology,
};
use quotaroute_journal::{ApiFormat, AuthKind, MemoryJournal, WriterConfig};

const TARGETS: usize = 16;

fn topology() -> Topology {
    let connections: Vec<ConnectionSpec> = (0..TARGETS)
        .map(|i| ConnectionSpec {
            max_concurrent: Some(64),
            ..ConnectionSpec::new(
                &format!("key-{i}"),
                "openai",
                AuthKind::ApiKey,
                1 + (i as u32 % 3),
            )
        })
        .collect();
    let targets: Vec<(&str, &str, u32)> = connections
        .iter()
        .map(|c| (c.id.as_str(), "gpt-4o-mini", c.weight))
        .collect();
    let combo = ComboSpec::quota_share("team", &targets);
    let provider = ProviderSpec::new("openai", ApiFormat::Openai, AuthKind::ApiKey);
    Topology::new(vec![provider], connections, vec![combo], "bench", "0")
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

async fn run_case(router: &Router, callers: usize, per_caller: usize) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for caller in 0..callers {
        let router = router.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_caller);
            for i in 0..per_caller {
                let t = Instant::now();
                let request = RouteRequest {
                    request_id: format!("r{caller}-{i}").into(),
                    model: "team".into(),
                    format: ApiFormat::Openai,
                    translatable: false,
                    cannot_carry: Vec::new(),
                    only_connection: None,
                    encrypted_maker: None,
                    affinity: None,
                    client: quotaroute_actors::ClientTag::default(),
                };
                let mut decision = router.route(request).await.expect("routes");
                decision.report(AttemptResult::success(200, 10, 20));
                latencies.push(t.elapsed().as_nanos() as u64);
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("caller"));
    }
    let elapsed = started.elapsed();
    all.sort_unstable();
    println!(
        "route+report  callers={callers:>3}  decisions={:>7}  {:>9.0} decisions/s  p50={:>6.1} µs  p99={:>6.1} µs",
        all.len(),
        all.len() as f64 / elapsed.as_secs_f64(),
        percentile(&all, 0.50) as f64 / 1000.0,
        percentile(&all, 0.99) as f64 / 1000.0,
    );
}

fn selector_alone() {
    let views: Vec<TargetView> = (0..TARGETS)
        .map(|i| TargetView {
            weight: 1 + (i as u32 % 3),
            exec_key: format!("key-{i}/gpt-4o-mini").into(),
            hard_block: None,
            saturated: false,
            in_flight: (i % 4) as u32,
            max_concurrent: Some(64),
            degraded: false,
            pace: quotaroute_actors::policy::pace::ON_PACE,
            pace_window: None,
            spend: quotaroute_actors::policy::pace::ON_PACE,
        })
        .collect();
    let deficits = DrrDeficits::new();
    let n = 200_000;
    let started = Instant::now();
    let mut chosen = 0usize;
    for _ in 0..n {
        let selection = select(Strategy::QuotaShare, &views, &deficits);
        chosen = chosen.wrapping_add(selection.chosen.unwrap_or(0));
    }
    let elapsed = started.elapsed();
    println!(
        "selector alone (16 targets): {:>9.0} selections/s  ({:.2} µs each; checksum {chosen})",
        n as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / n as f64
    );
}

fn main() {
    selector_alone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let router = Router::start(
            topology(),
            Box::new(MemoryJournal::new()),
            RouterOptions {
                writer: WriterConfig {
                    retention_hours: 0,
                    ..WriterConfig::default()
                },
                snapshot_every_events: 0,
                request_events: Default::default(),
                clock: Arc::new(SystemClock),
            },
        )
        .await
        .expect("router");
        // Warm up.
        run_case(&router, 8, 2_000).await;
        for (callers, per_caller) in [(1, 100_000), (8, 25_000), (64, 4_000)] {
            run_case(&router, callers, per_caller).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}
