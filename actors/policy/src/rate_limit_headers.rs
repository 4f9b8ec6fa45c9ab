//! Usage readings from upstream rate-limit headers (behaviour §6, source 2): what the upstream says
//! is used, of what limit, until when, per window.
//!
//! Codex (ChatGPT account) windows come as `x-codex-{primary,secondary}-*` and are named by their
//! minutes (300 → `5h`, 10080 → `7d`), never by their position: some plans report the weekly
//! window as primary.
//!
//! Pure parsing of one response's headers, `now_ms` given. It must not decide saturation or keep
//! buckets (that is `buckets`); unparseable, negative and sentinel values (Azure's `-1`, a limit of
//! `0`) are ignored, never fatal.

use std::sync::LazyLock;

use crate::reset_hint;
use http::{HeaderMap, HeaderName};

/// Basis points in a whole: utilisation readings use this as their limit.
pub const BASIS_POINTS: u64 = 10_000;

/// One window's state as an upstream reported it; becomes a `usage_observed` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageReading {
    /// `requests:<model>`, `tokens:<model>`, `input-tokens:<model>`, `output-tokens:<model>`,
    /// `5h` or `7d`.
    pub window: String,
    pub used: u64,
    pub limit: u64,
    /// Absolute Unix ms; `None` when the upstream gave no parseable reset.
    pub resets_at_ms: Option<u64>,
}

fn header<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    headers.get(name)?.to_str().ok()
}

/// Any reset dialect (Go duration, RFC 3339, Unix time, seconds) as an absolute Unix ms.
fn reset_at(headers: &HeaderMap, name: &HeaderName, now_ms: u64) -> Option<u64> {
    let delta_ms = reset_hint::any_reset_ms(header(headers, name)?, now_ms)?;
    Some(now_ms.saturating_add(delta_ms))
}

/// A count window's header names (`limit`, `remaining`, `reset`) and the name of its window.
struct CountWindow {
    name: &'static str,
    limit: HeaderName,
    remaining: HeaderName,
    reset: HeaderName,
}

/// A subscription window's header names.
struct UnifiedWindow {
    name: &'static str,
    utilization: HeaderName,
    reset: HeaderName,
    /// `allowed`, `allowed_warning` or `rejected` (this window is spent).
    status: HeaderName,
}

/// The subscription's overall headers: `rejected` when any window is spent, the claim naming
/// which one (`five_hour`, `seven_day`), and its reset.
struct UnifiedOverall {
    status: HeaderName,
    claim: HeaderName,
    reset: HeaderName,
}

/// A Codex window slot's header names (`x-codex-<slot>-*`).
struct CodexWindow {
    used_percent: HeaderName,
    window_minutes: HeaderName,
    reset_after_seconds: HeaderName,
    reset_at: HeaderName,
}

/// Every header name this module reads, parsed once: looking headers up by `&str` parses the
/// name on every call, and this runs on every upstream response.
struct HeaderNames {
    counts: Vec<CountWindow>,
    unified: Vec<UnifiedWindow>,
    unified_overall: UnifiedOverall,
    codex: Vec<CodexWindow>,
}

fn header_name(name: String) -> Option<HeaderName> {
    HeaderName::try_from(name).ok()
}

