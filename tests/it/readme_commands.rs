//! The README's commands work as written: `init`, `check`, `serve` without a config, `replay`
//! on a journal, `--help` on every command, and the exit codes of the contract.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn quotaroute() -> Command {
    Command::new(env!("CARGO_BIN_EXE_quotaroute"))
}

#[test]
fn init_then_check_the_starter_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quotaroute.toml");
    let out = quotaroute().arg("init").arg(&path).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A second init refuses to overwrite.
    let again = quotaroute().arg("init").arg(&path).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    // check names the missing key variables until they are set.
    let missing = quotaroute()
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let vars: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("api_key_env"))
        .filter_map(|rest| rest.split('"').nth(1))
        .map(str::to_string)
        .collect();
    assert!(!vars.is_empty());
    if missing.status.success() {
        panic!("check must fail while {vars:?} are unset");
    }
    assert_eq!(missing.status.code(), Some(1));
    let mut check = quotaroute();
    check.args(["check", "--config"]).arg(&path);
    for var in &vars {
        check.env(var, "sk-test-value-0123456789");
    }
    let out = check.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("providers"));
    assert!(
        !stdout.contains("sk-test-value"),
        "check never prints a key"
    );
}

#[test]
fn serve_without_a_config_points_at_demo_and_init() {
    let dir = tempfile::tempdir().unwrap();
    let out = quotaroute()
        .args(["serve", "--config"])
        .arg(dir.path().join("absent.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("quotaroute demo") && stderr.contains("quotaroute init"));
}

#[test]
fn check_reports_every_error_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[server]\nlisten = \"nope\"\nbogus = 1\n[[combos]]\nname = \"a/b\"\ntargets = [{ connection = \"ghost\", model = \"m\", weight = 0 }]\n",
    )
    .unwrap();
    let out = quotaroute()
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().filter(|l| l.contains("bad.toml")).count() >= 3,
        "{stderr}"
    );
}

#[test]
fn replay_commands_of_the_readme_run_on_the_incident_fixture() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/incident/journal.ndjson"
    );
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("incident.svg");
    for args in [
        vec!["--summary"],
        vec![
            "--connection",
            "ok2",
            "--kind",
            "request_failed,model_locked",
        ],
        vec!["--state-at", "2026-11-29T14:09:30Z"],
        vec!["--format", "json", "--kind", "breaker_transition"],
    ] {
        let out = quotaroute()
            .args(["replay", "--journal", fixture])
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stdout.is_empty(), "{args:?} printed nothing");
    }
    let out = quotaroute()
        .args(["replay", "--journal", fixture, "--svg"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg") || svg.exists());
}

#[test]
fn every_command_has_help_and_usage_errors_exit_2() {
    for command in ["serve", "demo", "init", "check", "replay"] {
        let out = quotaroute().args([command, "--help"]).output().unwrap();
        assert!(out.status.success(), "{command} --help");
    }
    let out = quotaroute().arg("no-such-command").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// README's "use your own keys" exports every key variable the starter config names.
#[test]
fn readme_exports_every_key_variable_of_the_starter() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let starter = std::fs::read_to_string(root.join("src/config/starter.toml")).unwrap();
    let export = readme
        .lines()
        .find(|line| line.starts_with("export "))
        .expect("README exports the key variables");
    let vars: Vec<&str> = starter
        .lines()
        .filter_map(|line| line.trim().strip_prefix("api_key_env"))
        .filter_map(|rest| rest.split('"').nth(1))
        .collect();
    assert!(vars.len() >= 3, "{vars:?}");
    for var in vars {
        assert!(
            export.contains(&format!("{var}=")),
            "README does not export {var}: {export}"
        );
    }
}

/// One fenced block of README: its language and its text.
struct Block {
    language: String,
    text: String,
}

fn readme_blocks() -> Vec<Block> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for line in readme.lines() {
        match (line.strip_prefix("```"), open.take()) {
            (Some(language), None) => {
                open = Some(Block {
                    language: language.trim().to_owned(),
                    text: String::new(),
                })
            }
            (Some(_), Some(block)) => blocks.push(block),
            (None, Some(mut block)) => {
                block.text.push_str(line);
                block.text.push('\n');
                open = Some(block);
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "README has an unclosed code block");
    blocks
}

/// A shell block's commands: continuation lines joined, comment and blank lines left out.
fn shell_commands(text: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        if pending.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(start) => pending.push_str(start),
            None => {
                pending.push_str(line);
                commands.push(std::mem::take(&mut pending));
            }
        }
    }
    commands
}

