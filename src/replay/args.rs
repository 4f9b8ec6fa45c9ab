//! The `replay` command line as a `clap::Args` struct: flags exactly as the contract names them.
//! Owns parsing only; what each flag does lives in the file named after it.

use std::path::PathBuf;

/// `quotaroute replay --journal DIR [filters] [--format text|json] [--summary]
/// [--state-at TIME] [--svg FILE] [--what-if CONFIG]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ReplayArgs {
    /// Journal directory (sled) to read offline, or an NDJSON export of one.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "from",
        conflicts_with = "from"
    )]
    pub journal: Option<PathBuf>,
    /// Read a running node's journal through `GET {URL}/admin/journal` (admin key from
    /// `QUOTAROUTE_ADMIN_KEY`).
    #[arg(long, value_name = "URL")]
    pub from: Option<String>,
    /// Only events at or after TIME (RFC 3339, a UTC time of day like `14:00`, or relative like
    /// `30m`, `2h`, `1d` ago).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only events before TIME (RFC 3339, a UTC time of day like `14:00`, or relative like `30m`
    /// ago).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only events about this provider.
    #[arg(long)]
    pub provider: Option<String>,
    /// Only events about this connection.
    #[arg(long)]
    pub connection: Option<String>,
    /// Only events about this upstream model (or requested model).
    #[arg(long)]
    pub model: Option<String>,
    /// Only events about this client id (`[[clients]]`; `default` = `server.api_keys`): its
    /// requests (routing decisions, attempts), usage, limits and affinity bindings.
    #[arg(long, value_name = "ID")]
    pub client: Option<String>,
    /// Only request events served through translation (behaviour §14); with a direction
    /// (`chat>messages`, `responses>messages`, `messages>chat`) only that one.
    #[arg(long, value_name = "DIRECTION", num_args = 0..=1, default_missing_value = "any")]
    pub translated: Option<String>,
    /// Only these event kinds (comma-separated contract names, e.g. `request_failed,model_locked`).
    #[arg(long, value_name = "KINDS")]
    pub kind: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Per provider and connection totals instead of the timeline.
    #[arg(long)]
    pub summary: bool,
    /// The router state at TIME (RFC 3339, a UTC time of day or relative), rebuilt by the node's
    /// own reducers.
    #[arg(long, value_name = "TIME")]
    pub state_at: Option<String>,
    /// Write a picture of the incident (lanes per connection) to FILE instead of printing the
    /// timeline.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Re-run the recorded outcomes with CONFIG's resilience settings and compare; or
    /// `affinity=off`: the recorded decisions taken again without conversation affinity, and
    /// what affinity saved (routing and cached input tokens).
    #[arg(long, value_name = "CONFIG")]
    pub what_if: Option<PathBuf>,
    /// Colour the text output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// `--format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}

/// `--color`: `auto` colours only when stdout is a terminal and `NO_COLOR` is unset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether to emit ANSI colours on stdout.
    pub fn enabled(self) -> bool {
        use std::io::IsTerminal;
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none() && std::io::stdout().is_terminal()
            }
        }
    }
}
