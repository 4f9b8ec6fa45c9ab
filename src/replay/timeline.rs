//! The default view: one aligned, readable line per event (UTC time, seq, kind, subject, the
//! fields a person debugging needs, then the skipped targets and why), or NDJSON with the
//! contract's kinds. Owns line formatting only; filtering and reading are elsewhere.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use quotaroute_actors::policy::exec_key::exec_key;
use quotaroute_actors::topology::recorded_targets;
use quotaroute_journal::{
    envelope_to_json, AffinityOutcome, ConfigLoaded, Envelope, Event, NdjsonError, Skipped,
};

use crate::replay::affinity_why::AffinityMemory;
use crate::replay::pace_why::PaceMemory;
use crate::replay::paint::{Paint, Tone};
use crate::time_parse::{format_duration, format_utc_ms};

/// Width of the kind column (the longest kind, `connection_cooldown`).
const KIND_WIDTH: usize = 19;
/// Width of the subject column (`provider/connection/model`); longer subjects push the rest.
const SUBJECT_WIDTH: usize = 34;

/// Renders envelopes as timeline lines; remembers config generations so `route_decided`
/// indices can be shown as `connection/model`.
#[derive(Debug, Default)]
pub struct TimelineWriter {
    paint: Paint,
    configs: BTreeMap<u64, ConfigLoaded>,
    /// The conversation bindings seen so far, to say why an affinity-held turn went where.
    affinity: AffinityMemory,
    /// The readings seen so far, to say what a paced turn's binding windows held.
    pace: PaceMemory,
}

impl TimelineWriter {
    pub fn new(paint: Paint) -> Self {
        TimelineWriter {
            paint,
            configs: BTreeMap::new(),
            affinity: AffinityMemory::default(),
            pace: PaceMemory::default(),
        }
    }

    /// Remembers a config generation; call for every envelope, filtered or not.
    pub fn observe(&mut self, envelope: &Envelope) {
        if let Event::ConfigLoaded(config) = &envelope.event {
            self.configs.insert(config.generation, config.clone());
        }
        self.affinity.observe(envelope);
        self.pace.observe(envelope);
    }

