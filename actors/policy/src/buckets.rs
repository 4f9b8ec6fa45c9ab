//! One connection's usage buckets (behaviour §6): successes counted in time bins against the
//! configured limits, plus the newest upstream/pushed reading per window, and whether a model is
//! saturated. Must not parse headers (that is `rate_limit_headers`) or route events between
//! connections: the caller hands [`UsageBuckets::apply`] only this connection's events.

use std::borrow::Cow;
use std::collections::BTreeMap;

use quotaroute_journal::event::{Event, UsageObserved, UsageSource};
use serde::{Deserialize, Serialize};

use crate::forecast::Burn;
use crate::pace::PaceWindow;
use crate::reading_end::reading_ends_at_ms;
use crate::window::WindowShape;
use crate::window_id::{CountedKind, Metric, WindowId};

/// A connection's configured limits (contract: `[connections.limits]`). `None` / absent = none.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BucketLimits {
    pub requests_5h: Option<u64>,
    pub tokens_5h: Option<u64>,
    pub requests_7d: Option<u64>,
    pub tokens_7d: Option<u64>,
    /// Requests per 7 days for one upstream model.
    pub model_requests_7d: BTreeMap<String, u64>,
    /// Tokens (in + out) per 7 days for one upstream model.
    pub model_tokens_7d: BTreeMap<String, u64>,
}

impl BucketLimits {
    /// No limit is configured: nothing is counted against one.
    pub fn none_set(&self) -> bool {
        self.requests_5h.is_none()
            && self.tokens_5h.is_none()
            && self.requests_7d.is_none()
            && self.tokens_7d.is_none()
            && self.model_requests_7d.is_empty()
            && self.model_tokens_7d.is_empty()
    }
}

/// Contract: `[defaults.buckets]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BucketSettings {
    /// A header reading with remaining ≤ this share of its limit saturates its window.
    pub saturate_below_pct: f64,
}

impl Default for BucketSettings {
    fn default() -> Self {
        Self {
            saturate_below_pct: 2.0,
        }
    }
}

impl BucketSettings {
    /// The threshold in basis points, so the comparison itself stays in integers.
    fn threshold_bp(&self) -> u64 {
        // NaN casts to 0; the clamp keeps the cast in range.
        (self.saturate_below_pct * 100.0)
            .round()
            .clamp(0.0, 10_000.0) as u64
    }
}

/// Per-model success counts kept at most, so junk traffic cannot grow memory without bound.
const MAX_COUNTED_MODELS: usize = 64;
/// Readings kept at most per connection.
const MAX_READINGS: usize = 256;

/// What one bin (or a window) counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
struct Tally {
    requests: u64,
    tokens: u64,
}

impl Tally {
    /// `more` counted in (saturating).
    fn add(&mut self, more: Tally) {
        self.requests = self.requests.saturating_add(more.requests);
        self.tokens = self.tokens.saturating_add(more.tokens);
    }

    fn of(&self, metric: Metric) -> u64 {
        match metric {
            Metric::Requests => self.requests,
            Metric::Tokens => self.tokens,
        }
    }
}

/// Successes in bins keyed by bin number (`at_ms / bin_ms`); never more than `shape.bins`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
struct Bins {
    by_bin: BTreeMap<u64, Tally>,
}

impl Bins {
    fn add(&mut self, at_ms: u64, shape: WindowShape, tally: Tally) {
        let bin_of = shape.bin_of(at_ms);
        // Most counts fall in the newest bin: no search, and nothing to drop (the count that
        // made it the newest dropped what it outdated).
        if let Some(mut newest) = self.by_bin.last_entry() {
            if *newest.key() == bin_of {
                newest.get_mut().add(tally);
                return;
            }
        }
        self.by_bin.entry(bin_of).or_default().add(tally);
        if let Some(newest) = self.by_bin.keys().next_back().copied() {
            let oldest_kept = shape.first_live_bin_of(newest);
            // Drops the bins before `oldest_kept` in place (no new tree per success).
            while let Some(oldest) = self.by_bin.first_entry() {
                if *oldest.key() >= oldest_kept {
                    break;
                }
                oldest.remove();
            }
        }
    }

    fn newest_bin(&self) -> Option<u64> {
        self.by_bin.keys().next_back().copied()
    }

    fn used(&self, now_ms: u64, shape: WindowShape, metric: Metric) -> u64 {
        self.by_bin
            .range(shape.first_live_bin(now_ms)..)
            .fold(0u64, |sum, (_, tally)| sum.saturating_add(tally.of(metric)))
    }

    /// What was counted over the `period_ms` before `now_ms`, in whole bins (the current one
    /// included), and the span those bins cover up to `now_ms`.
    fn since(&self, now_ms: u64, period_ms: u64, shape: WindowShape, metric: Metric) -> (u64, u64) {
        let first = shape.bin_of(now_ms.saturating_sub(period_ms));
        let counted = self
            .by_bin
            .range(first..)
            .fold(0u64, |sum, (_, tally)| sum.saturating_add(tally.of(metric)));
        (counted, now_ms.saturating_sub(shape.bin_start_ms(first)))
    }

