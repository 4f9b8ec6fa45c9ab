//! One envelope as one flat JSON object, `{"seq","at_ms","schema_version","kind",…fields}`:
//! the line format of `GET /admin/journal` and `replay --format json`, and its parser so such
//! output can be replayed (`replay --from`). Never used for storage (see `codec`).

use crate::event::{Envelope, Event, PeerApplied};
use serde::Serialize;
use serde_json::{Map, Value};

/// A line that is not a flat envelope object.
#[derive(Debug, thiserror::Error)]
pub enum NdjsonError {
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not a JSON object")]
    NotAnObject,
    #[error("missing or invalid field `{0}`")]
    Field(&'static str),
    #[error("unknown event kind `{0}`")]
    UnknownKind(String),
}

/// The flat line: envelope fields first, then the event's own fields in declaration order.
/// (`flatten` is fine here: this type is JSON output, never stored.)
#[derive(Serialize)]
struct FlatLine<'a, T: Serialize> {
    seq: u64,
    at_ms: u64,
    schema_version: u16,
    kind: &'static str,
    #[serde(flatten)]
    fields: &'a T,
}

/// Renders `envelope` as one line of JSON (no trailing newline).
pub fn envelope_to_json(envelope: &Envelope) -> Result<String, NdjsonError> {
    macro_rules! flat {
        ($inner:expr) => {
            serde_json::to_string(&FlatLine {
                seq: envelope.seq,
                at_ms: envelope.at_ms,
                schema_version: envelope.schema_version,
                kind: envelope.event.kind(),
                fields: $inner,
            })
        };
    }
    let line = match &envelope.event {
        Event::NodeStarted(e) => flat!(e),
        Event::ConfigLoaded(e) => flat!(e),
        Event::RequestSucceeded(e) => flat!(e),
        Event::RequestFailed(e) => flat!(e),
        Event::ConnectionCooldown(e) => flat!(e),
        Event::ConnectionDisabled(e) => flat!(e),
        Event::ConnectionCleared(e) => flat!(e),
        Event::ModelLocked(e) => flat!(e),
        Event::ModelUnlocked(e) => flat!(e),
        Event::BreakerTransition(e) => flat!(e),
        Event::UsageObserved(e) => flat!(e),
        Event::AdminAction(e) => flat!(e),
        Event::NodeStopped(e) => flat!(e),
        Event::RouteDecided(e) => flat!(e),
        Event::BreakerCounted(e) => flat!(e),
        Event::ResponseBound(e) => flat!(e),
        Event::AffinityBound(e) => flat!(e),
        Event::ClientUsage(e) => flat!(e),
        Event::ClientLimited(e) => flat!(e),
        Event::ApiUnserved(e) => flat!(e),
        Event::PacingRule(e) => flat!(e),
        Event::ResponseStored(e) => flat!(e),
        Event::ResponseDeleted(e) => flat!(e),
        Event::JournalRecovered(e) => flat!(e),
        Event::CredentialRefreshed(e) => flat!(e),
        Event::CredentialFailed(e) => flat!(e),
        Event::PeerApplied(e) => return peer_applied_to_json(envelope, e),
    }?;
    Ok(line)
}

/// `peer_applied` stays one flat line: the origin's fields, `event_kind`, then the origin's
/// event's own fields (no event kind has fields named like the origin's).
fn peer_applied_to_json(envelope: &Envelope, applied: &PeerApplied) -> Result<String, NdjsonError> {
    let inner = envelope_to_json(&Envelope {
        schema_version: envelope.schema_version,
        seq: applied.origin_seq,
        at_ms: applied.origin_at_ms,
        event: (*applied.event).clone(),
    })?;
    let kind = applied.event.kind();
    // The inner line begins `{"seq":…,"at_ms":…,"schema_version":…,"kind":"<kind>"`.
    let marker = format!("\"kind\":\"{kind}\"");
    let rest = inner
        .find(&marker)
        .and_then(|at| inner.get(at + marker.len()..))
        .ok_or(NdjsonError::Field("kind"))?;
    Ok(format!(
        "{{\"seq\":{},\"at_ms\":{},\"schema_version\":{},\"kind\":\"peer_applied\",\"origin_node\":{},\"origin_seq\":{},\"origin_at_ms\":{},\"stream_id\":{},\"event_kind\":\"{kind}\"{rest}",
        envelope.seq,
        envelope.at_ms,
        envelope.schema_version,
        serde_json::to_string(&applied.origin_node)?,
        applied.origin_seq,
        applied.origin_at_ms,
        serde_json::to_string(&applied.stream_id)?,
    ))
}

