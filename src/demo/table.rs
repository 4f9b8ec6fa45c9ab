//! The live table: one frame of text from the router's admin state (in-flight, cooldowns,
//! lockouts, breakers, each combo's paces and forecast) and the journal's counts (served,
//! failed). Pure: no I/O, no clock (the frame carries `now_ms`).

use std::fmt::Write as _;
use std::time::Duration;

use quotaroute_actors::admin_state::ConnectionAdminState;
use quotaroute_actors::AdminState;

use super::tally::JournalTally;

/// Everything one frame shows.
pub struct Frame<'a> {
    pub elapsed: Duration,
    pub run: Duration,
    pub scenario: &'a str,
    pub state: &'a AdminState,
    pub tally: &'a JournalTally,
    /// What the clients saw: (2xx, otherwise).
    pub clients: (u64, u64),
    /// What the spare client saw (behaviour §13): (served, refused).
    pub spare: (u64, u64),
    /// The router's clock, for the forecast's countdowns.
    pub now_ms: u64,
}

/// Milliseconds as `6.2s`.
fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// `ok`, `cooling 1.2s`, `disabled (auth)` or `disabled (billing) 3.0s`.
fn connection_state(connection: &ConnectionAdminState) -> String {
    if let Some(disabled) = &connection.disabled {
        return match disabled.remaining_ms {
            Some(ms) => format!("disabled ({}) {}", disabled.reason, seconds(ms)),
            None => format!("disabled ({})", disabled.reason),
        };
    }
    if connection.cooldown_remaining_ms > 0 {
        return format!("cooling {}", seconds(connection.cooldown_remaining_ms));
    }
    "ok".to_string()
}

