//! When a credential is refreshed, as pure arithmetic on Unix milliseconds (no clock here, so
//! every rule is a table test): an OAuth token before it expires, a command's key after its
//! TTL, a failed refresh retried with a capped exponential backoff.

/// No OAuth token is refreshed earlier than this before it expires…
const MAX_MARGIN_MS: u64 = 60_000;
/// …and none later than when this share of its life is left (1/5: at 80 % of its life).
const MARGIN_DIVISOR: u64 = 5;
/// An access token without `expires_in` is refreshed after this long.
pub const UNKNOWN_LIFETIME_REFRESH_MS: u64 = 55 * 60 * 1000;
/// First retry after a failed refresh, doubled per consecutive failure up to the cap.
const BACKOFF_BASE_MS: u64 = 1_000;
const BACKOFF_MAX_MS: u64 = 30_000;

/// When to refresh a token issued at `issued_at_ms` for `lifetime_ms`: 60 s before it
/// expires, or at 80 % of its life when that is earlier (a 1-minute token at 48 s, a 1-hour
/// token at 59 min).
pub fn oauth_refresh_at(issued_at_ms: u64, lifetime_ms: Option<u64>) -> u64 {
    match lifetime_ms {
        Some(lifetime) => {
            let margin = (lifetime / MARGIN_DIVISOR).min(MAX_MARGIN_MS);
            issued_at_ms.saturating_add(lifetime - margin)
        }
        None => issued_at_ms.saturating_add(UNKNOWN_LIFETIME_REFRESH_MS),
    }
}

/// When to run a key command again: `ttl_ms` after its last run.
pub fn command_refresh_at(loaded_at_ms: u64, ttl_ms: u64) -> u64 {
    loaded_at_ms.saturating_add(ttl_ms)
}

/// How long to wait before retrying after `failures` consecutive failed refreshes (≥ 1), and
/// never past `expires_at_ms` when the last good credential has one (retry right then).
pub fn retry_after_ms(failures: u32, now_ms: u64, expires_at_ms: Option<u64>) -> u64 {
    let exponent = failures.saturating_sub(1).min(16);
    let backoff = BACKOFF_BASE_MS
        .saturating_mul(1u64 << exponent)
        .min(BACKOFF_MAX_MS);
    match expires_at_ms {
        Some(expires) if expires > now_ms => backoff.min(expires - now_ms).max(100),
        _ => backoff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oauth_tokens_refresh_before_they_expire() {
        let t0 = 1_000_000;
        // (lifetime, refreshed after)
        for (lifetime, after) in [
            (Some(3_600_000), 3_540_000), // 1 h: 60 s before
            (Some(300_000), 240_000),     // 5 min: 60 s before (= 80 %)
            (Some(60_000), 48_000),       // 1 min: at 80 %
            (Some(2_000), 1_600),         // 2 s: at 80 %
            (Some(1), 1),                 // degenerate: at once
            (None, UNKNOWN_LIFETIME_REFRESH_MS),
        ] {
            assert_eq!(oauth_refresh_at(t0, lifetime), t0 + after, "{lifetime:?}");
        }
    }

    #[test]
    fn commands_run_again_after_their_ttl() {
        assert_eq!(command_refresh_at(5_000, 300_000), 305_000);
        assert_eq!(command_refresh_at(u64::MAX - 1, 10), u64::MAX);
    }

    #[test]
    fn failed_refreshes_back_off_and_never_wait_past_expiry() {
        let now = 10_000;
        let waits: Vec<u64> = (1..=7).map(|n| retry_after_ms(n, now, None)).collect();
        assert_eq!(waits, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
        assert_eq!(retry_after_ms(100, now, None), 30_000);
        // The last good token expires in 2.5 s: the retry comes by then.
        assert_eq!(retry_after_ms(3, now, Some(now + 2_500)), 2_500);
        // Already expired: the normal backoff (nothing left to protect).
        assert_eq!(retry_after_ms(2, now, Some(now - 1)), 2_000);
    }
}
