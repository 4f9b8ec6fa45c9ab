//! The `quotaroute` binary: parses the command line and runs one command.
//! Exit codes: 0 ok, 1 runtime or validation failure, 2 usage error.

use std::process::ExitCode;

use clap::Parser;

use quotaroute::cli::{Cli, Command, JournalCommand};
use quotaroute::commands;

// mimalloc's per-thread free lists: the request path allocates and frees many small buffers
// (headers, JSON, events) on several cores, where glibc malloc took ~17% of a request's
// instructions (bench/profile.sh).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (libmimalloc-sys names no constant for it; the value is
/// its place in `mi_option_e`, checked by the test below against the option's default).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed pages go back to the OS at once instead of after mimalloc's 1 s default: under 64
/// connections the node's peak RSS falls from ~54 MB to ~39 MB, for ~1.5 more minor page faults
/// per request (docs/measurements.md, "Memory"). An operator's `MIMALLOC_PURGE_DELAY` still wins.
#[expect(
    unsafe_code,
    reason = "the workspace's one unsafe call: an FFI setter, audited below"
)]
fn return_freed_pages_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: `mi_option_set` stores an integer in mimalloc's option table (atomically);
        // it takes no pointer and is valid at any time.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}

fn main() -> ExitCode {
    return_freed_pages_at_once();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            quotaroute::cli_output::err_line(&format!(
                "quotaroute: cannot start the runtime: {error}"
            ));
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Serve { config } => commands::serve(&config).await,
            #[cfg(feature = "demo")]
            Command::Demo { listen, seconds } => commands::demo(listen, seconds).await,
            Command::Init { path, force } => commands::init(&path, force),
            Command::Check { config } => commands::check(&config),
            Command::Replay(args) => commands::replay(&args),
            Command::Journal {
                command: JournalCommand::Verify { path, json },
            } => commands::journal_verify(&path, json),
            #[cfg(feature = "demo")]
            Command::MockUpstream { listen } => commands::mock_upstream(listen).await,
        }
    });
    ExitCode::from(code)
}

#[cfg(test)]
#[expect(unsafe_code, reason = "reads the option back through the same FFI")]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // 1000 ms is mimalloc v3's default purge delay and no other option's default.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads and writes an integer in mimalloc's option table.
        unsafe {
            assert_eq!(libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY), 1000);
        }
        return_freed_pages_at_once();
        // SAFETY: as above.
        unsafe {
            assert_eq!(libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY), 0);
        }
    }
}
