//! The command line (contract "Binary and commands"): parsing only; each command's work lives
//! in its own module.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// quotaroute — an LLM API router for pooled keys and accounts.
#[derive(Debug, Parser)]
#[command(name = "quotaroute", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the node.
    Serve {
        /// The config file.
        #[arg(long, default_value = "quotaroute.toml")]
        config: PathBuf,
    },
    /// Run a self-contained demo: simulated upstream accounts, live traffic, a live table.
    #[cfg(feature = "demo")]
    Demo {
        /// Where the demo node listens.
        #[arg(long, default_value = "127.0.0.1:4100")]
        listen: std::net::SocketAddr,
        /// How long to drive traffic.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
    },
    /// Write a commented starter config.
    Init {
        /// Where to write it.
        #[arg(default_value = "quotaroute.toml")]
        path: PathBuf,
        /// Overwrite an existing file.
        #[arg(long)]
        force: bool,
    },
    /// Validate a config; prints providers, connections and combos, or every error found.
    Check {
        #[arg(long)]
        config: PathBuf,
    },
    /// Read a journal offline (or a live node's with --from): timeline, summary, state at a
    /// time, an SVG of the incident, or what another config would have done.
    Replay(Box<crate::replay::ReplayArgs>),
    /// Inspect a journal without changing it.
    Journal {
        #[command(subcommand)]
        command: JournalCommand,
    },
    /// Run the mock upstream used by tests and benchmarks.
    #[cfg(feature = "demo")]
    #[command(hide = true)]
    MockUpstream {
        #[arg(long, default_value = "127.0.0.1:4200")]
        listen: std::net::SocketAddr,
    },
}

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Read every record and snapshot: versions, counts, damaged records, anything a newer
    /// build wrote, and the state a node would rebuild. Changes nothing; exits 1 when anything
    /// is unreadable by this build.
    Verify {
        /// The journal directory (`journal.path`).
        path: PathBuf,
        /// One JSON object, for scripts.
        #[arg(long)]
        json: bool,
    },
}