    /// When the window's count first drops below `limit` as old bins leave it; `None` if it
    /// already is below, or never will be (a zero limit).
    fn clears_at(
        &self,
        now_ms: u64,
        shape: WindowShape,
        metric: Metric,
        limit: u64,
    ) -> Option<u64> {
        let mut used = self.used(now_ms, shape, metric);
        if used < limit {
            return None;
        }
        for (bin, tally) in self.by_bin.range(shape.first_live_bin(now_ms)..) {
            used = used.saturating_sub(tally.of(metric));
            if used < limit {
                return Some(shape.leaves_at_ms(*bin));
            }
        }
        None
    }
}

/// The newest reading of one window from upstream headers or a push.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reading {
    pub used: u64,
    /// Never 0 (such readings are ignored).
    pub limit: u64,
    /// Its reset, at most its window's own length after `at_ms` (`reading_end`); kept as an
    /// `Option` for the layout snapshots store, always `Some` since issue #49.
    pub resets_at_ms: Option<u64>,
    pub source: UsageSource,
    /// When it was observed; newest wins per window.
    pub at_ms: u64,
}

impl Reading {
    /// Past its reset the reading says nothing any more.
    fn expired(&self, now_ms: u64) -> bool {
        self.resets_at_ms.is_some_and(|reset| now_ms >= reset)
    }

    /// Headers saturate a little early (remaining ≤ threshold) so traffic moves before the
    /// 429; pushed readings saturate at the limit itself.
    fn saturated(&self, now_ms: u64, threshold_bp: u64) -> bool {
        if self.expired(now_ms) {
            return false;
        }
        match self.source {
            UsageSource::Header => {
                let remaining = u128::from(self.limit.saturating_sub(self.used));
                remaining * 10_000 <= u128::from(self.limit) * u128::from(threshold_bp)
            }
            UsageSource::Push | UsageSource::Lease => self.used >= self.limit,
        }
    }
}

/// One bucket as the admin state shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketView {
    /// A reading's window, or a counted limit's config name (`requests_5h`,
    /// `tokens_7d:<model>`, …).
    pub window: String,
    pub used: u64,
    pub limit: u64,
    pub saturated: bool,
    pub resets_at_ms: Option<u64>,
}

/// Usage state of one connection.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UsageBuckets {
    five_hours: Bins,
    seven_days: Bins,
    /// 7-day bins per model, for at most [`MAX_COUNTED_MODELS`] recently successful models.
    seven_days_by_model: BTreeMap<String, Bins>,
    /// Newest reading per window name.
    readings: BTreeMap<String, Reading>,
}

/// One counted limit checked against its bins.
/// One configured limit (`[connections.limits]`): its name as `/admin/state` and the leases
/// call it (`requests_5h`, `tokens_7d:<model>`, …), the model it is about (`None`: every
/// model), what it counts, over which window, and the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSpec<'a> {
    pub name: String,
    pub model: Option<&'a str>,
    pub metric: Metric,
    pub shape: WindowShape,
    pub limit: u64,
}

/// Every configured limit of `limits`, in one order: the table buckets count and cluster
/// leases share.
pub fn each_limit(limits: &BucketLimits) -> impl Iterator<Item = LimitSpec<'_>> {
    let wide = CountedKind::ALL.into_iter().filter_map(|counted| {
        let limit = match counted {
            CountedKind::Requests5h => limits.requests_5h,
            CountedKind::Tokens5h => limits.tokens_5h,
            CountedKind::Requests7d => limits.requests_7d,
            CountedKind::Tokens7d => limits.tokens_7d,
        };
        // The limit first: an unset one must not cost its name's allocation.
        let limit = limit?;
        Some(LimitSpec {
            name: counted.name().to_owned(),
            model: None,
            metric: counted.metric(),
            shape: counted.shape(),
            limit,
        })
    });
    let per_model = [
        (CountedKind::Requests7d, &limits.model_requests_7d),
        (CountedKind::Tokens7d, &limits.model_tokens_7d),
    ]
    .into_iter()
    .flat_map(|(counted, by_model)| {
        by_model.iter().map(move |(model, limit)| LimitSpec {
            name: format!("{}:{model}", counted.name()),
            model: Some(model.as_str()),
            metric: counted.metric(),
            shape: counted.shape(),
            limit: *limit,
        })
    });
    wide.chain(per_model)
}

/// One window as pacing reads it, before it is a [`PaceWindow`].
struct PaceReading<'a> {
    window: Cow<'a, str>,
    used: u64,
    limit: u64,
    resets_at_ms: Option<u64>,
    reported: bool,
}

impl PaceReading<'_> {
    fn window(&self) -> PaceWindow {
        PaceWindow::of(
            &self.window,
            self.used,
            self.limit,
            self.resets_at_ms,
            self.reported,
        )
    }

    /// Whether [`Self::window`] would equal `known`.
    fn is(&self, known: &PaceWindow) -> bool {
        known.window() == self.window
            && known.left_pm == PaceWindow::left_pm_of(self.used, self.limit)
            && known.resets_at_ms == self.resets_at_ms
            && known.reported == self.reported
    }
}

