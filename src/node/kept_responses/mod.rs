//! `[responses] store = true` at work (behaviour §14): a translated Responses answer kept in
//! the router's response store (JSON, or a stream's final `response.completed` object) with
//! its input items, journaled as metadata only; a `previous_response_id` naming a kept
//! response expanded into the conversation before the request is translated. The endpoints
//! that read and delete kept responses are `serve`.
//!
//! Owns what is kept and what a continuation becomes; the store itself is
//! [`crate::node::response_store`].

pub mod serve;

use std::sync::Arc;

use bytes::Bytes;
use chacha20poly1305::aead::rand_core::RngCore;
use chacha20poly1305::aead::OsRng;
use quotaroute_actors::{RoutedTarget, Router};
use quotaroute_journal::{Event, ResponseDeleted, ResponseStored};
use serde_json::{json, Map, Value};

use crate::node::app::AppState;
use crate::node::attempt::TryContext;
use crate::node::response_store::{KeptResponse, Removed, ResponseStore};
use crate::wire::sse::{SseEvent, SseParser};
use crate::wire::translate::TRANSLATED_RESPONSE_PREFIX;

/// A new id for a kept response: the translated prefix and 24 random bytes, so no upstream's
/// id (nor another client's) can collide with it.
pub fn mint_id() -> String {
    let mut random = [0u8; 24];
    OsRng.fill_bytes(&mut random);
    let hex: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{TRANSLATED_RESPONSE_PREFIX}{hex}")
}

