//! Conversation affinity's memory (behaviour §10 "Memory"): one combo's groups and the target
//! each is bound to, bounded by `max_groups` (least recently used dropped first) and forgotten
//! `ttl_ms` after the group's last request (sliding). Folded from `affinity_bound` events (the
//! live combo and replay apply the same ones), touched by held turns in the live combo.
//!
//! Shares (behaviour §11): each client's groups are also kept in their own use order, so a
//! client at its share of the node's `max_groups` (`ClientQuota`, counted node-wide by the
//! live combos' `GroupLedger`) forgets its own least recently used group for a new one, never
//! another client's.
//!
//! Pure: `now` is an input. Holds digests and target keys only, never prompt text.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use quotaroute_journal::AffinityBound;
use serde::{Deserialize, Serialize};

use crate::exec_key::exec_key;

/// Where one group goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityBinding {
    #[serde(with = "arc_str")]
    pub client: Arc<str>,
    /// `connection/model` of the bound target.
    #[serde(with = "arc_str")]
    pub exec_key: Arc<str>,
    pub bound_at_ms: u64,
    pub last_used_ms: u64,
    /// Turns routed in this group since it was bound here (held ones included).
    pub turns: u64,
}

/// One combo's groups, by digest.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AffinityBindings {
    by_group: HashMap<u64, AffinityBinding>,
    /// `(last_used_ms, group)` in use order; a group used again appears again, and only the
    /// entry matching its current `last_used_ms` counts.
    order: VecDeque<(u64, u64)>,
    /// The same order per client, with each client's count of groups; derived from
    /// `by_group` (never stored: rebuilt after a decode, see `indexed`).
    #[serde(skip)]
    by_client: HashMap<Arc<str>, ClientGroups>,
    #[serde(skip)]
    indexed: bool,
}

/// Equal when they hold the same groups (the per-client index is derived from them).
impl PartialEq for AffinityBindings {
    fn eq(&self, other: &Self) -> bool {
        self.by_group == other.by_group && self.order == other.order
    }
}

/// One client's groups in this combo, in use order (stale entries skipped, as in `order`).
#[derive(Debug, Clone, Default)]
struct ClientGroups {
    live: usize,
    order: VecDeque<(u64, u64)>,
}

/// How many groups a client may hold on the node, and how many it holds in other combos.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientQuota {
    /// `max_groups / clients` (at least 1): [`share_of`].
    pub share: usize,
    pub held_elsewhere: usize,
}

/// One client's share of `max_groups` among `clients` (0 counts as 1), at least 1: the shares
/// add up to at most `max_groups`, so no client's new groups can evict another client's.
pub fn share_of(max_groups: usize, clients: usize) -> usize {
    (max_groups / clients.max(1)).max(1)
}

impl AffinityBindings {
    /// The group's binding, unless it was last used more than `ttl_ms` before `now_ms`.
    pub fn get(&self, group: u64, now_ms: u64, ttl_ms: u64) -> Option<&AffinityBinding> {
        self.by_group
            .get(&group)
            .filter(|b| now_ms.saturating_sub(b.last_used_ms) <= ttl_ms)
    }

    /// Binds `group` to `exec_key` at `now_ms` (a new group, or a move).
    pub fn bind(
        &mut self,
        group: u64,
        client: Arc<str>,
        exec_key: Arc<str>,
        now_ms: u64,
        limits: (usize, u64),
    ) {
        self.bind_within(group, client, exec_key, now_ms, limits, None);
    }

    /// [`bind`](Self::bind) for a client held to `quota`: a new group of a client at its share
    /// first forgets that client's least recently used group here; when it has none here (its
    /// groups are all in other combos) the new group is not kept and this returns false (the
    /// turn is routed by §2 alone). A move of a known group is always kept.
    pub fn bind_within(
        &mut self,
        group: u64,
        client: Arc<str>,
        exec_key: Arc<str>,
        now_ms: u64,
        limits: (usize, u64),
        quota: Option<ClientQuota>,
    ) -> bool {
        self.ensure_indexed();
        let known = self.by_group.contains_key(&group);
        if let (Some(quota), false) = (quota, known) {
            self.evict(now_ms, limits);
            loop {
                let here = self.by_client.get(&client).map_or(0, |c| c.live);
                if here.saturating_add(quota.held_elsewhere) < quota.share.max(1) {
                    break;
                }
                if here == 0 || !self.drop_oldest_of(&client) {
                    return false;
                }
            }
        }
        let binding = AffinityBinding {
            client: client.clone(),
            exec_key,
            bound_at_ms: now_ms,
            last_used_ms: now_ms,
            turns: 1,
        };
        if let Some(old) = self.by_group.insert(group, binding) {
            self.left(&old.client);
        }
        let entry = self.by_client.entry(client).or_default();
        entry.live += 1;
        entry.order.push_back((now_ms, group));
        self.order.push_back((now_ms, group));
        self.evict(now_ms, limits);
        true
    }

