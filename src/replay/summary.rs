//! `--summary`: per provider and per connection — requests ok, failures by class, time cooling,
//! disabled, locked per model, breaker open, breaker openings and cycles, the most frequent
//! upstream errors, first and last failure; each client's spend; the quota left unused at each
//! window reset (`window_resets.rs` finds them). Owns the counting and its text/JSON rendering.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use quotaroute_journal::{ClientUsage, Envelope, Event};
use serde::Serialize;

use crate::replay::window_resets::{mean_unused_pct, WindowReset, WindowResets};
use crate::time_parse::{format_duration, format_utc_ms};
use crate::timeline::filter::Filter;
use crate::timeline::periods::{PeriodTracker, Periods};

/// How many distinct upstream errors a row lists.
const TOP_ERRORS: usize = 3;

/// One upstream error shape and how often it came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorCount {
    pub status: Option<u16>,
    pub code: Option<String>,
    pub count: u64,
}

/// Request counts shared by provider and connection rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounts {
    pub ok: u64,
    pub failed: u64,
    /// Class → failures.
    pub failed_by_class: BTreeMap<String, u64>,
    pub top_errors: Vec<ErrorCount>,
    pub first_failure_ms: Option<u64>,
    pub last_failure_ms: Option<u64>,
    #[serde(skip)]
    errors: BTreeMap<(Option<u16>, Option<String>), u64>,
}

impl RequestCounts {
    fn success(&mut self) {
        self.ok += 1;
    }

    fn failure(&mut self, at_ms: u64, e: &quotaroute_journal::RequestFailed) {
        self.failed += 1;
        *self
            .failed_by_class
            .entry(e.class.as_str().to_string())
            .or_default() += 1;
        *self
            .errors
            .entry((e.status, e.error_code.clone()))
            .or_default() += 1;
        self.first_failure_ms = Some(self.first_failure_ms.map_or(at_ms, |f| f.min(at_ms)));
        self.last_failure_ms = Some(self.last_failure_ms.map_or(at_ms, |l| l.max(at_ms)));
    }

    fn finish(&mut self) {
        let mut errors: Vec<ErrorCount> = std::mem::take(&mut self.errors)
            .into_iter()
            .map(|((status, code), count)| ErrorCount {
                status,
                code,
                count,
            })
            .collect();
        errors.sort_by(|a, b| b.count.cmp(&a.count).then(a.status.cmp(&b.status)));
        errors.truncate(TOP_ERRORS);
        self.top_errors = errors;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProviderSummary {
    pub name: String,
    pub requests: RequestCounts,
    pub breaker_open_ms: u64,
    pub breaker_openings: u32,
    pub breaker_max_cycles: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConnectionSummary {
    pub id: String,
    pub provider: String,
    pub requests: RequestCounts,
    pub cooling_ms: u64,
    pub disabled_ms: u64,
    /// Model → time locked.
    pub locked_ms: BTreeMap<String, u64>,
}

/// The whole `--summary`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub events: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub start_ms: Option<u64>,
    pub end_ms: Option<u64>,
    pub providers: Vec<ProviderSummary>,
    pub connections: Vec<ConnectionSummary>,
    /// What each client spent on each upstream model (`client_usage`, behaviour §11).
    pub spend: Vec<ClientSpend>,
    /// Each window reset the journal saw and the share of it left unused (behaviour §13).
    pub window_resets: Vec<WindowReset>,
    /// Their mean unused share, in percent.
    pub unused_at_resets_pct: Option<f64>,
}

/// One row of the spend table: a client on one upstream model.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClientSpend {
    pub client: String,
    pub model: String,
    pub requests: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_cached: u64,
    /// Requests whose model had no price (counted, not priced).
    pub unpriced: u64,
    pub spend_usd: f64,
}

/// Counts envelopes into a [`Summary`]; time bands come from [`PeriodTracker`].
#[derive(Debug, Default)]
pub struct SummaryBuilder {
    filter: Filter,
    summary: Summary,
    tracker: PeriodTracker,
    providers: BTreeMap<String, RequestCounts>,
    /// Connection → (provider, counts).
    connections: BTreeMap<String, (String, RequestCounts)>,
    /// (client, model) → its row, spend summed in pico-USD (exact).
    spend: BTreeMap<(String, String), (ClientSpend, u64)>,
    windows: WindowResets,
}

impl SummaryBuilder {
    /// Counts events in `filter`'s time window; its provider/connection filters pick the rows.
    pub fn new(filter: Filter) -> Self {
        SummaryBuilder {
            filter,
            ..SummaryBuilder::default()
        }
    }

