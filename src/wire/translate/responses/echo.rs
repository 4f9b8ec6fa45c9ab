//! What a Responses answer repeats from its request (the Responses object's own fields:
//! `instructions`, `tools`, `tool_choice`, `temperature`, `text`, …), and which of its tools are
//! freeform (`custom`), whose calls go back as `custom_tool_call` items. Made from the client's
//! request when it goes through translation, read when its answer is written.

use serde_json::{json, Map, Value};

use super::super::openai_common::custom_tool_names;

/// Makes a field's default value.
type MakeDefault = fn() -> Value;

/// The request fields a Responses object repeats, with the value the API gives each when the
/// request did not set it.
const ECHOED: [(&str, MakeDefault); 13] = [
    ("instructions", || Value::Null),
    ("max_output_tokens", || Value::Null),
    ("max_tool_calls", || Value::Null),
    ("metadata", || json!({})),
    ("parallel_tool_calls", || json!(true)),
    ("previous_response_id", || Value::Null),
    ("reasoning", || json!({"effort": null, "summary": null})),
    ("temperature", || json!(1.0)),
    ("text", || json!({"format": {"type": "text"}})),
    ("tool_choice", || json!("auto")),
    ("tools", || json!([])),
    ("top_p", || json!(1.0)),
    ("user", || Value::Null),
];

/// Each of [`ECHOED`]'s defaults as `serde_json` writes it (a stream's response is written
/// from these bytes, not from the `Value`s).
const DEFAULT_JSON: [&[u8]; 13] = [
    b"null",
    b"null",
    b"null",
    b"{}",
    b"true",
    b"null",
    br#"{"effort":null,"summary":null}"#,
    b"1.0",
    br#"{"format":{"type":"text"}}"#,
    br#""auto""#,
    b"[]",
    b"1.0",
    b"null",
];

/// What a response repeats for one echoed field.
#[derive(Debug, Clone, Copy)]
pub enum Echoed<'a> {
    /// The request's value.
    Set(&'a Value),
    /// The API's default, as the JSON `serde_json` writes of it.
    Default(&'static [u8]),
}

/// A Responses request's echo.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Echo {
    /// The echoed fields the request set (not null); the others repeat the API's default.
    fields: Map<String, Value>,
    /// The freeform (`custom`) tools' names.
    custom_tools: Vec<String>,
    /// The id the router keeps the answer under (`[responses] store = true`, behaviour §14):
    /// the answer is then written with it and says `store: true`.
    kept_id: Option<String>,
}

impl Echo {
    /// The echo of `request` (a Responses request).
    pub fn of(request: &Map<String, Value>) -> Echo {
        // Only what the request set: the defaults are made when an answer is written (most
        // requests set two or three of the thirteen).
        let fields = ECHOED
            .iter()
            .filter_map(|(key, _)| {
                let value = request.get(*key).filter(|v| !v.is_null())?;
                Some(((*key).to_string(), value.clone()))
            })
            .collect();
        let tools = request
            .get("tools")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        Echo {
            fields,
            custom_tools: custom_tool_names(tools),
            kept_id: None,
        }
    }

    /// [`Echo::of`] made in one walk of the request's members (a request has a few), each set
    /// field inserted in turn: a map collected from an iterator is sorted and built in bulk,
    /// which costs several times that for three or four fields. The one a translated request's
    /// answer takes.
    pub fn of_request(request: &Map<String, Value>) -> Echo {
        let mut fields = Map::new();
        let mut custom_tools = Vec::new();
        for (key, value) in request {
            if key == "tools" {
                if let Value::Array(tools) = value {
                    custom_tools = custom_tool_names(tools);
                }
            }
            if !value.is_null() && ECHOED.iter().any(|(echoed, _)| echoed == key) {
                fields.insert(key.clone(), value.clone());
            }
        }
        Echo {
            fields,
            custom_tools,
            kept_id: None,
        }
    }

    /// This echo for an answer the router keeps under `id`.
    pub fn kept_as(&self, id: &str) -> Echo {
        Echo {
            kept_id: Some(id.to_owned()),
            ..self.clone()
        }
    }

    /// This echo for a request that continued the kept response `id` (its body then came
    /// expanded, without `previous_response_id`): the answer still names it.
    pub fn continuing(&self, id: &str) -> Echo {
        let mut echo = self.clone();
        echo.fields.insert(
            "previous_response_id".to_owned(),
            Value::String(id.to_owned()),
        );
        echo
    }

    /// The id the router keeps the answer under, when it keeps it.
    pub fn kept_id(&self) -> Option<&str> {
        self.kept_id.as_deref()
    }

    /// Each echoed field's key and what a response repeats for it, in [`Echo::fill`]'s terms.
    pub fn echoed(&self) -> impl Iterator<Item = (&'static str, Echoed<'_>)> {
        ECHOED
            .iter()
            .zip(DEFAULT_JSON)
            .map(|((key, _), default)| match self.fields.get(*key) {
                Some(value) => (*key, Echoed::Set(value)),
                None => (*key, Echoed::Default(default)),
            })
    }

    /// Whether `name` is a freeform tool.
    pub fn is_custom(&self, name: &str) -> bool {
        self.custom_tools.iter().any(|custom| custom == name)
    }

    /// The value a response repeats for the echoed field `key` (the API's default when the
    /// request did not set it); `None` for a field that is not echoed.
    pub fn field(&self, key: &str) -> Option<std::borrow::Cow<'_, Value>> {
        if let Some(value) = self.fields.get(key) {
            return Some(std::borrow::Cow::Borrowed(value));
        }
        ECHOED
            .iter()
            .find(|(echoed, _)| *echoed == key)
            .map(|(_, default)| std::borrow::Cow::Owned(default()))
    }

    /// The value the request set for the echoed field `key` (not null), `None` when the
    /// response repeats the API's default for it (or `key` is not echoed).
    pub fn set_field(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// The echoed fields the request set (not null), in the order of their names.
    pub fn set_fields(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.fields.iter().map(|(key, value)| (key.as_str(), value))
    }

    /// Writes the echoed fields into a response object (defaults when there is no request).
    pub fn fill(&self, response: &mut Map<String, Value>) {
        for (key, default) in ECHOED {
            let value = self.fields.get(key).cloned().unwrap_or_else(default);
            response.insert(key.to_string(), value);
        }
    }
}

#[cfg(test)]
mod of_request_tests {
    use super::*;

    #[test]
    fn one_walk_makes_the_echo_of_makes() {
        let requests = [
            json!({}),
            json!({"model": "m", "instructions": "Be brief.", "input": "hi",
                   "max_output_tokens": 64, "temperature": 0, "stream": false}),
            json!({"instructions": null, "metadata": {"a": "b"}, "parallel_tool_calls": false,
                   "previous_response_id": "resp_1", "reasoning": {"effort": "low"},
                   "text": {"format": {"type": "json_object"}}, "tool_choice": "required",
                   "top_p": 0.5, "user": "u", "max_tool_calls": 3,
                   "tools": [{"type": "custom", "name": "apply_patch"},
                             {"type": "function", "name": "f"},
                             {"type": "custom", "name": "other"}]}),
            json!({"tools": {"not": "a list"}, "temperature": null, "unknown": [1, 2]}),
            json!({"tools": [], "user": 7}),
        ];
        for request in requests {
            let Value::Object(request) = request else {
                unreachable!()
            };
            assert_eq!(
                Echo::of_request(&request),
                Echo::of(&request),
                "{request:?}"
            );
        }
    }
}
