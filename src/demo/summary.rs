//! The end-of-run summary: the replay tool's `--summary` of the journal the node left on disk,
//! the incident SVG beside it, and what the demo is about in one block — who served which model
//! (the 2:1:1 weights). Runs after the node has stopped; never touches a live journal.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use quotaroute_journal::{JournalError, SledJournal, SledOptions};

use crate::replay::{self, ColorChoice, ReplayArgs};

use super::error::DemoError;
use super::tally::JournalTally;

/// The node releases sled's lock a moment after its last handle drops; wait this long for it.
const LOCK_WAIT: Duration = Duration::from_secs(3);

/// Summarizes the stopped node's journal at `journal` (replay `--summary`, then served by
/// model) and writes the incident picture to `svg`.
pub fn summarize_journal(journal: &Path, svg: &Path) -> Result<String, DemoError> {
    let args = ReplayArgs {
        journal: Some(journal.to_path_buf()),
        summary: true,
        svg: Some(svg.to_path_buf()),
        color: ColorChoice::Never,
        ..ReplayArgs::default()
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = replay::run(&args, &mut out, &mut err, now_ms);
    if code != replay::EXIT_OK {
        return Err(DemoError::Journal {
            path: journal.to_path_buf(),
            reason: String::from_utf8_lossy(&err).trim().to_string(),
        });
    }
    let mut text = String::from("SUMMARY (quotaroute replay --summary)\n");
    text.push_str(&String::from_utf8_lossy(&out));
    let mut tally = JournalTally::default();
    let handle = open_when_released(journal)?;
    tally.read_new(&handle);
    text.push('\n');
    text.push_str(&primed_windows(&handle));
    text.push_str(&served_by_model(&tally));
    text.push_str(&cache_hit_rate(&tally));
    Ok(text)
}

/// Opens the journal, retrying briefly while the stopped node's lock is still held.
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

/// Per connection, successful upstream requests by model: the weights at work.
pub fn served_by_model(tally: &JournalTally) -> String {
    let mut out = String::from("SERVED BY MODEL (weights oa-1:oa-2:oa-3 = 2:1:1)\n");
    for (id, connection) in &tally.connections {
        let models = connection
            .served_by_model
            .iter()
            .map(|(model, n)| format!("{model}={n}"))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(out, "{id:<12} {models}");
    }
    out
}

/// The prompt caches at work (behaviour §10): the share of input tokens the upstreams read
/// from cache, over the run and per connection.
pub fn cache_hit_rate(tally: &JournalTally) -> String {
    let (input, cached) = tally.cached_input();
    let mut out = format!(
        "CACHE HIT RATE (cached share of input tokens): {} ({cached} of {input} input tokens)\n",
        percent(cached, input)
    );
    for (id, c) in &tally.connections {
        let _ = writeln!(
            out,
            "{id:<12} {} ({} of {})",
            percent(c.cached_input_tokens, c.input_tokens),
            c.cached_input_tokens,
            c.input_tokens
        );
    }
    out
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "n/a".to_string();
    }
    format!("{:.1} %", 100.0 * part as f64 / whole as f64)
}

/// The windows the node primed (behaviour §13), one line each.
fn primed_windows(journal: &SledJournal) -> String {
    use quotaroute_journal::{Event, Journal as _};
    let mut out = String::from("PRIMED WINDOWS (prime_at, behaviour §13)\n");
    let mut any = false;
    for envelope in journal.read_from(0).filter_map(Result::ok) {
        if let Event::WindowPrimed(primed) = &envelope.event {
            any = true;
            let _ = writeln!(
                out,
                "{:<12} window={} model={} primed at {}",
                primed.connection,
                primed.window,
                primed.model,
                crate::time_parse::format_utc_ms(envelope.at_ms)
            );
        }
    }
    if !any {
        out.push_str("none\n");
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_hit_rate_is_cached_over_all_input_tokens() {
        let mut tally = JournalTally::default();
        let oa1 = tally.connections.entry("oa-1".into()).or_default();
        oa1.input_tokens = 300;
        oa1.cached_input_tokens = 150;
        let oa2 = tally.connections.entry("oa-2".into()).or_default();
        oa2.input_tokens = 100;
        let text = cache_hit_rate(&tally);
        assert!(
            text.starts_with(
                "CACHE HIT RATE (cached share of input tokens): 37.5 % (150 of 400 input tokens)\n"
            ),
            "{text}"
        );
        assert!(text.contains("oa-1         50.0 % (150 of 300)"), "{text}");
        assert!(text.contains("oa-2         0.0 % (0 of 100)"), "{text}");
        assert!(cache_hit_rate(&JournalTally::default()).contains(": n/a (0 of 0"));
    }

    #[test]
    fn served_by_model_lists_each_connection_and_model() {
        let mut tally = JournalTally::default();
        let oa1 = tally.connections.entry("oa-1".into()).or_default();
        oa1.served_by_model.insert("gpt-4o-mini".into(), 20);
        oa1.served_by_model.insert("gpt-4o".into(), 3);
        let text = served_by_model(&tally);
        assert!(
            text.contains("oa-1         gpt-4o=3 gpt-4o-mini=20"),
            "{text}"
        );
    }
}
