//! Time bands from an event stream: when each connection was cooling or disabled, each
//! (connection, model) locked, each provider's breaker open. Shared by `--summary`, `--svg` and
//! `--what-if` (which feeds it simulated events), so all three measure time the same way.
//! A band runs from its event to its `until_ms`, cut short by a clear/unlock/transition, and is
//! clipped to the span being looked at.

use std::collections::BTreeMap;

use quotaroute_journal::{BreakerPhase, Event};

/// One period `[start_ms, end_ms)` with what it was (a lock reason, a class).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Band {
    pub start_ms: u64,
    pub end_ms: u64,
    pub label: String,
}

impl Band {
    pub fn duration_ms(&self) -> u64 {
        self.end_ms.saturating_sub(self.start_ms)
    }
}

/// Every band of a stream, clipped to a span.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Periods {
    /// Connection → cooldown bands.
    pub cooling: BTreeMap<String, Vec<Band>>,
    /// Connection → disabled bands (label: `auth` or `billing`).
    pub disabled: BTreeMap<String, Vec<Band>>,
    /// Connection → model → lock bands (label: the lock reason).
    pub locked: BTreeMap<String, BTreeMap<String, Vec<Band>>>,
    /// Provider → breaker-open bands.
    pub breaker_open: BTreeMap<String, Vec<Band>>,
    /// Provider → transitions to OPEN.
    pub breaker_openings: BTreeMap<String, u32>,
    /// Provider → the highest `cycles` seen.
    pub breaker_max_cycles: BTreeMap<String, u32>,
}

/// Total length of `bands`.
pub fn total_ms(bands: &[Band]) -> u64 {
    bands.iter().map(Band::duration_ms).sum()
}

impl Periods {
    /// Time connection `id` spent cooling.
    pub fn cooling_ms(&self, id: &str) -> u64 {
        self.cooling.get(id).map_or(0, |b| total_ms(b))
    }

    /// Time connection `id` spent disabled.
    pub fn disabled_ms(&self, id: &str) -> u64 {
        self.disabled.get(id).map_or(0, |b| total_ms(b))
    }