/// A command's words before its trailing `# comment` (README's `cargo run` and `export` lines
/// hold no quoted `#`).
fn words(command: &str) -> Vec<String> {
    let code = command.split(" #").next().unwrap_or(command);
    code.split_whitespace().map(str::to_owned).collect()
}

/// `serve` in the background, stopped (its process group killed) when the test ends.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where README's commands run: a directory of their own, the variables README exports, and
/// the clients' programs on `PATH` (`tests/clients`' `node_modules/.bin`).
struct Shell {
    work: tempfile::TempDir,
    home: tempfile::TempDir,
    env: Vec<(String, String)>,
    mock_base: String,
    served: Option<Served>,
}

const NODE: &str = "http://127.0.0.1:4100";

impl Shell {
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = crate::support::clients::clean_command(program);
        let path = std::env::var("PATH").unwrap_or_default();
        command
            .current_dir(self.work.path())
            .env("PATH", format!("{}:{path}", self.bin().display()))
            .env("HOME", self.home.path())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    /// The clients' programs as a person has them installed: `codex` (npm's launcher) and
    /// `claude` (the native binary its platform package holds; npm's own `claude` is set up by
    /// the postinstall `tests/clients` skips).
    fn bin(&self) -> PathBuf {
        let bin = self.home.path().join("bin");
        if !bin.is_dir() {
            std::fs::create_dir_all(&bin).unwrap();
            let modules = crate::support::clients::clients_dir().join("node_modules");
            let _ = std::os::unix::fs::symlink(
                modules.join("@openai/codex/bin/codex.js"),
                bin.join("codex"),
            );
            if let Some(claude) = claude_binary() {
                let _ = std::os::unix::fs::symlink(claude, bin.join("claude"));
            }
        }
        bin
    }

    /// `sh -c` the line exactly as README prints it.
    fn shell(&self, line: &str) -> crate::support::clients::ClientRun {
        let mut command = self.command("sh");
        command.args(["-c", line]);
        crate::support::clients::run_bounded(command, Duration::from_secs(90))
    }

    /// `cargo run --release -- ARGS`: the same program, built by this test's cargo.
    fn quotaroute(&mut self, line: &str, args: &[String]) {
        if args.first().map(String::as_str) == Some("demo") {
            return self.demo(line, args);
        }
        let mut command = self.command(env!("CARGO_BIN_EXE_quotaroute"));
        command.args(args);
        if args.first().map(String::as_str) == Some("serve") {
            command
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            self.served = Some(Served(command.spawn().unwrap()));
            wait_healthy();
            return;
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "`{line}`: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if args.first().map(String::as_str) == Some("init") {
            // The edit README asks for: the providers are ours (the mock), the rest as written.
            let path = self.work.path().join(&args[1]);
            let text = std::fs::read_to_string(&path).unwrap();
            let edited = text
                .replace(
                    "https://api.openai.com/v1",
                    &format!("{}/v1", self.mock_base),
                )
                .replace(
                    "https://api.anthropic.com/v1",
                    &format!("{}/v1", self.mock_base),
                );
            assert_ne!(edited, text, "init names the providers' URLs");
            std::fs::write(&path, edited).unwrap();
        }
    }

    /// `demo` as printed, stopped with Ctrl-C (SIGINT) after a few seconds like a person would.
    fn demo(&self, line: &str, args: &[String]) {
        let child = self
            .command(env!("CARGO_BIN_EXE_quotaroute"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(3));
        let sent = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "`{line}`: {stdout}");
        assert!(stdout.contains("SUMMARY"), "`{line}`: {stdout}");
    }
}

/// Claude Code's native binary in its platform package, when `tests/clients` is installed.
fn claude_binary() -> Option<PathBuf> {
    let root = crate::support::clients::clients_dir().join("node_modules/@anthropic-ai");
    [
        "linux-x64",
        "linux-x64-musl",
        "linux-arm64",
        "darwin-arm64",
        "darwin-x64",
    ]
    .iter()
    .map(|platform| root.join(format!("claude-code-{platform}/claude")))
    .find(|path| path.is_file())
}

