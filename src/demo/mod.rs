//! `quotaroute demo`: the node on an embedded config in front of simulated upstream accounts,
//! real HTTP traffic through it, a live table every second, and a summary counted from the
//! journal at the end. Offline: no keys, no network beyond loopback.
//!
//! Layout:
//! - `embedded_config` — the config text: providers `openai` (keys 2:1:1, two models),
//!   `anthropic` (three keys, a quick breaker) and `google` (two Gemini free-tier keys);
//! - `scenario` — the script: when `oa-1` 429s on `gpt-4o`, when the Anthropic keys 503, when
//!   `gm-1` spends its day's free-tier quota;
//! - `upstreams` — the mock upstream on an ephemeral port, playing the script;
//! - `traffic` — paced clients through the node's HTTP endpoints;
//! - `tally` — counting journal events (live, by tailing; and at the end);
//! - `table` — one frame of the live table;
//! - `summary` — the end-of-run summary: `quotaroute replay --summary` of the journal, the
//!   incident SVG (`replay --svg`), and who served which model;
//! - `error` — [`DemoError`].
//!
//! Output goes to stdout: with a terminal each frame redraws the previous one (ANSI cursor up
//! and clear); otherwise frames are printed one after another, so they can be read by a pipe.
//! The run's directory (journal and incident SVG) is kept after the run, so the incident can be
//! replayed.

mod embedded_config;
mod error;
mod scenario;
mod summary;
mod table;
mod tally;
mod traffic;
mod upstreams;

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use quotaroute_actors::{Clock as _, SystemClock};
use tokio::time::Instant;

use crate::config;
use crate::node::{NodeError, NodeOptions, RunningNode};

pub use embedded_config::config_text;
pub use error::DemoError;
pub use scenario::Scenario;
pub use summary::summarize_journal;
pub use tally::JournalTally;

/// How often the table is redrawn.
const REFRESH: Duration = Duration::from_secs(1);

/// Runs the demo; returns the exit code (0 finished or interrupted, 1 could not run).
pub async fn run(listen: SocketAddr, seconds: u64) -> u8 {
    match run_demo(listen, seconds).await {
        Ok(()) => 0,
        Err(error) => {
            crate::cli_output::err_line(&format!("quotaroute demo: {error}"));
            1
        }
    }
}

/// Writes to stdout, ignoring a closed pipe (`demo | head` must not panic).
fn emit(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// A fresh directory for this run (journal and SVG) under the system temp dir, kept after exit.
fn fresh_run_dir() -> Result<PathBuf, DemoError> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let dir = std::env::temp_dir().join(format!("quotaroute-demo-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|error| DemoError::JournalDir {
        path: dir.clone(),
        reason: error.to_string(),
    })?;
    Ok(dir)
}

/// How soon after start the demo primes [`embedded_config::PRIMED`]'s window.
const PRIME_AFTER_MS: u64 = 2_000;

