//! Deterministic sample events of every kind, for tests, benchmarks, the golden journal and
//! demos. Pure functions of their arguments: no clock, no randomness.

use crate::event::*;

/// How many event kinds exist (the length of [`Event::KINDS`]).
pub const KIND_COUNT: usize = Event::KINDS.len();

fn skipped(n: u64) -> Vec<Skipped> {
    vec![Skipped {
        connection: format!("conn-{}", n % 3),
        model: "gpt-4o-mini".to_string(),
        reason: BlockReason::Cooldown,
        remaining_ms: Some(1_000 + n),
    }]
}

/// The `n`-th sample of the event kind at `kind_index` (modulo [`KIND_COUNT`]), in variant
/// order of [`Event`]. Contents vary with `n` so samples are distinguishable.
#[expect(
    clippy::too_many_lines,
    reason = "one sample per event kind: a table, kept exhaustive by `KIND_COUNT`"
)]
pub fn sample_event(kind_index: usize, n: u64) -> Event {
    let connection = format!("conn-{}", n % 3);
    let provider = if n & 1 == 0 { "openai" } else { "anthropic" }.to_string();
    let model = "gpt-4o-mini".to_string();
    match kind_index % KIND_COUNT {
        0 => Event::NodeStarted(NodeStarted {
            version: "0.1.0".to_string(),
            pid: 4_000 + n as u32,
            recovered_seq: n,
        }),
        1 => Event::ConfigLoaded(ConfigLoaded {
            generation: 1 + n / 15,
            source: "./quotaroute.toml".to_string(),
            digest: format!("{n:016x}"),
            providers: vec![ProviderInfo {
                name: provider.clone(),
                format: ApiFormat::Openai,
                profile: AuthKind::ApiKey,
            }],
            connections: vec![ConnectionInfo {
                id: connection.clone(),
                provider: provider.clone(),
                auth: AuthKind::Oauth,
                weight: 2,
                max_concurrent: Some(8),
                models: Some(vec![model.clone()]),
            }],
            combos: vec![ComboInfo {
                name: "team".to_string(),
                strategy: "quota-share".to_string(),
                targets: vec![TargetInfo {
                    connection,
                    model,
                    weight: 1,
                }],
            }],
        }),
        2 => Event::RequestSucceeded(RequestSucceeded {
            request_id: format!("req-{n}").into(),
            combo: "team".into(),
            provider: provider.into(),
            connection: connection.into(),
            model: model.into(),
            status: 200,
            attempt: 1 + (n % 3) as u32,
            latency_ms: 100 + n,
            tokens_in: 10 * n,
            tokens_out: 20 * n,
            stream: n & 1 == 0,
            skipped: skipped(n),
            tokens_cached: 5 * n,
            tokens_cache_write: n & 1,
            client: Some(format!("team-{}", n % 2).into()),
            cost_usd: n.is_multiple_of(3).then_some(0.000_5 * n as f64),
            items_left_out: 0,
            translated: None,
            usage_estimated: false,
            period_spend_pusd: n.is_multiple_of(3).then_some(500_000_000 * n),
            period_start_ms: n.is_multiple_of(3).then_some(1_764_547_200_000),
        }),
        3 => Event::RequestFailed(RequestFailed {
            request_id: format!("req-{n}").into(),
            combo: "team".into(),
            provider: provider.into(),
            connection: connection.into(),
            model: model.into(),
            status: Some(429),
            class: OutcomeClass::RateLimited,
            error_code: Some("rate_limit_exceeded".to_string()),
            message: Some("Rate limit reached for sk-***".to_string()),
            attempt: 2,
            latency_ms: 50 + n,
            reset_hint_ms: Some(30_000),
            stream: false,
            after_first_content: false,
            skipped: skipped(n),
            client: Some(format!("team-{}", n % 2).into()),
            translated: None,
        }),
        4 => Event::ConnectionCooldown(ConnectionCooldown {
            provider,
            connection,
            class: OutcomeClass::ServerError,
            status: Some(503),
            level: (n % 5) as u32,
            until_ms: 1_000_000 + n,
            from_retry_after: n & 1 == 1,
        }),
        5 => Event::ConnectionDisabled(ConnectionDisabled {
            provider,
            connection,
            reason: DisableReason::Billing,
            status: Some(402),
            error_code: Some("insufficient_quota".to_string()),
            until_ms: Some(2_000_000 + n),
        }),
        6 => Event::ConnectionCleared(ConnectionCleared {
            provider,
            connection,
            by: ActionBy::Admin,
        }),
        7 => Event::ModelLocked(ModelLocked {
            provider,
            connection,
            model,
            reason: LockReason::QuotaExhausted,
            status: Some(429),
            error_code: None,
            until_ms: 3_000_000 + n,
            failure_count: 1 + (n % 4) as u32,
            source: ResetSource::Backoff,
        }),
        8 => Event::ModelUnlocked(ModelUnlocked {
            provider,
            connection,
            model,
            by: ActionBy::Router,
        }),
        9 => Event::BreakerTransition(BreakerTransition {
            provider,
            from: BreakerPhase::Closed,
            to: BreakerPhase::Open,
            failures: 12,
            cycles: (n % 3) as u32,
            until_ms: Some(4_000_000 + n),
            by: ActionBy::Router,
        }),
        10 => Event::UsageObserved(UsageObserved {
            provider,
            connection,
            window: "5h".to_string(),
            used: 1_234 + n,
            limit: 10_000,
            resets_at_ms: Some(5_000_000 + n),
            source: UsageSource::Header,
        }),
        11 => Event::AdminAction(AdminAction {
            action: "clear_lockout".to_string(),
            target: format!("{connection}/{model}"),
            by: "admin".to_string(),
        }),
        12 => Event::NodeStopped(NodeStopped {
            reason: "SIGTERM".to_string(),
            uptime_ms: 60_000 + n,
        }),
        13 => Event::RouteDecided(RouteDecided {
            request_id: format!("req-{n}").into(),
            generation: 1 + n / 15,
            combo: "team".into(),
            model: model.into(),
            room: vec![0, 1, 2],
            chosen: Some((n % 3) as u16),
            order: vec![1, 0, 2],
            skipped: skipped(n),
            affinity: [
                AffinityOutcome::None,
                AffinityOutcome::New,
                AffinityOutcome::Held,
                AffinityOutcome::Moved,
            ][(n % 4) as usize],
            client: Some(format!("team-{}", n % 2).into()),
            group: None,
            paces: Vec::new(),
        }),
        14 => Event::BreakerCounted(BreakerCounted {
            provider,
            connection,
            failure: n & 1 == 0,
            failures: (n % 12) as u32,
        }),
        16 => Event::JournalRecovered(JournalRecovered {
            failed_for_ms: 1_000 + n,
            write_errors: n % 7,
            dropped_request_events: n % 5,
        }),
        17 => Event::CredentialRefreshed(CredentialRefreshed {
            provider,
            connection,
            source: "command".to_string(),
            trigger: "ttl".to_string(),
            expires_at_ms: Some(1_000_000 + n),
        }),
        18 => Event::CredentialFailed(CredentialFailed {
            provider,
            connection,
            source: "oauth".to_string(),
            trigger: "expiring".to_string(),
            error: "token endpoint answered 500".to_string(),
            last_good_until_ms: n.is_multiple_of(2).then_some(2_000_000 + n),
        }),
        19 => Event::PeerApplied(PeerApplied {
            origin_node: format!("node-{}", n % 3),
            origin_seq: 100 + n,
            origin_at_ms: 1_700_000_000_000 + n,
            stream_id: format!("1700000000000-{n}"),
            event: Box::new(Event::ModelLocked(ModelLocked {
                provider,
                connection,
                model,
                reason: LockReason::RateLimited,
                status: Some(429),
                error_code: Some("rate_limit_exceeded".to_string()),
                until_ms: 1_700_000_060_000 + n,
                failure_count: 1 + (n % 4) as u32,
                source: ResetSource::Upstream,
            })),
        }),
        20 => Event::AffinityBound(AffinityBound {
            request_id: format!("req-{n}"),
            combo: "team".to_string(),
            group: 0x9e37_79b9_7f4a_7c15 ^ n,
            client: "default".to_string(),
            provider,
            connection,
            model,
            moved_from: n
                .is_multiple_of(2)
                .then(|| "conn-9/gpt-4o-mini".to_string()),
            reason: n.is_multiple_of(2).then(|| "rate_limited".to_string()),
        }),
        21 => Event::ClientUsage(ClientUsage {
            request_id: format!("req-{n}"),
            client: format!("team-{}", n % 2),
            combo: "team".to_string(),
            provider,
            connection,
            model,
            tokens_in: 100 + n,
            tokens_out: 20 + n,
            tokens_cached: n % 50,
            tokens_cache_write: n % 7,
            cost_usd: n.is_multiple_of(3).then_some(0.25 * n as f64),
            period_spend_pusd: 250_000_000_000 * n,
            period_start_ms: 1_700_000_000_000,
            estimated: false,
        }),
        22 => Event::ClientLimited(ClientLimited {
            request_id: format!("req-{n}"),
            client: format!("team-{}", n % 2),
            limit: "requests_per_min".to_string(),
            retry_after_ms: (!n.is_multiple_of(4)).then_some(1_000 + n),
        }),
        23 => Event::ApiUnserved(ApiUnserved {
            request_id: format!("req-{n}"),
            provider,
            connection,
            api: "responses".to_string(),
            path: "/v1/responses".to_string(),
        }),
        24 => Event::PacingRule(PacingRule {
            generation: n + 1,
            exponent_pm: 1_000,
            clock: PacingClock::Wall,
            pace_windows: PaceWindows::All,
            combos: vec![ComboPacing::new(
                "team",
                PacingKnobs {
                    exponent_pm: 2_000,
                    clock: if n.is_multiple_of(2) {
                        PacingClock::Demand
                    } else {
                        PacingClock::Wall
                    },
                    pace_windows: PaceWindows::Longest,
                },
            )],
        }),
        25 => Event::ResponseStored(ResponseStored {
            request_id: format!("req-{n}"),
            response_id: format!("resp_qrt_{n}"),
            client: format!("team-{}", n % 2),
            connection,
            bytes: 1_000 + n,
            expires_at_ms: 1_702_592_000_000 + n,
        }),
        26 => Event::ResponseDeleted(ResponseDeleted {
            response_id: format!("resp_qrt_{n}"),
            client: format!("team-{}", n % 2),
            reason: ["client", "expired", "evicted"][(n % 3) as usize].to_string(),
        }),
        27 => Event::WindowPrimed(WindowPrimed {
            provider,
            connection,
            window: "5h".to_string(),
            model,
            at: 1_700_000_000_000 + n,
            request_id: format!("prime-{n}"),
        }),
        _ => Event::ResponseBound(ResponseBound {
            request_id: format!("req-{n}"),
            response_id: format!("resp_{n}"),
            combo: "team".to_string(),
            provider,
            connection,
            model,
            client: None,
        }),
    }
}

