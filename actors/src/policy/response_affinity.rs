//! Response affinity (contract "Client API"): which connection created each stored response,
//! so `previous_response_id` and the `/v1/responses/{id}` endpoints reach the account that
//! holds it. Folded from `response_bound` events, bounded in count and in age.
//!
//! Pure: `now` is an input; the live router and replay apply the same events here.

use std::collections::{HashMap, VecDeque};

use quotaroute_journal::ResponseBound;
use serde::{Deserialize, Serialize};

/// Most bindings kept: past it the oldest is forgotten (its requests then route like any).
pub const MAX_BINDINGS: usize = 100_000;
/// How long a binding is kept: OpenAI keeps stored responses for 30 days.
pub const MAX_BINDING_AGE_MS: u64 = 30 * 24 * 3600 * 1000;

/// Where one stored response lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseBinding {
    pub combo: String,
    pub provider: String,
    pub connection: String,
    pub model: String,
    pub bound_at_ms: u64,
}

/// Every binding, oldest first for eviction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseBindings {
    by_id: HashMap<String, ResponseBinding>,
    /// `(bound_at_ms, id)` in binding order; an id bound twice appears twice, and only the
    /// entry matching its current `bound_at_ms` evicts it.
    order: VecDeque<(u64, String)>,
}

impl ResponseBindings {
    /// Records `bound` at `at_ms`, then forgets what is over the bounds.
    pub fn apply(&mut self, at_ms: u64, bound: &ResponseBound) {
        self.by_id.insert(
            bound.response_id.clone(),
            ResponseBinding {
                combo: bound.combo.clone(),
                provider: bound.provider.clone(),
                connection: bound.connection.clone(),
                model: bound.model.clone(),
                bound_at_ms: at_ms,
            },
        );
        self.order.push_back((at_ms, bound.response_id.clone()));
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

    fn evict(&mut self, now_ms: u64) {
        while let Some((at_ms, id)) = self.order.front() {
            let too_many = self.by_id.len() > MAX_BINDINGS || self.order.len() > 2 * MAX_BINDINGS;
            let too_old = now_ms.saturating_sub(*at_ms) > MAX_BINDING_AGE_MS;
            if !too_many && !too_old {
                break;
            }
            if self.by_id.get(id).is_some_and(|b| b.bound_at_ms == *at_ms) {
                self.by_id.remove(id);
            }
            self.order.pop_front();
        }
    }
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
}
