//! The end-of-run summary, counted from the journal the node left on disk: per connection what
//! was served and failed, every lockout, every breaker transition. Kept behind one function,
//! [`summarize_journal`], so the replay tool's summary can take its place.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use quotaroute_journal::{JournalError, SledJournal, SledOptions};

use super::error::DemoError;
use super::tally::JournalTally;

/// Lockouts listed one by one before the rest are only counted.
const LOCKOUTS_LISTED: usize = 6;
/// Breaker transitions per line of the summary.
const TRANSITIONS_PER_LINE: usize = 4;
/// The node releases sled's lock when its last handle drops; wait this long for that.
const LOCK_WAIT: Duration = Duration::from_secs(3);

/// Reads the journal at `path` (the node must be stopped) and summarizes it.
pub fn summarize_journal(path: &Path) -> Result<String, DemoError> {
    let journal = open_when_released(path)?;
    let mut tally = JournalTally::default();
    tally.read_new(&journal);
    Ok(render_summary(&tally))
}

/// Opens the journal, retrying briefly while the stopping node still holds its lock.
fn open_when_released(path: &Path) -> Result<SledJournal, DemoError> {
    let started = std::time::Instant::now();
    loop {
        match SledJournal::open(path, SledOptions::default()) {
            Ok(journal) => return Ok(journal),
            Err(JournalError::Locked { .. }) if started.elapsed() < LOCK_WAIT => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(error) => {
                return Err(DemoError::Journal {
                    path: path.to_path_buf(),
                    reason: error.to_string(),
                })
            }
        }
    }
}

/// The summary text of a counted journal.
pub fn render_summary(tally: &JournalTally) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "summary (counted from the journal):");
    let _ = writeln!(
        out,
        "  {:<12} {:>7} {:>7} {:>9}  SERVED BY MODEL / FAILED BY STATUS",
        "CONNECTION", "SERVED", "FAILED", "LOCKOUTS"
    );
    for (id, connection) in &tally.connections {
        let models = connection
            .served_by_model
            .iter()
            .map(|(model, n)| format!("{model}={n}"))
            .chain(
                connection
                    .failed_by_status
                    .iter()
                    .map(|(status, n)| format!("failed:{status}={n}")),
            )
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            out,
            "  {id:<12} {:>7} {:>7} {:>9}  {models}",
            connection.served,
            connection.failed,
            connection.lockouts.len()
        );
    }
    let mut locks: Vec<_> = tally
        .connections
        .iter()
        .flat_map(|(id, c)| c.lockouts.iter().map(move |lock| (id, lock)))
        .collect();
    locks.sort_by_key(|(_, lock)| lock.at_ms);
    let _ = writeln!(out, "lockouts: {}", locks.len());
    for (id, lock) in locks.iter().take(LOCKOUTS_LISTED) {
        let _ = writeln!(
            out,
            "  {} {id} locked {} for {:.1}s ({})",
            tally.relative(lock.at_ms),
            lock.model,
            lock.until_ms.saturating_sub(lock.at_ms) as f64 / 1000.0,
            lock.reason
        );
    }
    if locks.len() > LOCKOUTS_LISTED {
        let _ = writeln!(out, "  … and {} more", locks.len() - LOCKOUTS_LISTED);
    }
    let _ = writeln!(out, "breakers:");
    if tally.providers.is_empty() {
        let _ = writeln!(out, "  every breaker stayed CLOSED");
    }
    for (name, provider) in &tally.providers {
        let _ = writeln!(out, "  {name}: opened {}×", provider.openings());
        let steps: Vec<String> = provider
            .transitions
            .iter()
            .map(|t| {
                format!(
                    "{} {}→{}",
                    tally.relative(t.at_ms),
                    t.from.as_str(),
                    t.to.as_str()
                )
            })
            .collect();
        for line in steps.chunks(TRANSITIONS_PER_LINE) {
            let _ = writeln!(out, "    {}", line.join(", "));
        }
    }
    if tally.damaged > 0 {
        let _ = writeln!(out, "damaged records skipped: {}", tally.damaged);
    }
    out
}
