//! The demand clock's profile (behaviour §13, `pacing.clock = "demand"`): a combo's requests
//! by hour of the week, learned from its `route_decided` events (so replay rebuilds it), and
//! the share of a window's expected demand still to come before its reset. Pure: counts in,
//! shares out; it never reads the clock.

use serde::{Deserialize, Serialize};

const HOUR_MS: u64 = 3_600_000;
/// Hours in a week: the profile's slots (hour of the week in UTC; the slot of Unix time 0 is 0).
pub const HOURS_PER_WEEK: usize = 168;
const WEEK_MS: u64 = HOURS_PER_WEEK as u64 * HOUR_MS;

/// Requests seen in each hour of the week, since the first one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DemandProfile {
    /// Requests counted in each hour-of-week slot, over every week seen.
    pub by_hour: Vec<u64>,
    /// When the first request was counted (`None`: none yet).
    pub first_at_ms: Option<u64>,
}

impl Default for DemandProfile {
    fn default() -> Self {
        DemandProfile {
            by_hour: vec![0; HOURS_PER_WEEK],
            first_at_ms: None,
        }
    }
}

fn slot(at_ms: u64) -> usize {
    // In range: the remainder is below 168.
    ((at_ms / HOUR_MS) % HOURS_PER_WEEK as u64) as usize
}

impl DemandProfile {
    /// Counts one request at `at_ms`.
    pub fn count(&mut self, at_ms: u64) {
        self.first_at_ms = Some(self.first_at_ms.map_or(at_ms, |first| first.min(at_ms)));
        if let Some(count) = self.by_hour.get_mut(slot(at_ms)) {
            *count = count.saturating_add(1);
        }
    }

    /// Whether it holds a week of history at `now_ms` (before that the clock is the wall's).
    pub fn has_a_week(&self, now_ms: u64) -> bool {
        self.first_at_ms
            .is_some_and(|first| now_ms.saturating_sub(first) >= WEEK_MS)
    }

    /// Expected demand over `[from_ms, to_ms)` in request-milliseconds per counted request
    /// slot (each slot's count spread evenly over its hour).
    fn demand_between(&self, from_ms: u64, to_ms: u64) -> u128 {
        let mut total = 0u128;
        let mut at = from_ms;
        while at < to_ms {
            let slot_end = (at / HOUR_MS + 1) * HOUR_MS;
            let end = slot_end.min(to_ms);
            let count = self.by_hour.get(slot(at)).copied().unwrap_or(0);
            total += u128::from(count) * u128::from(end - at);
            // A window longer than a week would repeat it: never asked (windows are ≤ 7 d).
            at = end;
        }
        total
    }

    /// The share (per mille) of a window's expected demand still to come at `now_ms`: demand
    /// over `[now, reset)` against demand over the window `[reset − length, reset)`. `None`
    /// when the profile expects no demand in the window (the wall clock then answers).
    pub fn share_to_come_pm(&self, now_ms: u64, resets_at_ms: u64, length_ms: u64) -> Option<u32> {
        let length_ms = length_ms.min(WEEK_MS);
        let start = resets_at_ms.saturating_sub(length_ms);
        let whole = self.demand_between(start, resets_at_ms);
        if whole == 0 {
            return None;
        }
        let to_come = self.demand_between(now_ms.max(start), resets_at_ms);
        u32::try_from(to_come * 1_000 / whole).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: u64 = 24 * HOUR_MS;
    /// Monday 2026-11-30 00:00 UTC.
    const MONDAY: u64 = 1_795_996_800_000;

    /// Working hours 9–17 Monday to Friday, one request a minute, for `weeks` weeks.
    fn working_weeks(weeks: u64) -> DemandProfile {
        let mut profile = DemandProfile::default();
        for week in 0..weeks {
            for day in 0..5 {
                for minute in 0..8 * 60 {
                    profile.count(
                        MONDAY + week * WEEK_MS + day * DAY_MS + 9 * HOUR_MS + minute * 60_000,
                    );
                }
            }
        }
        profile
    }

    #[test]
    fn a_week_that_resets_on_monday_is_spent_by_friday_night() {
        let profile = working_weeks(1);
        let reset = MONDAY + 2 * WEEK_MS + 6 * HOUR_MS;
        let friday_night = MONDAY + WEEK_MS + 4 * DAY_MS + 20 * HOUR_MS;
        assert!(profile.has_a_week(friday_night));
        // Wall clock: 2 d 10 h of 7 d still to run (347 ‰); demand: none of it.
        assert_eq!(
            profile.share_to_come_pm(friday_night, reset, WEEK_MS),
            Some(0)
        );
        let wednesday_noon = MONDAY + WEEK_MS + 2 * DAY_MS + 12 * HOUR_MS;
        // Wednesday 12:00: 5 of 8 hours left that day and two more days = 21 of 40 hours.
        assert_eq!(
            profile.share_to_come_pm(wednesday_noon, reset, WEEK_MS),
            Some(525)
        );
    }

    #[test]
    fn no_history_or_no_demand_in_the_window_leaves_the_wall_clock() {
        let profile = working_weeks(1);
        assert!(!DemandProfile::default().has_a_week(MONDAY));
        assert!(!profile.has_a_week(MONDAY + 6 * DAY_MS));
        // A 5-hour window over Saturday night: nothing expected, no answer.
        let saturday = MONDAY + WEEK_MS + 5 * DAY_MS + 2 * HOUR_MS;
        assert_eq!(
            profile.share_to_come_pm(saturday, saturday + 3 * HOUR_MS, 5 * HOUR_MS),
            None
        );
    }
}
