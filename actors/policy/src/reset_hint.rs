//! Upstream reset hints (behaviour §5 "upstream reset"): parsers for every header and body shape
//! in `upstream-errors.md` that says when a limit lifts, and their precedence.
//!
//! Pure parsing: takes `now_ms` as a parameter, never reads a clock, never panics. A value that does
//! not parse, is negative or is a sentinel yields `None` (ignored), never an error. It must not
//! decide what a hint *does* (lockout, cooldown): that belongs to `lockout` and `cooldown`.
//!
//! Dates: `httpdate` parses all three HTTP-date forms (IMF-fixdate, RFC 850, asctime) and nothing
//! else; `jiff` parses RFC 3339 with offsets and fractional seconds without any time-zone database.

use http::HeaderMap;
use serde_json::Value;
use std::time::UNIX_EPOCH;

const NANOS_PER_MS: u128 = 1_000_000;
/// `X-RateLimit-Reset` values above this are absolute Unix seconds (behaviour: "above 10^9").
const ABSOLUTE_SECONDS_ABOVE: u128 = 1_000_000_000;
/// … and above this, absolute Unix milliseconds.
const ABSOLUTE_MILLIS_ABOVE: u128 = 1_000_000_000_000;
/// Fraction digits beyond this are dropped; they are far below a millisecond for every unit.
const MAX_FRACTION_DIGITS: usize = 18;

/// A non-negative decimal `digits[.digits]` times `unit`, rounded **up** so that a hint never
/// makes us retry early. Rejects signs, exponents, `inf`/`NaN` and overflow.
fn decimal_times(text: &str, unit: u128) -> Option<u128> {
    let (int_part, frac_part) = match text.split_once('.') {
        Some((int_part, frac_part)) => (int_part, frac_part),
        None => (text, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return None;
    }
    let mut whole: u128 = 0;
    for digit in int_part.bytes() {
        whole = whole
            .checked_mul(10)?
            .checked_add(u128::from(digit - b'0'))?;
    }
    let frac_digits = &frac_part[..frac_part.len().min(MAX_FRACTION_DIGITS)];
    let mut frac_value: u128 = 0;
    let mut frac_scale: u128 = 1;
    for digit in frac_digits.bytes() {
        frac_value = frac_value * 10 + u128::from(digit - b'0');
        frac_scale *= 10;
    }
    let frac_scaled = frac_value.checked_mul(unit)?.div_ceil(frac_scale);
    whole.checked_mul(unit)?.checked_add(frac_scaled)
}

fn to_u64(value: u128) -> Option<u64> {
    u64::try_from(value).ok()
}

/// Milliseconds from `now_ms` until `at_ms`; a time already past is 0 ("go now").
fn until(at_ms: u64, now_ms: u64) -> u64 {
    at_ms.saturating_sub(now_ms)
}

/// `Retry-After`: delta-seconds (fractions tolerated) or an HTTP date; ms from now, past → 0.
pub fn retry_after(value: &str, now_ms: u64) -> Option<u64> {
    let value = value.trim();
    if value.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return decimal_times(value, 1000).and_then(to_u64);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    let at_ms = to_u64(date.duration_since(UNIX_EPOCH).ok()?.as_millis())?;
    Some(until(at_ms, now_ms))
}

/// `retry-after-ms`: milliseconds (fractions rounded up).
pub fn retry_after_ms(value: &str) -> Option<u64> {
    decimal_times(value.trim(), 1).and_then(to_u64)
}

/// Nanoseconds in one Go duration unit.
fn go_unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// A Go `time.Duration` string as OpenAI sends in `x-ratelimit-reset-*` (`6m0s`, `1.5s`, `20ms`,
/// `1h2m3s`, `500us`), also protobuf JSON durations (`30s`). Rounded up to whole ms. A unitless
/// number other than `0` is not a Go duration; negative durations are rejected.
pub fn go_duration_ms(value: &str) -> Option<u64> {
    let value = value.trim();
    let value = value.strip_prefix('+').unwrap_or(value);
    if value == "0" {
        return Some(0);
    }
    let mut rest = value;
    let mut total_nanos: u128 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after_number) = rest.split_at(number_len);
        let unit_len = after_number
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after_number.len());
        let (unit, after_unit) = after_number.split_at(unit_len);
        let nanos = decimal_times(number, go_unit_nanos(unit)?)?;
        total_nanos = total_nanos.checked_add(nanos)?;
        rest = after_unit;
    }
    to_u64(total_nanos.div_ceil(NANOS_PER_MS))
}

