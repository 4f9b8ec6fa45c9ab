//! A JSON object read into a `serde_json::Value` with only the members a reader reads (by
//! name, whole or picked in turn), every other member skipped without being built: what the
//! stream readers' lifecycle events cost is mostly members they never look at (a Responses
//! `response.created` repeats the whole request). Member for member the same `Value` as a
//! whole parse gives (a repeated member: the last one, as `serde_json::Map` keeps it); a
//! picked member that is not an object is declined (`None`), for the caller to parse whole.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// The members of an object a reader reads: each by name, kept whole or picked in turn.
pub type Members = &'static [(&'static str, Pick)];

/// How one member is read.
#[derive(Debug, Clone, Copy)]
pub enum Pick {
    /// As a whole `Value`.
    Whole,
    /// An object of which only these members are read.
    Members(Members),
}

/// `data` (one JSON object) with only `members`; `None` when it is not valid JSON or a picked
/// member is not an object.
pub fn picked(data: &str, members: Members) -> Option<Value> {
    let mut deserializer = serde_json::Deserializer::from_str(data);
    let value = Picked(members).deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(value)
}

struct Picked(Members);

impl<'de> DeserializeSeed<'de> for Picked {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Picked {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match self.0.iter().find(|(name, _)| *name == key) {
                Some((name, Pick::Whole)) => {
                    kept.insert((*name).to_string(), map.next_value::<Value>()?);
                }
                Some((name, Pick::Members(members))) => {
                    kept.insert((*name).to_string(), map.next_value_seed(Picked(members))?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const INNER: Members = &[("id", Pick::Whole), ("usage", Pick::Whole)];
    const OUTER: Members = &[
        ("type", Pick::Whole),
        ("response", Pick::Members(INNER)),
        ("d\u{e9}", Pick::Whole),
    ];

    #[test]
    fn only_the_named_members_are_kept_as_a_whole_parse_reads_them() {
        let data = r#"{"type":"t","x":{"deep":[1,{"a":"\u00e9"}]},"response":{"id":"r","usage":{"n":1.5},"big":"…"},"d\u00e9":null,"type":"last"}"#;
        let value = picked(data, OUTER).unwrap();
        assert_eq!(
            value,
            json!({"type": "last", "response": {"id": "r", "usage": {"n": 1.5}}, "dé": null})
        );
        let whole: Value = serde_json::from_str(data).unwrap();
        for key in ["type", "dé"] {
            assert_eq!(value[key], whole[key]);
        }
        assert_eq!(value["response"]["usage"], whole["response"]["usage"]);
    }

    #[test]
    fn what_a_whole_parse_reads_otherwise_is_declined() {
        for declined in [
            r#"{"type":"t","response":"not an object"}"#,
            r#"{"type":"t","response":null}"#,
            r#"{"type":"t"} trailing"#,
            r#"{"type":"t","x":[}"#,
            r#"["type"]"#,
            "not json",
        ] {
            assert_eq!(picked(declined, OUTER), None, "{declined}");
        }
    }
}
