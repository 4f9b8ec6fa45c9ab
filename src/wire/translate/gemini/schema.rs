//! JSON Schema cleaned to the OpenAPI subset Gemini takes for `parameters` and
//! `responseSchema` (behaviour §15): local `$ref`s are inlined (a cycle stops as a bare
//! object), `type: [t, "null"]` becomes `type: t` with `nullable`, `const` becomes a one-value
//! `enum`, and every keyword Gemini rejects (`$schema`, `additionalProperties`, `$defs`, …) is
//! left out and named once in `dropped`. Property names are the client's, never keywords.
//! The other way, a Gemini client's schema (Google's `Type` names, `OBJECT`, and `nullable`)
//! becomes JSON Schema for the other APIs.

use serde_json::{json, Map, Value};

use crate::wire::translate::params::drop_named;

/// The keywords Gemini's `Schema` holds.
const KEPT: [&str; 18] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "propertyOrdering",
    "items",
];

/// Numbers Gemini takes beside [`KEPT`].
const KEPT_NUMBERS: [&str; 3] = ["minimum", "maximum", "default"];

/// How deep `$ref`s are followed before a cycle is cut.
const MAX_DEPTH: usize = 32;

/// How many schema nodes `$ref`s may make in all: a definition that names itself twice would
/// otherwise inline into 2^`MAX_DEPTH` copies (a request that costs the router minutes).
const MAX_INLINED: usize = 10_000;

/// `schema` as Gemini takes it; the keywords left out are named in `dropped`.
pub fn clean(schema: &Value, dropped: &mut Vec<String>) -> Value {
    let defs = definitions(schema);
    let mut walk = Walk {
        defs: &defs,
        dropped,
        inlined: 0,
    };
    walk.clean_at(schema, 0)
}

/// One cleaning: the definitions `$ref`s name, what was dropped, the nodes refs made so far.
struct Walk<'a> {
    defs: &'a Map<String, Value>,
    dropped: &'a mut Vec<String>,
    inlined: usize,
}

/// The `$defs` / `definitions` a local `$ref` may name.
fn definitions(schema: &Value) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(found)) = schema.get(key) {
            for (name, def) in found {
                defs.insert(format!("#/{key}/{name}"), def.clone());
            }
        }
    }
    defs
}

impl Walk<'_> {
    fn clean_at(&mut self, schema: &Value, depth: usize) -> Value {
        // `depth` counts the `$ref`s followed to get here: every node below one was made by it.
        if depth > 0 {
            self.inlined += 1;
        }
        let Value::Object(object) = schema else {
            return json!({});
        };
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            let target = self.defs.get(reference);
            return match target {
                Some(target) if depth < MAX_DEPTH && self.inlined < MAX_INLINED => {
                    self.clean_at(target, depth + 1)
                }
                _ => {
                    drop_named(self.dropped, "$ref");
                    json!({"type": "object"})
                }
            };
        }
        let mut out = Map::new();
        for (key, value) in object {
            match key.as_str() {
                "properties" => {
                    let properties = value
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(name, inner)| (name.clone(), self.clean_at(inner, depth)))
                        .collect();
                    out.insert(key.clone(), Value::Object(properties));
                }
                "items" => {
                    out.insert(key.clone(), self.clean_at(value, depth));
                }
                "anyOf" | "oneOf" => {
                    let choices: Vec<Value> = value
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|inner| self.clean_at(inner, depth))
                        .collect();
                    out.insert("anyOf".into(), Value::Array(choices));
                }
                "type" => match value {
                    Value::Array(types) => {
                        let named: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                        if named.len() < types.len() {
                            out.insert("nullable".into(), json!(true));
                        }
                        if let Some(first) = named.first() {
                            out.insert("type".into(), (*first).clone());
                        }
                        if named.len() > 1 {
                            drop_named(self.dropped, "type");
                        }
                    }
                    other => {
                        out.insert(key.clone(), other.clone());
                    }
                },
                "const" => {
                    out.insert("enum".into(), json!([value]));
                }
                known if KEPT.contains(&known) || KEPT_NUMBERS.contains(&known) => {
                    out.insert(key.clone(), value.clone());
                }
                "$defs" | "definitions" => drop_named(self.dropped, key),
                other => drop_named(self.dropped, other),
            }
        }
        // Gemini takes `enum` only on strings.
        if out.contains_key("enum") && !out.contains_key("type") {
            out.insert("type".into(), json!("string"));
        }
        // And only `enum` and `date-time` as a string's format (`uri`, `email`, … are refused).
        let string = out
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case("string"));
        let format = out.get("format").and_then(Value::as_str);
        if string && !matches!(format, None | Some("enum" | "date-time")) {
            out.remove("format");
            drop_named(self.dropped, "format");
        }
        Value::Object(out)
    }
}

