//! The forecast (behaviour §13 "Forecast"): when a window is spent at the rate it was used over
//! the last `pacing.burn_window_ms`, and when a combo's whole pool is, at the combo's request
//! rate with each target's share taken by its pace. Pure arithmetic on numbers the caller
//! measured (`burn_history`, `buckets`) at a `now` it is given; it never reads state or the
//! clock, and nothing routes by it (it is shown, not obeyed).

/// How much of one window was used over a measured span: per mille of its limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Burn {
    /// Per mille of the limit used during the span (never negative).
    pub used_pm: f64,
    pub span_ms: u64,
}

impl Burn {
    /// Per mille of the limit per millisecond; `None` for an empty span.
    pub fn pm_per_ms(&self) -> Option<f64> {
        (self.span_ms > 0).then(|| self.used_pm.max(0.0) / self.span_ms as f64)
    }
}

/// When a window with `left_pm` per mille of its limit left is spent at `burn`'s rate; `None`
/// when it lasts to its reset (or is not used at all). A window with no reset rolls: it runs
/// out only when the rate, kept up a whole window (`length_ms`, if known), exceeds its limit.
pub fn window_runs_out_at(
    left_pm: f64,
    burn: Option<Burn>,
    resets_at_ms: Option<u64>,
    length_ms: Option<u64>,
    now_ms: u64,
) -> Option<u64> {
    let rate = burn?.pm_per_ms().filter(|rate| *rate > 0.0)?;
    if resets_at_ms.is_none() && length_ms.is_some_and(|length| rate * (length as f64) < 1_000.0) {
        return None;
    }
    let runs_out_at = now_ms.saturating_add(ms(left_pm.max(0.0) / rate));
    match resets_at_ms {
        Some(reset) if runs_out_at >= reset => None,
        _ => Some(runs_out_at),
    }
}

/// Milliseconds from a float, rounded up (a forecast never claims a little more time).
fn ms(value: f64) -> u64 {
    if value.is_finite() {
        value.max(0.0).ceil().min(u64::MAX as f64) as u64
    } else {
        u64::MAX
    }
}

/// How many more requests one window of a target takes before it is spent or within its
/// reserve: what is left above the reserve over what one request cost it in the span;
/// `None` when the cost is unknown (no request, or no use, measured).
pub fn requests_left(
    left_pm: f64,
    reserve_pm: f64,
    burn: Option<Burn>,
    requests_in_span: u64,
) -> Option<f64> {
    let burn = burn.filter(|burn| burn.used_pm > 0.0)?;
    if requests_in_span == 0 {
        return None;
    }
    let cost_pm = burn.used_pm / requests_in_span as f64;
    Some(((left_pm - reserve_pm).max(0.0) / cost_pm).floor())
}

/// One target of a combo as its forecast sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetSupply {
    /// `weight × pace`: its share of the combo's requests among the targets still serving.
    pub share: f64,
    /// Requests it can still take (0: blocked now); `None`: no window says it runs out.
    pub requests_left: Option<f64>,
}

