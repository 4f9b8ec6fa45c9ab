//! Priming in the subscription week (behaviour §13 "Priming a window"): at the start of each
//! working day of the week (hour-of-day [`PRIME_HOUR`] relative to the week's Monday 00:00,
//! Monday to Friday), each account whose 5-hour window the router's rule finds due — not
//! running, not blocked, not primed in this window — gets the smallest request (one quota
//! unit), routed to that account only and answered and reported as any request, so the window
//! starts then and resets in the working day. Owns when primes fall in the week and sending
//! them; the rule is `policy::prime`'s, what it reads of the admin view `prime_input`'s.

use std::sync::Arc;

use quotaroute_actors::policy::prime::{prime_verdict_after, PrimeVerdict};
use quotaroute_actors::prime_input::prime_input;
use quotaroute_actors::{ClientTag, RouteError, RouteRequest};
use quotaroute_journal::ApiFormat;

use super::accounts::{DAY_MS, HOUR_MS};
use super::{attempt_result, Week, MODEL};
use crate::engine::{Failure, T0};

/// The hour of the working day's prime: two hours before the working hours (9–18) start, so
/// the window primed resets at noon and the afternoon has a fresh one (the example).
pub const PRIME_HOUR: u64 = 7;

/// The prime times of the week in order, and how many have been sent.
pub(super) struct Priming {
    times: Vec<u64>,
    next: usize,
    /// When each account was last primed.
    last: Vec<Option<u64>>,
}

impl Priming {
    /// Prime times over `days` days from the week's start, at `hour` on weekdays.
    pub(super) fn new(days: u64, hour: u64, accounts: usize) -> Self {
        let times = (0..days)
            .filter(|day| day % 7 < 5)
            .map(|day| T0 + day * DAY_MS + hour * HOUR_MS)
            .collect();
        Priming {
            times,
            next: 0,
            last: vec![None; accounts],
        }
    }

    /// Sends the primes whose time comes at or before `until_ms`.
    pub(super) async fn before(&mut self, until_ms: u64, week: &mut Week) -> Result<(), Failure> {
        while let Some(&at_ms) = self.times.get(self.next).filter(|at| **at <= until_ms) {
            self.next += 1;
            self.prime_all(at_ms, week).await?;
        }
        Ok(())
    }

    async fn prime_all(&mut self, at_ms: u64, week: &mut Week) -> Result<(), Failure> {
        week.clock.set(at_ms);
        let state = week.read().await?;
        for index in 0..week.accounts.len() {
            let (id, provider) = {
                let account = &week.accounts[index];
                (account.id.clone(), super::provider_of(account))
            };
            let input = prime_input(&state, (provider, &id, MODEL), self.last[index]);
            if !matches!(
                prime_verdict_after(Some(at_ms), &input, at_ms),
                PrimeVerdict::Due { .. }
            ) {
                continue;
            }
            let request = RouteRequest {
                request_id: format!("w{}-prime-{index}-{at_ms}", week.seed).into(),
                model: super::COMBO.into(),
                format: ApiFormat::Openai,
                translatable: false,
                cannot_carry: Vec::new(),
                only_connection: Some(id.clone()),
                encrypted_maker: None,
                affinity: None,
                client: ClientTag {
                    id: Arc::from("router/prime"),
                    weight: 1,
                    class: quotaroute_actors::policy::clients::class::RequestClass::Normal,
                },
            };
            let mut decision = match week.router.route(request).await {
                Ok(decision) => decision,
                Err(RouteError::NoTarget(_)) => continue,
                Err(other) => {
                    return Err(week.fail("route-succeeds-or-no-target", other.to_string()))
                }
            };
            let answer = week.accounts[index].answer(1, at_ms);
            let result = attempt_result(answer, MODEL, 1, at_ms);
            if !decision.report_applied(result).await {
                return Err(week.fail("report-has-attempt", "no attempt in progress".into()));
            }
            self.last[index] = Some(at_ms);
            week.stats.primes += 1;
        }
        Ok(())
    }
}
