//! What a journaled `route_decided` says of its request, read once for routing it again
//! (both `--what-if` forms): the combo's targets as selection names them, which of them were
//! the request's candidates, its conversation group and its encrypted items' maker.
//!
//! - **Candidates**: every target the node considered is in the record — in `order`, or in
//!   `skipped` when hard-blocked — so they are the request's format and `only_connection`
//!   (neither is journaled) as the node applied them. A target skipped as `cannot_carry`
//!   (behaviour §14) could never have served that request, so it is no candidate again; nor
//!   is one skipped as `no_spare` (behaviour §13: the spare request's class is not journaled,
//!   its refusals are).
//! - **Group**: `route_decided.group` with its `client` (schema 4; older records have none).
//! - **Maker**: a turn placed `held` without a group was held on its encrypted items' maker,
//!   which is the target it chose; `moved` without a group had a maker that was hard-blocked
//!   or gone — which, the record does not say, so it is taken as gone ([`UNKNOWN_MAKER`]).

use std::sync::Arc;

use quotaroute_actors::policy::selection::{AffinityKey, RoutedTarget};
use quotaroute_journal::{
    AffinityOutcome, ApiFormat, BlockReason, ConfigLoaded, RouteDecided, TargetInfo,
};

/// A maker the record does not name: matches no connection (ids are never empty).
pub const UNKNOWN_MAKER: &str = "";

/// One recorded request, as `policy::selection::decide` takes it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedTurn {
    /// The request's candidates, as positions in the combo's targets.
    pub positions: Vec<usize>,
    pub client: Arc<str>,
    pub group: Option<AffinityKey>,
    pub encrypted_maker: Option<String>,
}

/// The combo's targets (`infos`, config order) as selection names them, from the journal's
/// `config_loaded`: a connection it does not list keeps an empty provider.
pub fn routed_targets(config: &ConfigLoaded, infos: &[TargetInfo]) -> Vec<Arc<RoutedTarget>> {
    infos
        .iter()
        .enumerate()
        .map(|(index, info)| {
            let provider = config
                .connections
                .iter()
                .find(|c| c.id == info.connection)
                .map_or("", |c| c.provider.as_str());
            let format = config
                .providers
                .iter()
                .find(|p| p.name == provider)
                .map_or(ApiFormat::Openai, |p| p.format);
            Arc::new(RoutedTarget {
                index: u16::try_from(index).unwrap_or(u16::MAX),
                connection: Arc::from(info.connection.as_str()),
                provider: Arc::from(provider),
                model: Arc::from(info.model.as_str()),
                format,
                weight: info.weight,
            })
        })
        .collect()
}

/// Reads `decided` against its combo's `targets` (see the module header). A record that names
/// no target (none of its indices or skipped names match) makes every target a candidate.
pub fn recorded_turn(decided: &RouteDecided, targets: &[Arc<RoutedTarget>]) -> RecordedTurn {
    let mut positions: Vec<usize> = decided
        .order
        .iter()
        .map(|&i| usize::from(i))
        .filter(|&i| i < targets.len())
        .chain(targets.iter().enumerate().filter_map(|(i, target)| {
            decided
                .skipped
                .iter()
                .any(|s| {
                    *s.connection == *target.connection
                        && *s.model == *target.model
                        && !matches!(s.reason, BlockReason::CannotCarry | BlockReason::NoSpare)
                })
                .then_some(i)
        }))
        .collect();
    positions.sort_unstable();
    positions.dedup();
    if positions.is_empty() {
        positions = (0..targets.len()).collect();
    }
    let client = decided.client.clone().unwrap_or_else(|| "default".into());
    let group = decided.group.map(|group| AffinityKey {
        group,
        client: client.clone(),
    });
    let encrypted_maker = match (group.is_some(), decided.affinity) {
        (false, AffinityOutcome::Held) => decided
            .chosen
            .and_then(|i| targets.get(usize::from(i)))
            .map(|target| String::from(&*target.connection)),
        (false, AffinityOutcome::Moved) => Some(UNKNOWN_MAKER.to_owned()),
        _ => None,
    };
    RecordedTurn {
        positions,
        client,
        group,
        encrypted_maker,
    }
}