struct CountedLimit<'a> {
    name: String,
    bins: Option<&'a Bins>,
    shape: WindowShape,
    metric: Metric,
    limit: u64,
}

impl CountedLimit<'_> {
    fn used(&self, now_ms: u64) -> u64 {
        self.bins
            .map_or(0, |bins| bins.used(now_ms, self.shape, self.metric))
    }

    fn view(&self, now_ms: u64) -> BucketView {
        let used = self.used(now_ms);
        BucketView {
            window: self.name.clone(),
            used,
            limit: self.limit,
            saturated: used >= self.limit,
            resets_at_ms: self
                .bins
                .and_then(|bins| bins.clears_at(now_ms, self.shape, self.metric, self.limit)),
        }
    }
}

impl UsageBuckets {
    pub fn new() -> Self {
        Self::default()
    }

    /// The only mutator: counts a `RequestSucceeded`, records a `UsageObserved`; other events
    /// are ignored. The caller passes only this connection's events.
    pub fn apply(&mut self, at_ms: u64, event: &Event) {
        match event {
            Event::RequestSucceeded(success) => {
                let tally = Tally {
                    requests: 1,
                    tokens: success.tokens_in.saturating_add(success.tokens_out),
                };
                self.count(at_ms, &success.model, tally);
            }
            Event::UsageObserved(observed) => self.observe(at_ms, observed),
            _ => {}
        }
    }

    fn count(&mut self, at_ms: u64, model: &str, tally: Tally) {
        self.five_hours.add(at_ms, WindowShape::FIVE_HOURS, tally);
        self.seven_days.add(at_ms, WindowShape::SEVEN_DAYS, tally);
        // Looked up first so a success on a known model does not allocate its name.
        match self.seven_days_by_model.get_mut(model) {
            Some(bins) => bins.add(at_ms, WindowShape::SEVEN_DAYS, tally),
            None => self
                .seven_days_by_model
                .entry(model.to_owned())
                .or_default()
                .add(at_ms, WindowShape::SEVEN_DAYS, tally),
        }
        // Forget models with nothing left in the window, then the least recently used ones.
        let first_live = WindowShape::SEVEN_DAYS.first_live_bin(at_ms);
        self.seven_days_by_model
            .retain(|_, bins| bins.newest_bin().is_some_and(|bin| bin >= first_live));
        while self.seven_days_by_model.len() > MAX_COUNTED_MODELS {
            let stalest = self
                .seven_days_by_model
                .iter()
                .min_by_key(|(_, bins)| bins.newest_bin())
                .map(|(name, _)| name.clone());
            match stalest {
                Some(name) => self.seven_days_by_model.remove(&name),
                None => break,
            };
        }
    }

    fn observe(&mut self, at_ms: u64, observed: &UsageObserved) {
        // A zero limit cannot be a real quota: treat it like an unparseable value.
        if observed.limit == 0 {
            return;
        }
        if let Some(current) = self.readings.get(&observed.window) {
            if current.at_ms > at_ms {
                return;
            }
        }
        self.readings.retain(|_, reading| !reading.expired(at_ms));
        self.readings.insert(
            observed.window.clone(),
            Reading {
                used: observed.used,
                limit: observed.limit,
                resets_at_ms: Some(reading_ends_at_ms(
                    &observed.window,
                    at_ms,
                    observed.resets_at_ms,
                )),
                source: observed.source,
                at_ms,
            },
        );
        while self.readings.len() > MAX_READINGS {
            let oldest = self
                .readings
                .iter()
                .min_by_key(|(_, reading)| reading.at_ms)
                .map(|(window, _)| window.clone());
            match oldest {
                Some(window) => self.readings.remove(&window),
                None => break,
            };
        }
    }

    /// The `usage_observed` events that forget every live reading learned from upstream
    /// headers (admin `clear?readings=1`): each window read again as unused, its reset now,
    /// so it is past its reset at once — live, in replay and on peers alike.
    pub fn forget_header_readings(
        &self,
        provider: &str,
        connection: &str,
        now_ms: u64,
    ) -> Vec<Event> {
        self.readings
            .iter()
            .filter(|(_, reading)| {
                reading.source == UsageSource::Header && !reading.expired(now_ms)
            })
            .map(|(window, reading)| {
                Event::UsageObserved(UsageObserved {
                    provider: provider.to_owned(),
                    connection: connection.to_owned(),
                    window: window.clone(),
                    used: 0,
                    limit: reading.limit,
                    resets_at_ms: Some(now_ms),
                    source: UsageSource::Header,
                })
            })
            .collect()
    }

    /// The newest reading of `window`, if any.
    pub fn reading(&self, window: &str) -> Option<&Reading> {
        self.readings.get(window)
    }