    /// The text line for `envelope` (no trailing newline), appended to `line`.
    pub fn text_line(&self, envelope: &Envelope, line: &mut String) {
        let event = &envelope.event;
        let kind = event.kind();
        let _ = write!(
            line,
            "{}  #{:<7} ",
            format_utc_ms(envelope.at_ms),
            envelope.seq
        );
        line.push_str(
            &self
                .paint
                .paint(tone_of(event), &format!("{kind:<KIND_WIDTH$}")),
        );
        line.push_str("  ");
        let subject = subject_of(event);
        let _ = write!(line, "{subject:<SUBJECT_WIDTH$}");
        let details = self.details(envelope);
        if !details.is_empty() {
            line.push_str("  ");
            line.push_str(&details);
        }
        let skipped = skipped_of(event);
        if !skipped.is_empty() {
            line.push_str("  ");
            line.push_str(&self.paint.paint(Tone::Dim, "skipped: "));
            line.push_str(&render_skipped(skipped));
        }
        let trimmed = line.trim_end().len();
        line.truncate(trimmed);
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one arm per journal event kind: a table, kept exhaustive by the compiler"
    )]
    fn details(&self, envelope: &Envelope) -> String {
        let at = envelope.at_ms;
        let until = |until_ms: u64| {
            format!(
                "until {} (+{})",
                format_utc_ms(until_ms),
                format_duration(until_ms.saturating_sub(at))
            )
        };
        let status = |status: Option<u16>| status.map_or("---".to_string(), |s| s.to_string());
        let code = |code: &Option<String>| {
            code.as_ref()
                .map(|c| format!(" code={c}"))
                .unwrap_or_default()
        };
        match &envelope.event {
            Event::ClientUsage(e) => format!(
                "client={} tokens_in={} tokens_out={} cached={} cache_write={} cost_usd={} combo={} req={}",
                e.client,
                e.tokens_in,
                e.tokens_out,
                e.tokens_cached,
                e.tokens_cache_write,
                e.cost_usd
                    .map_or_else(|| "unpriced".to_string(), |cost| format!("{cost:.6}")),
                e.combo,
                e.request_id
            ),
            Event::PacingRule(e) => {
                let knobs = |k: &quotaroute_journal::PacingKnobs| {
                    format!(
                        "exponent={} clock={:?} pace_windows={:?}",
                        f64::from(k.exponent_pm) / 1_000.0,
                        k.clock,
                        k.pace_windows
                    )
                    .to_lowercase()
                };
                let combos: Vec<String> = e
                    .combos
                    .iter()
                    .map(|c| format!("{}: {}", c.combo, knobs(&c.knobs())))
                    .collect();
                format!(
                    "generation={} defaults: {}{}{}",
                    e.generation,
                    knobs(&e.defaults()),
                    if combos.is_empty() { "" } else { "; " },
                    combos.join("; ")
                )
            }
            Event::ClientLimited(e) => format!(
                "client={} limit={}{} req={}",
                e.client,
                e.limit,
                e.retry_after_ms
                    .map(|ms| format!(" retry_after={}", format_duration(ms)))
                    .unwrap_or_default(),
                e.request_id
            ),
            Event::NodeStarted(e) => format!(
                "version={} pid={} recovered_seq={}",
                e.version, e.pid, e.recovered_seq
            ),
            Event::NodeStopped(e) => {
                format!(
                    "reason={} uptime={}",
                    e.reason,
                    format_duration(e.uptime_ms)
                )
            }
            Event::ConfigLoaded(e) => format!(
                "generation={} source={} providers={} connections={} combos={}",
                e.generation,
                e.source,
                e.providers.len(),
                e.connections.len(),
                e.combos.len()
            ),
            Event::RequestSucceeded(e) => format!(
                "{} combo={} attempt={} latency={} tokens={}/{}{}{}{}{}{} req={}",
                e.status,
                e.combo,
                e.attempt,
                format_duration(e.latency_ms),
                e.tokens_in,
                e.tokens_out,
                if e.stream { " stream" } else { "" },
                client_part(&e.client),
                e.cost_usd
                    .map(|cost| format!(" cost_usd={cost}"))
                    .unwrap_or_default(),
                // The client's period spend after it, when this event carries the charge.
                e.period_spend_pusd
                    .map(|pusd| format!(" period_spend_usd={:.6}", pusd as f64 / 1e12))
                    .unwrap_or_default(),
                // Encrypted items the serving account could not read (behaviour §10).
                if e.items_left_out > 0 {
                    format!(" items_left_out={}", e.items_left_out)
                } else {
                    String::new()
                },
                e.request_id
            ),
            Event::RequestFailed(e) => {
                let mut text = format!(
                    "{} {}{} combo={} attempt={} latency={}",
                    status(e.status),
                    self.paint.paint(Tone::Bad, e.class.as_str()),
                    code(&e.error_code),
                    e.combo,
                    e.attempt,
                    format_duration(e.latency_ms)
                );
                if let Some(hint) = e.reset_hint_ms {
                    let _ = write!(text, " reset_hint={}", format_duration(hint));
                }
                if e.after_first_content {
                    text.push_str(" after_first_content");
                }
                text.push_str(&client_part(&e.client));
                let _ = write!(text, " req={}", e.request_id);
                if let Some(message) = &e.message {
                    let _ = write!(text, " msg={message:?}");
                }
                text
            }
            Event::ConnectionCooldown(e) => format!(
                "{} {} level={} {}{}",
                status(e.status),
                e.class.as_str(),
                e.level,
                until(e.until_ms),
                if e.from_retry_after {
                    " from Retry-After"
                } else {
                    ""
                }
            ),
            Event::ConnectionDisabled(e) => format!(
                "{} {}{} {}",
                e.reason.as_str(),
                status(e.status),
                code(&e.error_code),
                e.until_ms.map_or("until cleared".to_string(), until)
            ),
            Event::ConnectionCleared(e) => format!("by={}", by_str(e.by)),
            Event::ModelLocked(e) => format!(
                "{} {}{} {} failures={} source={}",
                e.reason.as_str(),
                status(e.status),
                code(&e.error_code),
                until(e.until_ms),
                e.failure_count,
                source_str(e.source)
            ),
            Event::ModelUnlocked(e) => format!("by={}", by_str(e.by)),
            Event::BreakerTransition(e) => {
                let mut text = format!(
                    "{} -> {} failures={} cycles={} by={}",
                    e.from.as_str(),
                    self.paint.paint(phase_tone(e.to), e.to.as_str()),
                    e.failures,
                    e.cycles,
                    by_str(e.by)
                );
                if let Some(until_ms) = e.until_ms {
                    let _ = write!(text, " {}", until(until_ms));
                }
                text
            }
            Event::JournalRecovered(e) => format!(
                "writes resumed after {} ({} write errors, {} request events dropped)",
                format_duration(e.failed_for_ms),
                e.write_errors,
                e.dropped_request_events
            ),
            Event::CredentialRefreshed(e) => {
                let mut text = format!("{} credential reloaded ({})", e.source, e.trigger);
                if let Some(expires_at_ms) = e.expires_at_ms {
                    let _ = write!(text, " expires {}", until(expires_at_ms));
                }
                text
            }
            Event::CredentialFailed(e) => {
                let mut text = format!(
                    "{} credential failed ({}): {}",
                    e.source, e.trigger, e.error
                );
                match e.last_good_until_ms {
                    Some(until_ms) => {
                        let _ = write!(text, "; last good kept {}", until(until_ms));
                    }
                    None => text.push_str("; the last good credential, if any, kept (no expiry)"),
                }
                text
            }
            Event::ResponseBound(e) => format!(
                "response={} combo={} req={}",
                e.response_id, e.combo, e.request_id
            ),
            Event::AffinityBound(e) => self.affinity.explain_bound(envelope, e),
            Event::BreakerCounted(e) => format!(
                "{} failures_in_window={}",
                if e.failure {
                    "+1 failure"
                } else {
                    "-1 (success)"
                },
                e.failures
            ),
            Event::UsageObserved(e) => format!(
                "window={} used={}/{}{} source={}",
                e.window,
                e.used,
                e.limit,
                e.resets_at_ms
                    .map(|r| format!(" resets {}", format_utc_ms(r)))
                    .unwrap_or_default(),
                match e.source {
                    quotaroute_journal::UsageSource::Header => "header",
                    quotaroute_journal::UsageSource::Push => "push",
                    quotaroute_journal::UsageSource::Lease => "lease",
                }
            ),
            Event::AdminAction(e) => format!("{} {} by={}", e.action, e.target, e.by),
            Event::ApiUnserved(e) => format!(
                "the host answered 404 for {}: {} left out of the provider's apis req={}",
                e.path, e.api, e.request_id
            ),
            Event::ResponseStored(e) => format!(
                "kept response {} for client={} bytes={} expires {} req={}",
                e.response_id,
                e.client,
                e.bytes,
                format_utc_ms(e.expires_at_ms),
                e.request_id
            ),
            Event::ResponseDeleted(e) => format!(
                "kept response {} of client={} deleted ({})",
                e.response_id, e.client, e.reason
            ),
            Event::WindowPrimed(e) => format!(
                "window={} primed for {} (+{} late) req={}",
                e.window,
                format_utc_ms(e.at),
                format_duration(envelope.at_ms.saturating_sub(e.at)),
                e.request_id
            ),
            Event::RouteDecided(e) => self.route_details(e, envelope.at_ms),
            Event::PeerApplied(e) => {
                // The origin's event, rendered as the origin saw it (its time, its seq).
                let inner = Envelope {
                    schema_version: envelope.schema_version,
                    seq: e.origin_seq,
                    at_ms: e.origin_at_ms,
                    event: (*e.event).clone(),
                };
                format!(
                    "from={} origin_seq={} {}: {}",
                    e.origin_node,
                    e.origin_seq,
                    e.event.kind(),
                    self.details(&inner)
                )
            }
        }
    }

    /// `chosen=k1/m order=[k1/m k3/m]`, or `NOTHING TO SERVE` when every target was blocked.
    fn route_details(&self, decided: &quotaroute_journal::RouteDecided, at_ms: u64) -> String {
        let targets = self
            .configs
            .get(&decided.generation)
            .and_then(|config| recorded_targets(config, &decided.combo))
            .map(|(_, targets)| targets);
        let name = |index: u16| match targets.as_ref().and_then(|t| t.get(usize::from(index))) {
            Some(target) => exec_key(&target.connection, &target.model),
            None => format!("#{index}"),
        };
        let order: Vec<String> = decided.order.iter().map(|&i| name(i)).collect();
        let chosen = match decided.chosen {
            Some(index) => format!("chosen={}", name(index)),
            None if decided.order.is_empty() => self.paint.paint(Tone::Bad, "NOTHING TO SERVE"),
            None => "chosen=none".to_string(),
        };
        let mut text = format!(
            "{chosen} order=[{}] room={} req={}",
            order.join(" "),
            decided.room.len(),
            decided.request_id
        );
        // Why it went there, when conversation affinity had a say (behaviour §10 "Seen").
        match (decided.affinity, decided.chosen) {
            (AffinityOutcome::Held, Some(index)) => {
                let _ = write!(
                    text,
                    " affinity=held: {}",
                    self.affinity.explain_held(&decided.combo, &name(index))
                );
            }
            (AffinityOutcome::New, _) => {
                text.push_str(
                    " affinity=new: its group is bound here (the affinity_bound of this req)",
                );
            }
            (AffinityOutcome::Moved, _) => {
                text.push_str(" affinity=moved: its bound target could not serve (the affinity_bound of this req says why)");
            }
            (AffinityOutcome::Held, None) | (AffinityOutcome::None, _) => {}
        }
        // Why by pace (behaviour §13 "Seen"): each paced candidate's pace and binding window.
        if !decided.paces.is_empty() {
            let named = |index: u16| {
                let connection = targets
                    .as_ref()
                    .and_then(|t| t.get(usize::from(index)))
                    .map(|target| target.connection.clone());
                (name(index), connection)
            };
            let _ = write!(
                text,
                " paced: {} ({})",
                self.pace.explain(&decided.paces, named, at_ms),
                self.pace.rule(decided.generation, &decided.combo)
            );
        }
        text
    }
}