async fn run_demo(listen: SocketAddr, seconds: u64) -> Result<(), DemoError> {
    let run = Duration::from_secs(seconds);
    let scenario = Scenario::for_run(seconds);
    let mut upstreams = upstreams::SimulatedUpstreams::start(&scenario).await?;
    let run_dir = fresh_run_dir()?;
    let journal_dir = run_dir.join("journal");
    let svg = run_dir.join("incident.svg");
    // One window primed a moment after start (behaviour §13), shown in the summary.
    let prime_at_ms = SystemClock.now_ms() + PRIME_AFTER_MS;
    let text = embedded_config::with_prime_at(
        &config_text(&upstreams.base_url(), &journal_dir),
        prime_at_ms,
    );
    let config = config::parse(&text, "embedded demo config", &|_| None)
        .map_err(|errors| DemoError::Config(errors.to_string()))?;
    let node = match RunningNode::start(
        config,
        NodeOptions {
            config_path: None,
            config_text: text,
            clock: Arc::new(SystemClock),
            listen: Some(listen),
        },
    )
    .await
    {
        Ok(node) => node,
        Err(error) => {
            upstreams.stop();
            // Nothing was journaled: leave no empty directory behind.
            let _ = std::fs::remove_dir(&run_dir);
            return Err(match error {
                NodeError::Bind { addr, reason } => DemoError::ListenBusy { addr, reason },
                other => DemoError::Node(other.to_string()),
            });
        }
    };
    emit(&banner(node.addr, upstreams.addr, &journal_dir, run));

    let started = Instant::now();
    upstreams.play(scenario.clone(), started);
    let traffic = traffic::Traffic::start(node.addr);
    let mut live = LiveTable {
        tally: JournalTally::default(),
        redraw: std::io::stdout().is_terminal(),
        lines_drawn: 0,
        drawn_at: None,
        run,
        started,
        scenario,
    };

    let interrupted = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(interrupted);
    let deadline = tokio::time::sleep(run);
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(REFRESH);
    let reason = loop {
        tokio::select! {
            () = &mut deadline => break "demo finished",
            () = &mut interrupted => break "SIGINT",
            _ = tick.tick() => live.draw(&node, &traffic).await,
        }
    };
    // The end state, unless the last frame already shows it.
    if live.drawn_at.is_none_or(|at| at.elapsed() > REFRESH / 2) {
        live.draw(&node, &traffic).await;
    }

    traffic.stop().await;
    let stopped = node.stop(reason).await;
    upstreams.stop();
    if let Err(error) = stopped {
        crate::cli_output::err_line(&format!("quotaroute demo: stopping the node: {error}"));
    }
    if reason == "SIGINT" {
        emit("\ninterrupted: traffic stopped, node stopped cleanly\n");
    }
    let (dir, picture) = (journal_dir.clone(), svg.clone());
    let summary = tokio::task::spawn_blocking(move || summarize_journal(&dir, &picture))
        .await
        .map_err(|error| DemoError::Journal {
            path: journal_dir.clone(),
            reason: error.to_string(),
        })??;
    emit(&format!("\n{summary}"));
    emit(&closing(&journal_dir, &svg));
    Ok(())
}

/// What the demo runs on, printed once before the table.
fn banner(node: SocketAddr, mock: SocketAddr, journal: &Path, run: Duration) -> String {
    format!(
        "quotaroute demo: node on http://{node}, simulated upstream accounts on http://{mock} \
         (no keys, no network)\n\
         journal: {}\n\
         meanwhile try: curl -s -H 'authorization: Bearer {}' http://{node}/admin/state\n\
         running for {}s; Ctrl-C stops early\n\n",
        journal.display(),
        embedded_config::ADMIN_KEY,
        run.as_secs()
    )
}

/// Where the journal and the picture are, and how to look at the incident again.
fn closing(journal: &Path, svg: &Path) -> String {
    format!(
        "\njournal kept at: {dir}\n\
         incident SVG:    {svg}\n\
         replay it:       quotaroute replay --journal {dir}\n\
         summary again:   quotaroute replay --journal {dir} --summary\n",
        dir = journal.display(),
        svg = svg.display()
    )
}

/// The live table's state between frames.
struct LiveTable {
    tally: JournalTally,
    /// Redraw in place (a terminal) rather than print frame after frame.
    redraw: bool,
    lines_drawn: usize,
    drawn_at: Option<Instant>,
    run: Duration,
    started: Instant,
    scenario: Scenario,
}

impl LiveTable {
    /// Tails the journal, asks the router for its state and prints one frame.
    async fn draw(&mut self, node: &RunningNode, traffic: &traffic::Traffic) {
        if let Some(journal) = node.app.journal_reader() {
            self.tally.read_new(&journal);
        }
        let Some(router) = node.app.router() else {
            return;
        };
        let Ok(state) = router.state().await else {
            return;
        };
        let elapsed = self.started.elapsed().min(self.run);
        let scenario = self.scenario.describe_at(elapsed);
        let frame = table::render(&table::Frame {
            elapsed,
            run: self.run,
            scenario: &scenario,
            state: &state,
            tally: &self.tally,
            clients: traffic.totals.get(),
            spare: traffic.totals.spare(),
            now_ms: router.clock().now_ms(),
        });
        let mut out = String::new();
        if self.redraw && self.lines_drawn > 0 {
            // Cursor up over the previous frame, then clear to the end of the screen.
            out.push_str(&format!("\x1b[{}A\x1b[J", self.lines_drawn));
        }
        out.push_str(&frame);
        if !self.redraw {
            out.push('\n');
        }
        self.lines_drawn = frame.lines().count();
        self.drawn_at = Some(Instant::now());
        emit(&out);
    }
}
