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

use std::cell::Cell;

use crate::reset_hint;
use http::HeaderMap;

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

/// The values of the rate-limit headers one response carries, by [`Slot`], gathered in one
/// pass over its headers: looking each of the ~35 names this module reads up in the map
/// hashed every name on every upstream response (~3.4k instructions on an OpenAI answer).
/// A slot holds the name's first value, `None` inside when it is not visible ASCII (as
/// `HeaderMap::get` followed by `to_str` reads it).
struct Found<'h> {
    values: [Option<Option<&'h str>>; SLOTS],
    any: bool,
    /// The last reset value read and what it read as (ms from now): Anthropic sends one reset
    /// time on each of its four count windows, read once.
    last_reset: Cell<Option<(&'h str, Option<u64>)>>,
}

impl<'h> Found<'h> {
    fn gather(headers: &'h HeaderMap) -> Self {
        let mut found = Found {
            values: [None; SLOTS],
            any: false,
            last_reset: Cell::new(None),
        };
        for (name, value) in headers {
            if let Some(slot) = slot_of(name.as_str()) {
                found.any = true;
                found.values[slot].get_or_insert_with(|| value.to_str().ok());
            }
        }
        found
    }

    fn get(&self, slot: Slot) -> Option<&'h str> {
        self.values.get(slot).copied().flatten().flatten()
    }

    /// [`reset_hint::any_reset_ms`] of the value in `slot`, a value equal to the last one
    /// read not read again.
    fn reset_ms(&self, slot: Slot, now_ms: u64) -> Option<u64> {
        let value = self.get(slot)?;
        if let Some((last, delta_ms)) = self.last_reset.get() {
            if last == value {
                return delta_ms;
            }
        }
        let delta_ms = reset_hint::any_reset_ms(value, now_ms);
        self.last_reset.set(Some((value, delta_ms)));
        delta_ms
    }
}

/// Where a header's value is kept in [`Found`].
type Slot = usize;

/// A count window's slots (`limit`, `remaining`, `reset`) and the name of its window.
struct CountWindow {
    name: &'static str,
    limit: Slot,
    remaining: Slot,
    reset: Slot,
}

/// A subscription window's slots.
struct UnifiedWindow {
    name: &'static str,
    utilization: Slot,
    reset: Slot,
    /// `allowed`, `allowed_warning` or `rejected` (this window is spent).
    status: Slot,
}

/// The subscription's overall headers: `rejected` when any window is spent, the claim naming
/// which one (`five_hour`, `seven_day`), and its reset.
const OVERALL_STATUS: Slot = 30;
const OVERALL_CLAIM: Slot = 31;
const OVERALL_RESET: Slot = 32;

/// A Codex window slot's header slots (`x-codex-<slot>-*`).
struct CodexWindow {
    used_percent: Slot,
    window_minutes: Slot,
    reset_after_seconds: Slot,
    reset_at: Slot,
}

/// OpenAI's windows (slots 0–5), then Anthropic's per-model ones (6–17).
const COUNT_WINDOWS: [CountWindow; 6] = [
    count_window_slots("requests", 0),
    count_window_slots("tokens", 3),
    count_window_slots("requests", 6),
    count_window_slots("tokens", 9),
    count_window_slots("input-tokens", 12),
    count_window_slots("output-tokens", 15),
];

const fn count_window_slots(name: &'static str, first: Slot) -> CountWindow {
    CountWindow {
        name,
        limit: first,
        remaining: first + 1,
        reset: first + 2,
    }
}

/// Subscription windows (slots 18–23).
const UNIFIED: [UnifiedWindow; 2] = [
    UnifiedWindow {
        name: "5h",
        utilization: 18,
        reset: 19,
        status: 20,
    },
    UnifiedWindow {
        name: "7d",
        utilization: 21,
        reset: 22,
        status: 23,
    },
];

/// Codex's primary and secondary windows (slots 24–29 and 33–34).
const CODEX: [CodexWindow; 2] = [
    CodexWindow {
        used_percent: 24,
        window_minutes: 25,
        reset_after_seconds: 26,
        reset_at: 27,
    },
    CodexWindow {
        used_percent: 28,
        window_minutes: 29,
        reset_after_seconds: 33,
        reset_at: 34,
    },
];

