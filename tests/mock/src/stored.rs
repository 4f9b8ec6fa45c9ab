//! The Responses API's stored responses: every `POST …/responses` keeps its response object and
//! input items under the key that made it, the last [`STORED_LIMIT`] of them.
//!
//! Owns the store and what a request's input items are; the HTTP side is `stored_api`'s, the
//! lock around it `state`'s.

use std::collections::{HashMap, VecDeque};

use serde_json::{json, Value};

/// How many responses the mock remembers; older ones are forgotten first.
pub const STORED_LIMIT: usize = 10_000;

/// One stored response.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredResponse {
    pub key: String,
    pub model: String,
    pub response: Value,
    pub input_items: Vec<Value>,
}

#[derive(Debug, Default)]
pub(crate) struct StoredResponses {
    by_id: HashMap<String, StoredResponse>,
    /// Ids in insertion order, for eviction; deleted ids stay until they reach the front.
    order: VecDeque<String>,
}

impl StoredResponses {
    pub(crate) fn insert(&mut self, id: String, stored: StoredResponse) {
        if self.by_id.insert(id.clone(), stored).is_none() {
            self.order.push_back(id);
        }
        while self.by_id.len() > STORED_LIMIT {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.by_id.remove(&oldest);
        }
        // Deleted ids leave stale entries behind; drop them once they dominate.
        if self.order.len() > 2 * STORED_LIMIT {
            let by_id = &self.by_id;
            self.order.retain(|id| by_id.contains_key(id));
        }
    }

    /// The response `id` if `key` made it; another key's response is as missing as no response.
    pub(crate) fn get(&self, key: &str, id: &str) -> Option<&StoredResponse> {
        self.by_id.get(id).filter(|stored| stored.key == key)
    }

    pub(crate) fn get_mut(&mut self, key: &str, id: &str) -> Option<&mut StoredResponse> {
        self.by_id.get_mut(id).filter(|stored| stored.key == key)
    }

    /// Forgets `id` if `key` made it.
    pub(crate) fn remove(&mut self, key: &str, id: &str) -> bool {
        if self.get(key, id).is_none() {
            return false;
        }
        self.by_id.remove(id).is_some()
    }
}

/// A request's `input` as the items `GET …/input_items` lists: a string becomes one user
/// message; items without an `id` get one (`msg_mock_<sequence>_<index>`), as OpenAI assigns.
pub(crate) fn input_items(body: &Value, sequence: u64) -> Vec<Value> {
    let items = match body.get("input") {
        Some(Value::String(text)) => vec![json!({
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        })],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, mut item)| {
            if let Value::Object(fields) = &mut item {
                fields
                    .entry("id")
                    .or_insert_with(|| json!(format!("msg_mock_{sequence}_{index}")));
                if fields.get("type").is_none() && fields.contains_key("role") {
                    fields.insert("type".to_owned(), json!("message"));
                }
                if let Some(Value::String(text)) = fields.get("content").cloned() {
                    fields.insert(
                        "content".to_owned(),
                        json!([{"type": "input_text", "text": text}]),
                    );
                }
                fields.entry("status").or_insert_with(|| json!("completed"));
            }
            item
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(key: &str) -> StoredResponse {
        StoredResponse {
            key: key.to_owned(),
            model: "m".to_owned(),
            response: json!({}),
            input_items: Vec::new(),
        }
    }

    #[test]
    fn a_response_belongs_to_its_key() {
        let mut store = StoredResponses::default();
        store.insert("resp_1".into(), stored("k1"));
        assert!(store.get("k1", "resp_1").is_some());
        assert!(store.get("k2", "resp_1").is_none());
        assert!(!store.remove("k2", "resp_1"));
        assert!(store.remove("k1", "resp_1"));
        assert!(store.get("k1", "resp_1").is_none());
    }

    #[test]
    fn the_oldest_responses_are_forgotten_first() {
        let mut store = StoredResponses::default();
        for index in 0..=STORED_LIMIT {
            store.insert(format!("resp_{index}"), stored("k"));
        }
        assert!(store.get("k", "resp_0").is_none());
        assert!(store.get("k", "resp_1").is_some());
        assert!(store.get("k", &format!("resp_{STORED_LIMIT}")).is_some());
    }

    #[test]
    fn string_input_is_one_user_message() {
        let items = input_items(&json!({"input": "hi"}), 7);
        assert_eq!(
            items,
            vec![json!({
                "type": "message", "role": "user", "id": "msg_mock_7_0", "status": "completed",
                "content": [{"type": "input_text", "text": "hi"}],
            })]
        );
        let items = input_items(&json!({"input": [{"role": "user", "content": "a"}]}), 8);
        assert_eq!(items[0]["type"], "message");
        assert_eq!(items[0]["content"][0]["text"], "a");
    }
}
