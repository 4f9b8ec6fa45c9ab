//! "Why did this turn go to X?" for conversation affinity (behaviour §10 "Seen"): the bindings
//! the journal's `affinity_bound` events made, remembered while replay reads them, so a
//! `route_decided` that held its group can name the binding (group digest, where and when it
//! was bound, and where it moved from and why). Owns that memory and its wording only.

use std::collections::{BTreeSet, HashMap};

use quotaroute_actors::policy::exec_key::exec_key;
use quotaroute_journal::{AffinityBound, Envelope, Event};

use crate::time_parse::format_utc_ms;

/// Groups listed at most when several are bound to the target a held turn went to.
const GROUPS_LISTED: usize = 3;

/// One group's binding as the journal last set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingSeen {
    pub group: u64,
    /// `connection/model`.
    pub target: String,
    pub client: String,
    pub at_ms: u64,
    pub seq: u64,
    pub request_id: String,
    /// Where it was bound before it moved, why, and since when it had been bound there.
    pub moved: Option<MoveSeen>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveSeen {
    pub from: String,
    pub reason: String,
    /// When the group had been bound to `from` (`None`: before this journal's window).
    pub from_since: Option<(u64, u64)>,
}

/// Every binding seen so far, by combo and group, and which groups each target holds.
#[derive(Debug, Default)]
pub struct AffinityMemory {
    bindings: HashMap<(String, u64), BindingSeen>,
    by_target: HashMap<(String, String), BTreeSet<u64>>,
}

impl AffinityMemory {
    /// Remembers the binding an `affinity_bound` makes; other events are ignored.
    pub fn observe(&mut self, envelope: &Envelope) {
        let Event::AffinityBound(bound) = &envelope.event else {
            return;
        };
        let key = (bound.combo.clone(), bound.group);
        let previous = self.bindings.get(&key);
        let moved = bound.moved_from.as_ref().map(|from| MoveSeen {
            from: from.clone(),
            reason: bound.reason.clone().unwrap_or_else(|| "-".to_string()),
            from_since: previous
                .filter(|p| &p.target == from)
                .map(|p| (p.at_ms, p.seq)),
        });
        if let Some(previous) = previous {
            if let Some(groups) = self
                .by_target
                .get_mut(&(bound.combo.clone(), previous.target.clone()))
            {
                groups.remove(&bound.group);
            }
        }
        let target = target_of(bound);
        self.by_target
            .entry((bound.combo.clone(), target.clone()))
            .or_default()
            .insert(bound.group);
        self.bindings.insert(
            key,
            BindingSeen {
                group: bound.group,
                target,
                client: bound.client.clone(),
                at_ms: envelope.at_ms,
                seq: envelope.seq,
                request_id: bound.request_id.clone(),
                moved,
            },
        );
    }

    /// The binding `group` of `combo` has now.
    pub fn binding(&self, combo: &str, group: u64) -> Option<&BindingSeen> {
        self.bindings.get(&(combo.to_string(), group))
    }

    /// Why a turn of `combo` that affinity held went to `target`: the binding that holds it.
    /// `route_decided` does not name its group, so when `target` holds several groups of the
    /// combo they are listed (newest first) and the line says so.
    pub fn explain_held(&self, combo: &str, target: &str) -> String {
        let groups = self
            .by_target
            .get(&(combo.to_string(), target.to_string()))
            .map(|groups| {
                let mut bound: Vec<&BindingSeen> = groups
                    .iter()
                    .filter_map(|&g| self.binding(combo, g))
                    .collect();
                bound.sort_by_key(|b| std::cmp::Reverse(b.seq));
                bound
            })
            .unwrap_or_default();
        match groups.as_slice() {
            [] => format!(
                "held: its group's binding to {target} predates this journal's window (a snapshot holds it)"
            ),
            [only] => format!("held by {}", describe(only)),
            several => {
                let listed: Vec<String> = several
                    .iter()
                    .take(GROUPS_LISTED)
                    .map(|b| describe(b))
                    .collect();
                let more = several.len().saturating_sub(GROUPS_LISTED);
                format!(
                    "held: one of the {} groups bound to {target} ({}{})",
                    several.len(),
                    listed.join("; "),
                    if more > 0 {
                        format!("; {more} more")
                    } else {
                        String::new()
                    }
                )
            }
        }
    }

    /// The words of an `affinity_bound` line: what was bound where, and for a move from where,
    /// why and since when it had been there.
    pub fn explain_bound(&self, envelope: &Envelope, bound: &AffinityBound) -> String {
        let seen = self
            .binding(&bound.combo, bound.group)
            .filter(|b| b.seq == envelope.seq);
        let mut text = format!("group={:016x} client={} ", bound.group, bound.client);
        match seen.and_then(|b| b.moved.as_ref()) {
            Some(moved) => {
                text.push_str(&format!(
                    "moved from {} ({}) to {}",
                    moved.from,
                    moved.reason,
                    target_of(bound)
                ));
                if let Some((at_ms, seq)) = moved.from_since {
                    text.push_str(&format!(
                        ", bound there since {} #{seq}",
                        format_utc_ms(at_ms)
                    ));
                }
            }
            None => match &bound.moved_from {
                Some(from) => text.push_str(&format!(
                    "moved from {from} ({}) to {}",
                    bound.reason.as_deref().unwrap_or("-"),
                    target_of(bound)
                )),
                None => text.push_str(&format!("new group bound to {}", target_of(bound))),
            },
        }
        text.push_str(&format!(" combo={} req={}", bound.combo, bound.request_id));
        text
    }
}

fn target_of(bound: &AffinityBound) -> String {
    exec_key(&bound.connection, &bound.model)
}

/// `group 00000000000000ab (client default) bound to k1/m at 12:00:01.000 #41 by req=r3,
/// after moving from k2/m (model_locked)`.
fn describe(binding: &BindingSeen) -> String {
    let mut text = format!(
        "group {:016x} (client {}) bound to {} at {} #{} by req={}",
        binding.group,
        binding.client,
        binding.target,
        format_utc_ms(binding.at_ms),
        binding.seq,
        binding.request_id
    );
    if let Some(moved) = &binding.moved {
        text.push_str(&format!(
            ", after moving from {} ({})",
            moved.from, moved.reason
        ));
    }
    text
}
