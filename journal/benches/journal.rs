//! Journal benchmarks (a plain `main` that prints numbers; run with
//! `cargo bench -p quotaroute-journal`). Measures, on one sled journal of `QR_BENCH_EVENTS`
//! events (default 1M): sustained append rate through `JournalHandle` with group commit,
//! bytes on disk per event, replay rate (decode + apply to a trivial reducer), and
//! restart-to-ready with and without a snapshot.

use quotaroute_journal::testkit::sample_event;
use quotaroute_journal::*;
use std::error::Error;
use std::path::Path;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// A trivial reducer: counts per kind and the last seq/time seen.
#[derive(Default)]
struct Reducer {
    per_kind: [u64; Event::KINDS.len()],
    last_seq: u64,
    last_at_ms: u64,
}

impl Reducer {
    fn apply(&mut self, envelope: &Envelope) {
        let kind = envelope.event.kind();
        if let Some(i) = Event::KINDS.iter().position(|k| *k == kind) {
            self.per_kind[i] += 1;
        }
        self.last_seq = envelope.seq;
        self.last_at_ms = envelope.at_ms;
    }

    fn encode(&self) -> Vec<u8> {
        let mut bytes: Vec<u8> = self.per_kind.iter().flat_map(|n| n.to_le_bytes()).collect();
        bytes.extend_from_slice(&self.last_seq.to_le_bytes());
        bytes.extend_from_slice(&self.last_at_ms.to_le_bytes());
        bytes
    }

    fn decode(bytes: &[u8]) -> Option<Reducer> {
        let mut words = bytes
            .chunks_exact(8)
            .map(|c| c.try_into().map(u64::from_le_bytes));
        let mut reducer = Reducer::default();
        for slot in reducer.per_kind.iter_mut() {
            *slot = words.next()?.ok()?;
        }
        reducer.last_seq = words.next()?.ok()?;
        reducer.last_at_ms = words.next()?.ok()?;
        Some(reducer)
    }
}

/// (apparent bytes, allocated bytes) of every file under `path`.
fn dir_bytes(path: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let (mut apparent, mut allocated) = (0, 0);
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let (a, b) = if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            (meta.len(), meta.blocks() * 512)
        };
        apparent += a;
        allocated += b;
    }
    Ok((apparent, allocated))
}

fn rate(events: u64, seconds: f64) -> String {
    format!("{:.0} events/s", events as f64 / seconds)
}

/// Opens, recovers and replays the tail: the node's restart path up to "ready".
fn restart(path: &Path) -> Result<(f64, f64, u64, Option<u64>)> {
    let started = Instant::now();
    let journal = SledJournal::open(path, SledOptions::default())?;
    let opened = started.elapsed().as_secs_f64();
    let recovery = recover(&journal, Reducer::decode);
    let snapshot_seq = recovery.snapshot_seq;
    let mut state = recovery.state.unwrap_or_default();
    let mut replayed = 0;
    for envelope in journal.read_from(snapshot_seq.map_or(0, |s| s + 1)) {
        state.apply(&envelope?);
        replayed += 1;
    }
    Ok((
        opened,
        started.elapsed().as_secs_f64(),
        replayed,
        snapshot_seq,
    ))
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; ignore arguments.
    let events: u64 = std::env::var("QR_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let pool: Vec<Event> = (0..4096).map(|i| sample_event(i, i as u64)).collect();

    // 1. Sustained append with group commit: from the first append until all is durable.
    let journal = SledJournal::open(dir.path(), SledOptions::default())?;
    let config = WriterConfig {
        max_queue_events: u64::MAX, // measure the writer, not the drop policy
        ..WriterConfig::default()
    };
    let handle = JournalHandle::spawn(Box::new(journal), config)?;
    let mut reducer = Reducer::default();
    let started = Instant::now();
    let mut append_only = 0.0;
    for i in 0..events {
        let event = pool[(i % 4096) as usize].clone();
        if i == events - 1_000 {
            // The live state after this event becomes the snapshot for restart (below).
            append_only = started.elapsed().as_secs_f64();
        }
        let at_ms = 1_700_000_000_000 + i;
        let seq = handle
            .append(at_ms, event.clone())
            .ok_or("append dropped")?;
        if i < events - 1_000 {
            reducer.apply(&Envelope {
                schema_version: SCHEMA_VERSION,
                seq,
                at_ms,
                event,
            });
        }
    }
    let durable = runtime.block_on(handle.flush())?;
    let sustained = started.elapsed().as_secs_f64();
    let stats = handle.stats();
    runtime.block_on(handle.close())?;
    println!("append: {events} events, durable seq {durable}");
    println!(
        "  sustained append (until durable): {} ({sustained:.2} s; caller side {})",
        rate(events, sustained),
        rate(events - 1_000, append_only)
    );
    println!(
        "  dropped {}, write errors {}",
        stats.dropped, stats.write_errors
    );

    // 2. Bytes on disk per event.
    let (bytes, allocated) = dir_bytes(dir.path())?;
    let payload: usize = SledJournal::open(dir.path(), SledOptions::default())?
        .raw_entries()
        .iter()
        .map(|(_, key, value)| key.len() + value.len())
        .sum();
    println!(
        "disk: {:.1} MB ({:.1} MB allocated) for {events} events = {:.0} bytes/event; \
         record payload {:.0} bytes/event",
        bytes as f64 / 1e6,
        allocated as f64 / 1e6,
        bytes as f64 / events as f64,
        payload as f64 / events as f64
    );

    // 3. Replay: decode + apply to a trivial reducer.
    {
        let journal = SledJournal::open(dir.path(), SledOptions::default())?;
        let started = Instant::now();
        let mut state = Reducer::default();
        for envelope in journal.read_from(0) {
            state.apply(&envelope?);
        }
        let seconds = started.elapsed().as_secs_f64();
        println!("replay: {} ({seconds:.2} s)", rate(state.last_seq, seconds));
    }

    // 4. Restart to ready without a snapshot (full replay) ...
    let (opened, total, replayed, _) = restart(dir.path())?;
    println!(
        "restart without snapshot: {:.0} ms (open {:.0} ms, replayed {replayed} events)",
        total * 1e3,
        opened * 1e3
    );
    // ... and with one, 1 000 events before the end.
    {
        let mut journal = SledJournal::open(dir.path(), SledOptions::default())?;
        journal.put_snapshot(reducer.last_seq, reducer.last_at_ms, 1, &reducer.encode())?;
        journal.flush()?;
    }
    let (opened, total, replayed, snapshot_seq) = restart(dir.path())?;
    println!(
        "restart with snapshot at {snapshot_seq:?}: {:.0} ms (open {:.0} ms, replayed {replayed} events)",
        total * 1e3,
        opened * 1e3
    );
    Ok(())
}