/// `gpt-4o locked 6.2s (rate_limited)` (`…(quota_exhausted, per day)` when the upstream named
/// its quota's window), comma-separated, or `-`.
fn lockouts(connection: &ConnectionAdminState) -> String {
    if connection.lockouts.is_empty() {
        return "-".to_string();
    }
    connection
        .lockouts
        .iter()
        .map(|lock| {
            let window = lock
                .quota_window
                .map(|window| format!(", per {window}"))
                .unwrap_or_default();
            format!(
                "{} locked {} ({}{window})",
                lock.model,
                seconds(lock.remaining_ms),
                lock.reason
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The frame as lines of text (each ending in `\n`).
pub fn render(frame: &Frame<'_>) -> String {
    let mut out = String::new();
    let (ok, failed) = frame.clients;
    let (spare_served, spare_refused) = frame.spare;
    let _ = writeln!(
        out,
        "quotaroute demo  t={:>3}s/{}s  clients: {ok} ok, {failed} failed  \
         spare: {spare_served} served, {spare_refused} refused",
        frame.elapsed.as_secs(),
        frame.run.as_secs()
    );
    let _ = writeln!(out, "upstreams: {}", frame.scenario);
    let _ = writeln!(
        out,
        "{:<12} {:<10} {:>8}  NEXT PROBE",
        "PROVIDER", "BREAKER", "FAILURES"
    );
    for provider in &frame.state.providers {
        let probe = provider
            .retry_after_ms
            .map_or_else(|| "-".to_string(), |ms| format!("in {}", seconds(ms)));
        let _ = writeln!(
            out,
            "{:<12} {:<10} {:>8}  {probe}",
            provider.name, provider.breaker, provider.failures
        );
    }
    let _ = writeln!(
        out,
        "{:<12} {:<10} {:>7} {:>7} {:>9}  {:<14} LOCKOUTS",
        "CONNECTION", "PROVIDER", "SERVED", "FAILED", "IN-FLIGHT", "STATE"
    );
    for connection in &frame.state.connections {
        let counted = frame.tally.connections.get(&connection.id);
        let _ = writeln!(
            out,
            "{:<12} {:<10} {:>7} {:>7} {:>9}  {:<14} {}",
            connection.id,
            connection.provider,
            counted.map_or(0, |c| c.served),
            counted.map_or(0, |c| c.failed),
            connection.in_flight,
            connection_state(connection),
            lockouts(connection)
        );
    }
    forecast(&mut out, frame);
    out
}

/// `2h 05m`, `20m`, `45s`.
fn span(ms: u64) -> String {
    let minutes = ms / 60_000;
    match minutes {
        0 => format!("{}s", ms / 1_000),
        1..=59 => format!("{minutes}m"),
        _ => format!("{}h {:02}m", minutes / 60, minutes % 60),
    }
}

/// One line per paced combo (behaviour §13): its targets' paces, when its next window resets,
/// when, at its rate, it runs out, and its spare now.
fn forecast(out: &mut String, frame: &Frame<'_>) {
    let now_ms = frame.now_ms;
    let _ = writeln!(out, "{:<12} {:<40} FORECAST", "COMBO", "PACES");
    for combo in &frame.state.combos {
        let paces = combo
            .targets
            .iter()
            .map(|target| format!("{} {:.2}", target.connection, target.pace))
            .collect::<Vec<_>>()
            .join("  ");
        let reset = combo
            .next_reset_at_ms
            .map(|at| format!("next reset in {}", span(at.saturating_sub(now_ms))));
        let runs_out = match (combo.runs_out_at_ms, combo.next_reset_at_ms) {
            (Some(at), _) => format!("runs out in {}", span(at.saturating_sub(now_ms))),
            (None, Some(_)) => "lasts to its reset".to_string(),
            (None, None) => "no windows known".to_string(),
        };
        let mut line = match reset {
            Some(reset) => format!("{reset}, {runs_out}"),
            None => runs_out,
        };
        // Spare now (behaviour §13): what its windows are forecast to lose at their resets.
        for spare in &combo.spare_now {
            let _ = write!(
                line,
                ", spare now {} of {} {}",
                spare.unused_at_reset, spare.limit, spare.window
            );
        }
        let _ = writeln!(out, "{:<12} {:<40} {line}", combo.name, paces);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_actors::admin_state::{DisabledState, LockoutState, ProviderState};

    fn connection(id: &str) -> ConnectionAdminState {
        ConnectionAdminState {
            id: id.into(),
            provider: "openai".into(),
            auth: "api_key",
            cooldown_remaining_ms: 0,
            cooldown_level: 0,
            disabled: None,
            in_flight: 0,
            buckets: vec![],
            lockouts: vec![],
            input_tokens: 0,
            cached_input_tokens: 0,
            cached_share: None,
        }
    }

    #[test]
    fn a_frame_shows_breakers_states_lockouts_and_counts() {
        let mut locked = connection("oa-1");
        locked.in_flight = 2;
        locked.lockouts.push(LockoutState {
            provider: "openai".into(),
            connection: "oa-1".into(),
            model: "gpt-4o".into(),
            reason: "rate_limited",
            error_code: None,
            upstream_code: None,
            quota_window: None,
            remaining_ms: 6_200,
            resets_at_ms: 0,
            failure_count: 1,
        });
        let mut cooling = connection("an-1");
        cooling.cooldown_remaining_ms = 1_200;
        let mut disabled = connection("an-2");
        disabled.disabled = Some(DisabledState {
            reason: "auth",
            remaining_ms: None,
        });
        let state = AdminState {
            providers: vec![ProviderState {
                name: "anthropic".into(),
                profile: "api_key",
                breaker: "OPEN",
                failures: 0,
                cycles: 1,
                retry_after_ms: Some(1_500),
                apis_unserved: Vec::new(),
            }],
            connections: vec![locked, cooling, disabled],
            combos: vec![],
        };
        let mut tally = JournalTally::default();
        tally.connections.entry("oa-1".into()).or_default().served = 42;
        let text = render(&Frame {
            elapsed: Duration::from_secs(3),
            run: Duration::from_secs(30),
            scenario: "all upstreams healthy",
            state: &state,
            tally: &tally,
            clients: (40, 2),
            spare: (3, 5),
            now_ms: 0,
        });
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} line in\n{text}"))
                .to_string()
        };
        assert!(line("anthropic").contains("OPEN"));
        assert!(line("anthropic").contains("in 1.5s"));
        let oa1: Vec<_> = line("oa-1").split_whitespace().map(String::from).collect();
        assert_eq!(oa1[2..5], ["42", "0", "2"]);
        assert!(line("oa-1").contains("gpt-4o locked 6.2s (rate_limited)"));
        assert!(line("an-1").contains("cooling 1.2s"));
        assert!(line("an-2").contains("disabled (auth)"));
        assert!(text.contains("clients: 40 ok, 2 failed  spare: 3 served, 5 refused"));
    }
}
