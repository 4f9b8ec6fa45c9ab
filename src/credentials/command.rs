//! `api_key_command`: the key is what an argv prints on stdout, trimmed. No shell: the first
//! element is the program, the rest its arguments. stdin is closed; stderr is read and thrown
//! away (only its length reaches an error: it may hold the key or other secrets). A command
//! still running after its timeout is killed (`kill_on_drop`, also when the node stops).
//!
//! Owns one run; when to run it is `watch`'s and the single flight is `credential`'s.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::config::Secret;
use crate::credentials::error::{check_value, CredentialError};

/// Largest stdout read from a key command.
const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// Runs `argv` once and returns its trimmed stdout as the key.
pub async fn run(argv: &[String], timeout: Duration) -> Result<Secret, CredentialError> {
    let program = argv.first().cloned().unwrap_or_default();
    let mut child = Command::new(&program)
        .args(argv.iter().skip(1))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| CredentialError::CommandSpawn {
            program: program.clone(),
            reason: error.to_string(),
        })?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let finished = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(pipe) = stdout.as_mut() {
                let _ = pipe
                    .take(MAX_OUTPUT_BYTES as u64 + 1)
                    .read_to_end(&mut out)
                    .await;
            }
        };
        let read_err = async {
            if let Some(pipe) = stderr.as_mut() {
                let _ = pipe.read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (status, out, err.len())
    };
    // On timeout the `?` returns, which drops the child: `kill_on_drop` kills it (and tokio
    // reaps it in the background).
    let (status, out, stderr_bytes) =
        tokio::time::timeout(timeout, finished).await.map_err(|_| {
            CredentialError::CommandTimeout {
                program: program.clone(),
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }
        })?;
    let status = status.map_err(|error| CredentialError::CommandSpawn {
        program: program.clone(),
        reason: error.to_string(),
    })?;
    if !status.success() {
        let status = match status.code() {
            Some(code) => format!("status {code}"),
            None => "a signal".to_owned(),
        };
        return Err(CredentialError::CommandFailed {
            program,
            status,
            stderr_bytes,
        });
    }
    if out.len() > MAX_OUTPUT_BYTES {
        return Err(CredentialError::BadValue {
            what: format!("output of `{program}`"),
            reason: format!("it is larger than {MAX_OUTPUT_BYTES} bytes"),
        });
    }
    let text = String::from_utf8(out).map_err(|_| CredentialError::BadValue {
        what: format!("output of `{program}`"),
        reason: "it is not UTF-8 text".to_owned(),
    })?;
    let key = text.trim();
    if key.is_empty() {
        return Err(CredentialError::CommandPrintedNothing {
            program,
            stderr_bytes,
        });
    }
    check_value(key, &format!("output of `{program}`"))?;
    Ok(Secret::new(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    #[tokio::test]
    async fn stdout_trimmed_is_the_key() {
        let key = run(&sh("printf '  sk-cmd-1\\n'"), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(key.expose(), "sk-cmd-1");
    }

    #[tokio::test]
    async fn argv_is_not_a_shell_line() {
        // One argument with a space and a `;`: echo prints it as is, nothing else runs.
        let argv = vec!["/bin/echo".to_owned(), "a;b c".to_owned()];
        let key = run(&argv, Duration::from_secs(5)).await.unwrap();
        assert_eq!(key.expose(), "a;b c");
    }

    #[tokio::test]
    async fn each_failure_is_named_and_stderr_never_shown() {
        let timeout = Duration::from_secs(5);
        let error = run(&sh("echo sk-secret-on-stderr >&2"), timeout)
            .await
            .unwrap_err();
        assert_eq!(
            error,
            CredentialError::CommandPrintedNothing {
                program: "/bin/sh".into(),
                stderr_bytes: 20
            }
        );
        let error = run(&sh("echo sk-leak >&2; exit 3"), timeout)
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "the key command `/bin/sh` exited with status 3 (stderr: 8 bytes, not shown)"
        );
        let error = run(&["/nonexistent/get-key".to_owned()], timeout)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("cannot start the key command `/nonexistent/get-key`"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_hanging_command_is_killed_at_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
        let started = std::time::Instant::now();
        let error = run(&sh(&script), Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_eq!(
            error,
            CredentialError::CommandTimeout {
                program: "/bin/sh".into(),
                timeout_ms: 300
            }
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        // The process is gone (killed, then reaped by tokio) shortly after.
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let proc_dir = format!("/proc/{}", pid.trim());
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            std::fs::read_to_string(format!("{proc_dir}/stat"))
                .map_or(true, |stat| stat.contains(") Z "))
        });
        assert!(gone, "the command still runs: {proc_dir}");
    }
}
