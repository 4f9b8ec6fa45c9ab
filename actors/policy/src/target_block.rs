//! What a request to one target would meet now (behaviour §2 step 0), read from the journal's
//! fold rather than a combo's copies: its provider's breaker, then its connection (cooldown,
//! disabled), the model's lockout and a spent or reserved window — through the very functions
//! the combo actor routes with (`admission`, `ConnectionView::block_for`). So `/admin/state`,
//! the dashboard and the advice on a passed-through 429 (§7) say what a request would get.
//! Pure: state, topology and `now` in, a block out.

use quotaroute_journal::{BlockReason, Skipped};

use crate::admission::{admission, breaker_admission, Block, BreakerAdmission};
use crate::connection_view::ConnectionView;
use crate::router_state::RouterState;
use crate::topology::Topology;

/// The block a request to (`connection`, `model`) would meet at `now_ms`; `None` when it would
/// be tried. A connection the topology does not know blocks nothing here (routing refuses it
/// elsewhere). A HALF_OPEN breaker admits: the fold holds no probe tokens, and a request
/// finding one free would be the probe.
pub fn target_block(
    state: &RouterState,
    topology: &Topology,
    connection: &str,
    model: &str,
    now_ms: u64,
) -> Option<Block> {
    let spec = topology.connection(connection)?;
    let breaker = match topology.provider(&spec.provider) {
        Some(provider) => {
            match breaker_admission(
                &state.breaker(&provider.name),
                &provider.breaker,
                None,
                now_ms,
            ) {
                BreakerAdmission::Blocked(BlockReason::ProbeInFlight, None) => {
                    BreakerAdmission::Probe
                }
                verdict => verdict,
            }
        }
        None => BreakerAdmission::Healthy,
    };
    admission(breaker, || {
        let learned = state.connection(&spec.provider, connection);
        ConnectionView::of(&learned, spec, now_ms).block_for(model, now_ms)
    })
}

/// Every one of `targets` blocked at `now_ms`, as behaviour §7 lists them; `None` when one of
/// them would be tried (or there are none).
pub fn all_blocked<'t>(
    state: &RouterState,
    topology: &Topology,
    targets: impl IntoIterator<Item = (&'t str, &'t str)>,
    now_ms: u64,
) -> Option<Vec<Skipped>> {
    let mut blocked = Vec::new();
    for (connection, model) in targets {
        let (reason, remaining_ms) = target_block(state, topology, connection, model, now_ms)?;
        blocked.push(Skipped {
            connection: connection.to_string(),
            model: model.to_string(),
            reason,
            remaining_ms,
        });
    }
    (!blocked.is_empty()).then_some(blocked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{ComboSpec, ConnectionSpec, ProviderSpec};
    use quotaroute_journal::{ApiFormat, AuthKind, Event, LockReason, ModelLocked, ResetSource};

    fn topology() -> Topology {
        Topology::new(
            vec![ProviderSpec::new("p", ApiFormat::Openai, AuthKind::ApiKey)],
            vec![
                ConnectionSpec::new("a", "p", AuthKind::ApiKey, 1),
                ConnectionSpec::new("b", "p", AuthKind::ApiKey, 1),
            ],
            vec![ComboSpec::quota_share("c", &[("a", "m", 1), ("b", "m", 1)])],
            "test",
            "digest",
        )
    }

    fn lock(state: &mut RouterState, connection: &str, until_ms: u64) {
        state.apply(
            0,
            &Event::ModelLocked(ModelLocked {
                provider: "p".into(),
                connection: connection.into(),
                model: "m".into(),
                reason: LockReason::QuotaExhausted,
                status: Some(429),
                error_code: None,
                until_ms,
                failure_count: 1,
                source: ResetSource::Upstream,
            }),
        );
    }

    #[test]
    fn a_pool_is_blocked_only_when_every_target_is_and_says_until_when() {
        let topology = topology();
        let mut state = RouterState::default();
        let both = [("a", "m"), ("b", "m")];
        assert_eq!(all_blocked(&state, &topology, both, 1_000), None);
        lock(&mut state, "a", 3_600_000);
        assert_eq!(
            target_block(&state, &topology, "a", "m", 1_000),
            Some((BlockReason::QuotaExhausted, Some(3_599_000)))
        );
        assert_eq!(all_blocked(&state, &topology, both, 1_000), None);
        lock(&mut state, "b", 7_200_000);
        let blocked = all_blocked(&state, &topology, both, 1_000).unwrap();
        assert_eq!(
            blocked
                .iter()
                .map(|s| (s.connection.as_str(), s.remaining_ms))
                .collect::<Vec<_>>(),
            [("a", Some(3_599_000)), ("b", Some(7_199_000))]
        );
        // Another model on the same accounts is not blocked; nor is anything once it expired.
        assert_eq!(target_block(&state, &topology, "a", "other", 1_000), None);
        assert_eq!(all_blocked(&state, &topology, both, 3_600_000), None);
        assert_eq!(all_blocked(&state, &topology, [], 1_000), None);
    }
}
