//! The README's commands work as written: `init`, `check`, `serve` without a config, `replay`
//! on a journal, `--help` on every command, and the exit codes of the contract.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::process::Command;

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
