//! A Responses stream's lifecycle event read once, for the reader's arm and for what the
//! relay's watch reads of it (`stream_watch::responses_inspected`): one strict walk of the event
//! that builds only the members the arm reads now. It must read the event exactly as the
//! reader's `event` and the watch's `observe` would, and leave to them whatever it cannot.

use serde_json::{Map, Value};

use super::{ResponsesReader, READ};
use crate::wire::stream_watch::{responses_inspected, Inspected, ResponsesMembers};
use crate::wire::translate::hub::form::Event;
use crate::wire::translate::picked::{found_members, Found};

impl ResponsesReader {
    /// An event other than a text piece, `name`d (not as a text piece), read once for its arm
    /// of [`Self::other`] and for what the relay's watch (`StreamUsage::observe`) reads of it:
    /// that, when the one strict read tells it (`stream_watch::responses_inspected`), and when
    /// `want_id`, its response's `id` as a typed read of `{"response":{"id":…}}` reads it
    /// (`None`: no response, no id, or one that is not a string). `None`: nothing was read
    /// (the event is read as before, by `observe` and [`Self::event`]).
    pub fn other_inspected(
        &mut self,
        name: Option<&str>,
        data: &str,
        events: &mut Vec<Event>,
        want_id: bool,
    ) -> Option<(Inspected, Option<String>)> {
        let name = name.filter(|name| *name != "response.output_text.delta")?;
        if !self.whole_values.fast() {
            return None;
        }
        let mut found = Vec::with_capacity(12);
        found_members(data, READ, &mut found)?;
        let mut members = ResponsesMembers::default();
        for member in &found {
            match (member.within, member.name) {
                (None, "type") => members.kind = Some(member.text),
                (None, "usage") => members.usage = Some(member.text),
                (Some("response"), "usage") => members.response_usage = Some(member.text),
                _ => {}
            }
        }
        let inspected = responses_inspected(Some(name), &members)?;
        // An event `ignores` names is one its arm leaves as it is: read, it makes nothing.
        let value = self.arm_value(&found)?;
        self.take(value, events);
        let id = found
            .iter()
            .filter(|_| want_id)
            .find(|member| member.within == Some("response") && member.name == "id")
            .and_then(|member| serde_json::from_str::<Option<String>>(member.text).ok())
            .flatten();
        Some((inspected, id))
    }

    /// What `picked` reads of an event whose kept members are `found`, as far as its arm reads
    /// it now: its `type`, `item`, `annotation`, `delta`, `message` and `code`, and of its
    /// `response` what `start` reads before the stream's start (`id`, `model`) and everything
    /// at its end. The rest is not built (most of a lifecycle event's response).
    fn arm_value(&self, found: &[Found<'_>]) -> Option<Value> {
        let kind = found
            .iter()
            .find(|member| member.within.is_none() && member.name == "type")
            .map(|member| serde_json::from_str::<Value>(member.text))
            .transpose()
            .ok()?;
        // The response's members the arm reads: `None` all that `READ` picks.
        let response_read: Option<&[&str]> = match kind.as_ref().and_then(Value::as_str) {
            Some("response.created" | "response.in_progress") if !self.started => {
                Some(&["id", "model"])
            }
            Some("response.completed" | "response.incomplete") if !self.done => None,
            _ => Some(&[]),
        };
        let mut data = Map::new();
        let mut response: Option<Map<String, Value>> = None;
        for member in found {
            match (member.within, member.name) {
                // A top-level usage is no arm's.
                (None, "type" | "usage") => {}
                (None, "response") => {
                    response.get_or_insert_with(Map::new);
                }
                (None, name) => {
                    data.insert(name.to_string(), serde_json::from_str(member.text).ok()?);
                }
                (Some("response"), name) => {
                    let response = response.get_or_insert_with(Map::new);
                    if response_read.is_none_or(|read| read.contains(&name)) {
                        response.insert(name.to_string(), serde_json::from_str(member.text).ok()?);
                    }
                }
                _ => {}
            }
        }
        if let Some(kind) = kind {
            data.insert("type".to_string(), kind);
        }
        if let Some(response) = response {
            data.insert("response".to_string(), Value::Object(response));
        }
        Some(Value::Object(data))
    }
}
