//! How many conversation groups each client holds on the node, across every combo (behaviour
//! §11 "Bounded tables … give each client at most its share"; §10 "Memory"). Each live combo
//! reports its own per-client counts after it changes its bindings; a combo binding a new
//! group reads the client's count in the other combos. Shared by the combo actors through the
//! registry; the decisions are `policy::affinity_bindings`'.
//!
//! The share: `affinity.max_groups / clients` (at least 1), where `clients` is the number of
//! clients the config names (`[[clients]]`, plus `default` when `server.api_keys` is set). The
//! shares add up to at most `max_groups`, so the node holds at most `max_groups` groups
//! (or one per client when there are more clients than groups) and no client's new groups can
//! evict another client's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::policy::affinity_bindings::{share_of, ClientQuota};

#[derive(Default)]
pub struct GroupLedger {
    /// Per combo, per client: the groups it holds, as the combo last reported them.
    by_combo: Mutex<HashMap<String, HashMap<Arc<str>, usize>>>,
    /// Clients sharing the table (0 is taken as 1).
    clients: AtomicUsize,
}

impl GroupLedger {
    /// The config now names `clients` clients.
    pub fn set_clients(&self, clients: usize) {
        self.clients.store(clients, Ordering::Relaxed);
    }

    /// The most groups one client holds on the node when the node keeps `max_groups`.
    pub fn share(&self, max_groups: usize) -> usize {
        share_of(max_groups, self.clients.load(Ordering::Relaxed))
    }

    /// `client`'s quota for a new group in `combo`.
    pub fn quota(&self, combo: &str, client: &str, max_groups: usize) -> ClientQuota {
        let held_elsewhere = self.by_combo.lock().map_or(0, |by_combo| {
            by_combo
                .iter()
                .filter(|(name, _)| name.as_str() != combo)
                .filter_map(|(_, counts)| counts.get(client))
                .sum()
        });
        ClientQuota {
            share: self.share(max_groups),
            held_elsewhere,
        }
    }

    /// `combo` now holds `counts` (replacing what it said before).
    pub fn report(&self, combo: &str, counts: Vec<(Arc<str>, usize)>) {
        if let Ok(mut by_combo) = self.by_combo.lock() {
            if counts.is_empty() {
                by_combo.remove(combo);
            } else {
                by_combo.insert(combo.to_owned(), counts.into_iter().collect());
            }
        }
    }

    /// `combo` stopped: its groups are gone.
    pub fn forget(&self, combo: &str) {
        if let Ok(mut by_combo) = self.by_combo.lock() {
            by_combo.remove(combo);
        }
    }

    /// Groups `client` holds on the node.
    pub fn held(&self, client: &str) -> usize {
        self.by_combo.lock().map_or(0, |by_combo| {
            by_combo.values().filter_map(|c| c.get(client)).sum()
        })
    }

    /// Groups held on the node.
    pub fn total(&self) -> usize {
        self.by_combo.lock().map_or(0, |by_combo| {
            by_combo.values().flat_map(|c| c.values()).sum()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_quota_counts_its_groups_in_the_other_combos() {
        let ledger = GroupLedger::default();
        ledger.set_clients(2);
        ledger.report("a", vec![(Arc::from("alice"), 3), (Arc::from("bob"), 1)]);
        ledger.report("b", vec![(Arc::from("alice"), 2)]);
        let quota = ledger.quota("a", "alice", 10);
        assert_eq!(
            quota,
            ClientQuota {
                share: 5,
                held_elsewhere: 2
            }
        );
        assert_eq!(ledger.held("alice"), 5);
        assert_eq!(ledger.total(), 6);
        ledger.forget("b");
        assert_eq!(ledger.held("alice"), 3);
        ledger.set_clients(0);
        assert_eq!(ledger.share(10), 10);
    }
}
