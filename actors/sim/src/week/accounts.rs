//! The provider's side of a subscription account (behaviour §13), for the simulator's
//! subscription week: a 5-hour and a weekly window, each as big as the account; the 5-hour
//! windows and Codex's weekly one roll from first use (a window starts with the first request
//! after the previous one reset, and resets its length later), Anthropic's weekly one resets at
//! a fixed time of the account's week, used or not; every answer carries the rate-limit headers of the account's
//! family (Anthropic's `anthropic-ratelimit-unified-*`, Codex's `x-codex-*`), and a spent
//! window answers 429 with its reset, as those providers do. It tallies, per window kind, the
//! quota each reset left unused and the requests that reached a spent window.
//!
//! Provider side only: it never sees the router; `week.rs` hands its answers to the router the
//! way the node does.

use http::{HeaderMap, HeaderName, HeaderValue};

pub const SECOND_MS: u64 = 1_000;
pub const HOUR_MS: u64 = 3_600 * SECOND_MS;
pub const FIVE_HOURS_MS: u64 = 5 * HOUR_MS;
pub const DAY_MS: u64 = 24 * HOUR_MS;
pub const WEEK_MS: u64 = 7 * DAY_MS;

/// Which headers an account's answers carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `anthropic-ratelimit-unified-{5h,7d}-{utilization,reset,status}` and the overall
    /// status, claim and reset; a spent window answers `Claude AI usage limit reached|<reset>`.
    Anthropic,
    /// `x-codex-{primary,secondary}-{used-percent,window-minutes,reset-after-seconds,reset-at}`;
    /// some plans report the weekly window as primary. A spent window answers
    /// `usage_limit_reached` with `resets_in_seconds`.
    Codex { weekly_primary: bool },
}

/// Quota that reset: how much there was and how much of it was never used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResetTally {
    pub resets: u64,
    pub capacity: u64,
    pub unused: u64,
}

impl ResetTally {
    pub fn add(&mut self, other: &ResetTally) {
        self.resets += other.resets;
        self.capacity += other.capacity;
        self.unused += other.unused;
    }

    /// The unused share in percent (0 when nothing reset).
    pub fn unused_pct(&self) -> f64 {
        if self.capacity == 0 {
            return 0.0;
        }
        100.0 * self.unused as f64 / self.capacity as f64
    }
}

/// One rolling window of an account, in quota units.
#[derive(Debug, Clone)]
pub struct Window {
    pub length_ms: u64,
    pub capacity: u64,
    pub used: u64,
    /// `None` until the first request after a reset starts it.
    pub started_at_ms: Option<u64>,
    /// Units the owner keeps (§13 `reserve`): not the pool's to spend, so not tallied.
    pub reserve: u64,
    /// Resets on a fixed schedule (every `length_ms` from its start, used or not) instead of
    /// rolling from the first use after a reset.
    pub anchored: bool,
    /// Resets before this are not tallied (the week's warm-up, §13's steady state).
    pub tally_from_ms: u64,
    pub tally: ResetTally,
    /// What spare-class requests used of the running window (`week/spare.rs`), and of the
    /// windows tallied so far (those that reset after `tally_from_ms`).
    pub spare_used: u64,
    pub spare_tallied: u64,
}

impl Window {
    pub fn new(length_ms: u64, capacity: u64) -> Self {
        Window {
            length_ms,
            capacity,
            used: 0,
            started_at_ms: None,
            reserve: 0,
            anchored: false,
            tally_from_ms: 0,
            tally: ResetTally::default(),
            spare_used: 0,
            spare_tallied: 0,
        }
    }

    pub fn resets_at_ms(&self) -> Option<u64> {
        self.started_at_ms.map(|start| start + self.length_ms)
    }