/// An RFC 3339 time (`anthropic-ratelimit-*-reset`) as absolute Unix milliseconds.
pub fn rfc3339_ms(value: &str) -> Option<u64> {
    let value = value.trim();
    if let Some(at_ms) = utc_whole_seconds_ms(value) {
        return Some(at_ms);
    }
    let timestamp: jiff::Timestamp = value.parse().ok()?;
    u64::try_from(timestamp.as_millisecond()).ok()
}

/// The form Anthropic sends on every answer (`2024-06-01T12:00:30Z`: UTC, whole seconds) read
/// by its positions, the calendar left to jiff; `None` for any other form, which jiff's parser
/// then reads (it costs ~1.5k instructions a value, four values an answer).
fn utc_whole_seconds_ms(value: &str) -> Option<u64> {
    let &[y1, y2, y3, y4, b'-', mo1, mo2, b'-', d1, d2, b'T', h1, h2, b':', mi1, mi2, b':', s1, s2, b'Z'] =
        value.as_bytes()
    else {
        return None;
    };
    let two = |tens: u8, ones: u8| -> Option<i8> {
        (tens.is_ascii_digit() && ones.is_ascii_digit())
            .then(|| ((tens - b'0') * 10 + (ones - b'0')) as i8)
    };
    let year = i16::from(two(y1, y2)?) * 100 + i16::from(two(y3, y4)?);
    let date_time = jiff::civil::DateTime::new(
        year,
        two(mo1, mo2)?,
        two(d1, d2)?,
        two(h1, h2)?,
        two(mi1, mi2)?,
        two(s1, s2)?,
        0,
    )
    .ok()?;
    let timestamp = jiff::tz::Offset::UTC.to_timestamp(date_time).ok()?;
    u64::try_from(timestamp.as_millisecond()).ok()
}

/// A Unix time given as a number: absolute milliseconds above 10^12, else absolute seconds.
/// Used where the value is known to be absolute (`anthropic-ratelimit-unified-*-reset`).
pub fn unix_time_ms(value: &str) -> Option<u64> {
    let value = value.trim();
    let as_seconds_ms = decimal_times(value, 1000)?;
    if as_seconds_ms > ABSOLUTE_MILLIS_ABOVE * 1000 {
        return decimal_times(value, 1).and_then(to_u64);
    }
    to_u64(as_seconds_ms)
}

/// `X-RateLimit-Reset` of the many hosts that disagree on its unit: values above 10^12 are
/// absolute Unix ms, above 10^9 absolute Unix seconds, smaller ones seconds from now.
/// Returns ms from now; an absolute time already past is 0.
pub fn reset_epoch_or_delta(value: &str, now_ms: u64) -> Option<u64> {
    let value = value.trim();
    let as_seconds_ms = decimal_times(value, 1000)?;
    if as_seconds_ms > ABSOLUTE_MILLIS_ABOVE * 1000 {
        let at_ms = to_u64(decimal_times(value, 1)?)?;
        Some(until(at_ms, now_ms))
    } else if as_seconds_ms > ABSOLUTE_SECONDS_ABOVE * 1000 {
        Some(until(to_u64(as_seconds_ms)?, now_ms))
    } else {
        to_u64(as_seconds_ms)
    }
}

/// Any reset header value, whatever its dialect: a Go duration, an RFC 3339 time, or a number
/// read as [`reset_epoch_or_delta`]. Returns ms from now.
pub fn any_reset_ms(value: &str, now_ms: u64) -> Option<u64> {
    go_duration_ms(value)
        .or_else(|| rfc3339_ms(value).map(|at_ms| until(at_ms, now_ms)))
        .or_else(|| reset_epoch_or_delta(value, now_ms))
}