    /// Model → locked time on connection `id`.
    pub fn locked_ms(&self, id: &str) -> BTreeMap<String, u64> {
        self.locked
            .get(id)
            .map(|models| {
                models
                    .iter()
                    .map(|(model, bands)| (model.clone(), total_ms(bands)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Time provider `name`'s breaker was open.
    pub fn breaker_open_ms(&self, name: &str) -> u64 {
        self.breaker_open.get(name).map_or(0, |b| total_ms(b))
    }
}

/// Builds [`Periods`] one event at a time.
#[derive(Debug, Clone, Default)]
pub struct PeriodTracker {
    periods: Periods,
}

/// Extends the last band when the new one overlaps it (a cooldown renewed while cooling), so
/// bands of one key never overlap and their lengths add up to time covered.
fn push_band(bands: &mut Vec<Band>, start_ms: u64, end_ms: u64, label: &str) {
    if end_ms <= start_ms {
        return;
    }
    if let Some(last) = bands.last_mut() {
        if start_ms <= last.end_ms && last.label == label {
            last.end_ms = last.end_ms.max(end_ms);
            return;
        }
        if start_ms < last.end_ms {
            // A different reason takes over from here.
            last.end_ms = start_ms;
        }
    }
    bands.push(Band {
        start_ms,
        end_ms,
        label: label.to_string(),
    });
}

/// Cuts the band running at `at_ms` (if any) short.
fn cut(bands: Option<&mut Vec<Band>>, at_ms: u64) {
    if let Some(last) = bands.and_then(|bands| bands.last_mut()) {
        if last.end_ms > at_ms {
            last.end_ms = at_ms.max(last.start_ms);
        }
    }
}

impl PeriodTracker {
    pub fn observe(&mut self, at_ms: u64, event: &Event) {
        let p = &mut self.periods;
        match event {
            Event::ConnectionCooldown(e) => push_band(
                p.cooling.entry(e.connection.clone()).or_default(),
                at_ms,
                e.until_ms,
                e.class.as_str(),
            ),
            Event::ConnectionDisabled(e) => push_band(
                p.disabled.entry(e.connection.clone()).or_default(),
                at_ms,
                e.until_ms.unwrap_or(u64::MAX),
                e.reason.as_str(),
            ),
            Event::ConnectionCleared(e) => {
                cut(p.cooling.get_mut(&e.connection), at_ms);
                cut(p.disabled.get_mut(&e.connection), at_ms);
            }
            Event::RequestSucceeded(e) => {
                // A successful probe after a billing disable re-enables the connection.
                cut(p.disabled.get_mut(&*e.connection), at_ms);
            }
            Event::ModelLocked(e) => push_band(
                p.locked
                    .entry(e.connection.clone())
                    .or_default()
                    .entry(e.model.clone())
                    .or_default(),
                at_ms,
                e.until_ms,
                e.reason.as_str(),
            ),
            Event::ModelUnlocked(e) => cut(
                p.locked
                    .get_mut(&e.connection)
                    .and_then(|models| models.get_mut(&e.model)),
                at_ms,
            ),
            Event::BreakerTransition(e) => {
                let cycles = p.breaker_max_cycles.entry(e.provider.clone()).or_default();
                *cycles = (*cycles).max(e.cycles);
                cut(p.breaker_open.get_mut(&e.provider), at_ms);
                if e.to == BreakerPhase::Open {
                    *p.breaker_openings.entry(e.provider.clone()).or_default() += 1;
                    push_band(
                        p.breaker_open.entry(e.provider.clone()).or_default(),
                        at_ms,
                        e.until_ms.unwrap_or(u64::MAX),
                        "open",
                    );
                }
            }
            _ => {}
        }
    }

    /// The bands clipped to `[span_start_ms, span_end_ms]`; bands wholly outside are dropped.
    pub fn finish(mut self, span_start_ms: u64, span_end_ms: u64) -> Periods {
        let clip = |bands: &mut Vec<Band>| {
            bands.retain_mut(|band| {
                band.start_ms = band.start_ms.max(span_start_ms);
                band.end_ms = band.end_ms.min(span_end_ms);
                band.end_ms > band.start_ms
            });
        };
        let p = &mut self.periods;
        p.cooling.values_mut().for_each(clip);
        p.disabled.values_mut().for_each(clip);
        p.breaker_open.values_mut().for_each(clip);
        p.locked
            .values_mut()
            .flat_map(|models| models.values_mut())
            .for_each(clip);
        self.periods
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::{
        ActionBy, BreakerTransition, ConnectionCleared, ConnectionCooldown, OutcomeClass,
    };

    fn cooldown(until_ms: u64) -> Event {
        Event::ConnectionCooldown(ConnectionCooldown {
            provider: "p".into(),
            connection: "k".into(),
            class: OutcomeClass::ServerError,
            status: Some(503),
            level: 0,
            until_ms,
            from_retry_after: false,
        })
    }

    fn transition(from: BreakerPhase, to: BreakerPhase, until_ms: Option<u64>) -> Event {
        Event::BreakerTransition(BreakerTransition {
            provider: "p".into(),
            from,
            to,
            failures: 0,
            cycles: 1,
            until_ms,
            by: ActionBy::Router,
        })
    }

    #[test]
    fn renewed_cooldowns_merge_and_a_clear_cuts_them() {
        let mut tracker = PeriodTracker::default();
        tracker.observe(100, &cooldown(200));
        tracker.observe(150, &cooldown(300));
        tracker.observe(400, &cooldown(500));
        tracker.observe(
            450,
            &Event::ConnectionCleared(ConnectionCleared {
                provider: "p".into(),
                connection: "k".into(),
                by: ActionBy::Admin,
            }),
        );
        let periods = tracker.finish(0, 1_000);
        assert_eq!(periods.cooling["k"].len(), 2);
        assert_eq!(periods.cooling_ms("k"), 200 + 50);
    }

    #[test]
    fn breaker_open_ends_at_its_reset_or_when_it_leaves_open_and_is_clipped_to_the_span() {
        let mut tracker = PeriodTracker::default();
        tracker.observe(
            100,
            &transition(BreakerPhase::Closed, BreakerPhase::Open, Some(130)),
        );
        tracker.observe(
            200,
            &transition(BreakerPhase::Open, BreakerPhase::HalfOpen, None),
        );
        tracker.observe(
            200,
            &transition(BreakerPhase::HalfOpen, BreakerPhase::Open, Some(400)),
        );
        tracker.observe(
            250,
            &transition(BreakerPhase::Open, BreakerPhase::Closed, None),
        );
        tracker.observe(
            900,
            &transition(BreakerPhase::Closed, BreakerPhase::Open, Some(2_000)),
        );
        let periods = tracker.finish(0, 1_000);
        assert_eq!(periods.breaker_openings["p"], 3);
        assert_eq!(periods.breaker_open_ms("p"), 30 + 50 + 100);
    }
}