    /// Ends the window if its reset has passed, tallying what it left unused of the share
    /// that was the pool's (the owner's reserve aside). An anchored window starts its next
    /// period at that reset (and tallies every whole period that passed unused).
    pub fn roll(&mut self, now_ms: u64) {
        while let Some(reset) = self.resets_at_ms().filter(|&reset| now_ms >= reset) {
            if reset >= self.tally_from_ms {
                self.tally.resets += 1;
                self.tally.capacity += self.capacity - self.reserve;
                self.tally.unused += self
                    .capacity
                    .saturating_sub(self.used)
                    .saturating_sub(self.reserve);
                self.spare_tallied += self.spare_used;
            }
            self.used = 0;
            self.spare_used = 0;
            self.started_at_ms = self.anchored.then_some(reset);
        }
    }

    pub fn spent(&self) -> bool {
        self.used >= self.capacity
    }

    /// Used, in basis points of the capacity, truncated (so only a spent window reads 100 %).
    fn used_basis_points(&self) -> u64 {
        (self.used * 10_000 / self.capacity.max(1)).min(10_000)
    }

    /// Its reset, or (not started) when it would reset if it started now.
    fn reset_ms(&self, now_ms: u64) -> u64 {
        self.resets_at_ms().unwrap_or(now_ms + self.length_ms)
    }

    fn consume(&mut self, cost: u64, now_ms: u64) {
        if self.started_at_ms.is_none() {
            self.started_at_ms = Some(now_ms);
        }
        self.used += cost;
    }
}

/// One answer as the upstream sends it.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// One subscription account.
#[derive(Debug, Clone)]
pub struct Account {
    pub id: String,
    /// Its size in plan units (Pro 1, Max 5, Max 20): its weight and its windows' scale.
    pub size: u32,
    pub family: Family,
    pub five_hour: Window,
    pub weekly: Window,
    /// Requests that arrived while a window was spent (each answered 429).
    pub sent_to_spent: u64,
    pub served: u64,
    /// Whether its answers carry the 5-hour window's headers (a measuring knob of the week:
    /// off, the window still refuses when spent, and only its 429 says so).
    pub reports_five_hour: bool,
}

impl Account {
    /// An account whose windows hold `size × units_5h` and `size × units_7d`.
    pub fn new(id: &str, size: u32, family: Family, units_5h: u64, units_7d: u64) -> Self {
        Account {
            id: id.to_owned(),
            size,
            family,
            five_hour: Window::new(FIVE_HOURS_MS, u64::from(size) * units_5h),
            // Anthropic's weekly limits reset at a fixed time of the account's week; Codex's
            // weekly window, like every 5-hour window, starts with the first use after a reset.
            weekly: Window {
                anchored: family == Family::Anthropic,
                ..Window::new(WEEK_MS, u64::from(size) * units_7d)
            },
            sent_to_spent: 0,
            served: 0,
            reports_five_hour: true,
        }
    }

    /// Tallies every window whose reset has passed.
    pub fn roll(&mut self, now_ms: u64) {
        self.five_hour.roll(now_ms);
        self.weekly.roll(now_ms);
    }

    /// Answers one request costing `cost` units at `now_ms` (whole seconds): 429 while a
    /// window is spent, else 200; either way with the family's headers as of after it.
    pub fn answer(&mut self, cost: u64, now_ms: u64) -> Answer {
        self.roll(now_ms);
        let spent = self.weekly.spent() || self.five_hour.spent();
        if spent {
            self.sent_to_spent += 1;
        } else {
            self.served += 1;
            self.five_hour.consume(cost, now_ms);
            self.weekly.consume(cost, now_ms);
        }
        let mut headers = HeaderMap::new();
        let body = match self.family {
            Family::Anthropic => self.anthropic(&mut headers, spent, now_ms),
            Family::Codex { weekly_primary } => {
                self.codex(&mut headers, weekly_primary, spent, now_ms)
            }
        };
        Answer {
            status: if spent { 429 } else { 200 },
            headers,
            body: body.into_bytes(),
        }
    }

