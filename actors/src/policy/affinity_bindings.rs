//! Conversation affinity's memory (behaviour §10 "Memory"): one combo's groups and the target
//! each is bound to, bounded by `max_groups` (least recently used dropped first) and forgotten
//! `ttl_ms` after the group's last request (sliding). Folded from `affinity_bound` events (the
//! live combo and replay apply the same ones), touched by held turns in the live combo.
//!
//! Pure: `now` is an input. Holds digests and target keys only, never prompt text.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use quotaroute_journal::AffinityBound;
use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AffinityBindings {
    by_group: HashMap<u64, AffinityBinding>,
    /// `(last_used_ms, group)` in use order; a group used again appears again, and only the
    /// entry matching its current `last_used_ms` counts.
    order: VecDeque<(u64, u64)>,
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
        self.by_group.insert(
            group,
            AffinityBinding {
                client,
                exec_key,
                bound_at_ms: now_ms,
                last_used_ms: now_ms,
                turns: 1,
            },
        );
        self.order.push_back((now_ms, group));
        self.evict(now_ms, limits);
    }

    /// A held turn: the group's ttl slides and its count grows.
    pub fn touch(&mut self, group: u64, now_ms: u64, limits: (usize, u64)) {
        if let Some(binding) = self.by_group.get_mut(&group) {
            binding.turns += 1;
            if binding.last_used_ms != now_ms {
                binding.last_used_ms = now_ms;
                self.order.push_back((now_ms, group));
            }
        }
        self.evict(now_ms, limits);
    }

    /// Folds one journaled binding (replay and restart). `max_groups` and `ttl_ms` bound it.
    pub fn apply(&mut self, at_ms: u64, bound: &AffinityBound, limits: (usize, u64)) {
        let exec_key: Arc<str> = format!("{}/{}", bound.connection, bound.model).into();
        self.bind(
            bound.group,
            Arc::from(bound.client.as_str()),
            exec_key,
            at_ms,
            limits,
        );
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &AffinityBinding)> {
        self.by_group.iter().map(|(group, b)| (*group, b))
    }

    pub fn len(&self) -> usize {
        self.by_group.len()
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
            self.by_group.remove(&group);
            self.order.pop_front();
        }
        if self.order.len() > 2 * self.by_group.len() + 64 {
            let by_group = &self.by_group;
            self.order.retain(|(used, group)| {
                by_group.get(group).is_some_and(|b| b.last_used_ms == *used)
            });
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
}