fn wait_healthy() {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let probe = Command::new("curl")
            .args(["-sf", &format!("{NODE}/healthz")])
            .output()
            .unwrap();
        if probe.status.success() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "serve did not become ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the mock answers, as the clients print it.
const MOCK_REPLY: &str = "mock";

/// Runs one shell command of README; panics on any command it does not know how to run.
fn run_shell_command(shell: &mut Shell, line: &str) {
    let args = words(line);
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["cargo", "test", "--workspace"] => {
            // The suite itself: what `.ci/run` runs, exactly (this test is part of it).
            let ci =
                std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/run")).unwrap();
            let last = ci
                .lines()
                .rfind(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .unwrap();
            assert_eq!(
                last.trim(),
                "cargo test --workspace",
                ".ci/run runs README's"
            );
        }
        ["cargo", "run", "--release", "--", rest @ ..] => {
            let rest: Vec<String> = rest.iter().map(|s| (*s).to_owned()).collect();
            shell.quotaroute(line, &rest);
        }
        ["export", assignments @ ..] => {
            for assignment in assignments {
                let (name, value) = assignment.split_once('=').unwrap();
                shell.env.push((name.to_owned(), value.to_owned()));
            }
        }
        ["curl", ..] => {
            let run = shell.shell(line);
            assert!(run.success(), "`{line}`: {}", run.describe());
            assert!(run.stdout.starts_with("HTTP/1.1 200"), "{}", run.describe());
            assert!(run.stdout.contains(MOCK_REPLY), "{}", run.describe());
        }
        _ if args.iter().any(|word| word == "claude") => {
            let Some(_) = claude_binary() else {
                return crate::support::clients::not_installed(
                    "Claude Code",
                    "npm ci --ignore-scripts --prefix tests/clients",
                );
            };
            let mut quiet = shell.shell(&format!(
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 {line}"
            ));
            quiet.stdout = quiet.stdout.replace('\n', " ");
            assert!(quiet.success(), "`{line}`: {}", quiet.describe());
            assert!(quiet.stdout.contains(MOCK_REPLY), "{}", quiet.describe());
            eprintln!(
                "README's Claude Code line printed: {}",
                quiet.stdout.trim().chars().take(120).collect::<String>()
            );
        }
        _ if line.contains("codex exec") => {
            if crate::support::clients::codex_launcher().is_none() {
                return crate::support::clients::not_installed(
                    "Codex CLI",
                    "npm ci --ignore-scripts --prefix tests/clients",
                );
            }
            // Codex's own settings for a machine without its network (not README's business),
            // and a project directory it trusts (a git repository, as a person's project is).
            let codex_home = shell.home.path().join(".codex");
            std::fs::create_dir_all(&codex_home).unwrap();
            std::fs::write(
                codex_home.join("config.toml"),
                "check_for_update_on_startup = false\n[analytics]\nenabled = false\n[features]\nplugins = false\nremote_plugin = false\napps = false\n",
            )
            .unwrap();
            let git = Command::new("git")
                .args(["init", "-q"])
                .current_dir(shell.work.path())
                .status()
                .unwrap();
            assert!(git.success());
            let run = shell.shell(line);
            assert!(run.success(), "`{line}`: {}", run.describe());
            assert!(run.stdout.contains(MOCK_REPLY), "{}", run.describe());
            eprintln!("README's Codex line printed: {}", run.stdout.trim());
        }
        _ => panic!("README command not run by tests/it/readme_commands.rs: `{line}`"),
    }
}

/// Every command and client snippet of README, as printed, in order: the two commands, `init`
/// (whose providers are then pointed at the mock, the one edit README asks for), the exports,
/// `check`, `serve`, and curl, the Python SDK, Claude Code and Codex against it with the key
/// `init` writes. A block or command this test does not know fails it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_of_the_readme_runs_as_printed() {
    let (mock_base, _mock) = crate::support::start_mock().await;
    let blocks = readme_blocks();
    tokio::task::spawn_blocking(move || {
        let mut shell = Shell {
            work: tempfile::tempdir().unwrap(),
            home: crate::support::clients::client_home("qr-readme-"),
            env: Vec::new(),
            mock_base,
            served: None,
        };
        let mut ran = 0;
        for block in &blocks {
            match block.language.as_str() {
                "sh" => {
                    for line in shell_commands(&block.text) {
                        run_shell_command(&mut shell, &line);
                        ran += 1;
                    }
                }
                "python" => {
                    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join(".venv-sdk/bin/python");
                    if !python.exists() {
                        crate::support::clients::not_installed(
                            "the Python SDK venv",
                            ".ci/run creates .venv-sdk",
                        );
                        continue;
                    }
                    let mut command = shell.command(&python);
                    command.args(["-c", &block.text]);
                    let run =
                        crate::support::clients::run_bounded(command, Duration::from_secs(60));
                    assert!(run.success(), "README's Python: {}", run.describe());
                    assert!(run.stdout.contains(MOCK_REPLY), "{}", run.describe());
                    ran += 1;
                }
                other => panic!("README has a `{other}` block this test does not run"),
            }
        }
        eprintln!("README: {ran} commands and snippets ran as printed");
        assert!(ran >= 10, "only {ran} of README's commands ran");
        assert!(shell.served.is_some(), "README serves a node");
    })
    .await
    .unwrap();
}
