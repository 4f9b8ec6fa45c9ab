//! Behaviour §2 step 0 and the per-target half of selection, in one place: whether a target is
//! admitted now (breaker → connection → model lockout), what the selector sees of it (hard
//! block, saturation, cap: [`evaluate_target`]), and taking the first target of an order that
//! admits a request now ([`take_first_admitted`]). The combo actor (routing and failover),
//! `replay --what-if` and, through the router, the simulator compose selection from exactly
//! these; none keeps a copy.

use crate::demand_profile::DemandProfile;
use crate::pace::{spend_pm, Pace, PacingSettings};
use std::sync::Arc;

use quotaroute_journal::{BlockReason, BreakerPhase};

use crate::breaker::{BreakerSettings, BreakerState, ProbeGate};
pub use crate::connection_view::{connection_block, Block, ConnectionView};
use crate::quota_share::TargetView;

/// The breaker's verdict on routing to its provider now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerAdmission {
    /// CLOSED: route normally.
    Healthy,
    /// DEGRADED: route, but after healthy targets.
    Degraded,
    /// HALF_OPEN with a free probe token: route, taking the token.
    Probe,
    /// OPEN, or HALF_OPEN with every token taken.
    Blocked(BlockReason, Option<u64>),
}

/// The breaker's verdict at `now`. `gate` is the provider's probe tokens (`None`: unknown, so
/// HALF_OPEN admits no probe).
pub fn breaker_admission(
    state: &BreakerState,
    settings: &BreakerSettings,
    gate: Option<&ProbeGate>,
    now_ms: u64,
) -> BreakerAdmission {
    match state.phase_at(now_ms, settings) {
        BreakerPhase::Closed => BreakerAdmission::Healthy,
        BreakerPhase::Degraded => BreakerAdmission::Degraded,
        BreakerPhase::Open => BreakerAdmission::Blocked(
            BlockReason::BreakerOpen,
            state
                .open_until_ms()
                .map(|until| until.saturating_sub(now_ms)),
        ),
        BreakerPhase::HalfOpen => match gate {
            Some(gate) if gate.available_at(now_ms, settings) => BreakerAdmission::Probe,
            Some(gate) => BreakerAdmission::Blocked(
                BlockReason::ProbeInFlight,
                gate.next_free_in(now_ms, settings),
            ),
            None => BreakerAdmission::Blocked(BlockReason::ProbeInFlight, None),
        },
    }
}

/// Behaviour §2 step 0 for one target, in order breaker → connection → model lockout.
/// `connection` is evaluated only when the breaker lets the target through.
pub fn admission(
    breaker: BreakerAdmission,
    connection: impl FnOnce() -> Option<Block>,
) -> Option<Block> {
    match breaker {
        BreakerAdmission::Blocked(reason, remaining) => Some((reason, remaining)),
        _ => connection(),
    }
}

/// What the selector sees of one target now (§2 steps 0–2): its hard block, whether one of its
/// connection's buckets for `model` is saturated, its in-flight count against its cap, and
/// whether its provider is DEGRADED, and its pace (§13) when `pacing` is on. `connection` is
/// the combo's copy of the connection (`None`: not known yet, so nothing blocks, saturates or
/// paces it); `demand` is the combo's demand profile (`clock = "demand"`).
#[expect(
    clippy::too_many_arguments,
    reason = "each argument is one input the rule reads; a struct of them would only rename them"
)]
pub fn evaluate_target(
    weight: u32,
    exec_key: Arc<str>,
    model: &str,
    breaker: BreakerAdmission,
    connection: Option<&ConnectionView>,
    in_flight: u32,
    max_concurrent: Option<u32>,
    pacing: Option<&PacingSettings>,
    demand: Option<&DemandProfile>,
    now_ms: u64,
) -> TargetView {
    let hard_block = admission(breaker, || {
        connection.and_then(|view| view.block_for(model, now_ms))
    });
    let pace = match (pacing, connection) {
        (Some(settings), Some(view)) => view.pace_by(model, now_ms, settings, demand),
        _ => Pace::on_pace(),
    };
    let spend = pacing.map_or(pace.per_mille, |settings| {
        spend_pm(pace.per_mille, settings.exponent)
    });
    TargetView {
        weight,
        exec_key,
        hard_block,
        saturated: connection.is_some_and(|view| view.is_saturated(model, now_ms)),
        in_flight,
        max_concurrent,
        degraded: breaker == BreakerAdmission::Degraded,
        pace: pace.per_mille,
        pace_window: pace.binding_window,
        spend,
    }
}

