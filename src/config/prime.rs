//! A connection's `prime_at` / `prime_days` (behaviour §13) → the policy's [`PrimeSchedule`],
//! read once at load: a bad time, an unknown zone or a bad day is an error naming its key.

use quotaroute_actors::policy::prime::{PrimeSchedule, WORKING_DAYS};

use super::error::ErrorSink;

/// The validated schedule of the connection at `prefix` (`connections[2]`); `None` when it
/// has no `prime_at` (or when one of the keys is wrong: every error is in `sink`).
pub(crate) fn build(
    prime_at: Option<&str>,
    prime_days: Option<&[String]>,
    prefix: &str,
    sink: &mut ErrorSink,
) -> Option<PrimeSchedule> {
    let mut days = match prime_days {
        None => WORKING_DAYS,
        Some(_) => [false; 7],
    };
    let mut days_ok = true;
    for (index, name) in prime_days.unwrap_or_default().iter().enumerate() {
        match PrimeSchedule::parse_day(name) {
            Ok(day) => days[usize::from(day.to_monday_zero_offset().unsigned_abs())] = true,
            Err(error) => {
                sink.push(format!("{prefix}.prime_days[{index}]"), error.to_string());
                days_ok = false;
            }
        }
    }
    let Some(prime_at) = prime_at else {
        if prime_days.is_some() {
            sink.push(
                format!("{prefix}.prime_days"),
                "is set without `prime_at` (the time to prime at, as \"07:00 Europe/Berlin\")",
            );
        }
        return None;
    };
    let parsed = PrimeSchedule::parse_at(prime_at)
        .and_then(|(time, zone)| PrimeSchedule::new(time, &zone, days));
    match parsed {
        Ok(schedule) => days_ok.then_some(schedule),
        Err(quotaroute_actors::policy::prime::PrimeScheduleError::NoDays) => {
            if days_ok {
                sink.push(
                    format!("{prefix}.prime_days"),
                    "must name at least one weekday (omit it for Monday to Friday)",
                );
            }
            None
        }
        Err(error) => {
            sink.push(format!("{prefix}.prime_at"), error.to_string());
            None
        }
    }
}
