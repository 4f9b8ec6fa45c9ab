//! A small closed-loop HTTP load generator for `bench/load.sh`: N connections, each sending
//! one request after another for a fixed time; prints RPS, p50/p99 latency and, for streams,
//! time to first byte of the body (≈ time to first token).
//!
//! `cargo run --release --example loadgen -- URL MODEL CONNECTIONS SECONDS [stream] [KEY]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

#[derive(Default)]
struct Sample {
    latency_us: Vec<u64>,
    first_byte_us: Vec<u64>,
    errors: u64,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p) as usize] as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: loadgen URL MODEL CONNECTIONS SECONDS [stream] [KEY]");
        std::process::exit(2);
    }
    let url: Arc<str> = Arc::from(args[1].as_str());
    let model = args[2].clone();
    let connections: usize = args[3].parse()?;
    let seconds: u64 = args[4].parse()?;
    let stream = args.get(5).is_some_and(|a| a == "stream");
    let key: Arc<str> = Arc::from(args.get(6).map_or("sk-bench", |k| k.as_str()));
    let body = Bytes::from(format!(
        r#"{{"model":"{model}","stream":{stream},"max_tokens":8,"messages":[{{"role":"user","content":"Say something short."}}]}}"#
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(connections)
            .build(http);
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let client = client.clone();
            let url = url.clone();
            let key = key.clone();
            let body = body.clone();
            tasks.push(tokio::spawn(async move {
                let mut sample = Sample::default();
                while Instant::now() < deadline {
                    let request = http::Request::post(&*url)
                        .header("content-type", "application/json")
                        .header("authorization", format!("Bearer {key}"))
                        .body(Full::new(body.clone()));
                    let Ok(request) = request else {
                        sample.errors += 1;
                        continue;
                    };
                    let t0 = Instant::now();
                    match client.request(request).await {
                        Ok(response) if response.status().is_success() => {
                            let mut body = response.into_body();
                            let mut first = None;
                            while let Some(frame) = body.frame().await {
                                if frame.is_err() {
                                    sample.errors += 1;
                                    break;
                                }
                                if first.is_none() {
                                    first = Some(t0.elapsed());
                                }
                            }
                            sample.latency_us.push(t0.elapsed().as_micros() as u64);
                            if let Some(first) = first {
                                sample.first_byte_us.push(first.as_micros() as u64);
                            }
                        }
                        Ok(response) => {
                            let _ = response.into_body().collect().await;
                            sample.errors += 1;
                        }
                        Err(_) => sample.errors += 1,
                    }
                }
                sample
            }));
        }
        let mut all = Sample::default();
        for task in tasks {
            if let Ok(sample) = task.await {
                all.latency_us.extend(sample.latency_us);
                all.first_byte_us.extend(sample.first_byte_us);
                all.errors += sample.errors;
            }
        }
        let elapsed = started.elapsed().as_secs_f64();
        all.latency_us.sort_unstable();
        all.first_byte_us.sort_unstable();
        println!(
            "{{\"requests\":{},\"errors\":{},\"rps\":{:.0},\"p50_us\":{:.0},\"p99_us\":{:.0},\"ttfb_p50_us\":{:.0},\"ttfb_p99_us\":{:.0}}}",
            all.latency_us.len(),
            all.errors,
            all.latency_us.len() as f64 / elapsed,
            percentile(&all.latency_us, 0.5),
            percentile(&all.latency_us, 0.99),
            percentile(&all.first_byte_us, 0.5),
            percentile(&all.first_byte_us, 0.99),
        );
    });
    Ok(())
}
