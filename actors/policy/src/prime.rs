//! Priming a window (behaviour §13): a connection's `prime_at` / `prime_days` as one parsed
//! schedule, and the rule that says whether the smallest request is due now to start its
//! 5-hour rolling window — at or after the day's prime time (at most the window's length
//! late), only while that window is not running, never on a reserved, spent, locked, disabled,
//! cooling or breaker-open target, at most once per window. Pure: `now` is an input; the time
//! zones come from the tz database bundled into the binary (jiff's `tzdb-bundle-always`).

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::{TimeZone, TimeZoneDatabase};
use jiff::Timestamp;

use crate::window_id::{CountedKind, WindowId, WindowScope};

/// The length of the window priming starts: Anthropic's and Codex's rolling 5-hour window.
pub const ROLLING_WINDOW_MS: u64 = 5 * 3_600_000;

/// How late after its time a prime is still sent (a node that was down at the prime time):
/// the window's length. Later than that, the window primed on time would already have reset,
/// so starting one now is an ordinary first request, not a plan for the working day.
pub const LATEST_PRIME_MS: u64 = ROLLING_WINDOW_MS;

/// The name a `window_primed` event gives the window it started.
pub const PRIMED_WINDOW: &str = "5h";

/// Days primed when `prime_days` is absent: Monday to Friday.
pub const WORKING_DAYS: [bool; 7] = [true, true, true, true, true, false, false];

/// A `prime_at` or `prime_days` value that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrimeScheduleError {
    #[error("`{0}` is not a time of day: write `HH:MM` (24-hour), optionally followed by an IANA time zone, as `07:00 Europe/Berlin` (UTC when none)")]
    BadTime(String),
    #[error("`{0}` is not a known time zone: use an IANA name such as `Europe/Berlin` or `America/Los_Angeles`")]
    UnknownZone(String),
    #[error("`{0}` is not a weekday: use mon, tue, wed, thu, fri, sat or sun")]
    BadDay(String),
    #[error("must name at least one weekday (omit it for Monday to Friday)")]
    NoDays,
}

/// When a connection's window is primed: a local time of day in a zone, on some weekdays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimeSchedule {
    time: Time,
    zone: TimeZone,
    /// The zone as written (`UTC` when none was).
    zone_name: String,
    /// Monday first.
    days: [bool; 7],
}

impl PrimeSchedule {
    /// `prime_at` (`"07:00 Europe/Berlin"`, `"07:00"` = UTC) on `days` (Monday first).
    pub fn new(time: Time, zone_name: &str, days: [bool; 7]) -> Result<Self, PrimeScheduleError> {
        let zone = zone_named(zone_name)?;
        if !days.contains(&true) {
            return Err(PrimeScheduleError::NoDays);
        }
        Ok(PrimeSchedule {
            time,
            zone,
            zone_name: zone_name.to_owned(),
            days,
        })
    }

    /// Reads `prime_at`: the time of day and its zone's name.
    pub fn parse_at(text: &str) -> Result<(Time, String), PrimeScheduleError> {
        let mut parts = text.split_whitespace();
        let bad = || PrimeScheduleError::BadTime(text.to_owned());
        let time_text = parts.next().ok_or_else(bad)?;
        let zone = parts.next().unwrap_or("UTC");
        if parts.next().is_some() {
            return Err(bad());
        }
        // `HH:MM` or `HH:MM:SS`, nothing finer.
        let colons = time_text.matches(':').count();
        if !(1..=2).contains(&colons) || time_text.contains('.') {
            return Err(bad());
        }
        let time: Time = time_text.parse().map_err(|_| bad())?;
        zone_named(zone)?;
        Ok((time, zone.to_owned()))
    }

    /// Reads `prime_days`: each name's weekday (`mon` … `sun`, or the whole English name).
    pub fn parse_day(name: &str) -> Result<Weekday, PrimeScheduleError> {
        let lower = name.trim().to_ascii_lowercase();
        let day = match lower.as_str() {
            "mon" | "monday" => Weekday::Monday,
            "tue" | "tuesday" => Weekday::Tuesday,
            "wed" | "wednesday" => Weekday::Wednesday,
            "thu" | "thursday" => Weekday::Thursday,
            "fri" | "friday" => Weekday::Friday,
            "sat" | "saturday" => Weekday::Saturday,
            "sun" | "sunday" => Weekday::Sunday,
            _ => return Err(PrimeScheduleError::BadDay(name.to_owned())),
        };
        Ok(day)
    }

    /// The zone as written.
    pub fn zone_name(&self) -> &str {
        &self.zone_name
    }

    /// Whether the schedule primes on `day`.
    pub fn primes_on(&self, day: Weekday) -> bool {
        self.days[usize::from(day.to_monday_zero_offset().unsigned_abs())]
    }

