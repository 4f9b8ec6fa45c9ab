//! `quotaroute replay`: the incident debugger. Reads a journal offline (or a live node's through
//! the admin API) and shows what happened, why each request went where it went, and what would
//! have happened with other settings — using the very policy code the live router runs.
//!
//! # Layout
//! - [`args`] — the command line (`ReplayArgs`, a `clap::Args`).
//! - [`source`] — opening a sled journal / NDJSON export; [`remote`] — `--from URL`.
//! - [`filter`] — `--since/--until/--provider/--connection/--model/--kind`.
//! - [`timeline`] — one line per event (default) or NDJSON, with [`affinity_why`] and
//!   [`pace_why`] saying why a turn went where; [`paint`] — ANSI colour.
//! - [`periods`] — cooling/locked/disabled/breaker-open bands, shared by the views below.
//! - [`summary`] — `--summary`, with [`window_resets`] (quota left unused at each reset);
//!   [`state_at`] — `--state-at`; [`svg`] — `--svg`.
//! - [`what_if`] — `--what-if CONFIG`; [`what_if_affinity`] — `--what-if affinity=off`.
//! - [`time_parse`] — RFC 3339 / relative times in, UTC out.
//!
//! Everything is one pass over the journal: each view observes every envelope in order.

pub mod affinity_why;
pub mod args;
pub mod ndjson_item;
pub mod pace_why;
pub mod paint;
pub mod recorded_turn;
pub mod remote;
pub mod source;
pub mod state_at;
pub mod summary;
pub mod timeline;
pub mod what_if;
pub mod what_if_affinity;
#[cfg(test)]
mod what_if_equals_live;
pub mod window_resets;

use std::io::Write;
use std::path::PathBuf;

pub use args::{ColorChoice, Format, ReplayArgs};

use crate::replay::ndjson_item::Damaged;
use crate::replay::paint::Paint;
use crate::replay::source::{Source, SourceError};
use crate::replay::state_at::StateFold;
use crate::replay::summary::SummaryBuilder;
use crate::replay::timeline::TimelineWriter;
use crate::replay::what_if::WhatIf;
use crate::replay::what_if_affinity::{AffinityOff, AFFINITY_OFF};
use crate::time_parse::{parse_time, TimeError};
use crate::timeline::filter::{Filter, FilterError};
use crate::timeline::svg::SvgBuilder;

/// Exit code: everything shown (damaged records, if any, reported on `err`).
pub const EXIT_OK: u8 = 0;
/// Exit code: the journal or a file could not be read or written.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code: the flags do not make sense.
pub const EXIT_USAGE: u8 = 2;

/// How many damaged locations the report names before eliding.
const DAMAGE_LISTED: usize = 10;

/// Why replay stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Filter(#[from] FilterError),
    #[error("--state-at: {0}")]
    StateAt(TimeError),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("--what-if {path}: {errors}")]
    WhatIfConfig { path: PathBuf, errors: String },
    /// Neither a config file nor a what-if this tool knows (`affinity=on`, a mistyped path).
    #[error(
        "--what-if {given}: no config file of that name, and not a what-if this tool knows; \
         the forms are `--what-if CONFIG` (the journal's requests routed again under a config \
         file) and `--what-if {AFFINITY_OFF}` (the same decisions without conversation affinity)"
    )]
    WhatIfUnknown { given: PathBuf },
    #[error("cannot write {path}: {source}")]
    WriteFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
    #[error("cannot render JSON: {0}")]
    Json(String),
}

impl ReplayError {
    pub fn exit_code(&self) -> u8 {
        match self {
            ReplayError::Filter(_)
            | ReplayError::StateAt(_)
            | ReplayError::WhatIfUnknown { .. } => EXIT_USAGE,
            _ => EXIT_FAILURE,
        }
    }
}