static HEADER_NAMES: LazyLock<HeaderNames> = LazyLock::new(|| {
    let openai = OPENAI_WINDOWS.into_iter().filter_map(|name| {
        Some(CountWindow {
            name,
            limit: header_name(format!("x-ratelimit-limit-{name}"))?,
            remaining: header_name(format!("x-ratelimit-remaining-{name}"))?,
            reset: header_name(format!("x-ratelimit-reset-{name}"))?,
        })
    });
    let anthropic = ANTHROPIC_WINDOWS.into_iter().filter_map(|name| {
        Some(CountWindow {
            name,
            limit: header_name(format!("anthropic-ratelimit-{name}-limit"))?,
            remaining: header_name(format!("anthropic-ratelimit-{name}-remaining"))?,
            reset: header_name(format!("anthropic-ratelimit-{name}-reset"))?,
        })
    });
    let unified = UNIFIED_WINDOWS.into_iter().filter_map(|name| {
        Some(UnifiedWindow {
            name,
            utilization: header_name(format!("anthropic-ratelimit-unified-{name}-utilization"))?,
            reset: header_name(format!("anthropic-ratelimit-unified-{name}-reset"))?,
            status: header_name(format!("anthropic-ratelimit-unified-{name}-status"))?,
        })
    });
    let codex = CODEX_SLOTS.into_iter().filter_map(|slot| {
        let name = |part: &str| header_name(format!("x-codex-{slot}-{part}"));
        Some(CodexWindow {
            used_percent: name("used-percent")?,
            window_minutes: name("window-minutes")?,
            reset_after_seconds: name("reset-after-seconds")?,
            reset_at: name("reset-at")?,
        })
    });
    HeaderNames {
        counts: openai.chain(anthropic).collect(),
        unified: unified.collect(),
        unified_overall: UnifiedOverall {
            status: HeaderName::from_static("anthropic-ratelimit-unified-status"),
            claim: HeaderName::from_static("anthropic-ratelimit-unified-representative-claim"),
            reset: HeaderName::from_static("anthropic-ratelimit-unified-reset"),
        },
        codex: codex.collect(),
    }
});

/// The claim names Anthropic gives its subscription windows, as the windows are named here.
fn claimed_window(claim: &str) -> Option<&'static str> {
    match claim.trim() {
        "five_hour" => Some("5h"),
        "seven_day" | "seven_day_opus" | "seven_day_sonnet" => Some("7d"),
        _ => None,
    }
}

/// A `rejected` status: the subscription refuses requests until the reset.
fn rejected(headers: &HeaderMap, name: &HeaderName) -> bool {
    header(headers, name).is_some_and(|status| status.trim().eq_ignore_ascii_case("rejected"))
}

/// A count window from its `limit`, `remaining` and `reset` headers; `None` unless both counts
/// parse and the limit is a real one (not the `0` sentinel).
fn count_window(
    headers: &HeaderMap,
    window: &CountWindow,
    model: &str,
    now_ms: u64,
) -> Option<UsageReading> {
    let limit = header(headers, &window.limit)
        .and_then(reset_hint::count)
        .filter(|limit| *limit > 0)?;
    let remaining = header(headers, &window.remaining).and_then(reset_hint::count)?;
    Some(UsageReading {
        window: format!("{}:{model}", window.name),
        used: limit.saturating_sub(remaining),
        limit,
        resets_at_ms: reset_at(headers, &window.reset, now_ms),
    })
}

/// A utilisation as basis points: a fraction when ≤ 1 (`0.25`), else a percentage (`25`, `25.5`).
/// Signs, exponents, `NaN` and `inf` are rejected by the character check.
fn utilization_basis_points(value: &str) -> Option<u64> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let number: f64 = value.parse().ok()?;
    let per_whole = if number <= 1.0 { 10_000.0 } else { 100.0 };
    let basis_points = (number * per_whole).round();
    // Far beyond any real utilisation (and beyond exact f64 → u64) is garbage.
    (basis_points.is_finite() && basis_points < 1e15).then_some(basis_points as u64)
}

/// A percentage (`100`, `42.5`, `0.5`) as basis points; unlike a utilisation, `1` is 1 %, not a
/// whole. Signs, exponents, `NaN` and `inf` are rejected by the character check.
fn percent_basis_points(value: &str) -> Option<u64> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let basis_points = (value.parse::<f64>().ok()? * 100.0).round();
    (basis_points.is_finite() && basis_points < 1e15).then_some(basis_points as u64)
}

/// A window's name from its length in minutes: whole days as `<n>d`, whole hours as `<n>h`,
/// else `<n>m` (so 300 → `5h`, 10080 → `7d`); `None` for 0 or garbage.
fn window_name(minutes: &str) -> Option<String> {
    let minutes = reset_hint::count(minutes).filter(|minutes| *minutes > 0)?;
    Some(if minutes % 1440 == 0 {
        format!("{}d", minutes / 1440)
    } else if minutes % 60 == 0 {
        format!("{}h", minutes / 60)
    } else {
        format!("{minutes}m")
    })
}

