//! What selection remembers of one combo between turns — the DRR deficits (§2), the affinity
//! leads and the conversation bindings (§10) — and the only two ways a turn changes them:
//! [`SelectionState::apply`] (a decision's changes, as `decide` returned them) and
//! [`SelectionState::served`] (the binding follows where a failed-over turn was served).
//!
//! Pure: `now` and the client's group quota are inputs. The combo actor, `--what-if` and the
//! simulator (through the actor) hold one per combo.

use std::sync::Arc;

use quotaroute_journal::{AffinityBound, RouteDecided};

use crate::affinity::AffinityLeads;
use crate::affinity_bindings::{AffinityBindings, ClientQuota};
use crate::drr::DrrDeficits;
use crate::exec_key::exec_key;
use crate::quota_share::{apply_route_decided, DrrKeys};
use crate::selection::target::{AffinityKey, RoutedTarget};

/// The reason an `affinity_bound` gives when a group follows a turn that failed over and was
/// served by another target than its binding (behaviour §10 "Where they go").
pub const SERVED_ELSEWHERE: &str = "failover";

/// One combo's selection memory.
#[derive(Debug, Clone, Default)]
pub struct SelectionState {
    pub deficits: DrrDeficits,
    /// How far each target ran ahead of its DRR share over the turns of groups (not
    /// journaled: a restart forgets them, which only delays a rebind).
    pub leads: AffinityLeads,
    /// The combo's conversations and the target each is bound to.
    pub bindings: AffinityBindings,
}

/// What a decision changes besides the deficits its `route_decided` carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changes {
    /// The turn was a group's: it moves the leads (what a binding can skew).
    pub leads: bool,
    pub binding: Option<BindingChange>,
}

/// What a decision does to its group's binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingChange {
    /// A held turn on its binding: the group's ttl slides, its turns count up.
    Touch { group: u64 },
    /// A new group, a move (or a held turn whose probe token went to another request first):
    /// the group binds to where the turn went, journaled as `bound` when kept.
    Bind {
        client: Arc<str>,
        exec_key: Arc<str>,
        bound: Box<AffinityBound>,
    },
}

/// What [`SelectionState::apply`] did: the binding to journal (a bind the client's share
/// kept), and whether the number of groups changed (the node's group ledger is told).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Applied {
    pub bound: Option<AffinityBound>,
    pub groups_changed: bool,
}

impl SelectionState {
    /// Applies one decision: its DRR turn (`apply_route_decided`, as replay does), its lead
    /// turn, and its binding. `keys` is the combo's key table; `limits` is `(max_groups,
    /// ttl_ms)`; `quota` gives a client's node-wide share of groups (`None`: unbounded).
    pub fn apply(
        &mut self,
        keys: &DrrKeys,
        decided: &RouteDecided,
        changes: Changes,
        now_ms: u64,
        limits: (usize, u64),
        quota: impl FnOnce(&Arc<str>) -> Option<ClientQuota>,
    ) -> Applied {
        apply_route_decided(&mut self.deficits, keys, decided);
        if changes.leads {
            let room = decided.room.iter().filter_map(|&i| keys.weighted(i));
            let chosen = decided.chosen.and_then(|i| keys.key(usize::from(i)));
            self.leads.apply_turn(room, chosen);
        }
        match changes.binding {
            None => Applied::default(),
            Some(BindingChange::Touch { group }) => {
                let before = self.bindings.len();
                self.bindings.touch(group, now_ms, limits);
                Applied {
                    bound: None,
                    groups_changed: self.bindings.len() != before,
                }
            }
            Some(BindingChange::Bind {
                client,
                exec_key,
                bound,
            }) => {
                let quota = quota(&client);
                let kept =
                    self.bindings
                        .bind_within(bound.group, client, exec_key, now_ms, limits, quota);
                Applied {
                    bound: kept.then_some(*bound),
                    groups_changed: true,
                }
            }
        }
    }

    /// A turn of `key`'s group was served by `target` after failing over inside its request:
    /// a group bound elsewhere follows it there (behaviour §10: "a held request that fails
    /// over inside its request binds the group to the target that served it"), so its next
    /// turn reads the prefix that target now has cached. Returns the `affinity_bound` to
    /// journal (already applied); `None` when the group is bound there already, or no longer
    /// bound at all (forgotten, or never kept).
    pub fn served(
        &mut self,
        request_id: &str,
        combo: &str,
        key: &AffinityKey,
        target: &RoutedTarget,
        now_ms: u64,
        limits: (usize, u64),
    ) -> Option<AffinityBound> {
        let binding = self.bindings.get(key.group, now_ms, limits.1)?;
        let served_key = exec_key(&target.connection, &target.model);
        if *binding.exec_key == *served_key {
            return None;
        }
        let bound = AffinityBound {
            request_id: request_id.to_owned(),
            combo: combo.to_owned(),
            group: key.group,
            client: String::from(&*key.client),
            provider: String::from(&*target.provider),
            connection: String::from(&*target.connection),
            model: String::from(&*target.model),
            moved_from: Some(String::from(&*binding.exec_key)),
            reason: Some(SERVED_ELSEWHERE.to_owned()),
        };
        self.bindings.apply(now_ms, &bound, limits);
        Some(bound)
    }
}