    /// The instant (Unix ms) of the prime on the local `date`, if it is a prime day. A time
    /// that a daylight-saving jump skips is read as the same wall time after the jump, one
    /// that occurs twice as its first occurrence (jiff's "compatible" reading).
    fn at_on(&self, date: Date) -> Option<u64> {
        if !self.primes_on(date.weekday()) {
            return None;
        }
        let zoned = date
            .to_datetime(self.time)
            .to_zoned_datetime(self.zone.clone())
            .ok()?;
        u64::try_from(zoned.timestamp().as_millisecond()).ok()
    }

    /// The local date of `now_ms` in the schedule's zone.
    fn local_date(&self, now_ms: u64) -> Option<Date> {
        let now = Timestamp::from_millisecond(i64::try_from(now_ms).ok()?).ok()?;
        Some(now.to_zoned_datetime(self.zone.clone()).date())
    }

    /// The latest prime time at or before `now_ms` (within the last week).
    pub fn latest_at_or_before(&self, now_ms: u64) -> Option<u64> {
        let mut date = self.local_date(now_ms)?.tomorrow().ok()?;
        for _ in 0..9 {
            if let Some(at) = self.at_on(date).filter(|at| *at <= now_ms) {
                return Some(at);
            }
            date = date.yesterday().ok()?;
        }
        None
    }

    /// The first prime time after `now_ms` (within the next week).
    pub fn next_after(&self, now_ms: u64) -> Option<u64> {
        let mut date = self.local_date(now_ms)?.yesterday().ok()?;
        for _ in 0..9 {
            if let Some(at) = self.at_on(date).filter(|at| *at > now_ms) {
                return Some(at);
            }
            date = date.tomorrow().ok()?;
        }
        None
    }
}

impl std::fmt::Display for PrimeSchedule {
    /// `07:00 Europe/Berlin mon,tue,wed,thu,fri`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
        let days: Vec<&str> = NAMES
            .iter()
            .zip(self.days)
            .filter(|(_, on)| *on)
            .map(|(name, _)| *name)
            .collect();
        write!(
            f,
            "{:02}:{:02} {} {}",
            self.time.hour(),
            self.time.minute(),
            self.zone_name,
            days.join(",")
        )
    }
}

fn zone_named(name: &str) -> Result<TimeZone, PrimeScheduleError> {
    if name.eq_ignore_ascii_case("UTC") {
        return Ok(TimeZone::UTC);
    }
    TimeZoneDatabase::bundled()
        .get(name)
        .map_err(|_| PrimeScheduleError::UnknownZone(name.to_owned()))
}

/// Whether a window named `name` is the rolling 5-hour window priming starts (`5h`, Codex's
/// `300m`), as the connection's own reading (not a configured limit's cluster share).
pub fn is_rolling_window(name: &str) -> bool {
    let id = WindowId::parse(name);
    id.scope() == WindowScope::Connection
        && id.model().is_none()
        && CountedKind::of_kind(id.kind()).is_none()
        && id.length_ms() == Some(ROLLING_WINDOW_MS)
}

/// Why a target is never primed now (behaviour §13): the request would spend what is kept,
/// spent, or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrimeBlock {
    /// A window's remainder is within the connection's reserve.
    Reserved,
    /// A window is spent.
    Spent,
    /// The model primed with is locked out.
    Locked,
    /// The connection is disabled.
    Disabled,
    /// The connection is cooling down.
    CoolingDown,
    /// Its provider's breaker is not closed.
    BreakerOpen,
}

impl PrimeBlock {
    pub fn as_str(self) -> &'static str {
        match self {
            PrimeBlock::Reserved => "reserved",
            PrimeBlock::Spent => "spent",
            PrimeBlock::Locked => "locked",
            PrimeBlock::Disabled => "disabled",
            PrimeBlock::CoolingDown => "cooldown",
            PrimeBlock::BreakerOpen => "breaker_open",
        }
    }
}

/// What the prime rule reads of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PrimeInput {
    /// The rolling window's reset as last read; `None`: never read (not known to run).
    pub window_resets_at_ms: Option<u64>,
    /// Why it must not be primed, if it must not.
    pub block: Option<PrimeBlock>,
    /// When it was last primed (journaled `window_primed`, rebuilt on restart).
    pub last_primed_at_ms: Option<u64>,
}

/// The prime rule's answer for one connection at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrimeVerdict {
    /// Send the smallest request now, for the prime time `scheduled_at_ms`.
    Due { scheduled_at_ms: u64 },
    /// No prime time in the last [`LATEST_PRIME_MS`].
    NotPrimeTime,
    /// This prime time (or this window) was primed already.
    AlreadyPrimed { at_ms: u64 },
    /// The window runs: started by a request, it resets at `resets_at_ms`.
    Running { resets_at_ms: u64 },
    /// The target must not be primed now.
    Blocked(PrimeBlock),
}