    /// A held turn: the group's ttl slides and its count grows.
    pub fn touch(&mut self, group: u64, now_ms: u64, limits: (usize, u64)) {
        self.ensure_indexed();
        if let Some(binding) = self.by_group.get_mut(&group) {
            binding.turns += 1;
            if binding.last_used_ms != now_ms {
                binding.last_used_ms = now_ms;
                self.order.push_back((now_ms, group));
                if let Some(entry) = self.by_client.get_mut(&binding.client) {
                    entry.order.push_back((now_ms, group));
                }
            }
        }
        self.evict(now_ms, limits);
    }

    /// Each client's count of groups here.
    pub fn held_by_client(&mut self) -> Vec<(Arc<str>, usize)> {
        self.ensure_indexed();
        self.by_client
            .iter()
            .filter(|(_, c)| c.live > 0)
            .map(|(client, c)| (client.clone(), c.live))
            .collect()
    }

    /// Forgets `group` (a trim to the shares).
    fn forget(&mut self, group: u64) {
        self.ensure_indexed();
        if let Some(old) = self.by_group.remove(&group) {
            self.left(&old.client);
        }
    }

    /// Forgets `client`'s least recently used group here; false when it has none.
    fn drop_oldest_of(&mut self, client: &Arc<str>) -> bool {
        let Some(entry) = self.by_client.get_mut(client) else {
            return false;
        };
        while let Some((used_ms, group)) = entry.order.pop_front() {
            let live = self
                .by_group
                .get(&group)
                .is_some_and(|b| b.last_used_ms == used_ms && b.client == *client);
            if live {
                self.by_group.remove(&group);
                entry.live = entry.live.saturating_sub(1);
                return true;
            }
        }
        false
    }

    /// A group of `client` left `by_group`.
    fn left(&mut self, client: &Arc<str>) {
        if let Some(entry) = self.by_client.get_mut(client) {
            entry.live = entry.live.saturating_sub(1);
            if entry.live == 0 {
                self.by_client.remove(client);
            }
        }
    }

    /// Rebuilds the per-client orders after a decode (which skips them).
    fn ensure_indexed(&mut self) {
        if self.indexed {
            return;
        }
        let mut groups: Vec<(u64, u64, &Arc<str>)> = self
            .by_group
            .iter()
            .map(|(group, b)| (b.last_used_ms, *group, &b.client))
            .collect();
        groups.sort_unstable_by_key(|&(used, group, _)| (used, group));
        let mut by_client: HashMap<Arc<str>, ClientGroups> = HashMap::new();
        for (used, group, client) in groups {
            let entry = by_client.entry(client.clone()).or_default();
            entry.live += 1;
            entry.order.push_back((used, group));
        }
        self.by_client = by_client;
        self.indexed = true;
    }

    /// Folds one journaled binding (replay and restart). `max_groups` and `ttl_ms` bound it.
    pub fn apply(&mut self, at_ms: u64, bound: &AffinityBound, limits: (usize, u64)) {
        self.apply_within(at_ms, bound, limits, None);
    }

    /// [`apply`](Self::apply) held to the client's node-wide `quota`, as the live combo bound
    /// it ([`bind_within`](Self::bind_within)).
    pub fn apply_within(
        &mut self,
        at_ms: u64,
        bound: &AffinityBound,
        limits: (usize, u64),
        quota: Option<ClientQuota>,
    ) {
        let exec_key: Arc<str> = exec_key(&bound.connection, &bound.model).into();
        self.bind_within(
            bound.group,
            Arc::from(bound.client.as_str()),
            exec_key,
            at_ms,
            limits,
            quota,
        );
    }

    /// How many groups `client` holds here.
    pub fn held_by(&mut self, client: &str) -> usize {
        self.ensure_indexed();
        self.by_client.get(client).map_or(0, |c| c.live)
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &AffinityBinding)> {
        self.by_group.iter().map(|(group, b)| (*group, b))
    }

    pub fn len(&self) -> usize {
        self.by_group.len()
    }

    /// One page of the groups `keep` accepts, by digest: the first `limit` after `after`, and
    /// how many it accepts in all. Clones only the page (`GET /admin/affinity` on a table of a
    /// million groups must not copy it).
    pub fn page(
        &self,
        after: Option<u64>,
        limit: usize,
        keep: impl Fn(&AffinityBinding) -> bool,
    ) -> (usize, Vec<(u64, AffinityBinding)>) {
        let mut matching = 0;
        // The `limit` smallest digests past `after`, largest on top.
        let mut smallest: std::collections::BinaryHeap<u64> =
            std::collections::BinaryHeap::with_capacity(limit.min(self.by_group.len()) + 1);
        for (&group, binding) in &self.by_group {
            if !keep(binding) {
                continue;
            }
            matching += 1;
            if after.is_some_and(|after| group <= after) || limit == 0 {
                continue;
            }
            if smallest.len() < limit {
                smallest.push(group);
            } else if smallest.peek().is_some_and(|&top| group < top) {
                smallest.pop();
                smallest.push(group);
            }
        }
        let page = smallest
            .into_sorted_vec()
            .into_iter()
            .filter_map(|group| Some((group, self.by_group.get(&group)?.clone())))
            .collect();
        (matching, page)
    }

