//! UTC calendar boundaries for `budget_period` (`day` or `month`): pure arithmetic on Unix
//! milliseconds (civil-from-days, H. Hinnant's algorithm), no time-zone database.

const DAY_MS: u64 = 86_400_000;

/// Days since 1970-01-01 → (year, month 1–12).
fn civil_from_days(days: i64) -> (i64, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month)
}

/// (year, month 1–12, day 1) → days since 1970-01-01.
fn days_from_civil(year: i64, month: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The UTC day holding `now_ms`: `[start, end)`.
pub fn day_bounds(now_ms: u64) -> (u64, u64) {
    let start = now_ms - now_ms % DAY_MS;
    (start, start + DAY_MS)
}

/// The UTC calendar month holding `now_ms`: `[start, end)`.
pub fn month_bounds(now_ms: u64) -> (u64, u64) {
    let days = (now_ms / DAY_MS) as i64;
    let (year, month) = civil_from_days(days);
    let start = days_from_civil(year, month);
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    let end = days_from_civil(next_year, next_month);
    (start as u64 * DAY_MS, end as u64 * DAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_start_on_the_first_utc() {
        // 2026-12-01T23:00:00Z
        let now = 1_796_166_000_000;
        let (start, end) = month_bounds(now);
        assert_eq!(start, 1_796_083_200_000); // 2026-12-01T00:00:00Z
        assert_eq!(end, 1_798_761_600_000); // 2027-01-01T00:00:00Z
                                            // 2024-02-29 (leap year): February has 29 days.
        let (start, end) = month_bounds(1_709_164_800_000);
        assert_eq!(start, 1_706_745_600_000); // 2024-02-01
        assert_eq!(end - start, 29 * DAY_MS);
    }

    #[test]
    fn days_start_at_midnight_utc() {
        assert_eq!(
            day_bounds(1_796_166_000_000),
            (1_796_083_200_000, 1_796_169_600_000)
        );
        assert_eq!(day_bounds(0), (0, DAY_MS));
    }
}
