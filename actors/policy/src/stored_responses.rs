//! Stored responses' placement (contract "Client API"; not conversation affinity, which is
//! `affinity`): which connection created each stored response,
//! and which client it belongs to (behaviour §11 "Every path is governed"), so
//! `previous_response_id` and the `/v1/responses/{id}` endpoints reach the account that holds
//! it, for its own client only. Folded from `response_bound` events, bounded in count, in age
//! and per client.
//!
//! Shares (behaviour §11): the node keeps at most [`MAX_BINDINGS`]; with `n` clients sharing
//! the table each client keeps at most `MAX_BINDINGS / n` (at least 1) of its own, and a client
//! at its share forgets its own oldest binding for a new one, never another client's. Bindings
//! without a client (journals written before clients were recorded) share one more slot of the
//! same size. The shares add up to the node's bound, so the node-wide least-recently-bound rule
//! below only acts when more clients than bindings are configured.
//!
//! Pure: `now` is an input; the live router and replay apply the same events here.

use std::collections::{HashMap, VecDeque};

use quotaroute_journal::ResponseBound;
use serde::{Deserialize, Serialize};

/// Most bindings kept: past it the oldest is forgotten (its requests then route like any).
pub const MAX_BINDINGS: usize = 100_000;
/// How long a binding is kept: OpenAI keeps stored responses for 30 days.
pub const MAX_BINDING_AGE_MS: u64 = 30 * 24 * 3600 * 1000;

/// Where one stored response lives, and whose it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseBinding {
    pub combo: String,
    pub provider: String,
    pub connection: String,
    pub model: String,
    pub bound_at_ms: u64,
    /// The client that created it; `None` for bindings folded from records that did not say
    /// (usable by any client). Not in the snapshot's layout-2 bytes: snapshot layout 5 carries
    /// it after them ([`ResponseBindings::owners`]).
    #[serde(skip)]
    pub client: Option<String>,
}

impl ResponseBinding {
    /// Whether `client` may use it: its own, or one that names no client.
    pub fn belongs_to(&self, client: &str) -> bool {
        self.client.as_deref().is_none_or(|owner| owner == client)
    }
}

/// One client's bindings in binding order (stale entries skipped like the node's order's).
#[derive(Debug, Clone, Default, PartialEq)]
struct ClientOrder {
    live: usize,
    order: VecDeque<(u64, String)>,
}

/// Every binding, oldest first for eviction.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResponseBindings {
    by_id: HashMap<String, ResponseBinding>,
    /// `(bound_at_ms, id)` in binding order; an id bound twice appears twice, and only the
    /// entry matching its current `bound_at_ms` evicts it.
    order: VecDeque<(u64, String)>,
    /// The same, per client (`""`: no client recorded); rebuilt from `by_id`, never stored.
    #[serde(skip)]
    by_client: HashMap<String, ClientOrder>,
    /// Clients sharing the table (0 or 1: one share, the whole table).
    #[serde(skip)]
    clients: usize,
    /// `by_client` matches `by_id` (false after a decode until the first write reindexes).
    #[serde(skip)]
    indexed: bool,
}

/// Equal when they hold the same bindings (the per-client index is derived from them).
impl PartialEq for ResponseBindings {
    fn eq(&self, other: &Self) -> bool {
        self.by_id == other.by_id && self.order == other.order
    }
}

impl ResponseBindings {
    /// Records `bound` at `at_ms`, then forgets what is over the bounds.
    pub fn apply(&mut self, at_ms: u64, bound: &ResponseBound) {
        if !self.indexed {
            self.reindex();
        }
        let binding = ResponseBinding {
            combo: bound.combo.clone(),
            provider: bound.provider.clone(),
            connection: bound.connection.clone(),
            model: bound.model.clone(),
            bound_at_ms: at_ms,
            client: bound.client.clone(),
        };
        let owner = owner_key(&binding).to_owned();
        if let Some(old) = self.by_id.insert(bound.response_id.clone(), binding) {
            self.forget_owner(&old);
        }
        let entry = self.by_client.entry(owner.clone()).or_default();
        entry.live += 1;
        entry.order.push_back((at_ms, bound.response_id.clone()));
        self.order.push_back((at_ms, bound.response_id.clone()));
        self.evict_share(&owner);
        self.evict(at_ms);
    }

