//! Embedding the actor system in your own tokio program: route 1,000 decisions over three
//! connections (weights 2:1:1) while one of them answers some requests with 429, then print
//! the distribution and the lockouts it learned.
//!
//! `cargo run --example embed`

use std::collections::BTreeMap;

use quotaroute::actors::{
    AttemptResult, ComboSpec, ConnectionSpec, ManualClock, ProviderSpec, RouteRequest, Router,
    RouterOptions, Topology,
};
use quotaroute::journal::{ApiFormat, AuthKind, MemoryJournal, OutcomeClass, WriterConfig};

fn connection(id: &str, weight: u32) -> ConnectionSpec {
    ConnectionSpec::new(id, "openai", AuthKind::ApiKey, weight)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connections = vec![
        connection("key-a", 2),
        connection("key-b", 1),
        connection("key-c", 1),
    ];
    let targets: Vec<(&str, &str, u32)> = connections
        .iter()
        .map(|c| (c.id.as_str(), "gpt-4o-mini", c.weight))
        .collect();
    let combo = ComboSpec::quota_share("team", &targets);
    let provider = ProviderSpec::new("openai", ApiFormat::Openai, AuthKind::ApiKey);
    let topology = Topology::new(
        vec![provider],
        connections,
        vec![combo],
        "examples/embed.rs",
        "example",
    );
    // Simulated time: one decision every 100 ms.
    let clock = ManualClock::new(1_764_000_000_000);
    let router = Router::start(
        topology,
        Box::new(MemoryJournal::new()),
        RouterOptions {
            writer: WriterConfig::default(),
            snapshot_every_events: 0,
            request_events: Default::default(),
            clock: clock.clone(),
        },
    )
    .await?;

    let mut served: BTreeMap<String, u32> = BTreeMap::new();
    let mut rate_limited = 0;
    for i in 0..1_000u32 {
        clock.advance(100);
        let request = RouteRequest {
            request_id: format!("req-{i}").into(),
            model: "team".into(),
            format: ApiFormat::Openai,
            translatable: false,
            cannot_carry: Vec::new(),
            only_connection: None,
            encrypted_maker: None,
            affinity: None,
            client: quotaroute_actors::ClientTag::default(),
        };
        let mut decision = router.route(request).await?;
        while let Some(target) = decision.current() {
            let connection = target.connection.to_string();
            // key-b answers every 50th request it gets with a 429 and a 10 s Retry-After.
            let count = served.get(&connection).copied().unwrap_or(0);
            if connection == "key-b" && count % 50 == 49 {
                rate_limited += 1;
                served.insert(connection, count + 1);
                decision.report(
                    AttemptResult::failure(OutcomeClass::RateLimited, Some(429))
                        .with_reset_hint_ms(Some(10_000)),
                );
                if decision.failover().await?.is_none() {
                    break;
                }
                continue;
            }
            *served.entry(connection).or_default() += 1;
            decision.report(AttemptResult::success(200, 120, 40));
            break;
        }
        router.settle().await?;
        if i == 499 {
            let state = router.state().await?;
            for lock in state.lockouts() {
                println!(
                    "at decision 500: {} / {} locked ({}), {} ms left, failure #{}",
                    lock.connection, lock.model, lock.reason, lock.remaining_ms, lock.failure_count
                );
            }
        }
    }
    println!("upstream requests per connection over 1,000 decisions ({rate_limited} were 429s):");
    for (connection, count) in &served {
        println!("  {connection:<6} {count:>4}");
    }
    let state = router.state().await?;
    println!("lockouts now: {}", state.lockouts().len());
    for combo in &state.combos {
        for target in &combo.targets {
            println!(
                "  deficit {}/{} = {}",
                target.connection, target.model, target.deficit
            );
        }
    }
    router.shutdown("example done").await?;
    Ok(())
}