/// Writes `envelope` as one NDJSON line (with newline).
pub fn json_line(envelope: &Envelope, out: &mut Vec<u8>) -> Result<(), NdjsonError> {
    out.extend_from_slice(envelope_to_json(envelope)?.as_bytes());
    out.push(b'\n');
    Ok(())
}

/// `provider/connection/model`, as much as the event names; `combo:<name>` for decisions.
pub fn subject_of(event: &Event) -> String {
    if let Event::RouteDecided(decided) = event {
        return format!("combo:{}", decided.combo);
    }
    let parts: Vec<&str> = [event.provider(), event.connection(), event.model()]
        .into_iter()
        .flatten()
        .collect();
    parts.join("/")
}

fn skipped_of(event: &Event) -> &[Skipped] {
    match event {
        Event::RequestSucceeded(e) => &e.skipped,
        Event::RequestFailed(e) => &e.skipped,
        Event::RouteDecided(e) => &e.skipped,
        _ => &[],
    }
}

/// ` client=ID` for a request event that names its client (journal schema 3), else nothing.
fn client_part(client: &Option<std::sync::Arc<str>>) -> String {
    client
        .as_ref()
        .map(|client| format!(" client={client}"))
        .unwrap_or_default()
}

/// `k2/m rate_limited 12s, k3/m disabled_auth (no end)`.
pub fn render_skipped(skipped: &[Skipped]) -> String {
    skipped
        .iter()
        .map(|s| {
            let remaining = s
                .remaining_ms
                .map_or("(no end)".to_string(), format_duration);
            format!(
                "{}/{} {} {remaining}",
                s.connection,
                s.model,
                s.reason.as_str()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn tone_of(event: &Event) -> Tone {
    match event {
        Event::RequestSucceeded(_) => Tone::Good,
        Event::RequestFailed(_) | Event::ConnectionDisabled(_) => Tone::Bad,
        Event::ConnectionCooldown(_) | Event::ModelLocked(_) => Tone::Warn,
        Event::BreakerTransition(e) => phase_tone(e.to),
        Event::RouteDecided(e) if e.chosen.is_none() => Tone::Bad,
        Event::RouteDecided(_) | Event::BreakerCounted(_) | Event::UsageObserved(_) => Tone::Dim,
        Event::PeerApplied(e) => tone_of(&e.event),
        _ => Tone::Info,
    }
}

fn phase_tone(phase: quotaroute_journal::BreakerPhase) -> Tone {
    match phase {
        quotaroute_journal::BreakerPhase::Open => Tone::Bad,
        quotaroute_journal::BreakerPhase::Closed => Tone::Good,
        _ => Tone::Warn,
    }
}

fn by_str(by: quotaroute_journal::ActionBy) -> &'static str {
    match by {
        quotaroute_journal::ActionBy::Router => "router",
        quotaroute_journal::ActionBy::Admin => "admin",
        quotaroute_journal::ActionBy::Reload => "reload",
        quotaroute_journal::ActionBy::Eviction => "eviction",
    }
}

fn source_str(source: quotaroute_journal::ResetSource) -> &'static str {
    match source {
        quotaroute_journal::ResetSource::Upstream => "upstream",
        quotaroute_journal::ResetSource::Backoff => "backoff",
        quotaroute_journal::ResetSource::Quota => "quota",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::testkit::sample_envelopes;

    #[test]
    fn item4_request_lines_show_skipped_targets_and_why() {
        let writer = TimelineWriter::default();
        for envelope in sample_envelopes(1, 1_764_424_992_345, 15) {
            let mut line = String::new();
            writer.text_line(&envelope, &mut line);
            assert!(line.starts_with("2025-11-29T14:03:1"), "{line}");
            assert!(!line.contains('\x1b'), "no colour by default: {line}");
            if matches!(
                envelope.event.kind(),
                "request_failed" | "request_succeeded" | "route_decided"
            ) {
                assert!(line.contains("skipped: conn-"), "{line}");
                assert!(line.contains("cooldown 1s"), "{line}");
            }
        }
    }

    #[test]
    fn columns_line_up_for_every_kind() {
        let writer = TimelineWriter::default();
        let starts: Vec<usize> = sample_envelopes(100, 1_764_424_992_345, 15)
            .iter()
            .map(|envelope| {
                let mut line = String::new();
                writer.text_line(envelope, &mut line);
                line.find(envelope.event.kind()).unwrap()
            })
            .collect();
        assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}");
    }

    #[test]
    fn colour_only_when_asked() {
        let writer = TimelineWriter::new(Paint::new(true));
        let envelope = &sample_envelopes(4, 1_000, 1)[0];
        let mut line = String::new();
        writer.text_line(envelope, &mut line);
        assert!(line.contains("\x1b["), "{line}");
    }

    #[test]
    fn s9_a_peers_event_says_which_node_saw_it() {
        let writer = TimelineWriter::default();
        let envelope = Envelope {
            schema_version: quotaroute_journal::SCHEMA_VERSION,
            seq: 40,
            at_ms: 1_764_424_992_345,
            event: quotaroute_journal::testkit::sample_event(19, 1),
        };
        let mut line = String::new();
        writer.text_line(&envelope, &mut line);
        assert!(line.contains("peer_applied"), "{line}");
        assert!(line.contains("anthropic/conn-1/gpt-4o-mini"), "{line}");
        assert!(
            line.contains("from=node-1 origin_seq=101 model_locked: "),
            "{line}"
        );
        assert!(line.contains("429"), "{line}");
    }

    /// "Why did this turn go to k1?": a held turn names its group's binding (digest, where and
    /// when it was bound); a move names where from, why, and since when it had been there.
    #[test]
    #[expect(
        clippy::too_many_lines,
        reason = "one narrated journal: events, then what each line says"
    )]
    fn an_affinity_held_turn_names_its_binding_and_a_move_says_from_where_and_why() {
        use quotaroute_journal::{
            AffinityBound, ApiFormat, AuthKind, ComboInfo, ConnectionInfo, ProviderInfo,
            RouteDecided, TargetInfo,
        };
        let connection = |id: &str| ConnectionInfo {
            id: id.into(),
            provider: "openai".into(),
            auth: AuthKind::ApiKey,
            weight: 1,
            max_concurrent: None,
            models: None,
        };
        let target = |id: &str| TargetInfo {
            connection: id.into(),
            model: "m".into(),
            weight: 1,
        };
        let config = Event::ConfigLoaded(ConfigLoaded {
            generation: 1,
            source: "q.toml".into(),
            digest: "d".into(),
            providers: vec![ProviderInfo {
                name: "openai".into(),
                format: ApiFormat::Openai,
                profile: AuthKind::ApiKey,
            }],
            connections: vec![connection("k1"), connection("k2")],
            combos: vec![ComboInfo {
                name: "pool".into(),
                strategy: "quota-share".into(),
                targets: vec![target("k1"), target("k2")],
            }],
        });
        let decided = |req: &str, chosen: u16, affinity: AffinityOutcome| {
            Event::RouteDecided(RouteDecided {
                request_id: req.into(),
                generation: 1,
                combo: "pool".into(),
                model: "pool".into(),
                room: vec![0, 1],
                chosen: Some(chosen),
                order: vec![chosen, 1 - chosen],
                skipped: vec![],
                affinity,
                client: Some("default".into()),
                group: None,
                paces: Vec::new(),
            })
        };
        let bound = |req: &str, connection: &str, moved_from: Option<&str>| {
            Event::AffinityBound(AffinityBound {
                request_id: req.into(),
                combo: "pool".into(),
                group: 0xab,
                client: "default".into(),
                provider: "openai".into(),
                connection: connection.into(),
                model: "m".into(),
                moved_from: moved_from.map(Into::into),
                reason: moved_from.map(|_| "model_locked".into()),
            })
        };
        let events = [
            config,
            decided("r1", 0, AffinityOutcome::New),
            bound("r1", "k1", None),
            decided("r2", 0, AffinityOutcome::Held),
            decided("r3", 1, AffinityOutcome::Moved),
            bound("r3", "k2", Some("k1/m")),
            decided("r4", 1, AffinityOutcome::Held),
            decided("r5", 0, AffinityOutcome::None),
        ];
        let mut writer = TimelineWriter::default();
        let lines: Vec<String> = events
            .into_iter()
            .enumerate()
            .map(|(i, event)| {
                let envelope = Envelope {
                    schema_version: quotaroute_journal::SCHEMA_VERSION,
                    seq: 10 + i as u64,
                    at_ms: 1_764_424_992_000 + 1_000 * i as u64,
                    event,
                };
                writer.observe(&envelope);
                let mut line = String::new();
                writer.text_line(&envelope, &mut line);
                line
            })
            .collect();
        assert!(
            lines[1].contains("chosen=k1/m") && lines[1].contains("affinity=new"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains("group=00000000000000ab client=default new group bound to k1/m"),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].contains(
                "affinity=held: held by group 00000000000000ab (client default) bound to k1/m at 2025-11-29T14:03:14"
            ) && lines[3].contains("#12 by req=r1"),
            "{}",
            lines[3]
        );
        assert!(lines[4].contains("affinity=moved"), "{}", lines[4]);
        assert!(
            lines[5].contains(
                "moved from k1/m (model_locked) to k2/m, bound there since 2025-11-29T14:03:14"
            ) && lines[5].contains("#12"),
            "{}",
            lines[5]
        );
        assert!(
            lines[6].contains("held by group 00000000000000ab (client default) bound to k2/m")
                && lines[6].contains("#15 by req=r3, after moving from k1/m (model_locked)"),
            "{}",
            lines[6]
        );
        assert!(!lines[7].contains("affinity"), "{}", lines[7]);
    }

    /// "Why did this turn go to an-1?": a paced decision names each candidate's pace, binding
    /// window and what the journal last read of it (behaviour §13 "Seen").
    #[test]
    fn a_paced_turn_names_each_candidate_s_pace_and_window() {
        use quotaroute_journal::{
            ApiFormat, AuthKind, CandidatePace, ComboInfo, ConnectionInfo, ProviderInfo,
            RouteDecided, TargetInfo, UsageObserved, UsageSource,
        };
        const AT: u64 = 1_764_424_992_000;
        let connection = |id: &str| ConnectionInfo {
            id: id.into(),
            provider: "anthropic".into(),
            auth: AuthKind::Oauth,
            weight: 1,
            max_concurrent: None,
            models: None,
        };
        let target = |id: &str| TargetInfo {
            connection: id.into(),
            model: "m".into(),
            weight: 1,
        };
        let events = [
            Event::ConfigLoaded(ConfigLoaded {
                generation: 1,
                source: "q.toml".into(),
                digest: "d".into(),
                providers: vec![ProviderInfo {
                    name: "anthropic".into(),
                    format: ApiFormat::Anthropic,
                    profile: AuthKind::Oauth,
                }],
                connections: vec![connection("an-1"), connection("an-2")],
                combos: vec![ComboInfo {
                    name: "pair".into(),
                    strategy: "quota-share".into(),
                    targets: vec![target("an-1"), target("an-2")],
                }],
            }),
            Event::UsageObserved(UsageObserved {
                provider: "anthropic".into(),
                connection: "an-2".into(),
                window: "5h".into(),
                used: 50,
                limit: 100,
                resets_at_ms: Some(AT + 4 * 3_600_000),
                source: UsageSource::Header,
            }),
            Event::RouteDecided(RouteDecided {
                request_id: "r1".into(),
                generation: 1,
                combo: "pair".into(),
                model: "pair".into(),
                room: vec![0, 1],
                chosen: Some(0),
                order: vec![0, 1],
                skipped: vec![],
                affinity: AffinityOutcome::None,
                client: Some("default".into()),
                group: None,
                paces: vec![
                    CandidatePace {
                        target: 0,
                        pace: 2_500,
                        window: Some("5h".into()),
                    },
                    CandidatePace {
                        target: 1,
                        pace: 625,
                        window: Some("5h".into()),
                    },
                ],
            }),
        ];
        let mut writer = TimelineWriter::default();
        let mut line = String::new();
        for (i, event) in events.iter().cloned().enumerate() {
            let envelope = Envelope {
                schema_version: quotaroute_journal::SCHEMA_VERSION,
                seq: 1 + i as u64,
                at_ms: AT,
                event,
            };
            writer.observe(&envelope);
            line.clear();
            writer.text_line(&envelope, &mut line);
        }
        assert!(
            line.contains(
                "paced: an-1/m: pace 2.50, 5h; an-2/m: pace 0.63, 5h 50 % used, resets in 4h00m (rule: exponent 1, wall clock, all windows)"
            ),
            "{line}"
        );
        // With the knobs the generation journaled: the explanation names them.
        let rule = Event::PacingRule(quotaroute_journal::PacingRule {
            generation: 1,
            exponent_pm: 1_000,
            clock: quotaroute_journal::PacingClock::Wall,
            pace_windows: quotaroute_journal::PaceWindows::All,
            combos: vec![quotaroute_journal::ComboPacing::new(
                "pair",
                quotaroute_journal::PacingKnobs {
                    exponent_pm: 2_000,
                    clock: quotaroute_journal::PacingClock::Demand,
                    pace_windows: quotaroute_journal::PaceWindows::Longest,
                },
            )],
        });
        let mut writer = TimelineWriter::default();
        let [config, observed, decided] = events;
        for (i, event) in [config, rule, observed, decided].into_iter().enumerate() {
            let envelope = Envelope {
                schema_version: quotaroute_journal::SCHEMA_VERSION,
                seq: 1 + i as u64,
                at_ms: AT,
                event,
            };
            writer.observe(&envelope);
            line.clear();
            writer.text_line(&envelope, &mut line);
        }
        assert!(
            line.contains("(rule: exponent 2, demand clock, longest windows)"),
            "{line}"
        );
    }

    #[test]
    fn a_primed_window_reads_as_its_connection_window_and_prime_time() {
        const AT: u64 = 1_796_540_400_000; // 2026-12-06T07:00:00Z
        let envelope = Envelope {
            schema_version: quotaroute_journal::SCHEMA_VERSION,
            seq: 9,
            at_ms: AT + 1_500,
            event: Event::WindowPrimed(quotaroute_journal::WindowPrimed {
                provider: "anthropic".into(),
                connection: "max-1".into(),
                window: "5h".into(),
                model: "claude-sonnet-4".into(),
                at: AT,
                request_id: "qr-1-prime".into(),
            }),
        };
        let mut line = String::new();
        TimelineWriter::default().text_line(&envelope, &mut line);
        assert!(line.contains("window_primed"), "{line}");
        assert!(
            line.contains(
                "anthropic/max-1/claude-sonnet-4     window=5h primed for 2026-12-06T07:00:00.000Z"
            ),
            "{line}"
        );
        assert!(line.contains("req=qr-1-prime"), "{line}");
    }
}
