//! The request events' shared names (`Arc<str>`) encode byte for byte as the `String`s they
//! replaced: frozen copies of the `String` shapes are encoded beside today's types, in the
//! journal's bincode and in JSON (ndjson export), and each decodes the other's bytes.

use std::sync::Arc;

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use super::config;
use crate::event::*;
use crate::testkit::sample_event;

/// `route_decided` as it was stored with `String` names.
#[derive(Debug, Serialize, Deserialize)]
struct RouteDecidedStrings {
    request_id: String,
    generation: u64,
    combo: String,
    model: String,
    room: Vec<u16>,
    chosen: Option<u16>,
    order: Vec<u16>,
    skipped: Vec<Skipped>,
    affinity: AffinityOutcome,
    client: Option<String>,
    group: Option<u64>,
    paces: Vec<CandidatePace>,
}

/// `request_succeeded` as it was stored with `String` names.
#[derive(Debug, Serialize, Deserialize)]
struct RequestSucceededStrings {
    request_id: String,
    combo: String,
    provider: String,
    connection: String,
    model: String,
    status: u16,
    attempt: u32,
    latency_ms: u64,
    tokens_in: u64,
    tokens_out: u64,
    stream: bool,
    skipped: Vec<Skipped>,
    tokens_cached: u64,
    tokens_cache_write: u64,
    client: Option<String>,
    cost_usd: Option<f64>,
    translated: Option<String>,
    usage_estimated: bool,
    items_left_out: u32,
    period_spend_pusd: Option<u64>,
    period_start_ms: Option<u64>,
}

/// `request_failed` as it was stored with `String` names.
#[derive(Debug, Serialize, Deserialize)]
struct RequestFailedStrings {
    request_id: String,
    combo: String,
    provider: String,
    connection: String,
    model: String,
    status: Option<u16>,
    class: OutcomeClass,
    error_code: Option<String>,
    message: Option<String>,
    attempt: u32,
    latency_ms: u64,
    reset_hint_ms: Option<u64>,
    stream: bool,
    after_first_content: bool,
    skipped: Vec<Skipped>,
    client: Option<String>,
    translated: Option<String>,
}

fn owned(name: &Arc<str>) -> String {
    String::from(&**name)
}

fn owned_client(client: &Option<Arc<str>>) -> Option<String> {
    client.as_deref().map(String::from)
}

fn decided_strings(e: &RouteDecided) -> RouteDecidedStrings {
    RouteDecidedStrings {
        request_id: owned(&e.request_id),
        generation: e.generation,
        combo: owned(&e.combo),
        model: owned(&e.model),
        room: e.room.clone(),
        chosen: e.chosen,
        order: e.order.clone(),
        skipped: e.skipped.clone(),
        affinity: e.affinity,
        client: owned_client(&e.client),
        group: e.group,
        paces: e.paces.clone(),
    }
}

fn succeeded_strings(e: &RequestSucceeded) -> RequestSucceededStrings {
    RequestSucceededStrings {
        request_id: owned(&e.request_id),
        combo: owned(&e.combo),
        provider: owned(&e.provider),
        connection: owned(&e.connection),
        model: owned(&e.model),
        status: e.status,
        attempt: e.attempt,
        latency_ms: e.latency_ms,
        tokens_in: e.tokens_in,
        tokens_out: e.tokens_out,
        stream: e.stream,
        skipped: e.skipped.clone(),
        tokens_cached: e.tokens_cached,
        tokens_cache_write: e.tokens_cache_write,
        client: owned_client(&e.client),
        cost_usd: e.cost_usd,
        translated: e.translated.clone(),
        usage_estimated: e.usage_estimated,
        items_left_out: e.items_left_out,
        period_spend_pusd: e.period_spend_pusd,
        period_start_ms: e.period_start_ms,
    }
}