/// The origin's fields and event of a flat `peer_applied` line (what is left is the event's).
fn peer_applied_from_json(mut object: Map<String, Value>) -> Result<Event, NdjsonError> {
    let origin_seq = take_u64(&mut object, "origin_seq")?;
    let origin_at_ms = take_u64(&mut object, "origin_at_ms")?;
    let mut take_string = |field: &'static str| match object.remove(field) {
        Some(Value::String(value)) => Ok(value),
        _ => Err(NdjsonError::Field(field)),
    };
    let origin_node = take_string("origin_node")?;
    let stream_id = take_string("stream_id")?;
    let kind = take_string("event_kind")?;
    if kind == "peer_applied" || !Event::KINDS.contains(&kind.as_str()) {
        return Err(NdjsonError::UnknownKind(kind));
    }
    let mut tagged = Map::new();
    tagged.insert(kind, Value::Object(object));
    Ok(Event::PeerApplied(PeerApplied {
        origin_node,
        origin_seq,
        origin_at_ms,
        stream_id,
        event: Box::new(serde_json::from_value(Value::Object(tagged))?),
    }))
}

fn take_u64(object: &mut Map<String, Value>, field: &'static str) -> Result<u64, NdjsonError> {
    object
        .remove(field)
        .and_then(|value| value.as_u64())
        .ok_or(NdjsonError::Field(field))
}