const SLOTS: usize = 35;

/// The slot of a header name this module reads (names are lowercase in a `HeaderMap`).
fn slot_of(name: &str) -> Option<Slot> {
    if let Some(rest) = name.strip_prefix("x-ratelimit-") {
        return Some(match rest {
            "limit-requests" => 0,
            "remaining-requests" => 1,
            "reset-requests" => 2,
            "limit-tokens" => 3,
            "remaining-tokens" => 4,
            "reset-tokens" => 5,
            _ => return None,
        });
    }
    if let Some(rest) = name.strip_prefix("anthropic-ratelimit-") {
        return Some(match rest {
            "requests-limit" => 6,
            "requests-remaining" => 7,
            "requests-reset" => 8,
            "tokens-limit" => 9,
            "tokens-remaining" => 10,
            "tokens-reset" => 11,
            "input-tokens-limit" => 12,
            "input-tokens-remaining" => 13,
            "input-tokens-reset" => 14,
            "output-tokens-limit" => 15,
            "output-tokens-remaining" => 16,
            "output-tokens-reset" => 17,
            "unified-5h-utilization" => 18,
            "unified-5h-reset" => 19,
            "unified-5h-status" => 20,
            "unified-7d-utilization" => 21,
            "unified-7d-reset" => 22,
            "unified-7d-status" => 23,
            "unified-status" => OVERALL_STATUS,
            "unified-representative-claim" => OVERALL_CLAIM,
            "unified-reset" => OVERALL_RESET,
            _ => return None,
        });
    }
    let rest = name.strip_prefix("x-codex-")?;
    Some(match rest {
        "primary-used-percent" => 24,
        "primary-window-minutes" => 25,
        "primary-reset-after-seconds" => 26,
        "primary-reset-at" => 27,
        "secondary-used-percent" => 28,
        "secondary-window-minutes" => 29,
        "secondary-reset-after-seconds" => 33,
        "secondary-reset-at" => 34,
        _ => return None,
    })
}

/// Any reset dialect (Go duration, RFC 3339, Unix time, seconds) as an absolute Unix ms.
fn reset_at(found: &Found, slot: Slot, now_ms: u64) -> Option<u64> {
    let delta_ms = found.reset_ms(slot, now_ms)?;
    Some(now_ms.saturating_add(delta_ms))
}

/// The claim names Anthropic gives its subscription windows, as the windows are named here.
fn claimed_window(claim: &str) -> Option<&'static str> {
    match claim.trim() {
        "five_hour" => Some("5h"),
        "seven_day" | "seven_day_opus" | "seven_day_sonnet" => Some("7d"),
        _ => None,
    }
}

/// A `rejected` status: the subscription refuses requests until the reset.
fn rejected(found: &Found, slot: Slot) -> bool {
    found
        .get(slot)
        .is_some_and(|status| status.trim().eq_ignore_ascii_case("rejected"))
}

