//! The one sliding-window shape: `bins` time bins of `bin_ms` each, numbered `at_ms / bin_ms`;
//! the window is the current bin and the `bins - 1` before it, and a bin's amount leaves the
//! window when the whole bin has. Every counted window is binned by it: a connection's 5 h and
//! 7 d buckets (`buckets`), a client's per-minute and per-day limits (`clients::window`),
//! and a cluster's shared counters in Redis (`src/cluster/`), whose bins live
//! [`WindowShape::counter_ttl_s`]. Pure: `now_ms` is always an argument.

use std::ops::RangeInclusive;

/// `bins` bins of `bin_ms` each; the window is `bins × bin_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowShape {
    pub bin_ms: u64,
    pub bins: u64,
}

impl WindowShape {
    /// 5 hours as 60 bins of 5 minutes (a connection's `requests_5h` / `tokens_5h`).
    pub const FIVE_HOURS: WindowShape = WindowShape {
        bin_ms: 5 * 60_000,
        bins: 60,
    };
    /// 7 days as 168 bins of 1 hour (a connection's 7 d limits).
    pub const SEVEN_DAYS: WindowShape = WindowShape {
        bin_ms: 3_600_000,
        bins: 168,
    };
    /// One minute in 12 bins of 5 s (a client's per-minute limits).
    pub const PER_MINUTE: WindowShape = WindowShape {
        bin_ms: 5_000,
        bins: 12,
    };
    /// 24 hours in 24 bins of one hour (a client's per-day limits).
    pub const PER_DAY: WindowShape = WindowShape {
        bin_ms: 3_600_000,
        bins: 24,
    };

    /// The window's length.
    pub const fn window_ms(self) -> u64 {
        self.bin_ms * self.bins
    }

    /// The bin `at_ms` falls in.
    pub const fn bin_of(self, at_ms: u64) -> u64 {
        at_ms / self.bin_ms
    }

    /// When `bin` begins.
    pub const fn bin_start_ms(self, bin: u64) -> u64 {
        bin * self.bin_ms
    }

    /// The oldest bin still inside the window at `now_ms`.
    pub const fn first_live_bin(self, now_ms: u64) -> u64 {
        self.first_live_bin_of(self.bin_of(now_ms))
    }

    /// The oldest bin still inside the window whose current bin is `now_bin`.
    pub const fn first_live_bin_of(self, now_bin: u64) -> u64 {
        (now_bin + 1).saturating_sub(self.bins)
    }

    /// The bins inside the window at `now_ms`, oldest first, the current one last.
    pub const fn live_bins(self, now_ms: u64) -> RangeInclusive<u64> {
        self.first_live_bin(now_ms)..=self.bin_of(now_ms)
    }

    /// Whether `bin` is inside the window whose current bin is `now_bin`.
    pub const fn is_live(self, bin: u64, now_bin: u64) -> bool {
        bin <= now_bin && now_bin - bin < self.bins
    }

    /// When `bin`'s amount leaves the window.
    pub const fn leaves_at_ms(self, bin: u64) -> u64 {
        bin.saturating_add(self.bins).saturating_mul(self.bin_ms)
    }

    /// How long from `now_ms` until the current bin ends.
    pub const fn bin_ends_in_ms(self, now_ms: u64) -> u64 {
        self.bin_ms - now_ms % self.bin_ms
    }

    /// How long a shared counter bin lives (in Redis): the whole window it counts in, plus one
    /// bin, so the oldest bin still counted is never gone early.
    pub const fn counter_ttl_s(self) -> u64 {
        (self.bins + 1) * self.bin_ms / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_the_current_bin_and_the_ones_before_it() {
        let minute = WindowShape::PER_MINUTE;
        assert_eq!(minute.window_ms(), 60_000);
        assert_eq!(minute.live_bins(61_000), 1..=12);
        assert_eq!(minute.live_bins(1_000), 0..=0);
        assert!(minute.is_live(1, 12) && !minute.is_live(0, 12) && !minute.is_live(13, 12));
        // The 0–5 s bin leaves at 60 s; a counter bin outlives its window by one bin.
        assert_eq!(minute.leaves_at_ms(0), 60_000);
        assert_eq!(minute.counter_ttl_s(), 65);
        assert_eq!(WindowShape::PER_DAY.counter_ttl_s(), 25 * 3_600);
        assert_eq!(minute.bin_ends_in_ms(61_000), 4_000);
    }
}