/// When every target of a combo is spent, reserved or blocked, at `requests_per_ms` split by
/// the targets' shares (a target that drops out passes its share to the others); `None` when
/// some target never runs out, nothing is asked of the combo, or `next_reset_at_ms` comes first.
pub fn combo_runs_out_at(
    targets: &[TargetSupply],
    requests_per_ms: f64,
    next_reset_at_ms: Option<u64>,
    now_ms: u64,
) -> Option<u64> {
    let mut live: Vec<(f64, f64)> = Vec::with_capacity(targets.len());
    for target in targets {
        match target.requests_left {
            None => return None,
            Some(left) if left > 0.0 => live.push((target.share.max(0.0), left)),
            Some(_) => {}
        }
    }
    let asked = requests_per_ms > 0.0 && requests_per_ms.is_finite();
    if !live.is_empty() && !asked {
        return None;
    }
    let mut elapsed = 0.0_f64;
    while !live.is_empty() {
        let total: f64 = live.iter().map(|(share, _)| share).sum();
        let serving = live.len() as f64;
        let rate_of = |share: f64| {
            if total > 0.0 {
                requests_per_ms * share / total
            } else {
                requests_per_ms / serving
            }
        };
        let step = live
            .iter()
            .map(|(share, left)| left / rate_of(*share))
            .fold(f64::INFINITY, f64::min);
        if !step.is_finite() {
            return None;
        }
        elapsed += step;
        for (share, left) in &mut live {
            *left -= rate_of(*share) * step;
        }
        live.retain(|(_, left)| *left > 1e-9);
    }
    let runs_out_at = now_ms.saturating_add(ms(elapsed));
    match next_reset_at_ms {
        Some(reset) if runs_out_at >= reset => None,
        _ => Some(runs_out_at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_735_689_600_000;
    const MINUTE: u64 = 60_000;
    const HOUR: u64 = 60 * MINUTE;

    fn burn(used_pm: f64, span_ms: u64) -> Option<Burn> {
        Some(Burn { used_pm, span_ms })
    }

    #[test]
    fn a_window_runs_out_at_its_rate_unless_its_reset_comes_first() {
        // (left ‰, burn, resets in, length, expected runs out in)
        let cases = [
            // 10 % used in 30 min, 50 % left: 2 h 30 min, before a reset in 4 h.
            (
                500.0,
                burn(100.0, 30 * MINUTE),
                Some(4 * HOUR),
                None,
                Some(150 * MINUTE),
            ),
            // The same with the reset in 2 h: it lasts.
            (500.0, burn(100.0, 30 * MINUTE), Some(2 * HOUR), None, None),
            // Not used: lasts.
            (500.0, burn(0.0, 30 * MINUTE), Some(HOUR), None, None),
            (500.0, None, Some(HOUR), None, None),
            (500.0, burn(10.0, 0), Some(HOUR), None, None),
            // Spent already: now.
            (0.0, burn(10.0, MINUTE), Some(HOUR), None, Some(0)),
            // Rolling 5 h window used at 10 %/30 min: 100 % per 5 h is its limit, runs out.
            (
                300.0,
                burn(100.0, 30 * MINUTE),
                None,
                Some(5 * HOUR),
                Some(90 * MINUTE),
            ),
            // Rolling and used at 5 %/30 min: 50 % per 5 h never fills it.
            (300.0, burn(50.0, 30 * MINUTE), None, Some(5 * HOUR), None),
            // No reset and no length known: at its rate.
            (
                300.0,
                burn(50.0, 30 * MINUTE),
                None,
                None,
                Some(180 * MINUTE),
            ),
        ];
        for (left, burn, resets_in, length, expected) in cases {
            assert_eq!(
                window_runs_out_at(left, burn, resets_in.map(|r| NOW + r), length, NOW),
                expected.map(|e| NOW + e),
                "{left} {burn:?} {resets_in:?}"
            );
        }
    }

    #[test]
    fn requests_left_is_what_is_left_above_the_reserve_over_a_request_s_cost() {
        // 10 ‰ over 20 requests: half a per mille each.
        assert_eq!(
            requests_left(500.0, 0.0, burn(10.0, MINUTE), 20),
            Some(1_000.0)
        );
        assert_eq!(
            requests_left(500.0, 200.0, burn(10.0, MINUTE), 20),
            Some(600.0)
        );
        assert_eq!(
            requests_left(100.0, 200.0, burn(10.0, MINUTE), 20),
            Some(0.0)
        );
        assert_eq!(requests_left(500.0, 0.0, burn(10.0, MINUTE), 0), None);
        assert_eq!(requests_left(500.0, 0.0, burn(0.0, MINUTE), 20), None);
        assert_eq!(requests_left(500.0, 0.0, None, 20), None);
    }

    fn target(share: f64, left: Option<f64>) -> TargetSupply {
        TargetSupply {
            share,
            requests_left: left,
        }
    }

    #[test]
    fn a_combo_runs_out_when_its_last_target_does() {
        let per_minute = 1.0 / MINUTE as f64;
        // (targets, requests per ms, next reset in, expected runs out in)
        let cases = [
            // Two equal targets of 60 requests each at 1 a minute: 120 minutes.
            (
                vec![target(1.0, Some(60.0)), target(1.0, Some(60.0))],
                per_minute,
                None,
                Some(120 * MINUTE),
            ),
            // Paced 3:1, 30 and 90 left: both run out together at 120 minutes.
            (
                vec![target(3.0, Some(90.0)), target(1.0, Some(30.0))],
                per_minute,
                None,
                Some(120 * MINUTE),
            ),
            // Paced 1:1 with 10 and 110 left: the first goes at 20 min, then the other
            // takes everything: 10 + 100 = 120 minutes in all.
            (
                vec![target(1.0, Some(10.0)), target(1.0, Some(110.0))],
                per_minute,
                None,
                Some(120 * MINUTE),
            ),
            // A reset first: lasts.
            (
                vec![target(1.0, Some(60.0))],
                per_minute,
                Some(30 * MINUTE),
                None,
            ),
            // One target never runs out.
            (
                vec![target(1.0, Some(60.0)), target(1.0, None)],
                per_minute,
                None,
                None,
            ),
            // Nothing asked of it.
            (vec![target(1.0, Some(60.0))], 0.0, None, None),
            // Every target blocked: now, whatever the rate.
            (
                vec![target(1.0, Some(0.0)), target(1.0, Some(0.0))],
                0.0,
                Some(HOUR),
                Some(0),
            ),
            // A blocked target takes no share: the other runs at the whole rate.
            (
                vec![target(1.0, Some(0.0)), target(1.0, Some(30.0))],
                per_minute,
                None,
                Some(30 * MINUTE),
            ),
            // Zero shares split evenly.
            (
                vec![target(0.0, Some(30.0)), target(0.0, Some(30.0))],
                per_minute,
                None,
                Some(60 * MINUTE),
            ),
        ];
        for (targets, rate, reset_in, expected) in cases {
            assert_eq!(
                combo_runs_out_at(&targets, rate, reset_in.map(|r| NOW + r), NOW),
                expected.map(|e| NOW + e),
                "{targets:?}"
            );
        }
    }
}