/// The text of a JSON number or string, for the decimal parsers (which reject `-1`, `1e9`, …).
fn json_text(value: &Value) -> Option<String> {
    match value {
        Value::Number(number) => Some(number.to_string()),
        Value::String(text) => Some(text.clone()),
        _ => None,
    }
}

/// Seconds-like words that may follow a bare number in "try again in 20 seconds".
fn word_unit_nanos(word: &str) -> Option<u128> {
    let word = word.trim_end_matches(['.', ',', ';', ':', ')', '!']);
    Some(match word {
        "ms" | "millisecond" | "milliseconds" => 1_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Phrases after which upstream messages state a wait ("Please try again in 1.5s.",
/// "Please retry in 34.07s.").
const WAIT_PHRASES: [&str; 3] = ["try again in ", "retry in ", "retry after "];

/// The wait a human-readable message states: "try again in 1m30s", "in 1.5s.", "in 20 seconds".
pub fn message_wait_ms(message: &str) -> Option<u64> {
    // ASCII lowercase keeps byte offsets identical to the original.
    let lower = message.to_ascii_lowercase();
    for phrase in WAIT_PHRASES {
        let mut search_from = 0;
        while let Some(found) = lower.get(search_from..).and_then(|tail| tail.find(phrase)) {
            let start = search_from + found + phrase.len();
            search_from = start;
            let mut words = lower.get(start..).unwrap_or_default().split_whitespace();
            let Some(first) = words.next() else { continue };
            let token = first.trim_end_matches(['.', ',', ';', ':', ')', '!']);
            if let Some(ms) = go_duration_ms(token) {
                return Some(ms);
            }
            let unit = words.next().and_then(word_unit_nanos);
            if let Some(nanos) = unit.and_then(|unit| decimal_times(token, unit)) {
                return to_u64(nanos.div_ceil(NANOS_PER_MS));
            }
        }
    }
    None
}

/// "Claude AI usage limit reached|1749924000": a subscription message ending in a Unix time.
fn message_pipe_epoch_ms(message: &str, now_ms: u64) -> Option<u64> {
    let (_, tail) = message.rsplit_once('|')?;
    let tail = tail.trim();
    if tail.len() < 10 || !tail.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(until(unix_time_ms(tail)?, now_ms))
}

/// A reset hint inside an error body, in this order: `retry_after_ms` (top level or in `error`),
/// `error.retryAfter` / `retry_after` (seconds or HTTP date), `error.details[].retryDelay`
/// (Google `RetryInfo`, "30s"), then the message's own "try again in …" and a trailing
/// `|<unix time>`. Returns ms from now.
pub fn body_reset_ms(body: &Value, now_ms: u64) -> Option<u64> {
    let error = body.get("error").filter(|error| error.is_object());
    let scopes = [Some(body), error];
    let field = |name: &str| {
        scopes
            .iter()
            .flatten()
            .find_map(|scope| scope.get(name).and_then(json_text))
    };
    if let Some(ms) = field("retry_after_ms").and_then(|text| retry_after_ms(&text)) {
        return Some(ms);
    }
    for name in ["retryAfter", "retry_after"] {
        if let Some(ms) = field(name).and_then(|text| retry_after(&text, now_ms)) {
            return Some(ms);
        }
    }
    let details = error
        .and_then(|error| error.get("details"))
        .and_then(Value::as_array);
    let retry_delay = details.into_iter().flatten().find_map(|detail| {
        let delay = detail.get("retryDelay").and_then(json_text)?;
        go_duration_ms(&delay)
    });
    if retry_delay.is_some() {
        return retry_delay;
    }
    let message = error
        .and_then(|error| error.get("message"))
        .or_else(|| body.get("message"))
        .or_else(|| body.get("error").filter(|error| error.is_string()))
        .and_then(Value::as_str)?;
    message_wait_ms(message).or_else(|| message_pipe_epoch_ms(message, now_ms))
}

/// A header's value as text; absent or non-visible-ASCII values are ignored.
fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name)?.to_str().ok()
}

/// A non-negative integer count (`x-ratelimit-remaining-*`); `-1` and garbage are unknown.
pub(crate) fn count(value: &str) -> Option<u64> {
    value.trim().parse().ok()
}

/// The reset of a family of windows (requests, tokens, …) given as `(remaining, reset_ms)`.
/// Choice: if some windows report `remaining = 0`, the latest reset among *those* (they are what
/// blocks us); otherwise the latest reset of all (waiting for the longest one cannot earn a
/// second 429, and a 429 with nothing at 0 means we do not know which window tripped).
fn family_reset(windows: &[(Option<u64>, Option<u64>)]) -> Option<u64> {
    let exhausted = windows
        .iter()
        .filter(|(remaining, _)| *remaining == Some(0))
        .filter_map(|(_, reset)| *reset)
        .max();
    exhausted.or_else(|| windows.iter().filter_map(|(_, reset)| *reset).max())
}

/// `Retry-After` and `retry-after-ms` only: what sets a cooldown exactly (behaviour §5) for
/// statuses whose per-window rate-limit headers say nothing about the failure.
pub fn retry_after_headers_ms(headers: &HeaderMap, now_ms: u64) -> Option<u64> {
    header(headers, "retry-after-ms")
        .and_then(retry_after_ms)
        .or_else(|| header(headers, "retry-after").and_then(|v| retry_after(v, now_ms)))
}

/// Window names of `anthropic-ratelimit-<name>-{remaining,reset}`.
const ANTHROPIC_WINDOWS: [&str; 4] = ["requests", "tokens", "input-tokens", "output-tokens"];

/// The upstream's own statement of when a limit lifts, as ms from `now_ms`. Precedence, first
/// that parses wins (most explicit and most precise first):
/// 1. `retry-after-ms`, 2. `retry-after`,
/// 3. `x-ratelimit-reset-{requests,tokens}` (see [`family_reset`] for which of the two),
/// 4. `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset` (same choice),
/// 5. `anthropic-ratelimit-unified-reset` (Unix seconds; small numbers read as deltas), 6. `x-ratelimit-reset`,
/// 7. body hints ([`body_reset_ms`]).
pub fn upstream_reset_ms(headers: &HeaderMap, body: Option<&Value>, now_ms: u64) -> Option<u64> {
    if let Some(ms) = retry_after_headers_ms(headers, now_ms) {
        return Some(ms);
    }
    let openai: Vec<_> = ["requests", "tokens"]
        .iter()
        .map(|name| {
            let remaining = header(headers, &format!("x-ratelimit-remaining-{name}"));
            let reset = header(headers, &format!("x-ratelimit-reset-{name}"));
            (
                remaining.and_then(count),
                reset.and_then(|v| any_reset_ms(v, now_ms)),
            )
        })
        .collect();
    if let Some(ms) = family_reset(&openai) {
        return Some(ms);
    }
    let anthropic: Vec<_> = ANTHROPIC_WINDOWS
        .iter()
        .map(|name| {
            let remaining = header(headers, &format!("anthropic-ratelimit-{name}-remaining"));
            let reset = header(headers, &format!("anthropic-ratelimit-{name}-reset"));
            (
                remaining.and_then(count),
                reset.and_then(|v| any_reset_ms(v, now_ms)),
            )
        })
        .collect();
    if let Some(ms) = family_reset(&anthropic) {
        return Some(ms);
    }
    let unified = header(headers, "anthropic-ratelimit-unified-reset").and_then(|v| {
        reset_epoch_or_delta(v, now_ms).or_else(|| rfc3339_ms(v).map(|at_ms| until(at_ms, now_ms)))
    });
    unified
        .or_else(|| {
            header(headers, "x-ratelimit-reset").and_then(|v| reset_epoch_or_delta(v, now_ms))
        })
        .or_else(|| body.and_then(|body| body_reset_ms(body, now_ms)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;
    use serde_json::json;

    /// 2015-10-21T07:28:00Z, the RFC 9110 example date.
    const DATE_MS: u64 = 1_445_412_480_000;
    /// 2024-06-01T12:00:00Z.
    const JUNE_MS: u64 = 1_717_243_200_000;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn s5_retry_after_forms() {
        let now = DATE_MS - 10_000;
        let cases: &[(&str, Option<u64>)] = &[
            ("0", Some(0)),
            ("30", Some(30_000)),
            (" 30 ", Some(30_000)),
            ("1.5", Some(1_500)),
            ("0.0001", Some(1)),
            (".5", Some(500)),
            ("Wed, 21 Oct 2015 07:28:00 GMT", Some(10_000)),
            ("Wednesday, 21-Oct-15 07:28:00 GMT", Some(10_000)),
            ("Wed Oct 21 07:28:00 2015", Some(10_000)),
            ("Tue, 20 Oct 2015 07:28:00 GMT", Some(0)),
            ("-1", None),
            ("+5", None),
            ("1e3", None),
            ("inf", None),
            ("NaN", None),
            ("", None),
            (".", None),
            ("1.2.3", None),
            ("soon", None),
            ("99999999999999999999999999999999999999999", None),
        ];
        for (value, want) in cases {
            assert_eq!(retry_after(value, now), *want, "retry-after {value:?}");
        }
    }

    #[test]
    fn s5_retry_after_ms_forms() {
        let cases: &[(&str, Option<u64>)] = &[
            ("1500", Some(1_500)),
            ("20.2", Some(21)),
            ("0", Some(0)),
            ("-1", None),
            ("abc", None),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(retry_after_ms(value), *want, "retry-after-ms {value:?}");
        }
    }

    #[test]
    fn s5_go_duration_forms() {
        let cases: &[(&str, Option<u64>)] = &[
            ("6m0s", Some(360_000)),
            ("1.5s", Some(1_500)),
            ("20ms", Some(20)),
            ("12ms", Some(12)),
            ("1s", Some(1_000)),
            ("1h2m3s", Some(3_723_000)),
            ("500us", Some(1)),
            ("500\u{b5}s", Some(1)),
            ("1500000ns", Some(2)),
            ("0", Some(0)),
            ("0s", Some(0)),
            ("+2s", Some(2_000)),
            ("30s", Some(30_000)),
            ("1.5h", Some(5_400_000)),
            ("-1s", None),
            ("60", None),
            ("s", None),
            ("1x", None),
            ("1s2", None),
            ("", None),
            ("1 s", None),
            ("..s", None),
            ("99999999999999999999999h", None),
        ];
        for (value, want) in cases {
            assert_eq!(go_duration_ms(value), *want, "go duration {value:?}");
        }
    }

    #[test]
    fn s5_rfc3339_forms() {
        let cases: &[(&str, Option<u64>)] = &[
            ("2024-06-01T12:00:00Z", Some(JUNE_MS)),
            ("2024-06-01T12:00:00.250Z", Some(JUNE_MS + 250)),
            ("2024-06-01T14:00:00+02:00", Some(JUNE_MS)),
            ("1969-12-31T23:59:59Z", None),
            ("2024-13-01T00:00:00Z", None),
            ("2024-06-01", None),
            ("yesterday", None),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(rfc3339_ms(value), *want, "rfc3339 {value:?}");
        }
    }

    /// The positional read of the usual form gives jiff's reading, and every other form is
    /// left to jiff: each second, minute, hour, day and month at and past its bounds, years at
    /// theirs, and the forms around it (lower case, offsets, fractions).
    #[test]
    fn rfc3339_read_by_position_is_jiffs() {
        let jiffs = |text: &str| {
            text.parse::<jiff::Timestamp>()
                .ok()
                .and_then(|at| u64::try_from(at.as_millisecond()).ok())
        };
        for year in [0, 1969, 1970, 2024, 2100, 9999] {
            for month in 0..14 {
                for day in [0, 1, 28, 29, 30, 31, 32] {
                    for (hour, minute) in [(0, 0), (23, 59), (24, 0), (12, 60)] {
                        for second in 0..62 {
                            let text = format!(
                                "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z"
                            );
                            assert_eq!(rfc3339_ms(&text), jiffs(&text), "{text}");
                        }
                    }
                }
            }
        }
        for text in [
            "2024-06-01t12:00:30Z",
            "2024-06-01T12:00:30z",
            "2024-06-01T12:00:30+00:00",
            "2024-06-01T12:00:30.5Z",
            "2024-06-01 12:00:30Z",
            "+2024-06-01T12:00:30Z",
            "2024-6-01T12:00:30Z",
        ] {
            assert_eq!(rfc3339_ms(text), jiffs(text), "{text}");
        }
    }

    #[test]
    fn s5_x_ratelimit_reset_epoch_or_delta() {
        let now = JUNE_MS;
        let cases: &[(&str, Option<u64>)] = &[
            ("60", Some(60_000)),
            ("0.5", Some(500)),
            ("1717243260", Some(60_000)),
            ("1717243260000", Some(60_000)),
            ("1717243100", Some(0)),
            ("-1", None),
            ("1m", None),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(
                reset_epoch_or_delta(value, now),
                *want,
                "x-ratelimit-reset {value:?}"
            );
        }
        assert_eq!(unix_time_ms("1717243200"), Some(JUNE_MS));
        assert_eq!(unix_time_ms("1717243200000"), Some(JUNE_MS));
    }

    #[test]
    fn s5_message_try_again_in() {
        let cases: &[(&str, Option<u64>)] = &[
            ("Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 1500. Please try again in 1.5s. Visit https://x.", Some(1_500)),
            ("Please try again in 1m30s.", Some(90_000)),
            ("try again in 20ms", Some(20)),
            ("Please Try Again In 6m0s", Some(360_000)),
            ("Please try again in 20 seconds.", Some(20_000)),
            ("try again in 2 hours", Some(7_200_000)),
            ("Please retry in 34.074824225s.", Some(34_075)),
            ("Please try again in a few minutes.", None),
            ("try again in", None),
            ("try again in 5 parsecs", None),
            ("Overloaded", None),
        ];
        for (message, want) in cases {
            assert_eq!(message_wait_ms(message), *want, "message {message:?}");
        }
    }

    #[test]
    fn s5_body_hints_in_precedence_order() {
        let now = JUNE_MS;
        let cases: Vec<(Value, Option<u64>)> = vec![
            (json!({"retry_after_ms": 2500}), Some(2_500)),
            (json!({"error": {"retry_after_ms": "700"}}), Some(700)),
            (json!({"error": {"retryAfter": 3}}), Some(3_000)),
            (json!({"error": {"retry_after": "4.5"}}), Some(4_500)),
            (
                json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
                    {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"}
                ]}}),
                Some(30_000),
            ),
            (
                json!({"error": {"message": "Please try again in 1m30s."}}),
                Some(90_000),
            ),
            (json!({"message": "try again in 2s"}), Some(2_000)),
            (json!({"error": "try again in 3s"}), Some(3_000)),
            (
                json!({"error": {"type": "rate_limit_error", "message": "Claude AI usage limit reached|1717246800"}}),
                Some(3_600_000),
            ),
            (
                json!({"retry_after_ms": 100, "error": {"message": "try again in 9s"}}),
                Some(100),
            ),
            (
                json!({"error": {"retry_after_ms": -5, "message": "nothing"}}),
                None,
            ),
            (json!({"error": {"retryAfter": null}}), None),
            (json!({"error": {"details": "not a list"}}), None),
            (json!([1, 2, 3]), None),
            (json!("text"), None),
        ];
        for (body, want) in cases {
            assert_eq!(body_reset_ms(&body, now), want, "body {body}");
        }
    }

    #[test]
    fn s5_upstream_reset_precedence() {
        let now = JUNE_MS;
        let body = json!({"error": {"message": "Please try again in 9s."}});
        let cases: Vec<(&str, HeaderMap, Option<u64>)> = vec![
            (
                "retry-after-ms beats retry-after",
                headers(&[("retry-after-ms", "1500"), ("retry-after", "2")]),
                Some(1_500),
            ),
            (
                "retry-after beats window resets",
                headers(&[("retry-after", "2"), ("x-ratelimit-reset-requests", "6m0s")]),
                Some(2_000),
            ),
            (
                "garbage retry-after falls through",
                headers(&[
                    ("retry-after", "soon"),
                    ("x-ratelimit-reset-tokens", "1.5s"),
                ]),
                Some(1_500),
            ),
            (
                "exhausted window wins over a longer healthy one",
                headers(&[
                    ("x-ratelimit-remaining-requests", "10"),
                    ("x-ratelimit-reset-requests", "6m0s"),
                    ("x-ratelimit-remaining-tokens", "0"),
                    ("x-ratelimit-reset-tokens", "1.5s"),
                ]),
                Some(1_500),
            ),
            (
                "no window at 0: the larger reset",
                headers(&[
                    ("x-ratelimit-reset-requests", "20ms"),
                    ("x-ratelimit-reset-tokens", "1.5s"),
                ]),
                Some(1_500),
            ),
            (
                "unitless window reset read as seconds",
                headers(&[("x-ratelimit-reset-requests", "60")]),
                Some(60_000),
            ),
            (
                "anthropic window reset in RFC 3339",
                headers(&[
                    ("anthropic-ratelimit-tokens-remaining", "0"),
                    ("anthropic-ratelimit-tokens-reset", "2024-06-01T12:00:30Z"),
                    ("anthropic-ratelimit-requests-remaining", "40"),
                    ("anthropic-ratelimit-requests-reset", "2024-06-01T12:01:00Z"),
                ]),
                Some(30_000),
            ),
            (
                "anthropic unified reset in Unix seconds",
                headers(&[("anthropic-ratelimit-unified-reset", "1717246800")]),
                Some(3_600_000),
            ),
            (
                "x-ratelimit-reset as Unix seconds",
                headers(&[("x-ratelimit-reset", "1717243260")]),
                Some(60_000),
            ),
            (
                "body hint last",
                headers(&[("retry-after", "-1")]),
                Some(9_000),
            ),
        ];
        for (rule, map, want) in cases {
            assert_eq!(upstream_reset_ms(&map, Some(&body), now), want, "{rule}");
        }
        assert_eq!(upstream_reset_ms(&HeaderMap::new(), None, now), None);
        let opaque = headers(&[
            ("x-ratelimit-reset-requests", "-1"),
            ("retry-after", "0x10"),
        ]);
        assert_eq!(upstream_reset_ms(&opaque, None, now), None);
    }

    #[test]
    fn s5_retry_after_headers_ignore_window_resets() {
        let map = headers(&[("x-ratelimit-reset-requests", "6m0s")]);
        assert_eq!(retry_after_headers_ms(&map, 0), None);
        let map = headers(&[("retry-after", "7")]);
        assert_eq!(retry_after_headers_ms(&map, 0), Some(7_000));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn parsers_never_panic(text in "\\PC{0,40}", now in any::<u64>()) {
            let _ = retry_after(&text, now);
            let _ = retry_after_ms(&text);
            let _ = go_duration_ms(&text);
            let _ = rfc3339_ms(&text);
            let _ = reset_epoch_or_delta(&text, now);
            let _ = any_reset_ms(&text, now);
            let _ = message_wait_ms(&text);
            let _ = body_reset_ms(&json!({"error": {"message": text.clone(), "retryAfter": text}}), now);
        }

        #[test]
        fn parsers_never_panic_on_digit_soup(text in "[0-9.+\\-a-z ]{0,30}", now in any::<u64>()) {
            let _ = retry_after(&text, now);
            let _ = go_duration_ms(&text);
            let _ = reset_epoch_or_delta(&text, now);
            let _ = message_wait_ms(&format!("try again in {text}"));
        }

        #[test]
        fn upstream_reset_never_panics(values in proptest::collection::vec("[ -~]{0,24}", 9), now in any::<u64>()) {
            let names = [
                "retry-after-ms", "retry-after", "x-ratelimit-reset-requests",
                "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
                "anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-tokens-remaining",
                "anthropic-ratelimit-unified-reset", "x-ratelimit-reset",
            ];
            let mut map = HeaderMap::new();
            for (name, value) in names.iter().zip(&values) {
                if let Ok(value) = HeaderValue::from_str(value) {
                    map.insert(*name, value);
                }
            }
            let _ = upstream_reset_ms(&map, None, now);
        }
    }
}
