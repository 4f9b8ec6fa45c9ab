//! A subscription account's windows, as Claude and ChatGPT plans keep them: a 5-hour and a
//! weekly window per key, each of a capacity in requests that depends on the plan's size, each
//! rolling from first use (a window starts at the first request after the previous one reset
//! and resets a fixed length later). Owns the counting and the readings; the headers each
//! provider sends for them are written by `rate_headers.rs`, the 429 when one is spent by
//! `verdict.rs`.

/// One window of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanWindow {
    pub length_ms: u64,
    /// Requests the window allows.
    pub capacity: u64,
    /// Requests counted in the current window.
    pub used: u64,
    /// When the current window started (its first request); `None` before first use.
    pub started_at_ms: Option<u64>,
}

impl PlanWindow {
    /// A window not yet used.
    pub fn fresh(length_ms: u64, capacity: u64) -> Self {
        PlanWindow {
            length_ms,
            capacity,
            used: 0,
            started_at_ms: None,
        }
    }

    /// A window already `used` requests in, that resets `resets_in_ms` from `now_ms`.
    pub fn in_use(
        length_ms: u64,
        capacity: u64,
        used: u64,
        now_ms: u64,
        resets_in_ms: u64,
    ) -> Self {
        PlanWindow {
            length_ms,
            capacity,
            used,
            started_at_ms: Some(
                now_ms
                    .saturating_add(resets_in_ms.min(length_ms))
                    .saturating_sub(length_ms),
            ),
        }
    }

    fn resets_at_ms(&self) -> Option<u64> {
        self.started_at_ms
            .map(|started| started.saturating_add(self.length_ms))
    }

    /// Rolls the window over when its reset has passed.
    fn roll(&mut self, now_ms: u64) {
        if self.resets_at_ms().is_some_and(|reset| now_ms >= reset) {
            self.used = 0;
            self.started_at_ms = None;
        }
    }

    fn spent(&self) -> bool {
        self.used >= self.capacity
    }
}

/// A plan: its 5-hour window and its weekly window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriptionPlan {
    pub five_hour: PlanWindow,
    pub weekly: PlanWindow,
}

pub const FIVE_HOURS_MS: u64 = 5 * 3_600_000;
pub const WEEK_MS: u64 = 7 * 24 * 3_600_000;

impl SubscriptionPlan {
    /// A plan of `size` (a Pro plan 1, a Max plan 5 or 20): `per_five_hours × size` requests
    /// every five hours and eight times that a week, as the providers size them.
    pub fn of_size(size: u64, per_five_hours: u64) -> Self {
        let five_hour = per_five_hours.saturating_mul(size).max(1);
        SubscriptionPlan {
            five_hour: PlanWindow::fresh(FIVE_HOURS_MS, five_hour),
            weekly: PlanWindow::fresh(WEEK_MS, five_hour.saturating_mul(8)),
        }
    }

    /// One request at `now_ms`: counted in both windows unless one is spent.
    pub fn admit(&mut self, now_ms: u64) -> PlanReading {
        let mut spent_until_ms = None;
        for window in [&mut self.five_hour, &mut self.weekly] {
            window.roll(now_ms);
            if window.spent() {
                let reset = window.resets_at_ms().unwrap_or(now_ms);
                spent_until_ms = Some(spent_until_ms.map_or(reset, |at: u64| at.max(reset)));
            }
        }
        if spent_until_ms.is_none() {
            for window in [&mut self.five_hour, &mut self.weekly] {
                window.started_at_ms.get_or_insert(now_ms);
                window.used = window.used.saturating_add(1);
            }
        }
        PlanReading {
            five_hour: WindowReading::of(&self.five_hour, now_ms),
            weekly: WindowReading::of(&self.weekly, now_ms),
            spent_until_ms,
        }
    }
}

/// What one window reports on an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowReading {
    pub used: u64,
    pub capacity: u64,
    pub length_ms: u64,
    /// When it resets (a window not yet started resets a full length from now).
    pub resets_at_ms: u64,
}

impl WindowReading {
    fn of(window: &PlanWindow, now_ms: u64) -> Self {
        WindowReading {
            used: window.used,
            capacity: window.capacity,
            length_ms: window.length_ms,
            resets_at_ms: window
                .resets_at_ms()
                .unwrap_or(now_ms.saturating_add(window.length_ms)),
        }
    }
}

impl WindowReading {
    /// Used share, 0.0 – 1.0.
    pub fn utilization(&self) -> f64 {
        (self.used.min(self.capacity) as f64) / self.capacity.max(1) as f64
    }
}

/// A plan's readings after one request, and whether it was refused as spent (until when).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanReading {
    pub five_hour: WindowReading,
    pub weekly: WindowReading,
    pub spent_until_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn windows_start_at_first_use_and_roll_over_at_their_reset() {
        let mut plan = SubscriptionPlan::of_size(1, 2);
        let first = plan.admit(NOW);
        assert_eq!(first.five_hour.resets_at_ms, NOW + FIVE_HOURS_MS);
        assert!((first.five_hour.utilization() - 0.5).abs() < 1e-9);
        plan.admit(NOW + 1_000);
        // Spent: refused until the 5-hour reset, nothing counted.
        let refused = plan.admit(NOW + 2_000);
        assert_eq!(refused.spent_until_ms, Some(NOW + FIVE_HOURS_MS));
        assert_eq!(plan.weekly.used, 2);
        // After the reset the next request starts a new window from its own time.
        let later = NOW + FIVE_HOURS_MS + 60_000;
        let next = plan.admit(later);
        assert_eq!(next.spent_until_ms, None);
        assert_eq!(next.five_hour.resets_at_ms, later + FIVE_HOURS_MS);
        assert_eq!(next.weekly.resets_at_ms, NOW + WEEK_MS);
    }

    #[test]
    fn a_window_in_use_resets_when_asked() {
        let window = PlanWindow::in_use(FIVE_HOURS_MS, 100, 30, NOW, 20 * 60_000);
        assert_eq!(window.resets_at_ms(), Some(NOW + 20 * 60_000));
        let mut plan = SubscriptionPlan {
            five_hour: window,
            weekly: PlanWindow::fresh(WEEK_MS, 800),
        };
        let reading = plan.admit(NOW);
        assert!((reading.five_hour.utilization() - 0.31).abs() < 1e-9);
    }
}
