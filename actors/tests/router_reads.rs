//! Reads of the learned state never stall the request path in proportion to its size (issue
//! 49 item 8): every actor step records its events under the recorder's one lock, so a read
//! (`/metrics`, the dashboard's push, a 429's `Retry-After`) that copied the whole fold under
//! it — a million conversation groups at the default `affinity.max_groups` — held every request
//! for as long as the copy took (~41 ms at 333,333 groups in a release build).

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

#[expect(
    dead_code,
    reason = "the shared support: this file calls only part of it"
)]
mod support;

use std::time::{Duration, Instant};

use quotaroute_journal::{
    AffinityBound, ClientUsage, Envelope, Event, Journal, MemoryJournal, SCHEMA_VERSION,
};
use support::*;

/// Groups bound before the node starts (the probe had 333,333: a client at its share of a node
/// with three clients).
const GROUPS: u64 = 200_000;

fn bound(group: u64) -> Event {
    Event::AffinityBound(AffinityBound {
        request_id: format!("r{group}"),
        combo: "team".into(),
        group,
        client: "big".into(),
        provider: "p".into(),
        connection: ["k1", "k2", "k3"][(group % 3) as usize].into(),
        model: "m".into(),
        moved_from: None,
        reason: None,
    })
}

/// A journal that already holds `GROUPS` bound conversations, all still within their ttl.
fn journal_with_groups() -> MemoryJournal {
    let mut journal = MemoryJournal::new();
    let envelopes: Vec<Envelope> = (0..GROUPS)
        .map(|group| Envelope {
            schema_version: SCHEMA_VERSION,
            seq: group + 1,
            at_ms: T0,
            event: bound(group),
        })
        .collect();
    for batch in envelopes.chunks(10_000) {
        journal.write_batch(batch).unwrap();
    }
    journal.flush().unwrap();
    journal
}

fn usage(request: u64) -> Event {
    Event::ClientUsage(ClientUsage {
        request_id: format!("u{request}"),
        client: "small".into(),
        combo: "team".into(),
        provider: "p".into(),
        connection: "k1".into(),
        model: "m".into(),
        tokens_in: 10,
        tokens_out: 5,
        tokens_cached: 0,
        tokens_cache_write: 0,
        cost_usd: None,
        period_spend_pusd: 0,
        period_start_ms: T0,
        estimated: false,
    })
}

/// With a third of a million groups learned, the admin view (what `/metrics`, the dashboard
/// and a 429's `Retry-After` read) holds the recorder's lock for no longer than a fold of the
/// config's size takes: under 5 ms on average and 50 ms at worst over 20 reads, where copying
/// the whole fold held it ~110 ms each (debug build) and stalled every request recorded
/// meanwhile as long. The groups are still there, and the view still says what it said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_the_state_does_not_hold_the_recorder_in_proportion_to_the_groups() {
    let clock = quotaroute_actors::ManualClock::new(T0);
    let router = start(pool_211(), journal_with_groups(), clock.clone()).await;

    // A scrape loop on one thread, while the request path records on another.
    let reader = {
        let router = router.clone();
        tokio::spawn(async move {
            let mut views = Vec::new();
            for _ in 0..20 {
                views.push(router.state().await.unwrap());
            }
            views
        })
    };
    let mut waits = Vec::new();
    let mut request = 0;
    while !reader.is_finished() || waits.len() < 100 {
        let started = Instant::now();
        router.record_client(T0, usage(request));
        waits.push(started.elapsed());
        request += 1;
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let views = reader.await.unwrap();
    waits.sort();
    let p99 = waits[waits.len() * 99 / 100];
    println!(
        "{} records during 20 reads: p99 {p99:?}, max {:?}",
        waits.len(),
        waits.last().unwrap()
    );

    let reads = router.recorder_reads();
    println!("recorder reads: {reads:?}");
    assert_eq!(reads.count, 20);
    assert!(
        reads.mean() < Duration::from_millis(5),
        "a read held the recorder {:?} on average",
        reads.mean()
    );
    assert!(
        reads.longest < Duration::from_millis(50),
        "a read held the recorder {:?}",
        reads.longest
    );
    // The view is whole: every connection and the combo, as before.
    let view = views.last().unwrap();
    assert_eq!(view.connections.len(), 3);
    assert_eq!(view.combos.len(), 1);
    assert_eq!(view.combos[0].targets.len(), 3);
    // The groups were learned (else this proves nothing), and are still there.
    let folded = router.folded_state().await.unwrap();
    assert_eq!(
        folded.affinity.get("team").map(|groups| groups.len()),
        Some(GROUPS as usize)
    );
}
