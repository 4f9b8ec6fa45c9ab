//! A JSON object of members moved in, for the request writers: `json!` takes each member that
//! is a variable through `serde_json::to_value`, which serializes a `Value` (a list of content
//! blocks, a tool's schema) again, whole, into a copy; here it is moved.

use serde_json::{Map, Value};

/// The object of `members`, in the map's order (as `json!` gives it).
pub fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    let mut map = Map::new();
    for (name, value) in members {
        map.insert(name.to_owned(), value);
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_is_the_one_json_gives() {
        let blocks = vec![json!({"type": "text", "text": "é \"q\""}), json!(null)];
        let built = object([
            ("role", Value::from("user")),
            ("content", Value::Array(blocks.clone())),
            ("max", Value::from(64u64)),
        ]);
        assert_eq!(
            built,
            json!({"role": "user", "content": blocks, "max": 64u64})
        );
        assert_eq!(
            serde_json::to_vec(&built).unwrap(),
            serde_json::to_vec(&json!({"max": 64, "content": blocks, "role": "user"})).unwrap()
        );
    }
}