/// What [`take_first_admitted`] asks of whoever holds the state: each candidate's admission now
/// and, for the first admitted, its in-flight slot (and probe token when HALF_OPEN).
pub trait Admit {
    /// What a taken target hands the request (a live permit; a probe mark in a replay).
    type Taken;
    /// Candidate `i`'s breaker verdict now.
    fn breaker(&mut self, i: usize) -> BreakerAdmission;
    /// Candidate `i`'s connection block now (asked only when its breaker lets it through).
    fn connection_block(&mut self, i: usize) -> Option<Block>;
    /// Takes candidate `i`'s slot; the block when it cannot be had (the last probe token went
    /// to another request first).
    fn take(&mut self, i: usize, breaker: BreakerAdmission) -> Result<Self::Taken, Block>;
}

/// The first of `candidates` (in order) admitted now, taken: its offset in `candidates` and
/// what taking it gave. Every candidate passed over is appended to `skipped` with its block.
pub fn take_first_admitted<A: Admit>(
    admit: &mut A,
    candidates: &[usize],
    skipped: &mut Vec<(usize, BlockReason, Option<u64>)>,
) -> Option<(usize, A::Taken)> {
    for (offset, &i) in candidates.iter().enumerate() {
        let breaker = admit.breaker(i);
        if let Some((reason, remaining_ms)) = admission(breaker, || admit.connection_block(i)) {
            skipped.push((i, reason, remaining_ms));
            continue;
        }
        match admit.take(i, breaker) {
            Ok(taken) => return Some((offset, taken)),
            Err((reason, remaining_ms)) => skipped.push((i, reason, remaining_ms)),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_open_without_a_free_token_blocks() {
        let settings = BreakerSettings::default();
        let mut state = BreakerState::new("p");
        // Trip the breaker open, then let its reset pass: HALF_OPEN.
        let mut now = 1_000_000;
        for i in 0..(settings.open_at + 2) {
            let events = state.on_outcome("p", &format!("k{i}"), true, now, false, now, &settings);
            for event in &events {
                state.apply(now, event);
            }
            now += 1;
        }
        assert!(matches!(
            breaker_admission(&state, &settings, None, now),
            BreakerAdmission::Blocked(BlockReason::BreakerOpen, _)
        ));
        now += 3_600_000;
        assert_eq!(state.phase_at(now, &settings), BreakerPhase::HalfOpen);
        let mut gate = ProbeGate::default();
        assert_eq!(
            breaker_admission(&state, &settings, Some(&gate), now),
            BreakerAdmission::Probe
        );
        while gate.try_take(now, &settings) {}
        assert!(matches!(
            breaker_admission(&state, &settings, Some(&gate), now),
            BreakerAdmission::Blocked(BlockReason::ProbeInFlight, Some(_))
        ));
    }

    /// A scripted state: which candidates are blocked, which lose their probe.
    struct Script {
        blocked: Vec<usize>,
        probe_lost: Vec<usize>,
    }

    impl Admit for Script {
        type Taken = usize;
        fn breaker(&mut self, i: usize) -> BreakerAdmission {
            if self.probe_lost.contains(&i) {
                BreakerAdmission::Probe
            } else {
                BreakerAdmission::Healthy
            }
        }
        fn connection_block(&mut self, i: usize) -> Option<Block> {
            self.blocked
                .contains(&i)
                .then_some((BlockReason::Cooldown, Some(5)))
        }
        fn take(&mut self, i: usize, breaker: BreakerAdmission) -> Result<usize, Block> {
            if breaker == BreakerAdmission::Probe {
                return Err((BlockReason::ProbeInFlight, Some(30_000)));
            }
            Ok(i)
        }
    }

    #[test]
    fn the_first_admitted_is_taken_and_the_passed_over_say_why() {
        let mut script = Script {
            blocked: vec![7],
            probe_lost: vec![3],
        };
        let mut skipped = Vec::new();
        let taken = take_first_admitted(&mut script, &[7, 3, 5, 1], &mut skipped);
        assert_eq!(taken, Some((2, 5)));
        assert_eq!(
            skipped,
            vec![
                (7, BlockReason::Cooldown, Some(5)),
                (3, BlockReason::ProbeInFlight, Some(30_000))
            ]
        );
        let mut skipped = Vec::new();
        assert_eq!(
            take_first_admitted(&mut script, &[7, 3], &mut skipped),
            None
        );
        assert_eq!(skipped.len(), 2);
    }
}