/// `count` envelopes with seqs from `first_seq`, one millisecond apart from `first_at_ms`,
/// cycling through every kind.
pub fn sample_envelopes(first_seq: u64, first_at_ms: u64, count: u64) -> Vec<Envelope> {
    (0..count)
        .map(|i| Envelope {
            schema_version: SCHEMA_VERSION,
            seq: first_seq + i,
            at_ms: first_at_ms + i,
            event: sample_event((first_seq + i) as usize, first_seq + i),
        })
        .collect()
}

/// A `request_succeeded` for tests: the given ids and token counts, everything else fixed.
pub fn succeeded(
    provider: &str,
    connection: &str,
    model: &str,
    tokens_in: u64,
    tokens_out: u64,
) -> Event {
    Event::RequestSucceeded(RequestSucceeded {
        request_id: "r".into(),
        combo: "c".into(),
        provider: provider.into(),
        connection: connection.into(),
        model: model.into(),
        status: 200,
        attempt: 1,
        latency_ms: 1,
        tokens_in,
        tokens_out,
        stream: false,
        skipped: Vec::new(),
        tokens_cached: 0,
        tokens_cache_write: 0,
        client: Some("default".into()),
        cost_usd: None,
        items_left_out: 0,
        translated: None,
        usage_estimated: false,
        period_spend_pusd: None,
        period_start_ms: None,
    })
}

/// A `request_failed` for tests: the given ids, status and class, everything else fixed.
pub fn failed(
    provider: &str,
    connection: &str,
    model: &str,
    status: Option<u16>,
    class: OutcomeClass,
) -> Event {
    Event::RequestFailed(RequestFailed {
        request_id: "r".into(),
        combo: "c".into(),
        provider: provider.into(),
        connection: connection.into(),
        model: model.into(),
        status,
        class,
        error_code: None,
        message: None,
        attempt: 1,
        latency_ms: 1,
        reset_hint_ms: None,
        stream: false,
        after_first_content: false,
        skipped: Vec::new(),
        client: Some("default".into()),
        translated: None,
    })
}
