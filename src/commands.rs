//! What each command does, returning its exit code (0 ok, 1 failure, 2 usage). Output to the
//! terminal is here and in the demo; libraries below only return values.

use std::path::Path;

use crate::config;
use crate::node::{NodeOptions, RunningNode};

/// ractor's own level unless `RUST_LOG` names ractor: its actors' message loops run inside an
/// `info` span (`Actor`) that is entered and left at every message, a few times per request,
/// and no ractor event below `warn` is one an operator reads.
const RACTOR_LEVEL: &str = "ractor=warn";

/// JSON logs on stderr; `RUST_LOG` filters (default `info`), with [`RACTOR_LEVEL`].
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let asked = std::env::var("RUST_LOG").unwrap_or_default();
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(with_ractor_level(filter, &asked))
        .with_writer(std::io::stderr)
        .with_current_span(false)
        .try_init();
}

/// `filter` with ractor at [`RACTOR_LEVEL`], unless `RUST_LOG` (`asked`) names ractor.
fn with_ractor_level(
    filter: tracing_subscriber::EnvFilter,
    asked: &str,
) -> tracing_subscriber::EnvFilter {
    if asked.contains("ractor") {
        return filter;
    }
    match RACTOR_LEVEL.parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// `quotaroute serve --config PATH`.
pub async fn serve(path: &Path) -> u8 {
    if !path.exists() {
        crate::cli_output::err_line(&format!(
            "quotaroute: no config at {}. Try `quotaroute demo` to see it work without keys, or \
             `quotaroute init {}` to write a starter config.",
            path.display(),
            path.display()
        ));
        return 2;
    }
    init_logging();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => {
            crate::cli_output::err_line(&format!(
                "quotaroute: cannot read {}: {error}",
                path.display()
            ));
            return 1;
        }
    };
    let config = match config::load(path) {
        Ok(config) => config,
        Err(errors) => {
            crate::cli_output::err_line(&format!("{errors}"));
            return 1;
        }
    };
    let node =
        match RunningNode::start(config, NodeOptions::from_file(path.to_path_buf(), text)).await {
            Ok(node) => node,
            Err(error) => {
                crate::cli_output::err_line(&format!("quotaroute: {error}"));
                return 1;
            }
        };
    tracing::info!(addr = %node.addr, "quotaroute serving");
    let reason = wait_for_stop(&node).await;
    tracing::info!(reason = %reason, "quotaroute stopping");
    match node.stop(&reason).await {
        Ok(()) => {
            tracing::info!(reason = %reason, "quotaroute stopped");
            0
        }
        Err(error) => {
            crate::cli_output::err_line(&format!("quotaroute: {error}"));
            1
        }
    }
}

/// Waits for SIGTERM or SIGINT, reloading the config on each SIGHUP meanwhile.
#[cfg(unix)]
async fn wait_for_stop(node: &RunningNode) -> String {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        let _ = tokio::signal::ctrl_c().await;
        return "SIGINT".to_string();
    };
    loop {
        tokio::select! {
            _ = term.recv() => return "SIGTERM".to_string(),
            _ = int.recv() => return "SIGINT".to_string(),
            _ = hup.recv() => match crate::node::reload::reload(&node.app).await {
                Ok(_) => tracing::info!("SIGHUP: config reloaded"),
                Err(errors) => tracing::error!(%errors, "SIGHUP: config not reloaded"),
            },
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_stop(_node: &RunningNode) -> String {
    let _ = tokio::signal::ctrl_c().await;
    "SIGINT".to_string()
}

/// `quotaroute init [PATH]`.
pub fn init(path: &Path, force: bool) -> u8 {
    if path.exists() && !force {
        crate::cli_output::err_line(&format!(
            "quotaroute: {} exists; pass --force to overwrite it",
            path.display()
        ));
        return 1;
    }
    match std::fs::write(path, config::STARTER_CONFIG) {
        Ok(()) => {
            crate::cli_output::out_line(&format!(
                "wrote {}: set your keys' environment variables, then `quotaroute check --config {}` and `quotaroute serve --config {}`",
                path.display(),
                path.display(),
                path.display()
            ));
            0
        }
        Err(error) => {
            crate::cli_output::err_line(&format!(
                "quotaroute: cannot write {}: {error}",
                path.display()
            ));
            1
        }
    }
}

/// `quotaroute check --config PATH`.
pub fn check(path: &Path) -> u8 {
    match config::load(path) {
        Ok(config) => {
            crate::cli_output::out(&config.summary());
            crate::cli_output::out_line(&format!("{}: ok", path.display()));
            0
        }
        Err(errors) => {
            crate::cli_output::err_line(&format!("{errors}"));
            crate::cli_output::err_line(&format!(
                "{} error(s) in {}",
                errors.errors.len(),
                path.display()
            ));
            1
        }
    }
}

/// `quotaroute demo` (see `demo`).
#[cfg(feature = "demo")]
pub async fn demo(listen: std::net::SocketAddr, seconds: u64) -> u8 {
    crate::demo::run(listen, seconds).await
}

/// `quotaroute replay …`.
pub fn replay(args: &crate::replay::ReplayArgs) -> u8 {
    use quotaroute_actors::Clock;
    let now_ms = quotaroute_actors::SystemClock.now_ms();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    crate::replay::run(args, &mut stdout.lock(), &mut stderr.lock(), now_ms)
}

/// `quotaroute journal verify PATH [--json]`.
pub fn journal_verify(path: &Path, json: bool) -> u8 {
    use quotaroute_actors::Clock;
    let now_ms = quotaroute_actors::SystemClock.now_ms();
    match crate::journal_verify::verify(path, now_ms) {
        Ok(report) => {
            if json {
                match serde_json::to_string(&report) {
                    Ok(text) => println!("{text}"),
                    Err(error) => {
                        eprintln!("quotaroute: {error}");
                        return 1;
                    }
                }
            } else {
                print!("{}", crate::journal_verify::render_text(&report));
            }
            report.exit_code()
        }
        Err(error) => {
            eprintln!("quotaroute: {error}");
            1
        }
    }
}

/// `quotaroute mock-upstream --listen ADDR` (hidden: tests and benchmarks).
#[cfg(feature = "demo")]
pub async fn mock_upstream(listen: std::net::SocketAddr) -> u8 {
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(error) => {
            crate::cli_output::err_line(&format!("quotaroute: cannot listen on {listen}: {error}"));
            return 1;
        }
    };
    crate::cli_output::err_line(&format!("mock upstream on {listen}"));
    quotaroute_mock::serve(listener, quotaroute_mock::MockUpstream::new()).await;
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    fn ractor_span_enabled(asked: &str) -> (bool, bool) {
        let filter = with_ractor_level(tracing_subscriber::EnvFilter::new(asked), asked);
        let subscriber = tracing_subscriber::registry().with(filter);
        tracing::subscriber::with_default(subscriber, || {
            let actor = tracing::info_span!(target: "ractor::actor", "Actor");
            let ours = tracing::info_span!(target: "quotaroute::node", "ours");
            (!actor.is_disabled(), !ours.is_disabled())
        })
    }

    #[test]
    fn ractor_spans_are_off_unless_rust_log_names_ractor() {
        assert_eq!(ractor_span_enabled("info"), (false, true));
        assert_eq!(ractor_span_enabled("debug"), (false, true));
        assert_eq!(ractor_span_enabled("info,ractor=info"), (true, true));
    }
}