    pub fn is_empty(&self) -> bool {
        self.by_group.is_empty()
    }

    /// Drops groups past `max_groups` (least recently used first) or idle past `ttl_ms`, and
    /// compacts the use order when stale entries outnumber live ones.
    fn evict(&mut self, now_ms: u64, (max_groups, ttl_ms): (usize, u64)) {
        while let Some(&(used_ms, group)) = self.order.front() {
            let live = self
                .by_group
                .get(&group)
                .is_some_and(|b| b.last_used_ms == used_ms);
            if !live {
                self.order.pop_front();
                continue;
            }
            let too_many = self.by_group.len() > max_groups.max(1);
            let too_old = now_ms.saturating_sub(used_ms) > ttl_ms;
            if !too_many && !too_old {
                break;
            }
            if let Some(old) = self.by_group.remove(&group) {
                self.left(&old.client);
            }
            self.order.pop_front();
        }
        if self.order.len() > 2 * self.by_group.len() + 64 {
            let by_group = &self.by_group;
            self.order.retain(|(used, group)| {
                by_group.get(group).is_some_and(|b| b.last_used_ms == *used)
            });
        }
        let by_group = &self.by_group;
        for (client, entry) in &mut self.by_client {
            if entry.order.len() > 2 * entry.live + 64 {
                entry.order.retain(|(used, group)| {
                    by_group
                        .get(group)
                        .is_some_and(|b| b.last_used_ms == *used && b.client == *client)
                });
            }
        }
    }
}

/// Trims every combo's groups (`by_combo`, as a replay left them) to the clients' node-wide
/// shares: a client holding more than `share` groups across the combos forgets its least
/// recently used ones. A node starts from this, so a restart keeps what the live shares kept
/// (the journal records binds, not the evictions the shares made).
pub fn trim_to_shares<'a>(
    by_combo: impl IntoIterator<Item = &'a mut AffinityBindings>,
    share: usize,
) {
    let mut tables: Vec<&mut AffinityBindings> = by_combo.into_iter().collect();
    let mut by_client: HashMap<Arc<str>, Vec<(u64, usize, u64)>> = HashMap::new();
    for (index, table) in tables.iter().enumerate() {
        for (group, binding) in table.iter() {
            by_client.entry(binding.client.clone()).or_default().push((
                binding.last_used_ms,
                index,
                group,
            ));
        }
    }
    for (_, mut groups) in by_client {
        if groups.len() <= share.max(1) {
            continue;
        }
        groups.sort_unstable();
        let over = groups.len() - share.max(1);
        for &(_, index, group) in &groups[..over] {
            if let Some(table) = tables.get_mut(index) {
                table.forget(group);
            }
        }
    }
}

