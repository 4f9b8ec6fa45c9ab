//! Claude Code typed into in tmux (a real interactive session, not `-p`): its binary, a tmux
//! server of the test's own, a HOME where Claude Code starts straight at its prompt, and one
//! session that types prompts and waits for each answer in the pane.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::clients::{client_home, clients_dir, mock_text};
use super::CLIENT_KEY;

/// Claude Code's native binary (see `node_clients.rs`).
pub fn claude_binary() -> Option<PathBuf> {
    let root = clients_dir().join("node_modules/@anthropic-ai");
    let platform = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => ["linux-x64", "linux-x64-musl"],
        ("linux", "aarch64") => ["linux-arm64", "linux-arm64-musl"],
        _ => return None,
    };
    platform
        .iter()
        .map(|p| root.join(format!("claude-code-{p}/claude")))
        .find(|path| path.is_file())
}

pub fn tmux() -> Option<PathBuf> {
    ["/usr/bin/tmux", "/usr/local/bin/tmux", "/bin/tmux"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// A tmux server of its own (`-L`); [`TmuxGuard`] kills it with everything it runs.
#[derive(Clone)]
pub struct Tmux {
    binary: PathBuf,
    socket: String,
}

impl Tmux {
    pub fn new(binary: PathBuf, name: &str) -> Tmux {
        Tmux {
            binary,
            socket: format!("qr-{name}-{}", std::process::id()),
        }
    }

    pub fn run(&self, args: &[&str]) -> String {
        let command = || {
            std::process::Command::new(&self.binary)
                .arg("-L")
                .arg(&self.socket)
                .args(args)
                .output()
                .unwrap()
        };
        let mut out = command();
        // Killing a server's last session makes it exit a moment later; a command sent in that
        // moment reaches the dying server ("server exited unexpectedly"). Tried again, it
        // starts a new one.
        for _ in 0..5 {
            if out.status.success()
                || !String::from_utf8_lossy(&out.stderr).contains("server exited unexpectedly")
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
            out = command();
        }
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn pane(&self, session: &str) -> String {
        self.run(&["capture-pane", "-p", "-J", "-t", session, "-S", "-200"])
    }

    /// Waits until the pane satisfies `done`, up to `timeout`; the pane either way.
    pub fn wait_for(
        &self,
        session: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let started = Instant::now();
        loop {
            let pane = self.pane(session);
            if done(&pane) {
                return Ok(pane);
            }
            if started.elapsed() > timeout {
                return Err(pane);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

pub struct TmuxGuard(pub Tmux);

impl Drop for TmuxGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new(&self.0.binary)
            .arg("-L")
            .arg(&self.0.socket)
            .arg("kill-server")
            .output();
    }
}

/// Claude Code's output limit for the test: the mock answers that many chunks.
pub const MAX_OUTPUT_TOKENS: usize = 6;

/// A HOME where Claude Code starts straight at its prompt: onboarding done, the API key
/// approved, the working directory trusted.
pub fn claude_home(home: &Path) -> PathBuf {
    let work = home.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    let tail: String = {
        let chars: Vec<char> = CLIENT_KEY.chars().collect();
        chars[chars.len().saturating_sub(20)..].iter().collect()
    };
    let state = serde_json::json!({
        "hasCompletedOnboarding": true,
        "lastOnboardingVersion": "2.1.197",
        "theme": "dark",
        "customApiKeyResponses": {"approved": [tail], "rejected": []},
        "projects": {work.display().to_string(): {
            "hasTrustDialogAccepted": true,
            "hasCompletedProjectOnboarding": true,
        }},
    });
    std::fs::write(home.join(".claude.json"), state.to_string()).unwrap();
    std::fs::write(home.join(".claude/settings.json"), r#"{"theme":"dark"}"#).unwrap();
    work
}

/// Where an interactive session points Claude Code.
pub struct ClaudeSession<'a> {
    /// `ANTHROPIC_BASE_URL`: the node, or a proxy in front of it.
    pub base: &'a str,
    /// The tmux session's name.
    pub name: &'a str,
    /// `ANTHROPIC_MODEL`: the combo the conversation uses.
    pub model: &'a str,
    /// Claude Code's small-fast model (its side requests).
    pub side_model: &'a str,
}

/// Starts an interactive Claude Code in tmux session `session.name`, types `prompts` one by
/// one and waits for each answer in the pane. Returns the final pane.
pub fn claude_session(
    tmux: &Tmux,
    binary: &Path,
    session: &ClaudeSession<'_>,
    prompts: &[&str],
) -> String {
    let (base, name) = (session.base, session.name);
    let home = client_home("qr-claude-tmux-");
    let work = claude_home(home.path());
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let env = [
        format!("PATH={path}"),
        format!("HOME={}", home.path().display()),
        "TERM=xterm-256color".into(),
        format!("ANTHROPIC_BASE_URL={base}"),
        format!("ANTHROPIC_API_KEY={CLIENT_KEY}"),
        format!("ANTHROPIC_MODEL={}", session.model),
        format!("ANTHROPIC_SMALL_FAST_MODEL={}", session.side_model),
        format!("ANTHROPIC_DEFAULT_HAIKU_MODEL={}", session.side_model),
        format!("CLAUDE_CODE_MAX_OUTPUT_TOKENS={MAX_OUTPUT_TOKENS}"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1".into(),
        "DISABLE_TELEMETRY=1".into(),
        "DISABLE_ERROR_REPORTING=1".into(),
        "DISABLE_AUTOUPDATER=1".into(),
        "CLAUDE_CODE_MAX_RETRIES=0".into(),
    ];
    let mut args: Vec<String> = [
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        "200",
        "-y",
        "50",
        "-c",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(work.display().to_string());
    args.push("env".into());
    args.push("-i".into());
    args.extend(env);
    args.push(binary.display().to_string());
    tmux.run(&args.iter().map(String::as_str).collect::<Vec<_>>());

    let ready = tmux.wait_for(name, Duration::from_secs(30), |pane| {
        pane.contains("for shortcuts")
    });
    let pane =
        ready.unwrap_or_else(|pane| panic!("{name}: Claude Code never showed its prompt:\n{pane}"));
    assert!(pane.contains("Claude Code v"), "{name}:\n{pane}");
    let reply = mock_text(MAX_OUTPUT_TOKENS);
    let mut last = String::new();
    for (i, prompt) in prompts.iter().enumerate() {
        tmux.run(&["send-keys", "-t", name, "-l", prompt]);
        tmux.wait_for(name, Duration::from_secs(10), |pane| pane.contains(prompt))
            .unwrap_or_else(|pane| panic!("{name}: `{prompt}` not typed:\n{pane}"));
        tmux.run(&["send-keys", "-t", name, "Enter"]);
        // The answer is the mock's text after the prompt, once per turn so far.
        last = tmux
            .wait_for(name, Duration::from_secs(30), |pane| {
                pane.matches(reply.as_str()).count() > i && !pane.contains("esc to interrupt")
            })
            .unwrap_or_else(|pane| panic!("{name}: no answer to `{prompt}`:\n{pane}"));
        let after = &last[last.find(prompt).unwrap()..];
        assert!(
            after.contains(reply.as_str()),
            "{name}: `{prompt}`:\n{last}"
        );
    }
    last
}

/// Two turns ("say pong", "say pong again") of an interactive Claude Code on combo `team` at
/// `base`, in tmux session `name` (closed afterwards); the final pane, where both answers must
/// be (`mock_text(MAX_OUTPUT_TOKENS)` twice).
pub async fn two_pongs_on_team(
    tmux_binary: PathBuf,
    binary: PathBuf,
    base: String,
    name: &'static str,
) -> String {
    let tmux = Tmux::new(tmux_binary, &format!("claude-{name}"));
    let _guard = TmuxGuard(tmux.clone());
    let pane = tokio::task::spawn_blocking(move || {
        let session = ClaudeSession {
            base: &base,
            name,
            model: "team",
            side_model: "team",
        };
        claude_session(&tmux, &binary, &session, &["say pong", "say pong again"])
    })
    .await
    .unwrap_or_default();
    assert!(
        pane.matches(mock_text(MAX_OUTPUT_TOKENS).as_str()).count() >= 2,
        "{pane}"
    );
    pane
}
