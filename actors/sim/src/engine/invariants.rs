//! The simulator's invariants (the letters of `engine`'s list): each check reads the admin
//! state and what the schedule did, and reports the first rule of `behaviour.md` that did not
//! hold. Checks only: they never drive the schedule (that is `engine`).

use super::*;

impl Sim {
    /// (i) One report applies behaviour §4/§5 exactly, as the admin state shows it before and
    /// after (same clock value): the connection column (cooldown `base·2^level` or the
    /// `Retry-After`, capped; not escalated while cooling or for a request sent before the
    /// cooldown; a success resets the level; auth disables for good, billing for `billing_ms`),
    /// the lockout column (the upstream reset exactly, else `base·2^(n−1)` capped, quota 1 h
    /// doubling to 24 h; never shortened), and the breaker column (classes that do not trip it
    /// leave it alone; a probe's failure re-opens it one cycle up; a late non-probe success
    /// does not close an OPEN breaker).
    #[expect(
        clippy::too_many_lines,
        reason = "one check per column of the tables in §4, in the tables' order"
    )]
    pub(super) fn check_report(
        &mut self,
        pre: &AdminState,
        post: &AdminState,
        held: &Held,
        model: &str,
        result: &AttemptResult,
    ) -> Result<(), Failure> {
        let now = self.now();
        let class = result.class;
        let conn = |state: &AdminState| {
            state
                .connections
                .iter()
                .find(|c| c.id == held.connection)
                .cloned()
        };
        let (Some(before), Some(after)) = (conn(pre), conn(post)) else {
            return Err(self.fail("i:report-applies-the-table", "connection missing".into()));
        };
        let spec = self.topology.connection(&held.connection).cloned();
        let Some(spec) = spec else {
            return Err(self.fail("i:report-applies-the-table", "connection missing".into()));
        };
        let bad = |what: String| {
            Failure {
            seed: self.seed,
            step: self.step,
            invariant: "i:report-applies-the-table",
            detail: format!(
                "{} on {}/{model} (sent at {}, now {now}): {what}; before {before:?}; after {after:?}",
                class.as_str(),
                held.connection,
                held.started_ms
            ),
        }
        };
        // Connection column.
        let cooling = before.cooldown_remaining_ms > 0;
        match class {
            OutcomeClass::Timeout | OutcomeClass::ServerError | OutcomeClass::Network => {
                let sent_before = self
                    .cooldown_set_at
                    .get(&held.connection)
                    .is_some_and(|&set| held.started_ms < set);
                if cooling || sent_before {
                    if after.cooldown_remaining_ms != before.cooldown_remaining_ms
                        || after.cooldown_level != before.cooldown_level
                    {
                        return Err(bad(format!(
                            "escalated a cooldown (cooling {cooling}, sent before it {sent_before})"
                        )));
                    }
                } else {
                    let level = before.cooldown_level.min(spec.cooldown.max_level);
                    let want = match result.reset_hint_ms {
                        Some(hint) => hint.min(spec.cooldown.max_ms),
                        None => spec.cooldown.backoff_ms(level),
                    };
                    if after.cooldown_remaining_ms != want || after.cooldown_level != level + 1 {
                        return Err(bad(format!(
                            "expected a cooldown of {want} ms at level {}",
                            level + 1
                        )));
                    }
                    self.cooldown_set_at.insert(held.connection.clone(), now);
                }
            }
            OutcomeClass::Success if after.cooldown_level != 0 => {
                return Err(bad("a success did not reset the cooldown level".into()));
            }
            OutcomeClass::AuthFailed | OutcomeClass::Forbidden => {
                let ok = after
                    .disabled
                    .as_ref()
                    .is_some_and(|d| d.reason == "auth" && d.remaining_ms.is_none());
                if !ok {
                    return Err(bad("expected disabled for auth until cleared".into()));
                }
            }
            OutcomeClass::Billing => {
                let want = match &before.disabled {
                    None => Some(spec.lockout.billing_ms),
                    Some(d) => d.remaining_ms,
                };
                let reason = before.disabled.as_ref().map_or("billing", |d| d.reason);
                let ok = after
                    .disabled
                    .as_ref()
                    .is_some_and(|d| d.reason == reason && d.remaining_ms == want);
                if !ok {
                    return Err(bad(format!("expected disabled ({reason}) for {want:?} ms")));
                }
            }
            _ => {}
        }
        if !matches!(
            class,
            OutcomeClass::AuthFailed | OutcomeClass::Forbidden | OutcomeClass::Billing
        ) && after.disabled != before.disabled
            && class != OutcomeClass::Success
        {
            return Err(bad("the disabled state changed".into()));
        }
        // Lockout column.
        let lock = |c: &quotaroute_actors::admin_state::ConnectionAdminState| {
            c.lockouts.iter().find(|l| l.model == model).cloned()
        };
        let (lock_before, lock_after) = (lock(&before), lock(&after));
        let reason = match class {
            OutcomeClass::RateLimited => Some("rate_limited"),
            OutcomeClass::ModelUnavailable => Some("not_found"),
            OutcomeClass::QuotaExhausted => Some("quota_exhausted"),
            _ => None,
        };
        let remaining_before = lock_before.as_ref().map_or(0, |l| l.remaining_ms);
        match (reason, &lock_after) {
            (Some(_), None) => return Err(bad("expected a lockout".into())),
            (Some(reason), Some(after_lock)) if after_lock.remaining_ms != remaining_before => {
                let s = &spec.lockout;
                let ok = after_lock.reason == reason
                    && match (result.reset_hint_ms, reason) {
                        (Some(hint), _) => after_lock.remaining_ms == hint.min(s.max_upstream_ms),
                        (None, "quota_exhausted") => {
                            let r = after_lock.remaining_ms;
                            r >= s.quota_ms
                                && r <= s.quota_max_ms
                                && (r == s.quota_max_ms
                                    || (r % s.quota_ms == 0 && (r / s.quota_ms).is_power_of_two()))
                        }
                        (None, _) => {
                            let reason = if reason == "rate_limited" {
                                quotaroute_journal::LockReason::RateLimited
                            } else {
                                quotaroute_journal::LockReason::NotFound
                            };
                            after_lock.remaining_ms
                                == s.backoff_ms(reason, after_lock.failure_count)
                        }
                    };
                if !ok || after_lock.remaining_ms < remaining_before {
                    return Err(bad("the new lock's duration is not the table's".into()));
                }
            }
            (None, _) if class != OutcomeClass::Success => {
                let same = match (&lock_before, &lock_after) {
                    (None, None) => true,
                    (Some(a), Some(b)) => a.remaining_ms == b.remaining_ms,
                    _ => false,
                };
                if !same {
                    return Err(bad("a class that does not lock changed the lock".into()));
                }
            }
            _ => {}
        }
        // Breaker column.
        let breaker = |state: &AdminState| {
            state
                .providers
                .iter()
                .find(|p| p.name == held.provider)
                .cloned()
        };
        let (Some(b0), Some(b1)) = (breaker(pre), breaker(post)) else {
            return Err(bad("provider missing".into()));
        };
        let trips = counts_as_attempt(class);
        let fresh_probe = held.probe && now < held.started_ms + PROBE_TIMEOUT_MS;
        if !trips && class != OutcomeClass::Success && b0 != b1 {
            return Err(bad(format!("the breaker changed: {b0:?} → {b1:?}")));
        }
        if trips
            && fresh_probe
            && b0.breaker == "HALF_OPEN"
            && (b1.breaker != "OPEN" || b1.cycles != b0.cycles + 1)
        {
            return Err(bad(format!(
                "a failed probe should re-open the breaker one cycle up: {b0:?} → {b1:?}"
            )));
        }
        if class == OutcomeClass::Success
            && fresh_probe
            && b0.breaker == "HALF_OPEN"
            && (b1.breaker != "CLOSED" || b1.cycles != 0)
        {
            return Err(bad(format!(
                "a successful probe should close the breaker: {b0:?} → {b1:?}"
            )));
        }
        if class == OutcomeClass::Success
            && !held.probe
            && matches!(b0.breaker, "OPEN" | "HALF_OPEN")
            && b1.breaker != b0.breaker
        {
            return Err(bad(format!(
                "a non-probe success moved an {} breaker: {b0:?} → {b1:?}",
                b0.breaker
            )));
        }
        Ok(())
    }

    /// (l) The decided order (§2): only unblocked targets, every target free in the state read
    /// before is in it (a HALF_OPEN provider's may be left out: its probe may be out), those
    /// with room (in-flight under `max_concurrent`, breaker not DEGRADED) before those without
    /// unless none has room, and the winner has no more in-flight than the runner-up (P2C).
    pub(super) fn check_order(
        &self,
        before: &AdminState,
        combo: &str,
        held: &Held,
    ) -> Result<(), Failure> {
        let targets = held.decision.targets();
        let provider_of = |connection: &str| {
            self.topology
                .connection(connection)
                .map(|c| c.provider.clone())
                .unwrap_or_default()
        };
        let in_flight = |connection: &str| {
            before
                .connections
                .iter()
                .find(|c| c.id == connection)
                .map_or(0, |c| c.in_flight)
        };
        let has_room = |connection: &str| {
            let capped = self
                .topology
                .connection(connection)
                .and_then(|c| c.max_concurrent)
                .is_some_and(|cap| in_flight(connection) >= cap);
            let provider = provider_of(connection);
            let degraded = before
                .providers
                .iter()
                .any(|p| p.name == provider && p.breaker == "DEGRADED");
            !capped && !degraded
        };
        let listed: Vec<(String, String)> = targets
            .iter()
            .map(|t| (t.connection.to_string(), t.model.to_string()))
            .collect();
        for (connection, model) in &listed {
            if let Some(why) =
                self.block_of(before, connection, &provider_of(connection), model, true)
            {
                return Err(self.fail(
                    "l:order-is-the-spec-order",
                    format!("order {listed:?} lists {connection}/{model}, which was {why}"),
                ));
            }
        }
        if let Some(spec) = self.topology.combo(combo) {
            for t in &spec.targets {
                let provider = provider_of(&t.connection);
                let half_open = before
                    .providers
                    .iter()
                    .any(|p| p.name == provider && p.breaker == "HALF_OPEN")
                    && self.probe_out(&provider);
                let free = self
                    .block_of(before, &t.connection, &provider, &t.model, true)
                    .is_none();
                if free && !half_open && !listed.contains(&(t.connection.clone(), t.model.clone()))
                {
                    return Err(self.fail(
                        "l:order-is-the-spec-order",
                        format!(
                            "order {listed:?} leaves out {}/{}, which was free",
                            t.connection, t.model
                        ),
                    ));
                }
            }
        }
        let room: Vec<bool> = listed.iter().map(|(c, _)| has_room(c)).collect();
        if room.iter().any(|&r| r) && room.windows(2).any(|w| !w[0] && w[1]) {
            return Err(self.fail(
                "l:order-is-the-spec-order",
                format!(
                    "order {listed:?} puts a target without room before one with room ({room:?})"
                ),
            ));
        }
        if let [(first, _), (second, _), ..] = &listed[..] {
            let both_room = room.first() == Some(&true) && room.get(1) == Some(&true)
                || room.iter().all(|&r| !r);
            if both_room && in_flight(first) > in_flight(second) {
                return Err(self.fail(
                    "l:order-is-the-spec-order",
                    format!(
                        "P2C: winner {first} has {} in flight, runner-up {second} {}",
                        in_flight(first),
                        in_flight(second)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether a HALF_OPEN probe of `provider` may still hold its token: one was taken within
    /// `probe_timeout_ms` (held, settled or abandoned).
    pub(super) fn probe_out(&self, provider: &str) -> bool {
        self.last_probe_ms
            .get(provider)
            .is_some_and(|&at| self.now() < at + PROBE_TIMEOUT_MS)
    }

    /// (a) The target just taken is not hard-blocked in the state read just before, at the
    /// same clock value.
    pub(super) fn check_not_blocked(
        &self,
        before: &AdminState,
        held: &Held,
        at: &str,
    ) -> Result<(), Failure> {
        let Some(target) = held.decision.current() else {
            return Ok(());
        };
        let model = target.model.to_string();
        if let Some(why) = self.block_of(before, &held.connection, &held.provider, &model, true) {
            return Err(self.fail(
                "a:routed-target-not-hard-blocked",
                format!(
                    "{at} chose {}/{model} (provider {}) which was {why}",
                    held.connection, held.provider
                ),
            ));
        }
        Ok(())
    }

    /// Why `connection/model` is hard-blocked in `state`, if it is. With `strict`, a HALF_OPEN
    /// provider whose probe the simulator holds counts as blocked.
    pub(super) fn block_of(
        &self,
        state: &AdminState,
        connection: &str,
        provider: &str,
        model: &str,
        strict: bool,
    ) -> Option<String> {
        let now = self.now();
        if let Some(p) = state.providers.iter().find(|p| p.name == provider) {
            if p.breaker == "OPEN" {
                return Some(format!(
                    "behind an OPEN breaker ({:?} ms left)",
                    p.retry_after_ms
                ));
            }
            if p.breaker == "HALF_OPEN" && strict {
                let probes = self
                    .held
                    .iter()
                    .filter(|h| {
                        h.provider == provider && h.probe && now < h.started_ms + PROBE_TIMEOUT_MS
                    })
                    .count();
                if probes >= HALF_OPEN_PROBES {
                    return Some("HALF_OPEN with its probe taken".into());
                }
            }
        }
        let c = state.connections.iter().find(|c| c.id == connection)?;
        if c.cooldown_remaining_ms > 0 {
            return Some(format!(
                "cooling down ({} ms left)",
                c.cooldown_remaining_ms
            ));
        }
        if let Some(d) = &c.disabled {
            return Some(format!(
                "disabled ({}, {:?} ms left)",
                d.reason, d.remaining_ms
            ));
        }
        if let Some(lock) = c.lockouts.iter().find(|l| l.model == model) {
            return Some(format!(
                "locked ({}, {} ms left)",
                lock.reason, lock.remaining_ms
            ));
        }
        None
    }

    /// (f) NoTarget only when every target of the combo is hard-blocked in the state read
    /// just before (a HALF_OPEN provider may have its probe out), and every blocked entry
    /// names a target of the combo.
    pub(super) fn check_all_blocked(
        &self,
        before: &AdminState,
        combo: &str,
        blocked: &[quotaroute_journal::Skipped],
    ) -> Result<(), Failure> {
        let Some(spec) = self.topology.combo(combo) else {
            return Ok(());
        };
        for target in &spec.targets {
            let provider = self
                .topology
                .connection(&target.connection)
                .map(|c| c.provider.clone())
                .unwrap_or_default();
            let half_open = before
                .providers
                .iter()
                .any(|p| p.name == provider && p.breaker == "HALF_OPEN")
                && self.probe_out(&provider);
            if !half_open
                && self
                    .block_of(before, &target.connection, &provider, &target.model, false)
                    .is_none()
            {
                return Err(self.fail(
                    "f:no-target-only-when-all-blocked",
                    format!(
                        "combo {combo} answered NoTarget but {}/{} was free; blocked {blocked:?}",
                        target.connection, target.model
                    ),
                ));
            }
        }
        for b in blocked {
            if !spec
                .targets
                .iter()
                .any(|t| t.connection == b.connection && t.model == b.model)
            {
                return Err(self.fail(
                    "f:no-target-only-when-all-blocked",
                    format!("blocked entry {b:?} is not a target of {combo}"),
                ));
            }
        }
        Ok(())
    }

    /// (d') Each entry of a NoTarget's `blocked` list agrees with the admin state read just
    /// before (same reason, same remaining time), and `retry_after_ms` is the earliest finite
    /// unblock among them.
    pub(super) fn check_blocked_agrees(
        &self,
        before: &AdminState,
        unroutable: &quotaroute_actors::Unroutable,
    ) -> Result<(), Failure> {
        for b in &unroutable.blocked {
            let connection = before.connections.iter().find(|c| c.id == b.connection);
            let provider =
                connection.and_then(|c| before.providers.iter().find(|p| p.name == c.provider));
            let agrees = match b.reason {
                BlockReason::BreakerOpen => provider
                    .is_some_and(|p| p.breaker == "OPEN" && p.retry_after_ms == b.remaining_ms),
                // And a probe was really taken within `probe_timeout_ms` (no stuck HALF_OPEN).
                BlockReason::ProbeInFlight => provider.is_some_and(|p| {
                    p.breaker == "HALF_OPEN"
                        && self
                            .last_probe_ms
                            .get(&p.name)
                            .is_some_and(|&at| self.now() < at + PROBE_TIMEOUT_MS)
                }),
                BlockReason::Cooldown => connection.is_some_and(|c| {
                    c.cooldown_remaining_ms > 0 && Some(c.cooldown_remaining_ms) == b.remaining_ms
                }),
                BlockReason::DisabledAuth | BlockReason::DisabledBilling => {
                    let reason = if b.reason == BlockReason::DisabledAuth {
                        "auth"
                    } else {
                        "billing"
                    };
                    // A billing disable reports when the connection is routable again, so a
                    // cooldown outlasting it counts.
                    connection.is_some_and(|c| {
                        c.disabled.as_ref().is_some_and(|d| {
                            d.reason == reason
                                && d.remaining_ms.map(|r| r.max(c.cooldown_remaining_ms))
                                    == b.remaining_ms
                        })
                    })
                }
                BlockReason::RateLimited | BlockReason::NotFound | BlockReason::QuotaExhausted => {
                    connection.is_some_and(|c| {
                        c.lockouts.iter().any(|l| {
                            l.model == b.model
                                && l.reason == b.reason.as_str()
                                && Some(l.remaining_ms) == b.remaining_ms
                        })
                    })
                }
                // The simulator configures no reserve: a reserved block is itself a failure.
                BlockReason::Reserved => false,
                // The simulator's requests are carried by every target, and none is spare.
                BlockReason::CannotCarry | BlockReason::NoSpare => false,
            };
            if !agrees {
                return Err(self.fail(
                    "d':blocked-list-agrees-with-state",
                    format!(
                        "blocked entry {b:?} but the state showed provider {provider:?}, connection {connection:?}"
                    ),
                ));
            }
        }
        let earliest = unroutable
            .blocked
            .iter()
            .filter_map(|b| b.remaining_ms)
            .min();
        if unroutable.retry_after_ms != earliest {
            return Err(self.fail(
                "d':blocked-list-agrees-with-state",
                format!(
                    "retry_after_ms {:?} but the earliest finite unblock is {earliest:?}",
                    unroutable.retry_after_ms
                ),
            ));
        }
        Ok(())
    }

    /// (h) DRR fairness over a stable window (§2 step 3): when nothing is held, every target
    /// of combo `all` is free and every breaker CLOSED, 2·Σw decisions all answered with a
    /// success serve each target within 2 of N·w/Σw (deficits start anywhere in [−Σw, +Σw],
    /// so the bound of a fresh start, 1, widens by one), and the deficits account exactly:
    /// count·Σw = clamp(d(0), ±Σw) − d(N) + N·w for every target.
    #[expect(
        clippy::too_many_lines,
        reason = "one narrated window: heal, serve 2·Σw decisions, check each bound"
    )]
    pub(super) async fn fair_window(&mut self) -> Result<(), Failure> {
        // An operator heals everything first: held requests are abandoned, breakers reset,
        // connections and lockouts cleared.
        self.held.clear();
        let state = self.read().await?;
        for provider in PROVIDERS {
            self.router()
                .reset_breaker(provider)
                .await
                .map_err(|e| self.fail("router-responds", format!("reset_breaker: {e}")))?;
        }
        self.cooldown_set_at.clear();
        for c in &state.connections {
            self.router()
                .clear_connection(&c.id)
                .await
                .map_err(|e| self.fail("router-responds", format!("clear_connection: {e}")))?;
            for lock in &c.lockouts {
                self.cleared
                    .insert((lock.connection.clone(), lock.model.clone()));
                self.router()
                    .clear_lockout(&lock.connection, &lock.model)
                    .await
                    .map_err(|e| self.fail("router-responds", format!("clear_lockout: {e}")))?;
            }
        }
        let before = self.read().await?;
        if let Some(p) = before.providers.iter().find(|p| p.breaker != "CLOSED") {
            return Err(self.fail(
                "h:drr-fair-over-stable-window",
                format!("after reset_breaker, provider {} is {}", p.name, p.breaker),
            ));
        }
        let Some(spec) = self.topology.combo("all").cloned() else {
            return Ok(());
        };
        for t in &spec.targets {
            let provider = self
                .topology
                .connection(&t.connection)
                .map(|c| c.provider.clone())
                .unwrap_or_default();
            if self
                .block_of(&before, &t.connection, &provider, &t.model, true)
                .is_some()
            {
                return Err(self.fail(
                    "h:drr-fair-over-stable-window",
                    format!(
                        "after clearing everything, {}/{} is still blocked",
                        t.connection, t.model
                    ),
                ));
            }
        }
        let deficits = |state: &AdminState| -> Vec<i64> {
            state
                .combos
                .iter()
                .find(|c| c.name == "all")
                .map(|c| c.targets.iter().map(|t| t.deficit).collect())
                .unwrap_or_default()
        };
        let d0 = deficits(&before);
        let total: i64 = spec.targets.iter().map(|t| i64::from(t.weight)).sum();
        let n = 2 * total;
        let mut counts = vec![0i64; spec.targets.len()];
        for i in 0..n {
            let request = RouteRequest {
                request_id: format!("s{}-{}-fair{i}", self.seed, self.step).into(),
                model: "all".into(),
                format: ApiFormat::Openai,
                translatable: false,
                cannot_carry: Vec::new(),
                only_connection: None,
                encrypted_maker: None,
                affinity: None,
                client: quotaroute_actors::ClientTag::default(),
            };
            let mut decision =
                self.router().route(request).await.map_err(|e| {
                    self.fail("h:drr-fair-over-stable-window", format!("route: {e}"))
                })?;
            let index = decision.current().map(|t| usize::from(t.index));
            if let Some(count) = index.and_then(|i| counts.get_mut(i)) {
                *count += 1;
            }
            decision
                .report_applied(AttemptResult::success(200, 1, 1))
                .await;
            self.stats.routed += 1;
            self.stats.upstream_requests += 1;
        }
        let after = self.read().await?;
        let d1 = deficits(&after);
        for (i, t) in spec.targets.iter().enumerate() {
            let w = i64::from(t.weight);
            let count = counts[i];
            if (count * total - n * w).abs() > 2 * total {
                return Err(self.fail(
                    "h:drr-fair-over-stable-window",
                    format!(
                        "{} (w {w}) served {count} of {n} (Σw {total}); counts {counts:?}",
                        t.connection
                    ),
                ));
            }
            if let (Some(a), Some(b)) = (d0.get(i), d1.get(i)) {
                // The admin view shows the stored deficit; a turn uses it clamped to the
                // current Σw (after a reload that lowered Σw the two differ).
                let a = (*a).clamp(-total, total);
                if count * total != a - b + n * w {
                    return Err(self.fail(
                        "h:drr-fair-over-stable-window",
                        format!(
                            "{}: served {count}, deficit {a} → {b}, w {w}, Σw {total}, N {n}: \
                             count·Σw ≠ d(0) − d(N) + N·w",
                            t.connection
                        ),
                    ));
                }
            }
        }
        self.stats.fair_windows += 1;
        Ok(())
    }

    /// The invariants checked after every step: (b), (c), (g).
    pub(super) async fn check(&mut self) -> Result<(), Failure> {
        let state = self.read().await?;
        let now = self.now();
        let phase = |name: &str| state.providers.iter().any(|p| p.breaker == name);
        self.stats.seen_degraded += u64::from(phase("DEGRADED"));
        self.stats.seen_open += u64::from(phase("OPEN"));
        self.stats.seen_half_open += u64::from(phase("HALF_OPEN"));
        let any = |f: &dyn Fn(&quotaroute_actors::admin_state::ConnectionAdminState) -> bool| {
            u64::from(state.connections.iter().any(f))
        };
        self.stats.seen_cooldown += any(&|c| c.cooldown_remaining_ms > 0);
        self.stats.seen_disabled += any(&|c| c.disabled.is_some());
        self.stats.seen_lockout += any(&|c| !c.lockouts.is_empty());
        // (c) In-flight counts equal the decisions held open, per connection.
        let mut expected: BTreeMap<&str, u32> = BTreeMap::new();
        for held in &self.held {
            *expected.entry(held.connection.as_str()).or_default() += 1;
        }
        for c in &state.connections {
            let want = expected.get(c.id.as_str()).copied().unwrap_or(0);
            if c.in_flight != want {
                return Err(self.fail(
                    "c:in-flight-equals-held",
                    format!(
                        "connection {} has in_flight {} but the simulator holds {want} ({} held in all)",
                        c.id,
                        c.in_flight,
                        self.held.len()
                    ),
                ));
            }
        }
        // (b) A lock's end never moves earlier, and a lock never vanishes before its end,
        // except by an admin clear.
        let mut ends = BTreeMap::new();
        for lock in state.lockouts() {
            ends.insert(
                (lock.connection.clone(), lock.model.clone()),
                now + lock.remaining_ms,
            );
        }
        for (key, &before) in &self.lock_ends {
            if self.cleared.contains(key) {
                continue;
            }
            match ends.get(key) {
                Some(&after) if after < before => {
                    return Err(self.fail(
                        "b:lock-end-never-earlier",
                        format!(
                            "lock {}/{} ended at {before}, now ends at {after} (now {now})",
                            key.0, key.1
                        ),
                    ))
                }
                None if before > now => {
                    return Err(self.fail(
                        "b:lock-end-never-earlier",
                        format!(
                            "lock {}/{} vanished {} ms before its end",
                            key.0,
                            key.1,
                            before - now
                        ),
                    ))
                }
                _ => {}
            }
        }
        self.lock_ends = ends;
        // (g) HALF_OPEN admits at most `half_open_probes` probes at a time.
        for provider in PROVIDERS {
            let probes = self
                .held
                .iter()
                .filter(|h| {
                    h.provider == provider && h.probe && now < h.started_ms + PROBE_TIMEOUT_MS
                })
                .count();
            if probes > HALF_OPEN_PROBES {
                return Err(self.fail(
                    "g:half-open-probes-bounded",
                    format!("provider {provider} has {probes} probes in flight"),
                ));
            }
        }
        Ok(())
    }
}