    /// The binding of `response_id`, unless it is older than the age bound at `now_ms`.
    pub fn get(&self, response_id: &str, now_ms: u64) -> Option<&ResponseBinding> {
        self.by_id
            .get(response_id)
            .filter(|b| now_ms.saturating_sub(b.bound_at_ms) <= MAX_BINDING_AGE_MS)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// How many bindings `client` holds (`None`: those without a client).
    pub fn held_by(&self, client: Option<&str>) -> usize {
        self.by_client
            .get(client.unwrap_or(""))
            .map_or(0, |order| order.live)
    }

    /// The most bindings one client keeps.
    pub fn share(&self) -> usize {
        (MAX_BINDINGS / self.clients.max(1)).max(1)
    }

    /// `clients` now share the table (config load and reload): a client over its new share
    /// forgets its oldest bindings.
    pub fn set_clients(&mut self, clients: usize) {
        self.clients = clients;
        self.reindex();
        let owners: Vec<String> = self.by_client.keys().cloned().collect();
        for owner in owners {
            self.evict_share(&owner);
        }
    }

    /// Each binding's client, for snapshot layout 5 (`(response_id, client)`, bindings with a
    /// client only).
    pub fn owners(&self) -> Vec<(String, String)> {
        let mut owners: Vec<(String, String)> = self
            .by_id
            .iter()
            .filter_map(|(id, b)| Some((id.clone(), b.client.clone()?)))
            .collect();
        owners.sort_unstable();
        owners
    }

    /// Restores [`owners`](Self::owners) after a snapshot's bindings were decoded.
    pub fn restore_owners(&mut self, owners: Vec<(String, String)>) {
        for (id, client) in owners {
            if let Some(binding) = self.by_id.get_mut(&id) {
                binding.client = Some(client);
            }
        }
        self.reindex();
    }

    /// Rebuilds the per-client orders from `by_id` (after a decode, which skips them).
    fn reindex(&mut self) {
        let mut bound: Vec<(u64, &String, &ResponseBinding)> = self
            .by_id
            .iter()
            .map(|(id, b)| (b.bound_at_ms, id, b))
            .collect();
        bound.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let mut by_client: HashMap<String, ClientOrder> = HashMap::new();
        for (at_ms, id, binding) in bound {
            let entry = by_client.entry(owner_key(binding).to_owned()).or_default();
            entry.live += 1;
            entry.order.push_back((at_ms, id.clone()));
        }
        self.by_client = by_client;
        self.indexed = true;
    }

    /// A binding that left `by_id` leaves its client's count.
    fn forget_owner(&mut self, binding: &ResponseBinding) {
        if let Some(entry) = self.by_client.get_mut(owner_key(binding)) {
            entry.live = entry.live.saturating_sub(1);
        }
    }

    /// `owner` past its share forgets its own oldest bindings.
    fn evict_share(&mut self, owner: &str) {
        let share = self.share();
        let Some(entry) = self.by_client.get_mut(owner) else {
            return;
        };
        while entry.live > share {
            let Some((at_ms, id)) = entry.order.pop_front() else {
                break;
            };
            let current = self
                .by_id
                .get(&id)
                .is_some_and(|b| b.bound_at_ms == at_ms && owner_key(b) == owner);
            if current {
                self.by_id.remove(&id);
                entry.live -= 1;
            }
        }
        if entry.order.len() > 2 * entry.live + 64 {
            let by_id = &self.by_id;
            entry.order.retain(|(at_ms, id)| {
                by_id
                    .get(id)
                    .is_some_and(|b| b.bound_at_ms == *at_ms && owner_key(b) == owner)
            });
        }
    }

    fn evict(&mut self, now_ms: u64) {
        while let Some((at_ms, id)) = self.order.front() {
            let too_many = self.by_id.len() > MAX_BINDINGS || self.order.len() > 2 * MAX_BINDINGS;
            let too_old = now_ms.saturating_sub(*at_ms) > MAX_BINDING_AGE_MS;
            if !too_many && !too_old {
                break;
            }
            if self.by_id.get(id).is_some_and(|b| b.bound_at_ms == *at_ms) {
                if let Some(old) = self.by_id.remove(id) {
                    self.forget_owner(&old);
                }
            }
            self.order.pop_front();
        }
    }
}

/// The per-client key of a binding (`""`: none recorded).
fn owner_key(binding: &ResponseBinding) -> &str {
    binding.client.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(id: &str, connection: &str) -> ResponseBound {
        ResponseBound {
            request_id: format!("req-{id}"),
            response_id: id.to_string(),
            combo: "team".into(),
            provider: "openai".into(),
            connection: connection.into(),
            model: "gpt-4o".into(),
            client: None,
        }
    }

    #[test]
    fn a_binding_names_its_connection_until_it_is_too_old() {
        let mut bindings = ResponseBindings::default();
        bindings.apply(1_000, &bound("resp_1", "oa-2"));
        assert_eq!(bindings.get("resp_1", 2_000).unwrap().connection, "oa-2");
        assert!(bindings.get("resp_2", 2_000).is_none());
        assert!(bindings
            .get("resp_1", 1_000 + MAX_BINDING_AGE_MS + 1)
            .is_none());
        // The next binding after that age evicts it from memory too.
        bindings.apply(1_000 + MAX_BINDING_AGE_MS + 1, &bound("resp_2", "oa-1"));
        assert_eq!(bindings.len(), 1);
    }

    #[test]
    fn rebinding_moves_an_id_and_its_old_entry_does_not_evict_it() {
        let mut bindings = ResponseBindings::default();
        bindings.apply(1, &bound("resp_1", "oa-1"));
        bindings.apply(5, &bound("resp_1", "oa-3"));
        bindings.apply(MAX_BINDING_AGE_MS + 2, &bound("resp_2", "oa-1"));
        assert_eq!(
            bindings
                .get("resp_1", MAX_BINDING_AGE_MS + 2)
                .unwrap()
                .connection,
            "oa-3"
        );
    }

    #[test]
    fn memory_is_bounded_by_count() {
        let mut bindings = ResponseBindings::default();
        for i in 0..(MAX_BINDINGS + 10) {
            bindings.apply(i as u64, &bound(&format!("resp_{i}"), "oa-1"));
        }
        assert_eq!(bindings.len(), MAX_BINDINGS);
        assert!(bindings.get("resp_0", MAX_BINDINGS as u64).is_none());
        assert!(bindings.get("resp_10", MAX_BINDINGS as u64).is_some());
    }

    fn owned(id: &str, client: &str) -> ResponseBound {
        ResponseBound {
            client: Some(client.into()),
            ..bound(id, "oa-1")
        }
    }

    #[test]
    fn s11_one_clients_bindings_never_evict_anothers() {
        let mut bindings = ResponseBindings::default();
        bindings.set_clients(2);
        bindings.apply(0, &owned("resp_alice", "alice"));
        // Bob binds one more than the whole table holds: only his own oldest go.
        for i in 0..=MAX_BINDINGS {
            bindings.apply(1 + i as u64, &owned(&format!("resp_bob_{i}"), "bob"));
        }
        let now = 2 + MAX_BINDINGS as u64;
        let alice = bindings.get("resp_alice", now).unwrap();
        assert_eq!(alice.client.as_deref(), Some("alice"));
        assert_eq!(bindings.held_by(Some("bob")), MAX_BINDINGS / 2);
        assert_eq!(bindings.held_by(Some("alice")), 1);
        assert!(bindings.get("resp_bob_0", now).is_none());
        assert!(bindings
            .get(&format!("resp_bob_{MAX_BINDINGS}"), now)
            .is_some());
    }

    #[test]
    fn a_binding_belongs_to_its_client_or_to_anyone_when_it_names_none() {
        let mut bindings = ResponseBindings::default();
        bindings.apply(0, &owned("resp_a", "alice"));
        bindings.apply(0, &bound("resp_old", "oa-1"));
        let a = bindings.get("resp_a", 1).unwrap();
        assert!(a.belongs_to("alice") && !a.belongs_to("bob"));
        assert!(bindings.get("resp_old", 1).unwrap().belongs_to("bob"));
    }

    #[test]
    fn fewer_clients_after_a_reload_trim_each_to_its_new_share() {
        let mut bindings = ResponseBindings::default();
        for i in 0..10 {
            bindings.apply(i, &owned(&format!("resp_{i}"), "alice"));
        }
        bindings.set_clients(MAX_BINDINGS / 4);
        assert_eq!(bindings.held_by(Some("alice")), 4);
        assert!(bindings.get("resp_9", 10).is_some());
        assert!(bindings.get("resp_5", 10).is_none());
    }
}