    /// The spent window that refuses (the weekly one first: it lasts longer), and its reset.
    fn refusing(&self, now_ms: u64) -> (&'static str, u64) {
        if self.weekly.spent() {
            ("seven_day", self.weekly.reset_ms(now_ms))
        } else {
            ("five_hour", self.five_hour.reset_ms(now_ms))
        }
    }

    fn anthropic(&self, headers: &mut HeaderMap, spent: bool, now_ms: u64) -> String {
        for (name, window) in [("5h", &self.five_hour), ("7d", &self.weekly)] {
            if name == "5h" && !self.reports_five_hour {
                continue;
            }
            let bp = window.used_basis_points();
            let status = if window.spent() {
                "rejected"
            } else {
                "allowed"
            };
            put(
                headers,
                &format!("anthropic-ratelimit-unified-{name}-utilization"),
                format!("{}.{:04}", bp / 10_000, bp % 10_000),
            );
            put(
                headers,
                &format!("anthropic-ratelimit-unified-{name}-reset"),
                (window.reset_ms(now_ms) / SECOND_MS).to_string(),
            );
            put(
                headers,
                &format!("anthropic-ratelimit-unified-{name}-status"),
                status.to_owned(),
            );
        }
        let (claim, reset_ms) = self.refusing(now_ms);
        let status = if spent { "rejected" } else { "allowed" };
        put(
            headers,
            "anthropic-ratelimit-unified-status",
            status.to_owned(),
        );
        if !spent {
            return r#"{"type":"message","content":[{"type":"text","text":"ok"}]}"#.to_owned();
        }
        let reset_s = reset_ms / SECOND_MS;
        put(
            headers,
            "anthropic-ratelimit-unified-representative-claim",
            claim.to_owned(),
        );
        put(
            headers,
            "anthropic-ratelimit-unified-reset",
            reset_s.to_string(),
        );
        put(
            headers,
            "retry-after",
            ((reset_ms.saturating_sub(now_ms)) / SECOND_MS).to_string(),
        );
        format!(
            r#"{{"type":"error","error":{{"type":"rate_limit_error","message":"Claude AI usage limit reached|{reset_s}"}}}}"#
        )
    }

    fn codex(
        &self,
        headers: &mut HeaderMap,
        weekly_primary: bool,
        spent: bool,
        now_ms: u64,
    ) -> String {
        let (primary, secondary) = if weekly_primary {
            (&self.weekly, &self.five_hour)
        } else {
            (&self.five_hour, &self.weekly)
        };
        let slots: &[(&str, &Window)] = if self.reports_five_hour {
            &[("primary", primary), ("secondary", secondary)]
        } else {
            &[("primary", &self.weekly)]
        };
        for &(slot, window) in slots {
            let bp = window.used_basis_points();
            let reset_ms = window.reset_ms(now_ms);
            put(
                headers,
                &format!("x-codex-{slot}-used-percent"),
                format!("{}.{:02}", bp / 100, bp % 100),
            );
            put(
                headers,
                &format!("x-codex-{slot}-window-minutes"),
                (window.length_ms / 60_000).to_string(),
            );
            put(
                headers,
                &format!("x-codex-{slot}-reset-after-seconds"),
                ((reset_ms - now_ms) / SECOND_MS).to_string(),
            );
            put(
                headers,
                &format!("x-codex-{slot}-reset-at"),
                (reset_ms / SECOND_MS).to_string(),
            );
        }
        if !spent {
            return r#"{"id":"resp_1","object":"response","status":"completed"}"#.to_owned();
        }
        let (_, reset_ms) = self.refusing(now_ms);
        format!(
            r#"{{"error":{{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":{}}}}}"#,
            (reset_ms - now_ms) / SECOND_MS
        )
    }
}

fn put(headers: &mut HeaderMap, name: &str, value: String) {
    if let (Ok(name), Ok(value)) = (
        HeaderName::try_from(name),
        HeaderValue::try_from(value.as_str()),
    ) {
        headers.insert(name, value);
    }
}