/// Whether `schedule`'s prime is due at `now_ms` on a connection that reads as `input`.
pub fn prime_verdict(schedule: &PrimeSchedule, input: &PrimeInput, now_ms: u64) -> PrimeVerdict {
    prime_verdict_after(schedule.latest_at_or_before(now_ms), input, now_ms)
}

/// [`prime_verdict`] given the latest prime time at or before `now_ms` (`None`: none), for a
/// caller whose days are not the calendar's (the simulator's week).
pub fn prime_verdict_after(
    latest_prime_ms: Option<u64>,
    input: &PrimeInput,
    now_ms: u64,
) -> PrimeVerdict {
    let Some(scheduled_at_ms) =
        latest_prime_ms.filter(|at| *at <= now_ms && now_ms.saturating_sub(*at) <= LATEST_PRIME_MS)
    else {
        return PrimeVerdict::NotPrimeTime;
    };
    // One per prime time, and one per window: a prime whose window has not reset by the
    // router's own count stands even when no reading came back from it.
    if let Some(at_ms) = input
        .last_primed_at_ms
        .filter(|at| *at >= scheduled_at_ms || at.saturating_add(ROLLING_WINDOW_MS) > now_ms)
    {
        return PrimeVerdict::AlreadyPrimed { at_ms };
    }
    if let Some(resets_at_ms) = input.window_resets_at_ms.filter(|reset| *reset > now_ms) {
        return PrimeVerdict::Running { resets_at_ms };
    }
    if let Some(block) = input.block {
        return PrimeVerdict::Blocked(block);
    }
    PrimeVerdict::Due { scheduled_at_ms }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;
    const MINUTE: u64 = 60_000;

    /// Unix ms of an RFC 3339 instant.
    fn at(text: &str) -> u64 {
        u64::try_from(text.parse::<Timestamp>().unwrap().as_millisecond()).unwrap()
    }

    fn schedule(at_text: &str) -> PrimeSchedule {
        let (time, zone) = PrimeSchedule::parse_at(at_text).unwrap();
        PrimeSchedule::new(time, &zone, WORKING_DAYS).unwrap()
    }

    #[test]
    fn prime_at_reads_a_time_and_an_iana_zone_utc_when_none() {
        let (time, zone) = PrimeSchedule::parse_at("07:00 Europe/Berlin").unwrap();
        assert_eq!((time.hour(), time.minute()), (7, 0));
        assert_eq!(zone, "Europe/Berlin");
        assert_eq!(PrimeSchedule::parse_at("06:30").unwrap().1, "UTC");
        assert_eq!(PrimeSchedule::parse_at("06:30:15").unwrap().0.second(), 15);
        for bad in [
            "7",
            "25:00",
            "07:61",
            "seven",
            "",
            "07:00 Europe/Berlin extra",
            "07:00:00.5",
        ] {
            assert!(
                matches!(
                    PrimeSchedule::parse_at(bad),
                    Err(PrimeScheduleError::BadTime(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(
            PrimeSchedule::parse_at("07:00 Mars/Olympus"),
            Err(PrimeScheduleError::UnknownZone("Mars/Olympus".into()))
        );
        assert_eq!(PrimeSchedule::parse_day("Fri"), Ok(Weekday::Friday));
        assert_eq!(PrimeSchedule::parse_day("sunday"), Ok(Weekday::Sunday));
        assert!(PrimeSchedule::parse_day("fry").is_err());
        assert_eq!(
            PrimeSchedule::new(time, "UTC", [false; 7]),
            Err(PrimeScheduleError::NoDays)
        );
    }

    #[test]
    fn a_prime_time_follows_daylight_saving_time_in_its_zone() {
        let berlin = schedule("07:00 Europe/Berlin");
        // Winter (CET, UTC+1): 07:00 is 06:00 UTC; summer (CEST, UTC+2): 05:00 UTC.
        // 2026-03-27 is a Friday, 2026-03-30 the Monday after the clocks went forward.
        assert_eq!(
            berlin.next_after(at("2026-03-27T00:00:00Z")),
            Some(at("2026-03-27T06:00:00Z"))
        );
        assert_eq!(
            berlin.next_after(at("2026-03-27T06:00:00Z")),
            Some(at("2026-03-30T05:00:00Z")),
            "the weekend is skipped and summer time is in force"
        );
        // A time the jump skips (02:30 on 2026-03-29, a Sunday) is read after the jump.
        let every_day = PrimeSchedule::new(
            PrimeSchedule::parse_at("02:30").unwrap().0,
            "Europe/Berlin",
            [true; 7],
        )
        .unwrap();
        assert_eq!(
            every_day.next_after(at("2026-03-28T12:00:00Z")),
            Some(at("2026-03-29T01:30:00Z"))
        );
        // Los Angeles, November: PDT (UTC-7) on Friday, PST (UTC-8) on Monday.
        let la = schedule("07:00 America/Los_Angeles");
        assert_eq!(
            la.latest_at_or_before(at("2026-10-30T20:00:00Z")),
            Some(at("2026-10-30T14:00:00Z"))
        );
        assert_eq!(
            la.next_after(at("2026-10-30T20:00:00Z")),
            Some(at("2026-11-02T15:00:00Z"))
        );
        assert_eq!(
            berlin.to_string(),
            "07:00 Europe/Berlin mon,tue,wed,thu,fri"
        );
    }

    #[test]
    fn due_at_the_prime_time_on_an_idle_window_and_not_before() {
        let utc = schedule("07:00");
        // 2026-12-07 is a Monday.
        let seven = at("2026-12-07T07:00:00Z");
        let idle = PrimeInput::default();
        assert_eq!(
            prime_verdict(&utc, &idle, seven - MINUTE),
            PrimeVerdict::NotPrimeTime,
            "Sunday's is not a prime day, Monday's not yet"
        );
        assert_eq!(
            prime_verdict(&utc, &idle, seven),
            PrimeVerdict::Due {
                scheduled_at_ms: seven
            }
        );
        // Late by up to the window's length (a node that was down), then not at all.
        assert!(matches!(
            prime_verdict(&utc, &idle, seven + LATEST_PRIME_MS),
            PrimeVerdict::Due { .. }
        ));
        assert_eq!(
            prime_verdict(&utc, &idle, seven + LATEST_PRIME_MS + 1),
            PrimeVerdict::NotPrimeTime
        );
        // A window whose reset has passed is not running: due.
        let reset_passed = PrimeInput {
            window_resets_at_ms: Some(seven - HOUR),
            ..idle
        };
        assert!(matches!(
            prime_verdict(&utc, &reset_passed, seven),
            PrimeVerdict::Due { .. }
        ));
        // Saturday is not a prime day by default.
        assert_eq!(
            prime_verdict(&utc, &idle, at("2026-12-12T08:00:00Z")),
            PrimeVerdict::NotPrimeTime
        );
    }

    #[test]
    fn never_on_a_running_window_nor_on_a_reserved_spent_locked_disabled_or_refused_target() {
        let utc = schedule("07:00");
        let now = at("2026-12-07T07:00:30Z");
        let running = PrimeInput {
            window_resets_at_ms: Some(now + 2 * HOUR),
            ..PrimeInput::default()
        };
        assert_eq!(
            prime_verdict(&utc, &running, now),
            PrimeVerdict::Running {
                resets_at_ms: now + 2 * HOUR
            }
        );
        for block in [
            PrimeBlock::Reserved,
            PrimeBlock::Spent,
            PrimeBlock::Locked,
            PrimeBlock::Disabled,
            PrimeBlock::CoolingDown,
            PrimeBlock::BreakerOpen,
        ] {
            let input = PrimeInput {
                block: Some(block),
                ..PrimeInput::default()
            };
            assert_eq!(
                prime_verdict(&utc, &input, now),
                PrimeVerdict::Blocked(block),
                "{}",
                block.as_str()
            );
        }
    }

    #[test]
    fn at_most_one_prime_per_prime_time_and_per_window() {
        let utc = schedule("07:00");
        let seven = at("2026-12-07T07:00:00Z");
        // Primed at 07:00 and no reading came back: not again that morning.
        let primed = PrimeInput {
            last_primed_at_ms: Some(seven),
            ..PrimeInput::default()
        };
        for later in [seven + MINUTE, seven + 4 * HOUR, seven + LATEST_PRIME_MS] {
            assert_eq!(
                prime_verdict(&utc, &primed, later),
                PrimeVerdict::AlreadyPrimed { at_ms: seven }
            );
        }
        // The next morning's prime time is due again.
        let tomorrow = seven + 24 * HOUR;
        assert_eq!(
            prime_verdict(&utc, &primed, tomorrow),
            PrimeVerdict::Due {
                scheduled_at_ms: tomorrow
            }
        );
        // Primed late last night (a window still running by the router's count): not again.
        let late_prime = PrimeInput {
            last_primed_at_ms: Some(tomorrow - 2 * HOUR),
            ..PrimeInput::default()
        };
        assert!(matches!(
            prime_verdict(&utc, &late_prime, tomorrow),
            PrimeVerdict::AlreadyPrimed { .. }
        ));
    }

    #[test]
    fn the_rolling_window_is_the_five_hour_one() {
        assert!(is_rolling_window("5h"));
        assert!(is_rolling_window("300m"));
        for other in [
            "7d",
            "7d:opus",
            "requests:gpt-4o",
            "requests_5h@cluster",
            "requests_5h",
            "1h",
        ] {
            assert!(!is_rolling_window(other), "{other}");
        }
    }
}