    pub fn observe(&mut self, envelope: &Envelope) {
        // Bands may start before the window and reach into it: track every event.
        self.tracker.observe(envelope.at_ms, &envelope.event);
        self.windows.observe(envelope);
        if let Event::ConfigLoaded(config) = &envelope.event {
            for provider in &config.providers {
                self.providers.entry(provider.name.clone()).or_default();
            }
            for connection in &config.connections {
                self.connections
                    .entry(connection.id.clone())
                    .or_insert_with(|| (connection.provider.clone(), RequestCounts::default()));
            }
        }
        if !self.filter.in_window(envelope.at_ms) {
            return;
        }
        let s = &mut self.summary;
        s.events += 1;
        s.first_seq = Some(s.first_seq.map_or(envelope.seq, |f| f.min(envelope.seq)));
        s.last_seq = Some(s.last_seq.map_or(envelope.seq, |l| l.max(envelope.seq)));
        s.start_ms = Some(s.start_ms.map_or(envelope.at_ms, |f| f.min(envelope.at_ms)));
        s.end_ms = Some(s.end_ms.map_or(envelope.at_ms, |l| l.max(envelope.at_ms)));
        match &envelope.event {
            Event::RequestSucceeded(e) => {
                self.providers
                    .entry(e.provider.to_string())
                    .or_default()
                    .success();
                self.connection(&e.provider, &e.connection).success();
                // A success that carries its client's charge stands in for a `client_usage`.
                if let Some(charge) = e.client_charge() {
                    if self.filter.matches_subject(&envelope.event) {
                        self.spent(&charge);
                    }
                }
            }
            Event::RequestFailed(e) => {
                self.providers
                    .entry(e.provider.to_string())
                    .or_default()
                    .failure(envelope.at_ms, e);
                self.connection(&e.provider, &e.connection)
                    .failure(envelope.at_ms, e);
            }
            Event::ClientUsage(e) if self.filter.matches_subject(&envelope.event) => {
                self.spent(e);
            }
            _ => {}
        }
    }

    /// Counts one charge to a client into the spend table.
    fn spent(&mut self, e: &ClientUsage) {
        let (row, pusd) = self
            .spend
            .entry((e.client.clone(), e.model.clone()))
            .or_insert_with(|| {
                (
                    ClientSpend {
                        client: e.client.clone(),
                        model: e.model.clone(),
                        ..ClientSpend::default()
                    },
                    0,
                )
            });
        row.requests += 1;
        row.tokens_in += e.tokens_in;
        row.tokens_out += e.tokens_out;
        row.tokens_cached += e.tokens_cached;
        match e.cost_usd {
            Some(cost) => *pusd += (cost * 1e12).round() as u64,
            None => row.unpriced += 1,
        }
    }

    fn connection(&mut self, provider: &str, id: &str) -> &mut RequestCounts {
        &mut self
            .connections
            .entry(id.to_string())
            .or_insert_with(|| (provider.to_string(), RequestCounts::default()))
            .1
    }