/// `Arc<str>` as a plain string (serde's `rc` feature is not on).
mod arc_str {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Arc<str>, D::Error> {
        String::deserialize(deserializer).map(Arc::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: (usize, u64) = (3, 1_000);

    fn key(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[test]
    fn ttl_slides_with_each_turn() {
        let mut b = AffinityBindings::default();
        b.bind(1, key("default"), key("a/m"), 0, LIMITS);
        b.touch(1, 900, LIMITS);
        assert_eq!(b.get(1, 1_800, 1_000).unwrap().turns, 2);
        assert!(b.get(1, 1_901, 1_000).is_none());
        // The next write forgets it from memory too.
        b.bind(2, key("default"), key("b/m"), 1_901, LIMITS);
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn least_recently_used_goes_first() {
        let mut b = AffinityBindings::default();
        for g in 1..=3 {
            b.bind(g, key("default"), key("a/m"), g, LIMITS);
        }
        b.touch(1, 10, LIMITS);
        b.bind(4, key("default"), key("a/m"), 11, LIMITS);
        assert!(
            b.get(2, 11, 1_000).is_none(),
            "2 was the least recently used"
        );
        assert!(b.get(1, 11, 1_000).is_some());
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn the_use_order_stays_bounded_however_often_groups_are_used() {
        let mut b = AffinityBindings::default();
        b.bind(1, key("default"), key("a/m"), 0, (10, u64::MAX));
        for now in 1..10_000 {
            b.touch(1, now, (10, u64::MAX));
        }
        assert!(b.order.len() <= 2 + 64);
        assert_eq!(b.get(1, 10_000, u64::MAX).unwrap().turns, 10_000);
    }

    #[test]
    fn a_move_rebinds() {
        let mut b = AffinityBindings::default();
        b.bind(1, key("default"), key("a/m"), 0, LIMITS);
        b.bind(1, key("default"), key("b/m"), 5, LIMITS);
        assert_eq!(&*b.get(1, 5, 1_000).unwrap().exec_key, "b/m");
        assert_eq!(b.len(), 1);
    }

    fn quota(share: usize, held_elsewhere: usize) -> Option<ClientQuota> {
        Some(ClientQuota {
            share,
            held_elsewhere,
        })
    }

    #[test]
    fn s11_a_client_at_its_share_gives_up_its_own_oldest_group_never_anothers() {
        let mut b = AffinityBindings::default();
        let limits = (1_000, u64::MAX);
        assert!(b.bind_within(1, key("alice"), key("a/m"), 0, limits, quota(2, 0)));
        for g in 10..20 {
            assert!(b.bind_within(g, key("bob"), key("a/m"), g, limits, quota(2, 0)));
        }
        assert!(b.get(1, 100, u64::MAX).is_some(), "alice's group stays");
        assert!(b.get(19, 100, u64::MAX).is_some() && b.get(18, 100, u64::MAX).is_some());
        assert!(b.get(17, 100, u64::MAX).is_none());
        let mut held = b.held_by_client();
        held.sort();
        assert_eq!(held, vec![(key("alice"), 1), (key("bob"), 2)]);
    }

    #[test]
    fn a_client_whose_share_is_held_in_other_combos_keeps_no_new_group_here() {
        let mut b = AffinityBindings::default();
        let limits = (1_000, u64::MAX);
        assert!(!b.bind_within(1, key("bob"), key("a/m"), 0, limits, quota(2, 2)));
        assert!(b.is_empty());
        // A move of a known group is kept whatever the quota.
        b.bind(2, key("bob"), key("a/m"), 0, limits);
        assert!(b.bind_within(2, key("bob"), key("b/m"), 1, limits, quota(2, 2)));
        assert_eq!(&*b.get(2, 1, u64::MAX).unwrap().exec_key, "b/m");
    }

    #[test]
    fn the_client_index_is_rebuilt_after_a_decode() {
        let mut b = AffinityBindings::default();
        b.bind(1, key("alice"), key("a/m"), 0, LIMITS);
        b.bind(2, key("bob"), key("a/m"), 1, LIMITS);
        let bytes = serde_json::to_vec(&b).unwrap();
        let mut decoded: AffinityBindings = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(decoded, b);
        assert!(decoded.bind_within(3, key("bob"), key("a/m"), 2, (10, 1_000), quota(1, 0)));
        assert!(
            decoded.get(2, 2, 1_000).is_none(),
            "bob's own older group went"
        );
        assert!(decoded.get(1, 2, 1_000).is_some());
    }

    #[test]
    fn pages_walk_every_kept_group_once_in_digest_order() {
        let mut b = AffinityBindings::default();
        for g in (1..=25).rev() {
            let client = if g % 5 == 0 { "other" } else { "alice" };
            b.bind(g, key(client), key("a/m"), g, (100, u64::MAX));
        }
        let keep = |binding: &AffinityBinding| &*binding.client == "alice";
        let mut after = None;
        let mut seen = Vec::new();
        loop {
            let (matching, page) = b.page(after, 7, keep);
            assert_eq!(matching, 20);
            let Some(&(last, _)) = page.last() else { break };
            seen.extend(page.iter().map(|(g, _)| *g));
            after = Some(last);
        }
        let expected: Vec<u64> = (1..=25).filter(|g| g % 5 != 0).collect();
        assert_eq!(seen, expected);
        assert_eq!(b.page(None, 0, keep).0, 20);
    }

    #[test]
    fn a_replayed_table_is_trimmed_to_each_clients_share_across_combos() {
        let limits = (100, u64::MAX);
        let mut team = AffinityBindings::default();
        let mut other = AffinityBindings::default();
        team.bind(1, key("alice"), key("a/m"), 1, limits);
        for g in 10..14 {
            team.bind(g, key("bob"), key("a/m"), g, limits);
            other.bind(g + 100, key("bob"), key("a/m"), g + 100, limits);
        }
        trim_to_shares([&mut team, &mut other], 3);
        assert!(
            team.get(1, 200, u64::MAX).is_some(),
            "alice is under her share"
        );
        let mut bob: Vec<u64> = team
            .iter()
            .chain(other.iter())
            .filter(|(_, b)| &*b.client == "bob")
            .map(|(g, _)| g)
            .collect();
        bob.sort_unstable();
        assert_eq!(bob, vec![111, 112, 113], "his most recently used three");
    }
}