/// The id a Responses request's answer is kept under, when the router keeps it: the store is
/// open, `store` is still on (a reload that turns it off stops new answers being kept; those
/// kept are still served), and the request did not say `store: false` (Codex does: it is then
/// left alone).
pub fn kept_id_for(app: &AppState, body: &[u8]) -> Option<String> {
    app.response_store()?;
    if !app.live().responses.store {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Asked {
        store: Option<bool>,
    }
    let asked: Asked = serde_json::from_slice(body).ok()?;
    (asked.store != Some(false)).then(mint_id)
}

/// What a request that may continue a kept response becomes.
#[derive(Debug, PartialEq)]
pub enum Continued {
    /// It names none (or one the router did not keep): as it came.
    AsItCame,
    /// The kept conversation and then its own input, `previous_response_id` (`id`) gone;
    /// `chain`: the first response of the chain it continues.
    Expanded {
        body: Bytes,
        id: String,
        chain: String,
    },
    /// It names a kept id that is not this client's, expired, or never was.
    NotFound(String),
}

/// `body` (a Responses request) with the kept response its `previous_response_id` names
/// expanded into its input: that response's input items, its output items (sealed reasoning
/// as the client saw it), then the request's own input. Chains need nothing more: a kept
/// response's input items already hold the turns before it.
pub fn continue_kept(
    store: &ResponseStore,
    body: &Bytes,
    client: &str,
    now_ms: u64,
) -> Result<Continued, crate::node::response_store::StoreError> {
    if memchr::memmem::find(body, b"\"previous_response_id\"").is_none() {
        return Ok(Continued::AsItCame);
    }
    let Ok(Value::Object(mut request)) = serde_json::from_slice::<Value>(body) else {
        return Ok(Continued::AsItCame);
    };
    let Some(id) = request
        .get("previous_response_id")
        .and_then(Value::as_str)
        .filter(|id| id.starts_with(TRANSLATED_RESPONSE_PREFIX))
        .map(str::to_owned)
    else {
        return Ok(Continued::AsItCame);
    };
    let Some(kept) = store.get(&id, client, now_ms)? else {
        return Ok(Continued::NotFound(id));
    };
    let chain = if kept.chain.is_empty() {
        id.clone()
    } else {
        kept.chain
    };
    let mut input = kept.input_items;
    if let Some(output) = kept.response.get("output").and_then(Value::as_array) {
        input.extend(output.iter().cloned());
    }
    input.extend(as_items(request.get("input")));
    request.remove("previous_response_id");
    request.insert("input".into(), Value::Array(input));
    Ok(Continued::Expanded {
        body: Bytes::from(serde_json::to_vec(&Value::Object(request))?),
        id,
        chain,
    })
}

/// A request's `input` as items: a string is one user message.
fn as_items(input: Option<&Value>) -> Vec<Value> {
    match input {
        Some(Value::String(text)) => vec![json!({
            "type": "message",
            "role": "user",
            "content": text,
        })],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

/// The input items a kept response lists (`input_items`): the request's input as items, each
/// with an id (`msg_<response>_<n>`, `item_…` for other items, when it had none) and a message's text as parts, as
/// OpenAI lists them.
pub fn input_items(body: &[u8], response_id: &str) -> Vec<Value> {
    let request: Value = serde_json::from_slice(body).unwrap_or_default();
    let bare = response_id
        .strip_prefix(TRANSLATED_RESPONSE_PREFIX)
        .unwrap_or(response_id);
    as_items(request.get("input"))
        .into_iter()
        .enumerate()
        .map(|(index, item)| listed_item(item, bare, index))
        .collect()
}

fn listed_item(item: Value, bare: &str, index: usize) -> Value {
    let Value::Object(mut item) = item else {
        return item;
    };
    let message =
        item.get("type").is_none_or(|kind| kind == "message") && item.contains_key("role");
    if message {
        item.entry("type").or_insert_with(|| json!("message"));
        if let Some(Value::String(text)) = item.get("content") {
            let part = if item.get("role").is_some_and(|role| role == "assistant") {
                json!({"type": "output_text", "text": text, "annotations": []})
            } else {
                json!({"type": "input_text", "text": text})
            };
            item.insert("content".into(), json!([part]));
        }
        item.entry("status").or_insert_with(|| json!("completed"));
    }
    let prefix = if message { "msg" } else { "item" };
    item.entry("id")
        .or_insert_with(|| json!(format!("{prefix}_{bare}_{index}")));
    Value::Object(item)
}

/// What keeping one try's answer needs: the store, the journal, and who made it.
pub struct Keeping {
    store: Arc<ResponseStore>,
    router: Router,
    request_id: String,
    client: String,
    connection: String,
    /// The id it is kept under (the answer says it).
    id: String,
    /// The first response of its chain.
    chain: String,
    input_items: Vec<Value>,
}

impl Keeping {
    /// For a try whose answer is kept (`ctx.kept_id`), when the store is open.
    pub(crate) fn for_try(ctx: &TryContext<'_>, target: &RoutedTarget) -> Option<Keeping> {
        let id = ctx.kept_id?;
        Some(Keeping {
            store: ctx.app.response_store()?,
            router: ctx.app.router()?.clone(),
            request_id: ctx.request_id.to_owned(),
            client: ctx.seal_client().to_string(),
            connection: target.connection.to_string(),
            id: id.to_owned(),
            chain: ctx.kept_chain.unwrap_or(id).to_owned(),
            input_items: input_items(ctx.client_body, id),
        })
    }

    /// Keeps `response` (the Responses object the client was given), journals it and what
    /// left the store for it. A failure is logged (never the content) and the answer stands.
    pub fn keep(self, response: Value) {
        if response.get("id").and_then(Value::as_str) != Some(&self.id) {
            return;
        }
        let now_ms = self.router.clock().now_ms();
        let ttl_ms = self.store.bounds().ttl_ms;
        let kept = KeptResponse {
            client: self.client.clone(),
            connection: self.connection.clone(),
            created_ms: now_ms,
            expires_ms: now_ms.saturating_add(ttl_ms),
            response,
            input_items: self.input_items,
            chain: self.chain,
        };
        match self.store.put(&self.id, &kept, now_ms) {
            Ok((bytes, removed)) => {
                journal_removed(&self.router, removed);
                self.router
                    .record_response_store(Event::ResponseStored(ResponseStored {
                        request_id: self.request_id,
                        response_id: self.id,
                        client: self.client,
                        connection: self.connection,
                        bytes,
                        expires_at_ms: kept.expires_ms,
                    }));
            }
            Err(error) => tracing::warn!(
                request_id = self.request_id,
                %error,
                "a translated response was not kept"
            ),
        }
    }
}

/// Journals what left the store (`response_deleted`).
pub fn journal_removed(router: &Router, removed: Vec<Removed>) {
    for gone in removed {
        router.record_response_store(Event::ResponseDeleted(ResponseDeleted {
            response_id: gone.id,
            client: gone.client,
            reason: gone.reason.as_str().to_owned(),
        }));
    }
}

/// Keeps a translated stream's answer: watches the events the client is given for the final
/// `response.completed` and keeps its response object.
pub struct StreamKeeper {
    parser: SseParser,
    keeping: Option<Keeping>,
    events: Vec<SseEvent>,
}

impl StreamKeeper {
    pub fn new(keeping: Keeping) -> Self {
        StreamKeeper {
            parser: SseParser::new(),
            keeping: Some(keeping),
            events: Vec::new(),
        }
    }

    /// Bytes the client is given (whole events).
    pub fn watch(&mut self, chunk: &[u8]) {
        if self.keeping.is_none() || self.parser.feed(chunk, &mut self.events).is_err() {
            return;
        }
        for event in self.events.drain(..) {
            if event.event.as_deref() != Some("response.completed") {
                continue;
            }
            let Ok(Value::Object(mut data)) = serde_json::from_str::<Value>(&event.data) else {
                continue;
            };
            if let (Some(response), Some(keeping)) = (data.remove("response"), self.keeping.take())
            {
                keeping.keep(response);
            }
        }
    }
}

/// The answer object of a JSON body, for keeping.
pub fn answer_object(body: &[u8]) -> Option<Value> {
    serde_json::from_slice::<Map<String, Value>>(body)
        .ok()
        .map(Value::Object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::response_store::StoreBounds;

    fn store_with(id: &str, client: &str, input: Vec<Value>, output: Vec<Value>) -> ResponseStore {
        let store = ResponseStore::open(
            None,
            StoreBounds {
                max_bytes: 1 << 20,
                ttl_ms: 1_000,
            },
        )
        .unwrap();
        let kept = KeptResponse {
            client: client.into(),
            connection: "an-1".into(),
            created_ms: 0,
            expires_ms: 1_000,
            response: json!({"id": id, "output": output}),
            input_items: input,
            chain: String::new(),
        };
        store.put(id, &kept, 0).unwrap();
        store
    }

    #[test]
    fn a_continuation_is_the_kept_conversation_then_its_own_input() {
        let turn1_in = vec![json!({"type": "message", "role": "user", "content": "one"})];
        let turn1_out = vec![
            json!({"type": "message", "role": "assistant", "id": "msg_1",
            "content": [{"type": "output_text", "text": "ONE"}]}),
        ];
        let store = store_with("resp_qrt_1", "alice", turn1_in.clone(), turn1_out.clone());
        let body = Bytes::from_static(
            br#"{"model":"m","previous_response_id":"resp_qrt_1","input":"two","stream":true}"#,
        );
        let Continued::Expanded {
            body: expanded,
            id,
            chain,
        } = continue_kept(&store, &body, "alice", 10).unwrap()
        else {
            panic!("expanded")
        };
        assert_eq!((id.as_str(), chain.as_str()), ("resp_qrt_1", "resp_qrt_1"));
        let expanded: Value = serde_json::from_slice(&expanded).unwrap();
        assert_eq!(
            expanded,
            json!({"model": "m", "stream": true, "input": [turn1_in[0], turn1_out[0],
                {"type": "message", "role": "user", "content": "two"}]})
        );
        // Another client's, an expired one and an unknown one are not found alike.
        for (client, now) in [("bob", 10), ("alice", 1_000)] {
            assert_eq!(
                continue_kept(&store, &body, client, now).unwrap(),
                Continued::NotFound("resp_qrt_1".into())
            );
        }
        // An id the router did not make goes as it came (the upstream's own).
        let upstream = Bytes::from_static(br#"{"previous_response_id":"resp_abc","input":"x"}"#);
        assert_eq!(
            continue_kept(&store, &upstream, "alice", 10).unwrap(),
            Continued::AsItCame
        );
    }

    #[test]
    fn input_items_have_ids_and_parts() {
        let body = br#"{"input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c","output":"4"},{"type":"message","role":"assistant","id":"msg_9","content":"ok"}]}"#;
        let items = input_items(body, "resp_qrt_ab");
        assert_eq!(
            items,
            vec![
                json!({"type": "message", "role": "user", "id": "msg_ab_0", "status": "completed",
                    "content": [{"type": "input_text", "text": "hi"}]}),
                json!({"type": "function_call_output", "call_id": "c", "output": "4", "id": "item_ab_1"}),
                json!({"type": "message", "role": "assistant", "id": "msg_9", "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}]}),
            ]
        );
        assert!(mint_id().starts_with("resp_qrt_") && mint_id() != mint_id());
    }
}
