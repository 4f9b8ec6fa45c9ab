//! Times as people write them, for the replay tool and the admin API: RFC 3339 (one reader,
//! jiff's), a UTC time of day (`14:00` = the latest 14:00 UTC not after now) or relative (`30m`
//! = 30 minutes before now) in; UTC with milliseconds out, and short human durations. No clock:
//! `now_ms` is passed.

use std::time::{Duration, UNIX_EPOCH};

/// A `--since`/`--until`/`--state-at` value that is neither RFC 3339 nor a relative duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read time `{value}`: expected RFC 3339 (2026-11-29T14:03:12Z), a UTC time of day (14:00, 14:03:12) or a duration ago (30m, 2h, 1d)")]
pub struct TimeError {
    pub value: String,
}

/// Parses `value` as Unix milliseconds: RFC 3339 (with `Z` or a `±HH:MM` offset, optional
/// fraction), a bare integer of Unix milliseconds, or a duration before `now_ms`.
pub fn parse_time(value: &str, now_ms: u64) -> Result<u64, TimeError> {
    let error = || TimeError {
        value: value.to_string(),
    };
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(error());
    }
    if trimmed.len() >= 13 && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return trimmed.parse().map_err(|_| error());
    }
    if let Some(ms) = parse_time_of_day(trimmed, now_ms) {
        return Ok(ms);
    }
    if trimmed.contains('T') || trimmed.contains(':') {
        return parse_rfc3339(trimmed).ok_or_else(error);
    }
    let ago = humantime::parse_duration(trimmed).map_err(|_| error())?;
    let ago_ms = u64::try_from(ago.as_millis()).map_err(|_| error())?;
    Ok(now_ms.saturating_sub(ago_ms))
}

/// `HH:MM` or `HH:MM:SS` in UTC: the latest such moment not after `now_ms` (today's, or
/// yesterday's when today's is still ahead), the way an on-call engineer says "since 14:00".
fn parse_time_of_day(value: &str, now_ms: u64) -> Option<u64> {
    let mut parts = value.split(':');
    let mut next = |max: u64| -> Option<u64> {
        let part = parts.next()?;
        let valid = (1..=2).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit());
        let number: u64 = if valid {
            part.parse().ok()?
        } else {
            return None;
        };
        (number <= max).then_some(number)
    };
    let hours = next(23)?;
    let minutes = next(59)?;
    let seconds = match value.matches(':').count() {
        1 => 0,
        2 => next(59)?,
        _ => return None,
    };
    const DAY_MS: u64 = 86_400_000;
    let day_start = now_ms - now_ms % DAY_MS;
    let at = day_start + (hours * 3_600 + minutes * 60 + seconds) * 1_000;
    Some(if at > now_ms {
        at.saturating_sub(DAY_MS)
    } else {
        at
    })
}

/// RFC 3339 (`Z` or a numeric offset, optional fraction) as Unix milliseconds; a time with no
/// offset is read as UTC. The one RFC 3339 reader of the node and the replay tool (jiff's).
pub fn parse_rfc3339(value: &str) -> Option<u64> {
    let timestamp = match value.parse::<jiff::Timestamp>() {
        Ok(timestamp) => timestamp,
        Err(_) => {
            let civil = value.parse::<jiff::civil::DateTime>().ok()?;
            jiff::tz::Offset::UTC.to_timestamp(civil).ok()?
        }
    };
    u64::try_from(timestamp.as_millisecond()).ok()
}

/// `2026-11-29T14:03:12.345Z`.
pub fn format_utc_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// `14:03:12` (UTC), for axis labels.
pub fn format_clock(ms: u64) -> String {
    let full = format_utc_ms(ms);
    full.get(11..19).unwrap_or(&full).to_string()
}

/// A short duration: `850ms`, `12s`, `2m05s`, `1h02m`.
pub fn format_duration(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let seconds = (ms + 500) / 1_000;
    if seconds < 60 {
        return format!("{seconds}s");
    }
    if seconds < 3_600 {
        return format!("{}m{:02}s", seconds / 60, seconds % 60);
    }
    format!("{}h{:02}m", seconds / 3_600, (seconds % 3_600) / 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_764_424_992_345; // 2025-11-29T14:03:12.345Z

    #[test]
    fn a_time_of_day_is_the_latest_such_utc_moment_not_after_now() {
        // NOW is 14:03:12.345 UTC.
        assert_eq!(parse_time("14:00", NOW), Ok(NOW - 192_345));
        assert_eq!(parse_time("14:03:12", NOW), Ok(NOW - 345));
        assert_eq!(parse_time("0:00", NOW), Ok(NOW - 50_592_345));
        // Still ahead today: yesterday's.
        assert_eq!(
            parse_time("15:00", NOW),
            Ok(NOW - 192_345 + 3_600_000 - 86_400_000)
        );
        for bad in [
            "24:00", "14:60", "14:00:61", "1:2:3:4", "14:", ":30", "140:00",
        ] {
            assert!(parse_time(bad, NOW).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_parse_from_every_accepted_form() {
        let cases: [(&str, u64); 9] = [
            ("2025-11-29T14:03:12.345", NOW),
            ("2025-11-29T14:03:12.345Z", NOW),
            ("2025-11-29T14:03:12Z", NOW - 345),
            ("2025-11-29T15:03:12.345+01:00", NOW),
            ("2025-11-29T13:33:12.345-00:30", NOW),
            ("30m", NOW - 1_800_000),
            ("2h", NOW - 7_200_000),
            ("1d", NOW - 86_400_000),
            ("1764424992345", NOW),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_time(text, NOW), Ok(expected), "{text}");
        }
    }

    #[test]
    fn unreadable_times_are_errors() {
        for text in ["", "yesterday", "2025-13-40T00:00:00Z", "12"] {
            assert!(parse_time(text, NOW).is_err(), "{text}");
        }
    }

    #[test]
    fn output_times_are_utc_with_milliseconds() {
        assert_eq!(format_utc_ms(NOW), "2025-11-29T14:03:12.345Z");
        assert_eq!(format_clock(NOW), "14:03:12");
    }

    #[test]
    fn durations_read_short() {
        let cases = [
            (850, "850ms"),
            (12_000, "12s"),
            (125_000, "2m05s"),
            (3_720_000, "1h02m"),
        ];
        for (ms, text) in cases {
            assert_eq!(format_duration(ms), text);
        }
    }
}
