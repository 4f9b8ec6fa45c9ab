//! Running real client programs (SDK scripts, Claude Code, Codex CLI) against a node: the two
//! upstreams they are tried on (a plain mock and one that compresses like a CDN), the mock's
//! reply text, and a bounded child process (clean environment, null stdin, killed with its
//! whole process group after a timeout, so a hang fails the test instead of hanging CI).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use quotaroute_mock::Compression;

use super::{upstream_key, Harness};

/// How long any one client run may take before it is killed.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// The upstream a client is tried against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upstream {
    /// The mock as it is: identity bodies.
    Plain,
    /// The mock compresses every answer the request allows (`Compression::Auto`), and the
    /// router asks it to (`accept_encoding` on each provider); the router decodes.
    Compressing,
}

impl Upstream {
    pub const BOTH: [Upstream; 2] = [Upstream::Plain, Upstream::Compressing];

    pub fn label(self) -> &'static str {
        match self {
            Upstream::Plain => "plain mock",
            Upstream::Compressing => "compressing mock",
        }
    }

    /// A node on the standard config in front of a mock of this kind.
    pub async fn harness(self) -> Harness {
        match self {
            Upstream::Plain => Harness::start().await,
            Upstream::Compressing => {
                let harness = Harness::start_editing(asks_for_compression).await;
                let config = std::fs::read_to_string(&harness.config_path).unwrap();
                assert_eq!(
                    config.matches("accept_encoding = ").count(),
                    2,
                    "both providers ask for compression:\n{config}"
                );
                harness.mock.set_compression(Compression::Auto);
                harness
            }
        }
    }
}

/// The router asks every provider for compressed answers, as a client behind a CDN would.
pub fn asks_for_compression(text: String) -> String {
    text.replace(
        "base_url = \"",
        "accept_encoding = \"gzip, deflate, br, zstd\"\nbase_url = \"",
    )
}

/// What the mock answers with `chunks` content chunks (its words cycle; 6 by default, else
/// `max_tokens` / `max_output_tokens`).
pub fn mock_text(chunks: usize) -> String {
    quotaroute_mock::reply_text(chunks)
}

/// Which connections the mock saw requests from (by their upstream keys), with counts.
pub fn mock_connections(harness: &Harness) -> Vec<(String, u64)> {
    let stats = harness.mock.stats();
    ["oa-1", "oa-2", "oa-3", "an-1", "an-2", "an-3"]
        .iter()
        .filter_map(|id| {
            let count = stats.per_key.get(&upstream_key(id)).copied().unwrap_or(0);
            (count > 0).then(|| (id.to_string(), count))
        })
        .collect()
}

/// `tests/clients`: the pinned npm packages (`npm ci --ignore-scripts --prefix tests/clients`)
/// and the scripts that drive them.
pub fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// A fresh directory for a client's HOME (Codex warns about its home under /tmp, so
/// /var/tmp when it exists).
pub fn client_home(prefix: &str) -> tempfile::TempDir {
    let parent = Path::new("/var/tmp");
    let builder = tempfile::Builder::new().prefix(prefix).clone();
    if parent.is_dir() {
        builder.tempdir_in(parent).unwrap()
    } else {
        builder.tempdir().unwrap()
    }
}

/// A command with an empty environment except `PATH` (clients need `node`, and Codex runs
/// shell tools); callers add only what the client needs.
pub fn clean_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(program);
    command.env_clear();
    command.env(
        "PATH",
        std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
    );
    command
}

/// One finished (or killed) client run.
#[derive(Debug)]
pub struct ClientRun {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub timed_out: bool,
}

impl ClientRun {
    pub fn success(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|status| status.success())
    }

    /// Everything worth printing when an assertion fails.
    pub fn describe(&self) -> String {
        format!(
            "status {:?}{} after {:.2?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            if self.timed_out {
                " (killed: timeout)"
            } else {
                ""
            },
            self.elapsed,
            truncate(&self.stdout, 4000),
            truncate(&self.stderr, 4000),
        )
    }
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// Runs `command` with stdin null and stdout/stderr captured, in its own process group; after
/// `timeout` the whole group is killed (launchers such as `codex.js` on Node 20 keep a child).
/// Blocking: call it from `spawn_blocking` when a node runs on the test's runtime.
pub fn run_bounded(mut command: Command, timeout: Duration) -> ClientRun {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("could not start {command:?}: {error}"));
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > timeout {
            timed_out = true;
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = started.elapsed();
    ClientRun {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        elapsed,
        timed_out,
    }
}

/// The note-and-return when a client is not installed; in CI (env `CI` set) a failure.
pub fn not_installed(what: &str, how: &str) {
    eprintln!("{what} not installed ({how}): nothing to run");
    assert!(
        std::env::var("CI").is_err(),
        "CI must install {what} ({how})"
    );
}

/// The pinned Codex CLI's launcher, when `tests/clients` is installed.
pub fn codex_launcher() -> Option<PathBuf> {
    let launcher = clients_dir().join("node_modules/@openai/codex/bin/codex.js");
    launcher.is_file().then_some(launcher)
}

/// `codex exec …` (or `codex exec resume --last …`) in `home`, pointed at `base_url` with the
/// test client key, on combo `model`, with updates, analytics, plugins and apps off, reasoning
/// effort low, and `settings` (`-c` values) added; bounded by [`CLIENT_TIMEOUT`].
pub fn codex_exec(
    launcher: &Path,
    (base_url, model): (&str, &str),
    home: &Path,
    resume: bool,
    settings: &[String],
    prompt: &str,
) -> ClientRun {
    let codex_home = home.join("codex");
    let work = home.join("work");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mut command = clean_command("node");
    command
        .arg(launcher)
        .current_dir(&work)
        .env("HOME", home)
        .env("CODEX_HOME", &codex_home)
        .env("CODEX_API_KEY", super::CLIENT_KEY)
        .env("RUST_LOG", "off")
        .arg("exec");
    if resume {
        command.args(["resume", "--last"]);
    }
    command
        .args(["--json", "--skip-git-repo-check", "-m", model])
        .args(["-c", "sandbox_mode=\"danger-full-access\""]);
    let common = [
        format!("openai_base_url=\"{base_url}\""),
        "check_for_update_on_startup=false".to_string(),
        "analytics.enabled=false".to_string(),
        "features.plugins=false".to_string(),
        "features.remote_plugin=false".to_string(),
        "features.apps=false".to_string(),
        "model_reasoning_effort=\"low\"".to_string(),
    ];
    for setting in common.iter().chain(settings) {
        command.args(["-c", setting]);
    }
    command.arg(prompt);
    run_bounded(command, CLIENT_TIMEOUT)
}

/// `claude -p PROMPT --output-format json --allowedTools Bash` for the node at `base`, with
/// `model` (a combo) as its model, in `home` (its HOME and working directory): no telemetry,
/// updates or retries, 8 output tokens.
pub fn claude_tool_turn(
    binary: &Path,
    home: &Path,
    (base, model): (&str, &str),
    prompt: &str,
) -> Command {
    let mut command = clean_command(binary);
    command
        .current_dir(home)
        .env("HOME", home)
        .env("TERM", "dumb")
        .env("ANTHROPIC_BASE_URL", base)
        .env("ANTHROPIC_API_KEY", super::CLIENT_KEY)
        .env("ANTHROPIC_MODEL", model)
        .env("ANTHROPIC_SMALL_FAST_MODEL", model)
        .env("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "8")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .args([
            "-p",
            prompt,
            "--output-format",
            "json",
            "--allowedTools",
            "Bash",
        ]);
    command
}