/// Parses one line made by [`envelope_to_json`] back into the envelope. Unknown extra fields
/// are ignored, so lines from a newer build with added fields still parse.
pub fn envelope_from_json(line: &str) -> Result<Envelope, NdjsonError> {
    let Value::Object(mut object) = serde_json::from_str::<Value>(line)? else {
        return Err(NdjsonError::NotAnObject);
    };
    let seq = take_u64(&mut object, "seq")?;
    let at_ms = take_u64(&mut object, "at_ms")?;
    let schema_version = u16::try_from(take_u64(&mut object, "schema_version")?)
        .map_err(|_| NdjsonError::Field("schema_version"))?;
    let Some(Value::String(kind)) = object.remove("kind") else {
        return Err(NdjsonError::Field("kind"));
    };
    if !Event::KINDS.contains(&kind.as_str()) {
        return Err(NdjsonError::UnknownKind(kind));
    }
    if kind == "peer_applied" {
        return Ok(Envelope {
            schema_version,
            seq,
            at_ms,
            event: peer_applied_from_json(object)?,
        });
    }
    // The event enum is externally tagged by kind in JSON: `{"<kind>": {fields}}`.
    let mut tagged = Map::new();
    tagged.insert(kind, Value::Object(object));
    let event = serde_json::from_value(Value::Object(tagged))?;
    Ok(Envelope {
        schema_version,
        seq,
        at_ms,
        event,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{sample_envelopes, sample_event, KIND_COUNT};

    #[test]
    fn every_kind_round_trips_through_a_flat_line() {
        for envelope in sample_envelopes(1, 1_700_000_000_000, 2 * KIND_COUNT as u64) {
            let line = envelope_to_json(&envelope).unwrap();
            assert!(!line.contains('\n'));
            let object: Map<String, Value> = serde_json::from_str(&line).unwrap();
            assert_eq!(object["kind"], envelope.event.kind());
            assert!(object.values().all(|v| !v.is_object()), "flat: {line}");
            assert_eq!(envelope_from_json(&line).unwrap(), envelope);
        }
    }

    #[test]
    fn line_starts_with_the_envelope_fields_in_contract_order() {
        let envelope = &sample_envelopes(5, 99, 1)[0];
        let line = envelope_to_json(envelope).unwrap();
        assert!(
            line.starts_with(r#"{"seq":5,"at_ms":99,"schema_version":5,"kind":"connection_disabled","provider":"anthropic","connection":"conn-2","reason":"billing"#),
            "{line}"
        );
    }

    #[test]
    fn request_events_show_their_client_and_price() {
        let succeeded = &sample_envelopes(2, 99, 1)[0];
        let line = envelope_to_json(succeeded).unwrap();
        assert!(line.contains(r#""kind":"request_succeeded""#), "{line}");
        assert!(
            line.ends_with(r#""client":"team-0","cost_usd":null,"translated":null,"usage_estimated":false,"items_left_out":0,"period_spend_pusd":null,"period_start_ms":null}"#),
            "{line}"
        );
        // Sample 48 of `request_succeeded` (kind 2) has a price.
        let priced = &Envelope {
            seq: 48,
            event: sample_event(2, 48),
            ..sample_envelopes(48, 99, 1)[0].clone()
        };
        let object: Map<String, Value> =
            serde_json::from_str(&envelope_to_json(priced).unwrap()).unwrap();
        assert_eq!(object["kind"], "request_succeeded");
        assert_eq!(object["client"], "team-0");
        assert_eq!(object["cost_usd"].as_f64(), Some(0.000_5 * 48.0));
        // ... and carries its client's charge (schema 5).
        assert_eq!(object["period_spend_pusd"].as_u64(), Some(500_000_000 * 48));
        assert_eq!(object["period_start_ms"].as_u64(), Some(1_764_547_200_000));
        let failed = &sample_envelopes(3, 99, 1)[0];
        let line = envelope_to_json(failed).unwrap();
        assert!(
            line.ends_with(r#""client":"team-1","translated":null}"#),
            "{line}"
        );
    }

    /// An export from a schema-2 build has no `client` / `cost_usd`: it still replays.
    #[test]
    fn a_schema_2_request_line_reads_without_client_or_cost() {
        let line = r#"{"seq":7,"at_ms":1,"schema_version":2,"kind":"request_succeeded","request_id":"r","combo":"c","provider":"p","connection":"k1","model":"m","status":200,"attempt":1,"latency_ms":3,"tokens_in":10,"tokens_out":20,"stream":false,"skipped":[],"tokens_cached":0,"tokens_cache_write":0}"#;
        let envelope = envelope_from_json(line).unwrap();
        let Event::RequestSucceeded(e) = &envelope.event else {
            panic!("{envelope:?}");
        };
        assert_eq!((e.client.as_deref(), e.cost_usd), (None, None));
        assert_eq!((e.tokens_in, e.tokens_out), (10, 20));
    }

    #[test]
    fn bad_lines_are_typed_errors() {
        let cases = [
            ("[1]", "not an object"),
            ("{", "json"),
            (
                r#"{"at_ms":1,"schema_version":1,"kind":"node_stopped"}"#,
                "seq",
            ),
            (
                r#"{"seq":1,"at_ms":1,"schema_version":1,"kind":"nope"}"#,
                "kind",
            ),
            (r#"{"seq":1,"at_ms":1,"schema_version":1}"#, "kind field"),
            (
                r#"{"seq":1,"at_ms":1,"schema_version":1,"kind":"node_stopped"}"#,
                "fields",
            ),
        ];
        for (line, what) in cases {
            let error = envelope_from_json(line).unwrap_err();
            let ok = match what {
                "not an object" => matches!(error, NdjsonError::NotAnObject),
                "json" | "fields" => matches!(error, NdjsonError::Json(_)),
                "seq" => matches!(error, NdjsonError::Field("seq")),
                "kind" => matches!(error, NdjsonError::UnknownKind(_)),
                _ => matches!(error, NdjsonError::Field("kind")),
            };
            assert!(ok, "{what}: {error:?}");
        }
    }
}