/// A Gemini client's OpenAPI-style schema as JSON Schema: types in lower case, `nullable`
/// as a `null` type, `propertyOrdering` (Gemini's own) left out; the rest as it is.
pub fn to_json_schema(schema: &Value) -> Value {
    let Value::Object(object) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in object {
        match key.as_str() {
            "properties" => {
                let properties = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, inner)| (name.clone(), to_json_schema(inner)))
                    .collect();
                out.insert(key.clone(), Value::Object(properties));
            }
            "items" => {
                out.insert(key.clone(), to_json_schema(value));
            }
            "anyOf" | "oneOf" | "allOf" => {
                let inner = value.as_array().into_iter().flatten().map(to_json_schema);
                out.insert(key.clone(), Value::Array(inner.collect()));
            }
            "type" => {
                let lower = |t: &Value| match t {
                    Value::String(name) => Value::String(name.to_ascii_lowercase()),
                    other => other.clone(),
                };
                let typed = match value {
                    Value::Array(types) => Value::Array(types.iter().map(lower).collect()),
                    other => lower(other),
                };
                out.insert(key.clone(), typed);
            }
            "nullable" | "propertyOrdering" => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if object.get("nullable").and_then(Value::as_bool) == Some(true) {
        if let Some(Value::String(named)) = out.get("type").cloned() {
            out.insert("type".into(), json!([named, "null"]));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_gemini_rejects_are_left_out_and_named_refs_inlined() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": "string", "description": "where"},
                "url": {"type": "string", "format": "uri"},
                "when": {"type": "string", "format": "date-time"},
                "mode": {"$ref": "#/$defs/Mode"},
                "limit": {"type": ["integer", "null"], "minimum": 1},
                "additionalProperties": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string", "const": "x"}},
            },
            "required": ["path"],
            "$defs": {"Mode": {"type": "string", "enum": ["r", "w"], "examples": ["r"]}},
        });
        let mut dropped = Vec::new();
        let out = clean(&schema, &mut dropped);
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "where"},
                    "url": {"type": "string"},
                    "when": {"type": "string", "format": "date-time"},
                    "mode": {"type": "string", "enum": ["r", "w"]},
                    "limit": {"type": "integer", "nullable": true, "minimum": 1},
                    "additionalProperties": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["x"]}},
                },
                "required": ["path"],
            })
        );
        for keyword in [
            "$schema",
            "additionalProperties",
            "$defs",
            "examples",
            "format",
        ] {
            assert!(dropped.contains(&keyword.to_string()), "{dropped:?}");
        }
    }

    /// A definition that names itself twice would inline into 2^32 copies: the nodes made
    /// are bounded, and what is left past the bound is a bare object.
    #[test]
    fn refs_that_double_at_each_level_are_inlined_only_so_far() {
        let schema = json!({
            "$defs": {"Node": {"type": "object", "properties": {
                "left": {"$ref": "#/$defs/Node"}, "right": {"$ref": "#/$defs/Node"}}}},
            "$ref": "#/$defs/Node",
        });
        let started = std::time::Instant::now();
        let mut dropped = Vec::new();
        let out = clean(&schema, &mut dropped);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(
            out.to_string().len() < 2_000_000,
            "{}",
            out.to_string().len()
        );
        assert!(dropped.contains(&"$ref".to_string()));
    }

    #[test]
    fn a_gemini_clients_schema_becomes_json_schema() {
        let openapi = json!({"type": "OBJECT", "propertyOrdering": ["a"], "properties": {
            "a": {"type": "STRING", "nullable": true, "description": "d"},
            "b": {"anyOf": [{"type": "INTEGER"}, {"type": "BOOLEAN"}]}}});
        assert_eq!(
            to_json_schema(&openapi),
            json!({"type": "object", "properties": {
                "a": {"type": ["string", "null"], "description": "d"},
                "b": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}}})
        );
    }

    #[test]
    fn a_ref_cycle_or_an_unknown_ref_ends_as_an_object() {
        let schema = json!({
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
            "$ref": "#/$defs/Node",
        });
        let mut dropped = Vec::new();
        let out = clean(&schema, &mut dropped);
        let mut inner = &out;
        for _ in 0..MAX_DEPTH - 1 {
            inner = &inner["properties"]["next"];
        }
        assert_eq!(inner["type"], "object");
        assert!(dropped.contains(&"$ref".to_string()));
        let out = clean(
            &json!({"$ref": "https://example.com/s.json"}),
            &mut Vec::new(),
        );
        assert_eq!(out, json!({"type": "object"}));
    }
}