fn failed_strings(e: &RequestFailed) -> RequestFailedStrings {
    RequestFailedStrings {
        request_id: owned(&e.request_id),
        combo: owned(&e.combo),
        provider: owned(&e.provider),
        connection: owned(&e.connection),
        model: owned(&e.model),
        status: e.status,
        class: e.class,
        error_code: e.error_code.clone(),
        message: e.message.clone(),
        attempt: e.attempt,
        latency_ms: e.latency_ms,
        reset_hint_ms: e.reset_hint_ms,
        stream: e.stream,
        after_first_content: e.after_first_content,
        skipped: e.skipped.clone(),
        client: owned_client(&e.client),
        translated: e.translated.clone(),
    }
}

/// Today's `value` and its `String`-named copy `strings` write the same bytes (bincode with the
/// journal's config, and JSON), and today's type reads the copy's bytes back as `value`.
fn same_bytes<T, S>(value: &T, strings: &S)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    S: Serialize,
{
    let shared = bincode::serde::encode_to_vec(value, config()).unwrap();
    let copied = bincode::serde::encode_to_vec(strings, config()).unwrap();
    assert_eq!(shared, copied, "bincode of {value:?}");
    let (read, used): (T, usize) = bincode::serde::decode_from_slice(&copied, config()).unwrap();
    assert_eq!((&read, used), (value, copied.len()));
    let shared = serde_json::to_string(value).unwrap();
    let copied = serde_json::to_string(strings).unwrap();
    assert_eq!(shared, copied, "json of {value:?}");
    assert_eq!(&serde_json::from_str::<T>(&copied).unwrap(), value);
}

/// Names a sample does not have: empty, escaped, multi-byte (and no client).
const ODD: (&str, &str, &str) = ("", "team \"a\"\\b", "café-模型\n");

/// An event whose names can be set to [`ODD`]'s.
trait NamedEvent {
    fn rename(&mut self, request_id: &str, combo: &str, model: &str);
}

impl NamedEvent for RouteDecided {
    fn rename(&mut self, request_id: &str, combo: &str, model: &str) {
        (self.request_id, self.combo, self.model) = (request_id.into(), combo.into(), model.into());
        self.client = None;
    }
}

impl NamedEvent for RequestSucceeded {
    fn rename(&mut self, request_id: &str, combo: &str, model: &str) {
        (self.request_id, self.combo, self.model) = (request_id.into(), combo.into(), model.into());
        (self.provider, self.connection) = (model.into(), combo.into());
        self.client = None;
    }
}

impl NamedEvent for RequestFailed {
    fn rename(&mut self, request_id: &str, combo: &str, model: &str) {
        (self.request_id, self.combo, self.model) = (request_id.into(), combo.into(), model.into());
        (self.provider, self.connection) = (combo.into(), model.into());
        self.client = None;
    }
}

/// The samples of the three kinds whose names are shared, as the testkit makes them and with
/// odd names.
fn samples() -> Vec<Event> {
    let mut events = Vec::new();
    for n in 0..6 {
        for kind in [2, 3, 13] {
            let event = sample_event(kind, n);
            let mut odd = event.clone();
            match &mut odd {
                Event::RouteDecided(e) => e.rename(ODD.0, ODD.1, ODD.2),
                Event::RequestSucceeded(e) => e.rename(ODD.0, ODD.1, ODD.2),
                Event::RequestFailed(e) => e.rename(ODD.0, ODD.1, ODD.2),
                _ => {}
            }
            events.extend([event, odd]);
        }
    }
    events
}

#[test]
fn shared_names_encode_as_the_strings_they_replaced() {
    let mut seen = [0; 3];
    for event in samples() {
        match &event {
            Event::RouteDecided(e) => {
                same_bytes(e, &decided_strings(e));
                seen[0] += 1;
            }
            Event::RequestSucceeded(e) => {
                same_bytes(e, &succeeded_strings(e));
                seen[1] += 1;
            }
            Event::RequestFailed(e) => {
                same_bytes(e, &failed_strings(e));
                seen[2] += 1;
            }
            other => panic!("sample of another kind: {}", other.kind()),
        }
    }
    assert_eq!(
        seen,
        [12, 12, 12],
        "each kind, with its names as sampled and odd"
    );
}
