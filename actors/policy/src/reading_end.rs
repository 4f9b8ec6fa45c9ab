//! How long a usage reading stands (behaviour §6, issue #49): at most its window's own length
//! from when it was read — a minute for the per-minute count windows (`requests:<model>`, …),
//! five hours for `5h`, a Codex window as long as its minutes say — and never more than
//! [`READING_MAX_MS`] (a week: the longest window any upstream reports; a window whose name
//! says no length, as an operator's pushed one, gets that). A reset further away, or none at
//! all, is cut to that end: no reading blocks an account for good, whoever sent it.
//!
//! The one rule for every reading: the node's own upstream headers (`connection_state` bounds
//! a reading before journaling it), a peer's (`src/cluster/peer_bounds.rs` bounds it before
//! applying it) and whatever a journal already holds (`buckets` bounds every reading it keeps,
//! replayed ones included).
//!
//! Pure: the time the reading was made is an argument.

use crate::window_id::WindowId;

/// The longest any reading stands: a week, the longest window an upstream reports.
pub const READING_MAX_MS: u64 = 7 * 24 * 3_600_000;

/// How long a reading of `window` may stand: its length, at most [`READING_MAX_MS`].
pub fn window_bound_ms(window: &str) -> u64 {
    length_bound_ms(WindowId::parse(window).length_ms())
}

/// [`window_bound_ms`] of a window whose name says it is `length_ms` long.
fn length_bound_ms(length_ms: Option<u64>) -> u64 {
    length_ms.map_or(READING_MAX_MS, |length| length.min(READING_MAX_MS))
}

/// When a reading of `window` made at `read_at_ms` that claims `resets_at_ms` stops saying
/// anything: its reset when that is within the window's own length of `read_at_ms`, else the
/// end of that length (also when it claims no reset).
pub fn reading_ends_at_ms(window: &str, read_at_ms: u64, resets_at_ms: Option<u64>) -> u64 {
    length_reading_ends_at_ms(
        WindowId::parse(window).length_ms(),
        read_at_ms,
        resets_at_ms,
    )
}

/// [`reading_ends_at_ms`] of a window whose name says it is `length_ms` long (for a caller
/// that has read the name already).
pub fn length_reading_ends_at_ms(
    length_ms: Option<u64>,
    read_at_ms: u64,
    resets_at_ms: Option<u64>,
) -> u64 {
    let latest = read_at_ms.saturating_add(length_bound_ms(length_ms));
    resets_at_ms.map_or(latest, |reset| reset.min(latest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_796_166_000_000;
    const MINUTE: u64 = 60_000;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;

    #[test]
    fn an_absurd_or_missing_reset_ends_with_the_windows_own_length() {
        // `x-ratelimit-reset-requests: 999999h` (41,666 days) on a per-minute window.
        assert_eq!(
            reading_ends_at_ms("requests:gpt-4o", NOW, Some(NOW + 999_999 * HOUR)),
            NOW + MINUTE
        );
        // No reset at all: a minute for a per-minute window, not forever.
        assert_eq!(reading_ends_at_ms("tokens:gpt-4o", NOW, None), NOW + MINUTE);
        // Unified `rejected` with reset 99999999999 (Unix s, 1.1 M days away).
        assert_eq!(
            reading_ends_at_ms("5h", NOW, Some(99_999_999_999_000)),
            NOW + 5 * HOUR
        );
        assert_eq!(reading_ends_at_ms("7d", NOW, None), NOW + 7 * DAY);
        assert_eq!(
            reading_ends_at_ms("30d", NOW, None),
            NOW + 7 * DAY,
            "a week at most"
        );
        assert_eq!(reading_ends_at_ms("monthly", NOW, None), NOW + 7 * DAY);
        assert_eq!(
            reading_ends_at_ms("300m", NOW, u64::MAX.into()),
            NOW + 5 * HOUR
        );
        // A reset within the window stands as read, a past one too.
        assert_eq!(
            reading_ends_at_ms("requests:gpt-4o", NOW, Some(NOW + 6_000)),
            NOW + 6_000
        );
        assert_eq!(reading_ends_at_ms("5h", NOW, Some(NOW - 1)), NOW - 1);
        assert_eq!(reading_ends_at_ms("7d", u64::MAX - 1, None), u64::MAX);
    }
}
