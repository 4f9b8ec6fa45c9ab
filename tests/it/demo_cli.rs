//! `quotaroute demo` end to end: the real binary, stdout piped (so the table is printed frame
//! after frame), checked for what the contract's `demo` line promises.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]
#![expect(clippy::too_many_lines, reason = "one CLI session, step by step")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_quotaroute");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Every stdout line with when it arrived, the exit code and stderr.
struct Run {
    lines: Vec<(Duration, String)>,
    code: Option<i32>,
    stderr: String,
}

/// Runs the demo with `args`; with `interrupt_after`, sends it SIGINT (Ctrl-C) that long after
/// its start.
fn run_demo(args: &[&str], limit: Duration, interrupt_after: Option<Duration>) -> Run {
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .arg("demo")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = sender.send((started.elapsed(), line.unwrap()));
        }
    });
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut interrupt_after = interrupt_after;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if interrupt_after.is_some_and(|after| started.elapsed() >= after) {
            interrupt_after = None;
            let sent = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(sent.success());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("demo still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    reader.join().unwrap();
    Run {
        lines: receiver.try_iter().collect(),
        code,
        stderr: stderr_reader.join().unwrap(),
    }
}

impl Run {
    /// All of stdout, one line per line.
    fn text(&self) -> String {
        self.lines
            .iter()
            .map(|(_, line)| format!("{line}\n"))
            .collect()
    }
}

/// The journal directory the demo says it kept; it exists.
fn kept_journal(text: &str) -> std::path::PathBuf {
    let journal = text
        .lines()
        .find_map(|line| line.strip_prefix("journal kept at: "))
        .unwrap_or_else(|| panic!("no journal path in\n{text}"));
    let journal = std::path::PathBuf::from(journal.trim());
    assert!(journal.is_dir(), "{}", journal.display());
    journal
}

/// `gpt-4o-mini=N` from a summary line, 0 when absent.
fn served_mini(line: &str) -> f64 {
    line.split_whitespace()
        .find_map(|token| token.strip_prefix("gpt-4o-mini="))
        .map_or(0.0, |n| n.parse().unwrap())
}

#[test]
fn demo_runs_offline_shows_the_live_table_and_exits_0() {
    let listen = format!("127.0.0.1:{}", free_port());
    let run = run_demo(
        &["--seconds", "4", "--listen", &listen],
        Duration::from_secs(20),
        None,
    );
    let text = run.text();
    assert_eq!(
        run.code,
        Some(0),
        "stdout:\n{text}\nstderr:\n{}",
        run.stderr
    );

    // First output within 2 s of start.
    let (first_at, _) = run.lines.first().expect("no output at all");
    assert!(
        *first_at < Duration::from_secs(2),
        "first output after {first_at:?}"
    );
    assert!(text.contains(&format!("http://{listen}")), "{text}");

    // The table names all eight connections and the three providers, once per frame.
    let frames = text.matches("CONNECTION   PROVIDER").count();
    assert!(frames >= 4, "{frames} frames in\n{text}");
    for name in [
        "oa-1",
        "oa-2",
        "oa-3",
        "an-1",
        "an-2",
        "an-3",
        "gm-1",
        "gm-2",
        "openai",
        "anthropic",
        "google",
    ] {
        let rows = run
            .lines
            .iter()
            .filter(|(_, line)| line.starts_with(&format!("{name} ")))
            .count();
        assert!(
            rows >= frames,
            "{name}: {rows} rows for {frames} frames\n{text}"
        );
    }

    // oa-1 shows a lockout for gpt-4o at some point, and never one for gpt-4o-mini.
    let oa1_rows: Vec<&str> = run
        .lines
        .iter()
        .map(|(_, line)| line.as_str())
        .filter(|line| line.starts_with("oa-1 "))
        .collect();
    assert!(
        oa1_rows
            .iter()
            .any(|row| row.contains("gpt-4o locked") && row.contains("rate_limited")),
        "{text}"
    );
    assert!(!oa1_rows
        .iter()
        .any(|row| row.contains("gpt-4o-mini locked")));

    // gm-1's free tier runs out for the day: locked until midnight Pacific, per day.
    assert!(
        run.lines.iter().any(|(_, line)| line.starts_with("gm-1 ")
            && line.contains("gemini-2.5-flash locked")
            && line.contains("quota_exhausted, per day")),
        "{text}"
    );

    // The anthropic breaker opened at some point of the run.
    assert!(
        run.lines
            .iter()
            .any(|(_, line)| line.starts_with("anthropic ") && line.contains("OPEN")),
        "{text}"
    );

    // The replayed summary is there; gpt-4o-mini (never locked) is served 2:1:1 by oa-1..oa-3.
    assert!(
        text.contains("SUMMARY (quotaroute replay --summary)"),
        "{text}"
    );
    let summary = text
        .split("SERVED BY MODEL")
        .nth(1)
        .unwrap_or_else(|| panic!("no served-by-model block in\n{text}"));
    let mini: BTreeMap<&str, f64> = ["oa-1", "oa-2", "oa-3"]
        .into_iter()
        .map(|id| {
            let line = summary
                .lines()
                .find(|line| line.trim_start().starts_with(&format!("{id} ")))
                .unwrap_or_else(|| panic!("no {id} in summary\n{summary}"));
            (id, served_mini(line))
        })
        .collect();
    assert!(mini["oa-2"] >= 10.0 && mini["oa-3"] >= 10.0, "{mini:?}");
    let high = mini["oa-1"] / mini["oa-2"];
    let low = mini["oa-2"] / mini["oa-3"];
    assert!((1.5..=2.6).contains(&high), "oa-1/oa-2 = {high}: {mini:?}");
    assert!((0.7..=1.4).contains(&low), "oa-2/oa-3 = {low}: {mini:?}");

    // The Anthropic keys are plan accounts (behaviour §13): an-1, whose week resets soonest
    // with most of it unused, is spent first; an-3, with a tenth of its week left, last.
    let claude: BTreeMap<&str, f64> = ["an-1", "an-2", "an-3"]
        .into_iter()
        .map(|id| {
            let line = summary
                .lines()
                .find(|line| line.trim_start().starts_with(&format!("{id} ")))
                .unwrap_or_else(|| panic!("no {id} in summary\n{summary}"));
            let served = line
                .split_whitespace()
                .find_map(|token| token.strip_prefix("claude-3-5-haiku="))
                .map_or(0.0, |n| n.parse().unwrap());
            (id, served)
        })
        .collect();
    // A run serves only a dozen claude requests on a busy machine: an-2 and an-3 may tie.
    assert!(
        claude["an-1"] > claude["an-2"] && claude["an-2"] >= claude["an-3"],
        "{claude:?}"
    );
    // The forecast line: the claude combo's paces (an-1's week: 80 % left, two sevenths of
    // it to run, 2.8) and its next reset, in 20 minutes.
    assert!(
        run.lines.iter().any(|(_, line)| line.starts_with("claude ")
            && line.contains("an-1 2.")
            && (line.contains("next reset in 19m") || line.contains("next reset in 20m"))),
        "{text}"
    );

    // The prompt caches at work: the run's cached share of input tokens, as a percentage
    // of the input tokens counted (the mock caches each key's prompts like a provider).
    let hit = text
        .lines()
        .find_map(|line| line.strip_prefix("CACHE HIT RATE (cached share of input tokens): "))
        .unwrap_or_else(|| panic!("no cache hit rate in\n{text}"));
    let pct: f64 = hit
        .split(" %")
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{hit}"));
    assert!((0.0..=100.0).contains(&pct), "{hit}");
    assert!(
        pct > 0.0,
        "repeated prompts on one key read from its cache: {hit}"
    );
    assert!(hit.contains(" input tokens)"), "{hit}");

    // The journal directory printed at the end exists (and is kept).
    let journal = kept_journal(&text);
    // And so does the incident picture.
    let svg = text
        .lines()
        .find_map(|line| line.strip_prefix("incident SVG:"))
        .unwrap_or_else(|| panic!("no SVG path in\n{text}"));
    let svg = std::fs::read_to_string(svg.trim()).unwrap();
    assert!(svg.contains("<svg") && svg.contains("oa-1"), "{svg}");
    let _ = std::fs::remove_dir_all(journal.parent().unwrap());
}

#[test]
fn demo_on_a_busy_port_exits_1_naming_the_way_out() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = busy.local_addr().unwrap().to_string();
    let run = run_demo(
        &["--seconds", "2", "--listen", &listen],
        Duration::from_secs(10),
        None,
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains(&listen), "{}", run.stderr);
    assert!(
        run.stderr.contains("--listen 127.0.0.1:0"),
        "{}",
        run.stderr
    );
}

#[test]
fn demo_ctrl_c_stops_early_with_the_summary_and_exits_0() {
    let listen = format!("127.0.0.1:{}", free_port());
    let run = run_demo(
        &["--seconds", "120", "--listen", &listen],
        Duration::from_secs(30),
        Some(Duration::from_secs(2)),
    );
    let text = run.text();
    assert_eq!(
        run.code,
        Some(0),
        "stdout:\n{text}\nstderr:\n{}",
        run.stderr
    );
    let (last_at, _) = run.lines.last().expect("no output at all");
    assert!(*last_at < Duration::from_secs(30), "stopped at {last_at:?}");
    assert!(
        text.contains("SUMMARY (quotaroute replay --summary)"),
        "{text}"
    );
    let journal = kept_journal(&text);
    let _ = std::fs::remove_dir_all(journal.parent().unwrap());
}