/// A count window from its `limit`, `remaining` and `reset` headers; `None` unless both counts
/// parse and the limit is a real one (not the `0` sentinel).
fn count_window(
    found: &Found,
    window: &CountWindow,
    model: &str,
    now_ms: u64,
) -> Option<UsageReading> {
    let limit = found
        .get(window.limit)
        .and_then(reset_hint::count)
        .filter(|limit| *limit > 0)?;
    let remaining = found.get(window.remaining).and_then(reset_hint::count)?;
    let mut name = String::with_capacity(window.name.len() + 1 + model.len());
    name.push_str(window.name);
    name.push(':');
    name.push_str(model);
    Some(UsageReading {
        window: name,
        used: limit.saturating_sub(remaining),
        limit,
        resets_at_ms: reset_at(found, window.reset, now_ms),
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
fn codex_window(found: &Found, slot: &CodexWindow, now_ms: u64) -> Option<UsageReading> {
    let window = found.get(slot.window_minutes).and_then(window_name)?;
    let used = found
        .get(slot.used_percent)
        .and_then(percent_basis_points)?;
    let reset_at = found.get(slot.reset_at).and_then(reset_hint::unix_time_ms);
    let reset_after = || {
        let seconds = found.get(slot.reset_after_seconds)?;
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

/// Every window reading these response headers carry, for `model` on this connection:
/// `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (OpenAI and compatibles),
/// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`,
/// and subscription utilisation `anthropic-ratelimit-unified-{5h,7d}-utilization` (+ `-reset`)
/// as basis points of [`BASIS_POINTS`], and Codex's `x-codex-{primary,secondary}-*` windows the
/// same way, named by their minutes.
pub fn readings_from_headers(headers: &HeaderMap, model: &str, now_ms: u64) -> Vec<UsageReading> {
    let found = Found::gather(headers);
    // An upstream that sends no rate-limit header at all is common (local and compatible
    // servers).
    if !found.any {
        return Vec::new();
    }
    let counts = COUNT_WINDOWS
        .iter()
        .filter_map(|window| count_window(&found, window, model, now_ms));
    // The subscription says it refuses requests: the window its claim names (else the 5-hour
    // one) is spent until the overall reset, whatever its utilisation reads (§13).
    let spent_window = rejected(&found, OVERALL_STATUS).then(|| {
        found
            .get(OVERALL_CLAIM)
            .and_then(claimed_window)
            .unwrap_or("5h")
    });
    let mut unified: Vec<UsageReading> = UNIFIED
        .iter()
        .filter_map(|window| {
            let spent = rejected(&found, window.status) || spent_window == Some(window.name);
            let used = found
                .get(window.utilization)
                .and_then(utilization_basis_points);
            let used = if spent {
                BASIS_POINTS.max(used.unwrap_or(0))
            } else {
                used?
            };
            let resets_at_ms = reset_at(&found, window.reset, now_ms).or_else(|| {
                spent
                    .then(|| reset_at(&found, OVERALL_RESET, now_ms))
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
    let codex = CODEX
        .iter()
        .filter_map(|slot| codex_window(&found, slot, now_ms));
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
    fn every_name_read_has_its_own_slot_and_each_window_reads_its_own_names() {
        let mut names = Vec::new();
        for window in ["requests", "tokens"] {
            for part in ["limit", "remaining", "reset"] {
                names.push(format!("x-ratelimit-{part}-{window}"));
            }
        }
        for window in ["requests", "tokens", "input-tokens", "output-tokens"] {
            for part in ["limit", "remaining", "reset"] {
                names.push(format!("anthropic-ratelimit-{window}-{part}"));
            }
        }
        for window in ["5h", "7d"] {
            for part in ["utilization", "reset", "status"] {
                names.push(format!("anthropic-ratelimit-unified-{window}-{part}"));
            }
        }
        for part in ["status", "representative-claim", "reset"] {
            names.push(format!("anthropic-ratelimit-unified-{part}"));
        }
        for slot in ["primary", "secondary"] {
            for part in [
                "used-percent",
                "window-minutes",
                "reset-after-seconds",
                "reset-at",
            ] {
                names.push(format!("x-codex-{slot}-{part}"));
            }
        }
        let mut slots: Vec<Slot> = names
            .iter()
            .map(|name| slot_of(name).unwrap_or_else(|| panic!("{name} has no slot")))
            .collect();
        slots.sort_unstable();
        assert_eq!(slots, (0..SLOTS).collect::<Vec<_>>());
        // Each window's slots are its own names'.
        for (family, window) in COUNT_WINDOWS.iter().enumerate() {
            let name = |part: &str| {
                if family < 2 {
                    format!("x-ratelimit-{part}-{}", window.name)
                } else {
                    format!("anthropic-ratelimit-{}-{part}", window.name)
                }
            };
            assert_eq!(slot_of(&name("limit")), Some(window.limit));
            assert_eq!(slot_of(&name("remaining")), Some(window.remaining));
            assert_eq!(slot_of(&name("reset")), Some(window.reset));
        }
        for window in &UNIFIED {
            let name = |part: &str| format!("anthropic-ratelimit-unified-{}-{part}", window.name);
            assert_eq!(slot_of(&name("utilization")), Some(window.utilization));
            assert_eq!(slot_of(&name("reset")), Some(window.reset));
            assert_eq!(slot_of(&name("status")), Some(window.status));
        }
        for (codex, slot) in ["primary", "secondary"].iter().zip(&CODEX) {
            let name = |part: &str| format!("x-codex-{codex}-{part}");
            assert_eq!(slot_of(&name("used-percent")), Some(slot.used_percent));
            assert_eq!(slot_of(&name("window-minutes")), Some(slot.window_minutes));
            assert_eq!(
                slot_of(&name("reset-after-seconds")),
                Some(slot.reset_after_seconds)
            );
            assert_eq!(slot_of(&name("reset-at")), Some(slot.reset_at));
        }
        // Headers of no family: nothing read, whatever they say.
        let other = headers(&[
            ("x-request-id", "req_1"),
            ("content-type", "application/json"),
        ]);
        assert!(readings_from_headers(&other, "gpt", NOW).is_empty());
    }

    #[test]
    fn a_repeated_header_is_read_by_its_first_value_as_the_map_gives_it() {
        let mut map = headers(&[("x-ratelimit-remaining-requests", "40")]);
        map.append(
            "x-ratelimit-limit-requests",
            HeaderValue::from_static("100"),
        );
        map.append("x-ratelimit-limit-requests", HeaderValue::from_static("5"));
        assert_eq!(
            readings_from_headers(&map, "gpt", NOW),
            vec![reading("requests:gpt", 60, 100, None)]
        );
        // A first value that is not visible ASCII is no value; a later one does not stand in.
        let mut map = headers(&[("x-ratelimit-remaining-requests", "40")]);
        map.append(
            "x-ratelimit-limit-requests",
            HeaderValue::from_bytes(b"10\xff").unwrap(),
        );
        map.append(
            "x-ratelimit-limit-requests",
            HeaderValue::from_static("100"),
        );
        assert!(readings_from_headers(&map, "gpt", NOW).is_empty());
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

    /// Each count window's reset reads as its own value alone, however the four repeat one
    /// another (Anthropic sends one time on all four; a reset read once is not read again).
    #[test]
    fn each_window_reads_its_own_reset_however_they_repeat() {
        let values = [
            "2024-06-01T12:00:30Z",
            "2024-06-01T12:01:00Z",
            "30s",
            "6m0s",
            "1717243260",
            "soon",
        ];
        let kinds = ["requests", "tokens", "input-tokens", "output-tokens"];
        // Every way of giving the four windows two of the values, in turn.
        for pattern in 0..16u32 {
            for (first, second) in [(0, 1), (0, 2), (3, 4), (5, 0), (1, 5)] {
                let resets: Vec<&str> = (0..4)
                    .map(|at| {
                        values[if (pattern >> at) & 1 == 0 {
                            first
                        } else {
                            second
                        }]
                    })
                    .collect();
                let mut pairs: Vec<(String, String)> = Vec::new();
                for (kind, reset) in kinds.iter().zip(&resets) {
                    let prefix = format!("anthropic-ratelimit-{kind}");
                    pairs.push((format!("{prefix}-limit"), "100".to_owned()));
                    pairs.push((format!("{prefix}-remaining"), "40".to_owned()));
                    pairs.push((format!("{prefix}-reset"), (*reset).to_owned()));
                }
                let mut map = HeaderMap::new();
                for (name, value) in &pairs {
                    map.insert(
                        http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                        HeaderValue::from_str(value).unwrap(),
                    );
                }
                let read: Vec<Option<u64>> = readings_from_headers(&map, "m", NOW)
                    .iter()
                    .map(|reading| reading.resets_at_ms)
                    .collect();
                let each: Vec<Option<u64>> = resets
                    .iter()
                    .map(|reset| {
                        reset_hint::any_reset_ms(reset, NOW).map(|delta| NOW.saturating_add(delta))
                    })
                    .collect();
                assert_eq!(read, each, "{resets:?}");
            }
        }
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