/// Runs `replay`: writes the views to `out`, damage reports and notes to `err`. `now_ms` anchors
/// relative times. Returns the process exit code (0 ok, 1 failure, 2 usage).
pub fn run(args: &ReplayArgs, out: &mut dyn Write, err: &mut dyn Write, now_ms: u64) -> u8 {
    match run_inner(args, out, err, now_ms) {
        Ok(()) => EXIT_OK,
        Err(ReplayError::Output(error)) if error.kind() == std::io::ErrorKind::BrokenPipe => {
            EXIT_OK
        }
        Err(error) => {
            let _ = writeln!(err, "quotaroute replay: {error}");
            error.exit_code()
        }
    }
}

/// The `--what-if` views `args` asks for: another config's replay, or `affinity=off`'s
/// savings (unless a config file has that very name).
fn what_if_views(args: &ReplayArgs) -> Result<(Option<WhatIf>, Option<AffinityOff>), ReplayError> {
    let affinity_off = args
        .what_if
        .as_deref()
        .filter(|path| path.as_os_str() == AFFINITY_OFF && !path.exists())
        .map(|_| AffinityOff::default());
    let what_if = match &args.what_if {
        Some(_) if affinity_off.is_some() => None,
        Some(path) if !path.exists() => {
            return Err(ReplayError::WhatIfUnknown {
                given: path.clone(),
            })
        }
        Some(path) => {
            let config =
                crate::config::load_settings(path).map_err(|errors| ReplayError::WhatIfConfig {
                    path: path.clone(),
                    errors: errors.to_string(),
                })?;
            Some(WhatIf::new(config, path.display().to_string()))
        }
        None => None,
    };
    Ok((what_if, affinity_off))
}

fn run_inner(
    args: &ReplayArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
    now_ms: u64,
) -> Result<(), ReplayError> {
    let mut filter = Filter::from_flags(
        args.since.as_deref(),
        args.until.as_deref(),
        args.provider.as_deref(),
        args.connection.as_deref(),
        args.model.as_deref(),
        args.kind.as_deref(),
        now_ms,
    )?;
    filter.client.clone_from(&args.client);
    filter.translated.clone_from(&args.translated);
    let state_at_ms = args
        .state_at
        .as_deref()
        .map(|t| parse_time(t, now_ms))
        .transpose()
        .map_err(ReplayError::StateAt)?;
    let (what_if, affinity_off) = what_if_views(args)?;
    let source = Source::open(args.journal.as_deref(), args.from.as_deref())?;

    let json = args.format == Format::Json;
    let show_timeline =
        !args.summary && state_at_ms.is_none() && args.what_if.is_none() && args.svg.is_none();
    let mut views = Views {
        timeline: show_timeline.then(|| TimelineWriter::new(Paint::new(args.color.enabled()))),
        summary: args.summary.then(|| SummaryBuilder::new(filter.clone())),
        state: state_at_ms.map(StateFold::new),
        svg: args.svg.as_ref().map(|_| SvgBuilder::new(filter.clone())),
        what_if,
        affinity_off,
    };

    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    let mut damaged: Vec<Damaged> = Vec::new();
    let mut line = String::new();
    let mut bytes: Vec<u8> = Vec::with_capacity(1 << 16);
    for item in source.items() {
        let envelope = match item {
            Ok(envelope) => envelope,
            Err(damage) => {
                damaged.push(damage);
                continue;
            }
        };
        if let Some(timeline) = &mut views.timeline {
            timeline.observe(&envelope);
            if filter.matches(&envelope) {
                if json {
                    timeline::json_line(&envelope, &mut bytes)
                        .map_err(|e| ReplayError::Json(e.to_string()))?;
                } else {
                    line.clear();
                    timeline.text_line(&envelope, &mut line);
                    bytes.extend_from_slice(line.as_bytes());
                    bytes.push(b'\n');
                }
                if bytes.len() >= 1 << 15 {
                    out.write_all(&bytes)?;
                    bytes.clear();
                }
            }
        }
        views.observe(&envelope);
    }
    out.write_all(&bytes)?;
    report_damage(err, &damaged)?;

    if let Some(summary) = views.summary {
        let summary = summary.finish();
        if json {
            write_json(&mut out, &summary)?;
        } else {
            out.write_all(summary::render_text(&summary).as_bytes())?;
        }
    }
    if let Some(state) = views.state {
        let at = state.finish();
        if json {
            write_json(&mut out, &at)?;
        } else {
            out.write_all(state_at::render_text(&at).as_bytes())?;
        }
    }
    if let Some(what_if) = views.what_if {
        let report = what_if.finish();
        if json {
            write_json(&mut out, &report)?;
        } else {
            out.write_all(what_if::render_text(&report).as_bytes())?;
        }
    }
    if let Some(affinity_off) = views.affinity_off {
        let report = affinity_off.finish();
        if json {
            write_json(&mut out, &report)?;
        } else {
            out.write_all(what_if_affinity::render_text(&report).as_bytes())?;
        }
    }
    if let (Some(svg), Some(path)) = (views.svg, &args.svg) {
        let document = svg.finish();
        std::fs::write(path, document).map_err(|source| ReplayError::WriteFile {
            path: path.clone(),
            source,
        })?;
        writeln!(err, "wrote {}", path.display())?;
    }
    out.flush()?;
    Ok(())
}