    pub fn finish(self) -> Summary {
        let mut summary = self.summary;
        let start = self.filter.since_ms.or(summary.start_ms).unwrap_or(0);
        let end = match (self.filter.until_ms, summary.end_ms) {
            (Some(until), Some(last)) => until.min(last),
            (until, last) => until.or(last).unwrap_or(0),
        };
        let periods: Periods = self.tracker.finish(start, end);
        summary.window_resets = self.windows.finish(&self.filter, end);
        summary.unused_at_resets_pct = mean_unused_pct(&summary.window_resets);
        let wanted_provider =
            |name: &str| self.filter.provider.as_deref().is_none_or(|p| p == name);
        let wanted_connection =
            |id: &str| self.filter.connection.as_deref().is_none_or(|c| c == id);
        summary.providers = self
            .providers
            .into_iter()
            .filter(|(name, _)| wanted_provider(name) && self.filter.connection.is_none())
            .map(|(name, mut requests)| {
                requests.finish();
                ProviderSummary {
                    breaker_open_ms: periods.breaker_open_ms(&name),
                    breaker_openings: periods.breaker_openings.get(&name).copied().unwrap_or(0),
                    breaker_max_cycles: periods.breaker_max_cycles.get(&name).copied().unwrap_or(0),
                    name,
                    requests,
                }
            })
            .collect();
        summary.connections = self
            .connections
            .into_iter()
            .filter(|(id, (provider, _))| wanted_provider(provider) && wanted_connection(id))
            .map(|(id, (provider, mut requests))| {
                requests.finish();
                ConnectionSummary {
                    cooling_ms: periods.cooling_ms(&id),
                    disabled_ms: periods.disabled_ms(&id),
                    locked_ms: periods.locked_ms(&id),
                    id,
                    provider,
                    requests,
                }
            })
            .collect();
        summary.spend = self
            .spend
            .into_values()
            .map(|(mut row, pusd)| {
                row.spend_usd = pusd as f64 / 1e12;
                row
            })
            .collect();
        summary
    }
}

fn when(ms: Option<u64>) -> String {
    ms.map_or("-".to_string(), format_utc_ms)
}

fn classes(counts: &RequestCounts) -> String {
    if counts.failed_by_class.is_empty() {
        return "-".to_string();
    }
    counts
        .failed_by_class
        .iter()
        .map(|(class, n)| format!("{class}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn errors(counts: &RequestCounts) -> String {
    counts
        .top_errors
        .iter()
        .map(|e| {
            let status = e.status.map_or("---".to_string(), |s| s.to_string());
            match &e.code {
                Some(code) => format!("{status} {code} x{}", e.count),
                None => format!("{status} x{}", e.count),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text rendering: a header, a provider table, a connection table, then detail lines.
pub fn render_text(summary: &Summary) -> String {
    let mut out = String::new();
    let span = match (summary.start_ms, summary.end_ms) {
        (Some(start), Some(end)) => format!(
            "{} -> {} ({})",
            format_utc_ms(start),
            format_utc_ms(end),
            format_duration(end - start)
        ),
        _ => "empty".to_string(),
    };
    let _ = writeln!(
        out,
        "{} events, seq {}..{}, {span}",
        summary.events,
        summary.first_seq.unwrap_or(0),
        summary.last_seq.unwrap_or(0)
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<12} {:>6} {:>6}  {:>12} {:>8} {:>6}  {:<24}  {:<24}",
        "PROVIDER",
        "OK",
        "FAILED",
        "BREAKER OPEN",
        "OPENINGS",
        "CYCLES",
        "FIRST FAILURE",
        "LAST FAILURE"
    );
    for p in &summary.providers {
        let _ = writeln!(
            out,
            "{:<12} {:>6} {:>6}  {:>12} {:>8} {:>6}  {:<24}  {:<24}",
            p.name,
            p.requests.ok,
            p.requests.failed,
            format_duration(p.breaker_open_ms),
            p.breaker_openings,
            p.breaker_max_cycles,
            when(p.requests.first_failure_ms),
            when(p.requests.last_failure_ms)
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<12} {:<12} {:>6} {:>6}  {:>9} {:>9} {:>9}  {:<24}  {:<24}",
        "CONNECTION",
        "PROVIDER",
        "OK",
        "FAILED",
        "COOLING",
        "DISABLED",
        "LOCKED",
        "FIRST FAILURE",
        "LAST FAILURE"
    );
    for c in &summary.connections {
        let locked: u64 = c.locked_ms.values().sum();
        let _ = writeln!(
            out,
            "{:<12} {:<12} {:>6} {:>6}  {:>9} {:>9} {:>9}  {:<24}  {:<24}",
            c.id,
            c.provider,
            c.requests.ok,
            c.requests.failed,
            format_duration(c.cooling_ms),
            format_duration(c.disabled_ms),
            format_duration(locked),
            when(c.requests.first_failure_ms),
            when(c.requests.last_failure_ms)
        );
    }
    let _ = writeln!(out);
    for p in &summary.providers {
        if p.requests.failed > 0 {
            let _ = writeln!(out, "{}: failed by class: {}", p.name, classes(&p.requests));
            let _ = writeln!(out, "{}: top errors: {}", p.name, errors(&p.requests));
        }
    }
    for c in &summary.connections {
        if c.requests.failed > 0 {
            let _ = writeln!(out, "{}: failed by class: {}", c.id, classes(&c.requests));
            let _ = writeln!(out, "{}: top errors: {}", c.id, errors(&c.requests));
        }
        let locks: Vec<String> = c
            .locked_ms
            .iter()
            .filter(|(_, ms)| **ms > 0)
            .map(|(model, ms)| format!("{model} {}", format_duration(*ms)))
            .collect();
        if !locks.is_empty() {
            let _ = writeln!(out, "{}: locked: {}", c.id, locks.join(", "));
        }
    }
    render_window_resets(&mut out, summary);
    render_spend(&mut out, summary);
    out
}

/// The spend table: one row per client and model, when anything was charged.
fn render_spend(out: &mut String, summary: &Summary) {
    if summary.spend.is_empty() {
        return;
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<16} {:<28} {:>8} {:>12} {:>12} {:>12} {:>12}",
        "CLIENT", "MODEL", "REQUESTS", "TOKENS IN", "CACHED", "TOKENS OUT", "SPEND USD"
    );
    for row in &summary.spend {
        let spend = if row.unpriced == row.requests {
            "unpriced".to_string()
        } else {
            format!("{:.4}", row.spend_usd)
        };
        let _ = writeln!(
            out,
            "{:<16} {:<28} {:>8} {:>12} {:>12} {:>12} {:>12}",
            row.client,
            row.model,
            row.requests,
            row.tokens_in,
            row.tokens_cached,
            row.tokens_out,
            spend
        );
    }
}

/// The window resets: one line each, then the mean share left unused.
fn render_window_resets(out: &mut String, summary: &Summary) {
    let Some(mean) = summary.unused_at_resets_pct else {
        return;
    };
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<12} {:<16} {:<24} {:>8} {:>8}",
        "CONNECTION", "WINDOW", "RESET AT", "USED", "UNUSED"
    );
    for reset in &summary.window_resets {
        let _ = writeln!(
            out,
            "{:<12} {:<16} {:<24} {:>7.0}% {:>7.0}%",
            reset.connection,
            reset.window,
            format_utc_ms(reset.reset_at_ms),
            reset.used_pct,
            reset.unused_pct
        );
    }
    let _ = writeln!(
        out,
        "unused at resets: {mean:.1}% of each window on average ({} resets)",
        summary.window_resets.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::{OutcomeClass, SCHEMA_VERSION};

    #[test]
    fn spend_is_summed_by_client_and_model_and_the_client_filter_picks_rows() {
        let usage = |n: u64| quotaroute_journal::testkit::sample_event(21, n);
        let mut all = SummaryBuilder::new(Filter::default());
        let mut only_b = SummaryBuilder::new(Filter {
            client: Some("team-1".into()),
            ..Filter::default()
        });
        // n = 0, 3 are priced (0.25 × n), n = 1, 2 are not; n even is team-0, odd team-1.
        for n in 0..4 {
            all.observe(&envelope(n + 1, 1_000 + n, usage(n)));
            only_b.observe(&envelope(n + 1, 1_000 + n, usage(n)));
        }
        let summary = all.finish();
        let requests: u64 = summary.spend.iter().map(|row| row.requests).sum();
        assert_eq!(requests, 4);
        let spend: f64 = summary.spend.iter().map(|row| row.spend_usd).sum();
        assert!((spend - 0.75).abs() < 1e-12, "{spend}");
        assert!(render_text(&summary).contains("SPEND USD"));
        let b = only_b.finish();
        assert!(b.spend.iter().all(|row| row.client == "team-1"));
        assert_eq!(b.spend.iter().map(|row| row.requests).sum::<u64>(), 2);
    }

    fn envelope(seq: u64, at_ms: u64, event: Event) -> Envelope {
        Envelope {
            schema_version: SCHEMA_VERSION,
            seq,
            at_ms,
            event,
        }
    }

    fn failed(connection: &str, status: u16, class: OutcomeClass) -> Event {
        quotaroute_journal::testkit::failed("p", connection, "m", Some(status), class)
    }

    #[test]
    fn item2_counts_ok_and_failed_by_class_with_first_and_last_failure() {
        let mut builder = SummaryBuilder::new(Filter::default());
        builder.observe(&envelope(
            1,
            10,
            failed("k1", 429, OutcomeClass::RateLimited),
        ));
        builder.observe(&envelope(
            2,
            20,
            failed("k1", 503, OutcomeClass::ServerError),
        ));
        builder.observe(&envelope(
            3,
            30,
            failed("k1", 503, OutcomeClass::ServerError),
        ));
        builder.observe(&envelope(
            4,
            40,
            quotaroute_journal::testkit::succeeded("p", "k2", "m", 1, 1),
        ));
        let summary = builder.finish();
        let p = &summary.providers[0];
        assert_eq!((p.requests.ok, p.requests.failed), (1, 3));
        assert_eq!(p.requests.top_errors[0].status, Some(503));
        assert_eq!(p.requests.top_errors[0].count, 2);
        let k1 = &summary.connections[0];
        assert_eq!(k1.requests.failed_by_class["server_error"], 2);
        assert_eq!(k1.requests.first_failure_ms, Some(10));
        assert_eq!(k1.requests.last_failure_ms, Some(30));
        assert!(render_text(&summary).contains("k1: top errors: 503 x2, 429 x1"));
    }
}