/// One Codex window slot: its used percentage as basis points of [`BASIS_POINTS`], named by
/// its minutes; the reset from `-reset-at` (Unix seconds), else `-reset-after-seconds`.
fn codex_window(headers: &HeaderMap, slot: &CodexWindow, now_ms: u64) -> Option<UsageReading> {
    let window = header(headers, &slot.window_minutes).and_then(window_name)?;
    let used = header(headers, &slot.used_percent).and_then(percent_basis_points)?;
    let reset_at = header(headers, &slot.reset_at).and_then(reset_hint::unix_time_ms);
    let reset_after = || {
        let seconds = header(headers, &slot.reset_after_seconds)?;
        let delta_ms = reset_hint::retry_after(seconds, now_ms)?;
        Some(now_ms.saturating_add(delta_ms))
    };
    Some(UsageReading {
        window,
        used,
        limit: BASIS_POINTS,
        resets_at_ms: reset_at.or_else(reset_after),
    })
}

/// Whether `name` belongs to one of the families read here (every name in [`HEADER_NAMES`]
/// starts with one of these).
fn is_rate_limit_header(name: &HeaderName) -> bool {
    let name = name.as_str();
    name.starts_with("x-ratelimit-")
        || name.starts_with("anthropic-ratelimit-")
        || name.starts_with("x-codex-")
}

/// Codex's window slots, as in `x-codex-<slot>-used-percent`.
const CODEX_SLOTS: [&str; 2] = ["primary", "secondary"];
/// Names of the OpenAI windows, as in `x-ratelimit-limit-<name>`.
const OPENAI_WINDOWS: [&str; 2] = ["requests", "tokens"];
/// Names of the Anthropic per-model windows, as in `anthropic-ratelimit-<name>-limit`.
const ANTHROPIC_WINDOWS: [&str; 4] = ["requests", "tokens", "input-tokens", "output-tokens"];
/// Subscription windows reported as `anthropic-ratelimit-unified-<window>-utilization`.
const UNIFIED_WINDOWS: [&str; 2] = ["5h", "7d"];

