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

fn main() -> ExitCode {
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
            Command::Demo { listen, seconds } => commands::demo(listen, seconds).await,
            Command::Init { path, force } => commands::init(&path, force),
            Command::Check { config } => commands::check(&config),
            Command::Replay(args) => commands::replay(&args),
            Command::Journal {
                command: JournalCommand::Verify { path, json },
            } => commands::journal_verify(&path, json),
            Command::MockUpstream { listen } => commands::mock_upstream(listen).await,
        }
    });
    ExitCode::from(code)
}