    /// The counted limits that concern `model` (`None`: every configured one).
    fn counted_limits<'a>(
        &'a self,
        model: Option<&str>,
        limits: &BucketLimits,
    ) -> Vec<CountedLimit<'a>> {
        let mut counted = Vec::new();
        // Most connections set none: their outcomes and decisions skip the walk.
        if limits.none_set() {
            return counted;
        }
        for spec in each_limit(limits) {
            if spec
                .model
                .is_some_and(|limited| model.is_some_and(|model| model != limited))
            {
                continue;
            }
            let bins = match (spec.model, spec.shape == WindowShape::FIVE_HOURS) {
                (Some(limited), _) => self.seven_days_by_model.get(limited),
                (None, true) => Some(&self.five_hours),
                (None, false) => Some(&self.seven_days),
            };
            counted.push(CountedLimit {
                name: spec.name,
                bins,
                shape: spec.shape,
                metric: spec.metric,
                limit: spec.limit,
            });
        }
        counted
    }

    /// Whether `model` on this connection should move to the tail (§2 step 1): any counted
    /// limit reached, or any live reading of `5h`, `7d`, `7d:<model>` or a short per-model
    /// window saturated.
    pub fn saturated(
        &self,
        model: &str,
        now_ms: u64,
        limits: &BucketLimits,
        settings: &BucketSettings,
    ) -> bool {
        let threshold_bp = settings.threshold_bp();
        self.counted_limits(Some(model), limits)
            .iter()
            .any(|counted| counted.used(now_ms) >= counted.limit)
            || self.readings.iter().any(|(window, reading)| {
                WindowId::parse(window).applies_to(model) && reading.saturated(now_ms, threshold_bp)
            })
    }

    /// Every window pacing reads (behaviour §13) at `now_ms`: each live reading (reported by
    /// an upstream or a push, so it can be spent), then each configured limit counted here
    /// (rolling: no reset).
    pub fn pace_windows(&self, now_ms: u64, limits: &BucketLimits) -> Vec<PaceWindow> {
        self.pace_readings(now_ms, limits)
            .map(|read| read.window())
            .collect()
    }

    /// Whether [`Self::pace_windows`] would equal `windows`, without making any (a connection
    /// asks after every outcome whether its view changed).
    pub fn pace_windows_are(
        &self,
        windows: &[PaceWindow],
        now_ms: u64,
        limits: &BucketLimits,
    ) -> bool {
        let mut known = windows.iter();
        self.pace_readings(now_ms, limits)
            .all(|read| known.next().is_some_and(|known| read.is(known)))
            && known.next().is_none()
    }

    /// What [`Self::pace_windows`] makes its windows of, in its order.
    fn pace_readings<'a>(
        &'a self,
        now_ms: u64,
        limits: &BucketLimits,
    ) -> impl Iterator<Item = PaceReading<'a>> {
        let read = self
            .readings
            .iter()
            .filter(move |(_, reading)| !reading.expired(now_ms))
            .map(|(window, reading)| PaceReading {
                window: Cow::Borrowed(window),
                used: reading.used,
                limit: reading.limit,
                resets_at_ms: reading.resets_at_ms,
                reported: true,
            });
        let counted = self
            .counted_limits(None, limits)
            .into_iter()
            .map(move |counted| PaceReading {
                used: counted.used(now_ms),
                limit: counted.limit,
                window: Cow::Owned(counted.name),
                resets_at_ms: None,
                reported: false,
            });
        read.chain(counted)
    }

    /// Requests this connection served over the `period_ms` before `now_ms` (5-minute bins),
    /// and the span counted: what a window's burn is divided by to cost one request (§13).
    pub fn requests_since(&self, now_ms: u64, period_ms: u64) -> (u64, u64) {
        self.five_hours
            .since(now_ms, period_ms, WindowShape::FIVE_HOURS, Metric::Requests)
    }

    /// How much of the configured limit `name` (`requests_5h`, `tokens_7d:<model>`, …) was
    /// counted over the `period_ms` before `now_ms`: the wide limits from the 5-minute bins
    /// (they count the same successes), a model's from its hourly ones. `None`: not configured.
    pub fn counted_burn(
        &self,
        name: &str,
        now_ms: u64,
        period_ms: u64,
        limits: &BucketLimits,
    ) -> Option<Burn> {
        let spec = each_limit(limits).find(|spec| spec.name == name)?;
        let (bins, shape) = match spec.model {
            Some(model) => (self.seven_days_by_model.get(model), WindowShape::SEVEN_DAYS),
            None => (Some(&self.five_hours), WindowShape::FIVE_HOURS),
        };
        let (counted, span_ms) = bins.map_or((0, period_ms), |bins| {
            bins.since(now_ms, period_ms.max(shape.bin_ms), shape, spec.metric)
        });
        Some(Burn {
            used_pm: counted as f64 * 1_000.0 / spec.limit.max(1) as f64,
            span_ms,
        })
    }

    /// The windows [`Self::views`] shows saturated, in its order: each one's name (borrowed
    /// for a reading) and reset.
    pub fn saturated_windows<'a>(
        &'a self,
        now_ms: u64,
        limits: &BucketLimits,
        settings: &BucketSettings,
    ) -> impl Iterator<Item = (Cow<'a, str>, Option<u64>)> {
        let threshold_bp = settings.threshold_bp();
        let counted = self
            .counted_limits(None, limits)
            .into_iter()
            .filter_map(move |counted| {
                let view = counted.view(now_ms);
                view.saturated
                    .then_some((Cow::Owned(view.window), view.resets_at_ms))
            });
        let read = self
            .readings
            .iter()
            .filter(move |(_, reading)| {
                !reading.expired(now_ms) && reading.saturated(now_ms, threshold_bp)
            })
            .map(|(window, reading)| (Cow::Borrowed(window.as_str()), reading.resets_at_ms));
        counted.chain(read)
    }

    /// Every configured limit and every live reading, for `GET /admin/state`.
    pub fn views(
        &self,
        now_ms: u64,
        limits: &BucketLimits,
        settings: &BucketSettings,
    ) -> Vec<BucketView> {
        let threshold_bp = settings.threshold_bp();
        let counted = self
            .counted_limits(None, limits)
            .into_iter()
            .map(|counted| counted.view(now_ms));
        let read = self
            .readings
            .iter()
            .filter(|(_, reading)| !reading.expired(now_ms))
            .map(|(window, reading)| BucketView {
                window: window.clone(),
                used: reading.used,
                limit: reading.limit,
                saturated: reading.saturated(now_ms, threshold_bp),
                resets_at_ms: reading.resets_at_ms,
            });
        counted.chain(read).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MINUTE: u64 = 60_000;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    /// An arbitrary, bin-aligned start (2025-01-01T00:00:00Z).
    const T0: u64 = 1_735_689_600_000;

    fn success(model: &str, tokens_in: u64, tokens_out: u64) -> Event {
        quotaroute_journal::testkit::succeeded("openai", "c1", model, tokens_in, tokens_out)
    }

    fn observed(
        window: &str,
        used: u64,
        limit: u64,
        resets_at_ms: Option<u64>,
        source: UsageSource,
    ) -> Event {
        Event::UsageObserved(UsageObserved {
            provider: "openai".into(),
            connection: "c1".into(),
            window: window.into(),
            used,
            limit,
            resets_at_ms,
            source,
        })
    }

    fn header(window: &str, used: u64, limit: u64, resets_at_ms: Option<u64>) -> Event {
        observed(window, used, limit, resets_at_ms, UsageSource::Header)
    }

    fn push(window: &str, used_bp: u64, resets_at_ms: Option<u64>) -> Event {
        observed(window, used_bp, 10_000, resets_at_ms, UsageSource::Push)
    }

    fn settings() -> BucketSettings {
        BucketSettings::default()
    }

    fn none() -> BucketLimits {
        BucketLimits::default()
    }

    /// `none_set` skips the walk only when the walk would find nothing: each limit alone
    /// makes it false.
    #[test]
    fn none_set_holds_exactly_when_no_limit_is_configured() {
        assert!(none().none_set());
        assert_eq!(each_limit(&none()).count(), 0);
        let one_each = [
            BucketLimits {
                requests_5h: Some(1),
                ..none()
            },
            BucketLimits {
                tokens_5h: Some(1),
                ..none()
            },
            BucketLimits {
                requests_7d: Some(1),
                ..none()
            },
            BucketLimits {
                tokens_7d: Some(1),
                ..none()
            },
            BucketLimits {
                model_requests_7d: [("m".to_owned(), 1)].into(),
                ..none()
            },
            BucketLimits {
                model_tokens_7d: [("m".to_owned(), 1)].into(),
                ..none()
            },
        ];
        for limits in one_each {
            assert!(!limits.none_set(), "{limits:?}");
            assert_eq!(each_limit(&limits).count(), 1, "{limits:?}");
        }
    }

    /// Issue #49: a spent reading with an absurd reset or none blocks for its window's own
    /// length at most, whoever sent it (the node's headers, a push, a peer).
    #[test]
    fn a_spent_reading_blocks_no_longer_than_its_window() {
        let mut buckets = UsageBuckets::new();
        // `x-ratelimit-remaining-requests: 0` with reset `999999h`; a token window with none.
        buckets.apply(
            T0,
            &header("requests:m", 100, 100, Some(T0 + 999_999 * HOUR)),
        );
        buckets.apply(T0, &header("tokens:m", 100, 100, None));
        // Unified `rejected` with reset 99999999999 (Unix s); a pushed `7d` with none.
        buckets.apply(T0, &header("5h", 10_000, 10_000, Some(99_999_999_999_000)));
        buckets.apply(T0, &push("7d", 10_000, None));
        assert!(buckets.saturated("m", T0 + 59_000, &none(), &settings()));
        let views = buckets.views(T0, &none(), &settings());
        let ends: Vec<(&str, Option<u64>)> = views
            .iter()
            .map(|v| (v.window.as_str(), v.resets_at_ms))
            .collect();
        assert_eq!(
            ends,
            [
                ("5h", Some(T0 + 5 * HOUR)),
                ("7d", Some(T0 + 7 * DAY)),
                ("requests:m", Some(T0 + MINUTE)),
                ("tokens:m", Some(T0 + MINUTE)),
            ]
        );
        assert!(buckets.saturated("m", T0 + 7 * DAY - 1, &none(), &settings()));
        assert!(
            !buckets.saturated("m", T0 + 7 * DAY, &none(), &settings()),
            "a week at most"
        );
        let spent: Vec<u64> = buckets
            .pace_windows(T0, &none())
            .iter()
            .filter_map(|w| w.resets_at_ms)
            .collect();
        assert_eq!(spent.len(), 4, "every spent window has an end");
    }

    #[test]
    fn s6_settings_default_to_2_pct() {
        assert_eq!(BucketSettings::default().saturate_below_pct, 2.0);
        assert_eq!(BucketSettings::default().threshold_bp(), 200);
        let parsed: BucketSettings = serde_json::from_str("{}").unwrap();
        assert_eq!(parsed, BucketSettings::default());
    }

    #[test]
    fn s6_limits_parse_from_config_names() {
        let limits: BucketLimits =
            serde_json::from_str(r#"{"requests_5h": 10, "model_requests_7d": {"gpt-4o": 5000}}"#)
                .unwrap();
        assert_eq!(limits.requests_5h, Some(10));
        assert_eq!(limits.tokens_7d, None);
        assert_eq!(limits.model_requests_7d.get("gpt-4o"), Some(&5000));
        assert!(serde_json::from_str::<BucketLimits>(r#"{"requests_1h": 1}"#).is_err());
    }

    #[test]
    fn s6_counted_requests_5h_saturate_at_limit() {
        let limits = BucketLimits {
            requests_5h: Some(3),
            ..none()
        };
        let mut buckets = UsageBuckets::new();
        for i in 0..2 {
            buckets.apply(T0 + i, &success("m", 1, 1));
        }
        assert!(!buckets.saturated("m", T0 + 10, &limits, &settings()));
        buckets.apply(T0 + 2, &success("m", 1, 1));
        assert!(buckets.saturated("m", T0 + 10, &limits, &settings()));
        assert!(buckets.saturated("other", T0 + 10, &limits, &settings()));
    }

    #[test]
    fn s6_counted_tokens_are_in_plus_out() {
        let limits = BucketLimits {
            tokens_7d: Some(100),
            ..none()
        };
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &success("m", 60, 39));
        assert!(!buckets.saturated("m", T0, &limits, &settings()));
        buckets.apply(T0, &success("m", 0, 1));
        assert!(buckets.saturated("m", T0, &limits, &settings()));
    }

    #[test]
    fn s6_counted_5h_clears_as_old_bins_leave_the_window() {
        let limits = BucketLimits {
            requests_5h: Some(2),
            ..none()
        };
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0 + MINUTE, &success("m", 0, 0));
        buckets.apply(T0 + HOUR, &success("m", 0, 0));
        let now = T0 + 2 * HOUR;
        assert!(buckets.saturated("m", now, &limits, &settings()));
        // The window is the current 5-minute bin and the 59 before it, so the first success's
        // bin [T0, T0 + 5 min) leaves it at T0 + 5 h.
        let view = &buckets.views(now, &limits, &settings())[0];
        assert_eq!(view.window, "requests_5h");
        assert_eq!((view.used, view.limit, view.saturated), (2, 2, true));
        assert_eq!(view.resets_at_ms, Some(T0 + 5 * HOUR));
        assert!(buckets.saturated("m", T0 + 5 * HOUR - 1, &limits, &settings()));
        assert!(!buckets.saturated("m", T0 + 5 * HOUR, &limits, &settings()));
    }

    #[test]
    fn s6_model_7d_limit_concerns_only_its_model() {
        let limits = BucketLimits {
            model_requests_7d: BTreeMap::from([("a".to_owned(), 1)]),
            ..none()
        };
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &success("a", 0, 0));
        assert!(buckets.saturated("a", T0 + 6 * 24 * HOUR, &limits, &settings()));
        assert!(!buckets.saturated("b", T0, &limits, &settings()));
        assert!(!buckets.saturated("a", T0 + 7 * 24 * HOUR, &limits, &settings()));
    }

    #[test]
    fn s6_header_remaining_below_2pct_saturates_until_reset() {
        // Table: (used, limit) → saturated with the default 2 %.
        let cases = [
            (97, 100, false),
            (98, 100, true),
            (100, 100, true),
            (120, 100, true),
            (9_799, 10_000, false),
            (9_800, 10_000, true),
            (0, 1, false),
            (1, 1, true),
        ];
        for (used, limit, expected) in cases {
            let mut buckets = UsageBuckets::new();
            buckets.apply(T0, &header("requests:m", used, limit, Some(T0 + MINUTE)));
            assert_eq!(
                buckets.saturated("m", T0, &none(), &settings()),
                expected,
                "{used}/{limit}"
            );
            assert!(!buckets.saturated("m", T0 + MINUTE, &none(), &settings()));
        }
    }

    #[test]
    fn s6_saturate_below_pct_is_configurable() {
        let ten_pct = BucketSettings {
            saturate_below_pct: 10.0,
        };
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &header("tokens:m", 90, 100, None));
        assert!(buckets.saturated("m", T0, &none(), &ten_pct));
        assert!(!buckets.saturated("m", T0, &none(), &settings()));
    }

    #[test]
    fn s6_pushed_reading_saturates_at_the_limit() {
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &push("7d", 9_999, Some(T0 + HOUR)));
        assert!(!buckets.saturated("m", T0, &none(), &settings()));
        buckets.apply(T0 + 1, &push("7d", 10_000, Some(T0 + HOUR)));
        assert!(buckets.saturated("m", T0 + 1, &none(), &settings()));
        assert!(!buckets.saturated("m", T0 + HOUR, &none(), &settings()));
    }

    #[test]
    fn s6_newer_reading_below_limit_clears_saturation() {
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &push("5h", 10_000, None));
        assert!(buckets.saturated("m", T0 + HOUR, &none(), &settings()));
        buckets.apply(T0 + HOUR, &push("5h", 4_000, None));
        assert!(!buckets.saturated("m", T0 + HOUR, &none(), &settings()));
    }

    #[test]
    fn s6_newest_reading_wins_per_window() {
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0 + 200, &push("5h", 10_000, None));
        buckets.apply(T0 + 100, &push("5h", 0, None));
        assert_eq!(buckets.reading("5h").map(|r| r.used), Some(10_000));
        assert!(buckets.saturated("m", T0 + 300, &none(), &settings()));
    }

    #[test]
    fn s6_reading_windows_apply_by_model() {
        // Table: window → does a saturated reading of it concern model `m`?
        let cases = [
            ("5h", true),
            ("7d", true),
            ("7d:m", true),
            ("requests:m", true),
            ("tokens:m", true),
            ("input-tokens:m", true),
            ("output-tokens:m", true),
            ("7d:other", false),
            ("requests:other", false),
            ("requests:m:v2", false),
        ];
        for (window, expected) in cases {
            let mut buckets = UsageBuckets::new();
            buckets.apply(T0, &header(window, 100, 100, Some(T0 + HOUR)));
            assert_eq!(
                buckets.saturated("m", T0, &none(), &settings()),
                expected,
                "{window}"
            );
        }
        // A model name with a colon keeps it.
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &header("requests:m:v2", 100, 100, None));
        assert!(buckets.saturated("m:v2", T0, &none(), &settings()));
    }

    /// A view asks after each outcome whether its windows changed without making them: the
    /// answer is what comparing with freshly made ones gives, whichever field differs.
    #[test]
    fn pace_windows_are_compares_what_pace_windows_makes() {
        let limits = BucketLimits {
            requests_5h: Some(10),
            model_tokens_7d: BTreeMap::from([("m".to_owned(), 500)]),
            ..none()
        };
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &success("m", 100, 20));
        buckets.apply(T0, &header("requests:m", 40, 100, Some(T0 + MINUTE)));
        buckets.apply(T0, &header("tokens:m", 10, 1_000, None));
        buckets.apply(T0, &push("5h", 9_000, Some(T0 + HOUR)));
        for now in [T0, T0 + 2 * MINUTE, T0 + 2 * HOUR] {
            let made = buckets.pace_windows(now, &limits);
            assert!(buckets.pace_windows_are(&made, now, &limits), "{now}");
            let mut changed: Vec<Vec<PaceWindow>> = Vec::new();
            for at in 0..made.len() {
                let mut one = made.clone();
                one[at].left_pm ^= 1;
                changed.push(one);
                let mut one = made.clone();
                one[at].resets_at_ms = Some(one[at].resets_at_ms.map_or(0, |reset| reset + 1));
                changed.push(one);
                let mut one = made.clone();
                one[at].reported = !one[at].reported;
                changed.push(one);
                let mut one = made.clone();
                let known = &one[at];
                let renamed = format!("{}x", known.window());
                one[at] = PaceWindow::with_left_pm(
                    &renamed,
                    known.left_pm,
                    known.resets_at_ms,
                    known.reported,
                );
                changed.push(one);
            }
            changed.push(made[..made.len() - 1].to_vec());
            changed.push([&made[..], &made[..1]].concat());
            for one in &changed {
                assert!(!buckets.pace_windows_are(one, now, &limits), "{one:?}");
            }
        }
    }

    /// The saturated windows, read without copying their names, are the saturated views.
    #[test]
    fn saturated_windows_are_the_saturated_views() {
        let limits = BucketLimits {
            requests_5h: Some(1),
            model_tokens_7d: BTreeMap::from([("m".to_owned(), 50)]),
            ..none()
        };
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &success("m", 100, 20));
        buckets.apply(T0, &header("requests:m", 100, 100, Some(T0 + MINUTE)));
        buckets.apply(T0, &header("tokens:m", 10, 1_000, None));
        buckets.apply(T0, &push("5h", 10_000, Some(T0 + HOUR)));
        buckets.apply(T0, &push("7d", 100, None));
        for now in [T0, T0 + 2 * MINUTE, T0 + 2 * HOUR] {
            let views: Vec<(String, Option<u64>)> = buckets
                .views(now, &limits, &settings())
                .into_iter()
                .filter(|view| view.saturated)
                .map(|view| (view.window, view.resets_at_ms))
                .collect();
            let read: Vec<(String, Option<u64>)> = buckets
                .saturated_windows(now, &limits, &settings())
                .map(|(window, reset)| (window.into_owned(), reset))
                .collect();
            assert_eq!(read, views, "{now}");
            assert!(!read.is_empty() || now > T0);
        }
    }

    #[test]
    fn s6_zero_limit_readings_are_ignored() {
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &header("requests:m", 0, 0, None));
        assert_eq!(buckets.reading("requests:m"), None);
        assert!(!buckets.saturated("m", T0, &none(), &settings()));
    }

    #[test]
    fn s6_views_list_limits_and_live_readings() {
        let limits = BucketLimits {
            tokens_5h: Some(1_000),
            model_tokens_7d: BTreeMap::from([("m".to_owned(), 50)]),
            ..none()
        };
        let mut buckets = UsageBuckets::new();
        buckets.apply(T0, &success("m", 30, 20));
        buckets.apply(T0, &push("7d", 2_500, Some(T0 + 2 * HOUR)));
        buckets.apply(T0, &header("requests:m", 1, 10, Some(T0 + MINUTE)));
        let views = buckets.views(T0 + 2 * MINUTE, &limits, &settings());
        assert_eq!(
            views,
            vec![
                BucketView {
                    window: "tokens_5h".into(),
                    used: 50,
                    limit: 1_000,
                    saturated: false,
                    resets_at_ms: None,
                },
                BucketView {
                    window: "tokens_7d:m".into(),
                    used: 50,
                    limit: 50,
                    saturated: true,
                    resets_at_ms: Some(T0 + 168 * HOUR),
                },
                BucketView {
                    window: "7d".into(),
                    used: 2_500,
                    limit: 10_000,
                    saturated: false,
                    resets_at_ms: Some(T0 + 2 * HOUR),
                },
            ]
        );
    }

    #[test]
    fn s8_expired_while_down_is_expired_on_replay() {
        let limits = BucketLimits {
            requests_5h: Some(1),
            ..none()
        };
        let journal = [
            (T0, success("m", 1, 1)),
            (T0 + 1, header("requests:m", 100, 100, Some(T0 + MINUTE))),
        ];
        let mut replayed = UsageBuckets::new();
        for (at_ms, event) in &journal {
            replayed.apply(*at_ms, event);
        }
        assert!(replayed.saturated("m", T0 + 2, &limits, &settings()));
        let restart = T0 + 6 * HOUR;
        assert!(!replayed.saturated("m", restart, &limits, &settings()));
        let json = serde_json::to_string(&replayed).unwrap();
        assert_eq!(
            serde_json::from_str::<UsageBuckets>(&json).unwrap(),
            replayed
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Memory stays bounded however long and varied the traffic.
        #[test]
        fn s6_bins_models_and_readings_stay_bounded(
            steps in prop::collection::vec((0u64..4 * HOUR, 0usize..200, 0u64..3), 1..400),
        ) {
            let mut buckets = UsageBuckets::new();
            let mut now = T0;
            for (gap, model, kind) in steps {
                now += gap;
                let model = format!("m{model}");
                match kind {
                    0 => buckets.apply(now, &success(&model, 1, 1)),
                    1 => buckets.apply(now, &header(&format!("requests:{model}"), 1, 10, None)),
                    _ => buckets.apply(now, &push("5h", 5_000, Some(now + HOUR))),
                }
            }
            prop_assert!(buckets.five_hours.by_bin.len() as u64 <= WindowShape::FIVE_HOURS.bins);
            prop_assert!(buckets.seven_days.by_bin.len() as u64 <= WindowShape::SEVEN_DAYS.bins);
            prop_assert!(buckets.seven_days_by_model.len() <= MAX_COUNTED_MODELS);
            for bins in buckets.seven_days_by_model.values() {
                prop_assert!(bins.by_bin.len() as u64 <= WindowShape::SEVEN_DAYS.bins);
            }
            prop_assert!(buckets.readings.len() <= MAX_READINGS);
        }

        /// A counted window is saturated exactly when the successes inside it reach the limit.
        #[test]
        fn s6_counted_window_matches_a_naive_count(
            offsets in prop::collection::vec(0u64..10 * HOUR, 0..50),
            after_last in 0u64..6 * HOUR,
            limit in 1u64..20,
        ) {
            let limits = BucketLimits { requests_5h: Some(limit), ..none() };
            let mut sorted = offsets.clone();
            sorted.sort_unstable();
            let mut buckets = UsageBuckets::new();
            for offset in &sorted {
                buckets.apply(T0 + offset, &success("m", 0, 0));
            }
            // Policy is asked about now, never about a time before events it has seen.
            let now = T0 + sorted.last().copied().unwrap_or(0) + after_last;
            // Naive: bins of 5 minutes, the current one and the 59 before it.
            let now_bin = now / WindowShape::FIVE_HOURS.bin_ms;
            let naive = sorted
                .iter()
                .filter(|offset| {
                    let bin = (T0 + **offset) / WindowShape::FIVE_HOURS.bin_ms;
                    bin + WindowShape::FIVE_HOURS.bins > now_bin
                })
                .count() as u64;
            prop_assert_eq!(buckets.saturated("m", now, &limits, &settings()), naive >= limit);
        }
    }
}
