//! The mock's per-key prompt cache (behaviour §10's premise): like a provider, each account
//! remembers the prompt prefixes it has seen, and a request that starts with one reads it from
//! cache. Prefixes end at message boundaries (`tools`, `system` / `instructions` /
//! `systemInstruction`, then each message, input item or Gemini content), and the whole prompt is written to the cache (what it did not
//! read is the cache write). Tokens are bytes / 4, as the mock counts prompt tokens. Bounded
//! per key (oldest prefixes forgotten first).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

/// Prefixes remembered per key.
const MAX_PREFIXES_PER_KEY: usize = 4096;

/// What one request read from and wrote to its key's cache, in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUse {
    pub read: u64,
    pub written: u64,
}

/// Every key's remembered prefixes.
#[derive(Debug, Default)]
pub struct PromptCaches {
    by_key: HashMap<String, KeyCache>,
}

#[derive(Debug, Default)]
struct KeyCache {
    seen: HashSet<u64>,
    order: VecDeque<u64>,
}

impl PromptCaches {
    /// Looks `body` up in `key`'s cache and remembers its prefixes.
    pub fn serve(&mut self, key: &str, body: &Value) -> CacheUse {
        let prefixes = prefixes(body);
        let cacheable = prefixes.last().map_or(0, |&(_, bytes)| bytes);
        let cache = self.by_key.entry(key.to_owned()).or_default();
        let read = prefixes
            .iter()
            .rev()
            .find(|(hash, _)| cache.seen.contains(hash))
            .map_or(0, |&(_, bytes)| bytes);
        for &(hash, _) in &prefixes {
            if cache.seen.insert(hash) {
                cache.order.push_back(hash);
            }
        }
        while cache.order.len() > MAX_PREFIXES_PER_KEY {
            if let Some(old) = cache.order.pop_front() {
                cache.seen.remove(&old);
            }
        }
        let read = read.min(cacheable);
        CacheUse {
            read: read.div_ceil(4),
            written: cacheable.saturating_sub(read).div_ceil(4),
        }
    }
}

/// `(hash of the prompt up to here, bytes up to here)` at each message boundary.
fn prefixes(body: &Value) -> Vec<(u64, u64)> {
    let mut parts: Vec<&Value> = Vec::new();
    for field in ["tools", "system", "instructions", "systemInstruction"] {
        if let Some(value) = body.get(field) {
            parts.push(value);
        }
    }
    match body
        .get("messages")
        .or_else(|| body.get("input"))
        .or_else(|| body.get("contents"))
    {
        Some(Value::Array(items)) => parts.extend(items.iter()),
        Some(other) => parts.push(other),
        None => {}
    }
    let mut hasher = DefaultHasher::new();
    let mut bytes = 0u64;
    parts
        .into_iter()
        .map(|part| {
            let text = part.to_string();
            text.hash(&mut hasher);
            bytes += text.len() as u64;
            (hasher.finish(), bytes)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn turn(history: &[&str]) -> Value {
        let messages: Vec<Value> = history
            .iter()
            .map(|text| json!({"role": "user", "content": text}))
            .collect();
        json!({"model": "m", "system": "s".repeat(4000), "messages": messages})
    }

    #[test]
    fn a_key_reads_what_it_saw_and_another_key_does_not() {
        let mut caches = PromptCaches::default();
        let first = caches.serve("a", &turn(&["q1"]));
        assert_eq!(first.read, 0);
        assert!(first.written >= 1000, "{first:?}");
        let second = caches.serve("a", &turn(&["q1", "a1", "q2"]));
        assert!(second.read >= 1000, "{second:?}");
        let elsewhere = caches.serve("b", &turn(&["q1", "a1", "q2"]));
        assert_eq!(elsewhere.read, 0);
    }
}