/// The views asked for, each fed every readable envelope.
struct Views {
    timeline: Option<TimelineWriter>,
    summary: Option<SummaryBuilder>,
    state: Option<StateFold>,
    svg: Option<SvgBuilder>,
    what_if: Option<WhatIf>,
    affinity_off: Option<AffinityOff>,
}

impl Views {
    fn observe(&mut self, envelope: &quotaroute_journal::Envelope) {
        if let Some(summary) = &mut self.summary {
            summary.observe(envelope);
        }
        if let Some(state) = &mut self.state {
            state.observe(envelope);
        }
        if let Some(svg) = &mut self.svg {
            svg.observe(envelope);
        }
        if let Some(what_if) = &mut self.what_if {
            what_if.observe(envelope);
        }
        if let Some(affinity_off) = &mut self.affinity_off {
            affinity_off.observe(envelope);
        }
    }
}

fn write_json(out: &mut dyn Write, value: &impl serde::Serialize) -> Result<(), ReplayError> {
    serde_json::to_writer(&mut *out, value).map_err(|e| ReplayError::Json(e.to_string()))?;
    out.write_all(b"\n")?;
    Ok(())
}

/// `N damaged records skipped (seq 41, seq 57)` plus one line per record with its reason.
fn report_damage(err: &mut dyn Write, damaged: &[Damaged]) -> Result<(), ReplayError> {
    if damaged.is_empty() {
        return Ok(());
    }
    let mut locations: Vec<&str> = damaged
        .iter()
        .take(DAMAGE_LISTED)
        .map(|d| d.location.as_str())
        .collect();
    if damaged.len() > DAMAGE_LISTED {
        locations.push("…");
    }
    writeln!(
        err,
        "{} damaged records skipped ({})",
        damaged.len(),
        locations.join(", ")
    )?;
    for damage in damaged.iter().take(DAMAGE_LISTED) {
        writeln!(err, "  {}: {}", damage.location, damage.reason)?;
    }
    Ok(())
}

#[cfg(test)]
mod what_if_form_tests {
    use super::*;

    /// `--what-if affinity=on` is no file and no known form: a usage error naming the forms,
    /// before any journal is opened.
    #[test]
    fn an_unknown_what_if_names_the_forms_there_are() {
        let args = ReplayArgs {
            journal: Some(PathBuf::from("/nonexistent/journal")),
            what_if: Some(PathBuf::from("affinity=on")),
            ..Default::default()
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run(&args, &mut out, &mut err, 0);
        let err = String::from_utf8(err).unwrap_or_default();
        assert_eq!(code, EXIT_USAGE, "{err}");
        assert!(
            err.contains("--what-if affinity=on: no config file"),
            "{err}"
        );
        assert!(err.contains("`--what-if CONFIG`"), "{err}");
        assert!(err.contains("`--what-if affinity=off`"), "{err}");
        assert!(!err.contains("cannot read the file"), "{err}");
    }
}