/// Every window reading these response headers carry, for `model` on this connection:
/// `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (OpenAI and compatibles),
/// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`,
/// and subscription utilisation `anthropic-ratelimit-unified-{5h,7d}-utilization` (+ `-reset`)
/// as basis points of [`BASIS_POINTS`], and Codex's `x-codex-{primary,secondary}-*` windows the
/// same way, named by their minutes.
pub fn readings_from_headers(headers: &HeaderMap, model: &str, now_ms: u64) -> Vec<UsageReading> {
    // One pass over the names the response has is cheaper than the dozen lookups below, and
    // an upstream that sends no rate-limit header at all is common (local and compatible
    // servers).
    if !headers.keys().any(is_rate_limit_header) {
        return Vec::new();
    }
    let names = &*HEADER_NAMES;
    let counts = names
        .counts
        .iter()
        .filter_map(|window| count_window(headers, window, model, now_ms));
    let overall = &names.unified_overall;
    // The subscription says it refuses requests: the window its claim names (else the 5-hour
    // one) is spent until the overall reset, whatever its utilisation reads (§13).
    let spent_window = rejected(headers, &overall.status).then(|| {
        header(headers, &overall.claim)
            .and_then(claimed_window)
            .unwrap_or("5h")
    });
    let mut unified: Vec<UsageReading> = names
        .unified
        .iter()
        .filter_map(|window| {
            let spent = rejected(headers, &window.status) || spent_window == Some(window.name);
            let used = header(headers, &window.utilization).and_then(utilization_basis_points);
            let used = if spent {
                BASIS_POINTS.max(used.unwrap_or(0))
            } else {
                used?
            };
            let resets_at_ms = reset_at(headers, &window.reset, now_ms).or_else(|| {
                spent
                    .then(|| reset_at(headers, &overall.reset, now_ms))
                    .flatten()
            });
            Some(UsageReading {
                window: window.name.to_owned(),
                used,
                limit: BASIS_POINTS,
                resets_at_ms,
            })
        })
        .collect();
    let codex = names
        .codex
        .iter()
        .filter_map(|slot| codex_window(headers, slot, now_ms));
    let mut readings: Vec<UsageReading> = counts.collect();
    readings.append(&mut unified);
    readings.extend(codex);
    readings
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

    /// 2024-06-01T12:00:00Z.
    const NOW: u64 = 1_717_243_200_000;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn reading(window: &str, used: u64, limit: u64, resets_at_ms: Option<u64>) -> UsageReading {
        UsageReading {
            window: window.to_owned(),
            used,
            limit,
            resets_at_ms,
        }
    }

    #[test]
    fn every_name_read_is_in_a_family_the_first_pass_looks_for() {
        let names = &*HEADER_NAMES;
        let all = names
            .counts
            .iter()
            .flat_map(|w| [&w.limit, &w.remaining, &w.reset])
            .chain(
                names
                    .unified
                    .iter()
                    .flat_map(|w| [&w.utilization, &w.reset]),
            )
            .chain(names.codex.iter().flat_map(|w| {
                [
                    &w.used_percent,
                    &w.window_minutes,
                    &w.reset_after_seconds,
                    &w.reset_at,
                ]
            }));
        let mut count = 0;
        for name in all {
            assert!(is_rate_limit_header(name), "{name}");
            count += 1;
        }
        assert_eq!(count, 6 * 3 + 2 * 2 + 2 * 4);
        // Headers of no family: nothing read, whatever they say.
        let other = headers(&[
            ("x-request-id", "req_1"),
            ("content-type", "application/json"),
        ]);
        assert!(readings_from_headers(&other, "gpt", NOW).is_empty());
    }

    #[test]
    fn s6_openai_request_and_token_windows() {
        let map = headers(&[
            ("x-ratelimit-limit-requests", "5000"),
            ("x-ratelimit-remaining-requests", "4999"),
            ("x-ratelimit-reset-requests", "12ms"),
            ("x-ratelimit-limit-tokens", "30000"),
            ("x-ratelimit-remaining-tokens", "1500"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]);
        assert_eq!(
            readings_from_headers(&map, "gpt-4o", NOW),
            vec![
                reading("requests:gpt-4o", 1, 5000, Some(NOW + 12)),
                reading("tokens:gpt-4o", 28_500, 30_000, Some(NOW + 360_000)),
            ]
        );
    }

    #[test]
    fn s6_anthropic_windows_with_rfc3339_resets() {
        let map = headers(&[
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2024-06-01T12:00:30Z"),
            ("anthropic-ratelimit-input-tokens-limit", "40000"),
            ("anthropic-ratelimit-input-tokens-remaining", "39000"),
            (
                "anthropic-ratelimit-input-tokens-reset",
                "2024-06-01T12:01:00Z",
            ),
            ("anthropic-ratelimit-output-tokens-limit", "8000"),
            ("anthropic-ratelimit-output-tokens-remaining", "8000"),
            ("anthropic-ratelimit-tokens-limit", "48000"),
            ("anthropic-ratelimit-tokens-remaining", "47000"),
            ("anthropic-ratelimit-tokens-reset", "2024-06-01T11:59:00Z"),
        ]);
        assert_eq!(
            readings_from_headers(&map, "claude-sonnet-4", NOW),
            vec![
                reading("requests:claude-sonnet-4", 50, 50, Some(NOW + 30_000)),
                reading("tokens:claude-sonnet-4", 1_000, 48_000, Some(NOW)),
                reading(
                    "input-tokens:claude-sonnet-4",
                    1_000,
                    40_000,
                    Some(NOW + 60_000)
                ),
                reading("output-tokens:claude-sonnet-4", 0, 8_000, None),
            ]
        );
    }

    #[test]
    fn s6_subscription_utilisation_feeds_5h_and_7d() {
        let cases: &[(&str, Option<u64>)] = &[
            ("0.25", Some(2_500)),
            ("0", Some(0)),
            ("1", Some(10_000)),
            ("1.0", Some(10_000)),
            ("0.98764", Some(9_876)),
            ("25", Some(2_500)),
            ("99.5", Some(9_950)),
            ("100", Some(10_000)),
            ("-1", None),
            ("-0.5", None),
            ("1e2", None),
            ("NaN", None),
            ("inf", None),
            ("", None),
            ("..", None),
            ("high", None),
        ];
        for (value, want) in cases {
            let map = headers(&[
                ("anthropic-ratelimit-unified-5h-utilization", value),
                ("anthropic-ratelimit-unified-5h-reset", "1717246800"),
            ]);
            let want: Vec<_> = want
                .map(|bp| reading("5h", bp, BASIS_POINTS, Some(NOW + 3_600_000)))
                .into_iter()
                .collect();
            assert_eq!(readings_from_headers(&map, "m", NOW), want, "{value:?}");
        }
        let weekly = headers(&[("anthropic-ratelimit-unified-7d-utilization", "0.5")]);
        assert_eq!(
            readings_from_headers(&weekly, "m", NOW),
            vec![reading("7d", 5_000, BASIS_POINTS, None)]
        );
    }

    #[test]
    fn s13_a_rejected_subscription_spends_the_window_it_names() {
        // Overall status with the claim: that window is spent until the overall reset.
        let map = headers(&[
            ("anthropic-ratelimit-unified-status", "rejected"),
            (
                "anthropic-ratelimit-unified-representative-claim",
                "seven_day",
            ),
            ("anthropic-ratelimit-unified-reset", "1717246800"),
            ("anthropic-ratelimit-unified-5h-utilization", "0.4"),
            ("anthropic-ratelimit-unified-7d-utilization", "0.97"),
        ]);
        assert_eq!(
            readings_from_headers(&map, "m", NOW),
            vec![
                reading("5h", 4_000, BASIS_POINTS, None),
                reading("7d", BASIS_POINTS, BASIS_POINTS, Some(NOW + 3_600_000)),
            ]
        );
        // A window's own status, with no utilisation at all.
        let map = headers(&[
            ("anthropic-ratelimit-unified-5h-status", "rejected"),
            ("anthropic-ratelimit-unified-5h-reset", "1717246800"),
        ]);
        assert_eq!(
            readings_from_headers(&map, "m", NOW),
            vec![reading(
                "5h",
                BASIS_POINTS,
                BASIS_POINTS,
                Some(NOW + 3_600_000)
            )]
        );
        // Allowed says nothing new.
        let map = headers(&[
            ("anthropic-ratelimit-unified-status", "allowed"),
            ("anthropic-ratelimit-unified-5h-utilization", "0.4"),
        ]);
        assert_eq!(
            readings_from_headers(&map, "m", NOW),
            vec![reading("5h", 4_000, BASIS_POINTS, None)]
        );
    }

    /// A Codex reply as ChatGPT accounts get it: both slots, plus headers this module ignores.
    fn codex(primary: (&str, &str), secondary: (&str, &str)) -> HeaderMap {
        headers(&[
            ("x-codex-primary-used-percent", primary.0),
            ("x-codex-primary-window-minutes", primary.1),
            ("x-codex-primary-reset-after-seconds", "3600"),
            ("x-codex-primary-reset-at", "1717250400"),
            ("x-codex-secondary-used-percent", secondary.0),
            ("x-codex-secondary-window-minutes", secondary.1),
            ("x-codex-secondary-reset-after-seconds", "86400"),
            ("x-codex-plan-type", "plus"),
            ("x-codex-credits-has-credits", "False"),
        ])
    }

    #[test]
    fn s6_codex_windows_are_named_by_their_minutes_not_their_slot() {
        // The usual order: the 5-hour window as primary, the weekly one as secondary (whose
        // reset comes only as seconds from now).
        assert_eq!(
            readings_from_headers(&codex(("42", "300"), ("100", "10080")), "gpt-5", NOW),
            vec![
                reading("5h", 4_200, BASIS_POINTS, Some(1_717_250_400_000)),
                reading("7d", 10_000, BASIS_POINTS, Some(NOW + 86_400_000)),
            ]
        );
        // Some plans report the weekly window as primary.
        assert_eq!(
            readings_from_headers(&codex(("100", "10080"), ("3.5", "300")), "gpt-5", NOW),
            vec![
                reading("7d", 10_000, BASIS_POINTS, Some(1_717_250_400_000)),
                reading("5h", 350, BASIS_POINTS, Some(NOW + 86_400_000)),
            ]
        );
    }

    #[test]
    fn s6_codex_percent_is_a_percentage_and_garbage_is_ignored() {
        // (used percent, window minutes, the reading's window and basis points)
        type Case<'a> = (&'a str, &'a str, Option<(&'a str, u64)>);
        let cases: &[Case] = &[
            // `1` is 1 %, not a whole (unlike Anthropic's utilisation).
            ("1", "300", Some(("5h", 100))),
            ("0", "10080", Some(("7d", 0))),
            ("99.99", "10080", Some(("7d", 9_999))),
            ("50", "1440", Some(("1d", 5_000))),
            ("50", "90", Some(("90m", 5_000))),
            ("-5", "300", None),
            ("NaN", "300", None),
            ("1e2", "300", None),
            ("50", "0", None),
            ("50", "-300", None),
            ("50", "weekly", None),
            ("", "300", None),
        ];
        for (percent, minutes, want) in cases {
            let map = headers(&[
                ("x-codex-primary-used-percent", percent),
                ("x-codex-primary-window-minutes", minutes),
            ]);
            let want: Vec<_> = want
                .map(|(window, bp)| reading(window, bp, BASIS_POINTS, None))
                .into_iter()
                .collect();
            assert_eq!(
                readings_from_headers(&map, "m", NOW),
                want,
                "{percent} {minutes}"
            );
        }
        // Without its minutes a slot names no window: the position is never a name.
        let unnamed = headers(&[("x-codex-secondary-used-percent", "100")]);
        assert_eq!(readings_from_headers(&unnamed, "m", NOW), vec![]);
    }

    #[test]
    fn s6_sentinels_and_garbage_are_ignored() {
        let cases: &[(&str, &str, &str)] = &[
            ("-1", "-1", "-1"),
            ("0", "0", "1s"),
            ("100", "-1", "1s"),
            ("100", "", "1s"),
            ("abc", "10", "1s"),
            ("1.5", "1", "1s"),
            ("99999999999999999999999", "1", "1s"),
        ];
        for (limit, remaining, reset) in cases {
            let map = headers(&[
                ("x-ratelimit-limit-requests", limit),
                ("x-ratelimit-remaining-requests", remaining),
                ("x-ratelimit-reset-requests", reset),
            ]);
            assert_eq!(
                readings_from_headers(&map, "m", NOW),
                vec![],
                "{limit} {remaining}"
            );
        }
        let bad_reset = headers(&[
            ("x-ratelimit-limit-requests", "10"),
            ("x-ratelimit-remaining-requests", "12"),
            ("x-ratelimit-reset-requests", "-1"),
        ]);
        assert_eq!(
            readings_from_headers(&bad_reset, "m", NOW),
            vec![reading("requests:m", 0, 10, None)]
        );
        let mut opaque = HeaderMap::new();
        opaque.insert(
            "x-ratelimit-limit-tokens",
            HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
        );
        opaque.insert(
            "x-ratelimit-remaining-tokens",
            HeaderValue::from_static("1"),
        );
        assert_eq!(readings_from_headers(&opaque, "m", NOW), vec![]);
        assert_eq!(readings_from_headers(&HeaderMap::new(), "m", NOW), vec![]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn readings_never_panic_and_respect_limits(
            values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 9),
            now in any::<u64>(),
        ) {
            let names = [
                "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
                "x-ratelimit-reset-requests", "anthropic-ratelimit-tokens-limit",
                "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset",
                "anthropic-ratelimit-unified-5h-utilization", "anthropic-ratelimit-unified-5h-reset",
                "anthropic-ratelimit-unified-7d-utilization",
            ];
            let mut map = HeaderMap::new();
            for (name, bytes) in names.iter().zip(&values) {
                if let Ok(value) = HeaderValue::from_bytes(bytes) {
                    map.insert(*name, value);
                }
            }
            for reading in readings_from_headers(&map, "m", now) {
                prop_assert!(reading.limit > 0);
                if reading.window.contains(':') {
                    prop_assert!(reading.used <= reading.limit);
                }
            }
        }

        #[test]
        fn numeric_readings_round_trip(limit in 1u64..1_000_000_000, remaining in 0u64..1_000_000_000) {
            let limit_text = limit.to_string();
            let remaining_text = remaining.to_string();
            let map = headers(&[
                ("x-ratelimit-limit-tokens", &limit_text),
                ("x-ratelimit-remaining-tokens", &remaining_text),
            ]);
            let got = readings_from_headers(&map, "m", NOW);
            prop_assert_eq!(got, vec![reading("tokens:m", limit.saturating_sub(remaining), limit, None)]);
        }
    }
}
