//! The router's own store of kept Responses (`[responses] store = true`, behaviour §14): each
//! translated Responses answer the router kept, with its input items, owned by the client that
//! made it (§11), bounded by bytes (oldest evicted first) and by age (`ttl_days`).
//!
//! Layout: its own sled database beside the journal (`<journal.path>.responses`), never in
//! the journal (which holds only `response_stored` / `response_deleted` metadata) and never in
//! logs. Two trees:
//! - `kept`: response id → the kept response as JSON ([`KeptResponse`]);
//! - `by_age`: `created_ms` (8 bytes, big-endian) ++ id → its size (8 bytes, big-endian) ++ its
//!   client, so eviction and expiry walk oldest first without reading the content, and the
//!   total is summed from this tree alone when the store opens.
//!
//! A response is written to `by_age` before `kept`: a crash between the two leaves an entry
//! whose content is missing, which eviction and expiry drop like any.
//!
//! Pure of time: every call that judges age takes `now_ms`.

use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Page cache of the store's sled database: kept responses are written once and read on the
/// next turn; the disk holds the rest.
const CACHE_BYTES: u64 = 8 * 1024 * 1024;
/// How often sled writes what it holds to disk.
const FLUSH_EVERY_MS: u64 = 500;

/// The store's bounds (`[responses] max_bytes`, `ttl_days`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreBounds {
    pub max_bytes: u64,
    pub ttl_ms: u64,
}

/// One kept response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptResponse {
    /// The client it belongs to (behaviour §11); another client is told it does not exist.
    pub client: String,
    /// The connection that served it (its sealed reasoning items open only there).
    pub connection: String,
    pub created_ms: u64,
    pub expires_ms: u64,
    /// The Responses object as the client was given it.
    pub response: Value,
    /// Its input items: the conversation before it (earlier turns' input and output, when it
    /// continued one) and its own input, oldest first.
    pub input_items: Vec<Value>,
    /// The first response of the chain it continues (its own id when it continues none): the
    /// chain's turns keep to one connection where they can (behaviour §10).
    #[serde(default)]
    pub chain: String,
}

/// Why a kept response left the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Its client deleted it.
    Client,
    /// Past `ttl_days`.
    Expired,
    /// Over `max_bytes`: the oldest go first.
    Evicted,
}

impl Removal {
    /// The journal's word for it (`response_deleted.reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            Removal::Client => "client",
            Removal::Expired => "expired",
            Removal::Evicted => "evicted",
        }
    }
}

/// A kept response that left the store (to journal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub id: String,
    pub client: String,
    pub reason: Removal,
}

/// What a store operation could not do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("response store: {0}")]
    Sled(#[from] sled::Error),
    #[error("response store: a kept response is not readable: {0}")]
    Encoding(#[from] serde_json::Error),
    #[error("response of {bytes} bytes is larger than the store's max_bytes ({max_bytes})")]
    TooLarge { bytes: u64, max_bytes: u64 },
    #[error("response store: a writer panicked")]
    Poisoned,
}

/// The store. Writes are serialized (one lock around the total and the two trees); reads are
/// sled's own.
pub struct ResponseStore {
    db: sled::Db,
    kept: sled::Tree,
    by_age: sled::Tree,
    bounds: StoreBounds,
    /// Bytes held, summed from `by_age`.
    total: Mutex<u64>,
}

impl std::fmt::Debug for ResponseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStore")
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}

impl ResponseStore {
    /// Opens (or makes) the store at `path`; `None`: in memory only (tests).
    pub fn open(path: Option<&Path>, bounds: StoreBounds) -> Result<Self, StoreError> {
        let config = sled::Config::new()
            .cache_capacity(CACHE_BYTES)
            .flush_every_ms(Some(FLUSH_EVERY_MS));
        let config = match path {
            Some(path) => config.path(path),
            None => config.temporary(true),
        };
        let db = config.open()?;
        let kept = db.open_tree("kept")?;
        let by_age = db.open_tree("by_age")?;
        let mut total = 0u64;
        for entry in by_age.iter() {
            let (_, value) = entry?;
            total = total.saturating_add(age_entry(&value).0);
        }
        Ok(ResponseStore {
            db,
            kept,
            by_age,
            bounds,
            total: Mutex::new(total),
        })
    }

    /// The store's path for a journal at `journal_path`: beside it.
    pub fn path_beside(journal_path: &Path) -> std::path::PathBuf {
        let mut name = journal_path.as_os_str().to_owned();
        name.push(".responses");
        std::path::PathBuf::from(name)
    }

    pub fn bounds(&self) -> StoreBounds {
        self.bounds
    }

    /// Bytes held now.
    pub fn total_bytes(&self) -> u64 {
        self.total.lock().map_or(0, |total| *total)
    }

    /// Keeps `kept` under `id` (replacing one of the same id), after dropping what expired by
    /// `now_ms` and evicting the oldest while the store would be over `max_bytes`. Returns the
    /// bytes it takes and what left the store.
    pub fn put(
        &self,
        id: &str,
        kept: &KeptResponse,
        now_ms: u64,
    ) -> Result<(u64, Vec<Removed>), StoreError> {
        let content = serde_json::to_vec(kept)?;
        let bytes = (content.len() + id.len()) as u64;
        if bytes > self.bounds.max_bytes {
            return Err(StoreError::TooLarge {
                bytes,
                max_bytes: self.bounds.max_bytes,
            });
        }
        let mut total = self.total.lock().map_err(|_| StoreError::Poisoned)?;
        let mut removed = self.expire_locked(&mut total, now_ms)?;
        if let Some(old) = self.kept.get(id)? {
            let old: KeptResponse = serde_json::from_slice(&old)?;
            self.remove_locked(&mut total, id, old.created_ms)?;
        }
        while *total + bytes > self.bounds.max_bytes {
            let Some((key, value)) = self.by_age.first()? else {
                break;
            };
            let (_, client) = age_entry(&value);
            let id = key_id(&key);
            self.remove_locked(&mut total, &id, key_created(&key))?;
            removed.push(Removed {
                id,
                client,
                reason: Removal::Evicted,
            });
        }
        let mut age_value = bytes.to_be_bytes().to_vec();
        age_value.extend_from_slice(kept.client.as_bytes());
        self.by_age
            .insert(age_key(kept.created_ms, id), age_value)?;
        self.kept.insert(id.as_bytes(), content)?;
        *total += bytes;
        Ok((bytes, removed))
    }

    /// The kept response `id` when it is `client`'s and has not expired by `now_ms`; `None`
    /// otherwise, alike whether it never existed, expired or is another client's.
    pub fn get(
        &self,
        id: &str,
        client: &str,
        now_ms: u64,
    ) -> Result<Option<KeptResponse>, StoreError> {
        let Some(content) = self.kept.get(id)? else {
            return Ok(None);
        };
        let kept: KeptResponse = serde_json::from_slice(&content)?;
        Ok((kept.client == client && kept.expires_ms > now_ms).then_some(kept))
    }

    /// Deletes `client`'s kept response `id`; whether there was one (another client's, or an
    /// expired one, is not).
    pub fn delete(&self, id: &str, client: &str, now_ms: u64) -> Result<bool, StoreError> {
        let mut total = self.total.lock().map_err(|_| StoreError::Poisoned)?;
        let Some(kept) = self.get(id, client, now_ms)? else {
            return Ok(false);
        };
        self.remove_locked(&mut total, id, kept.created_ms)?;
        Ok(true)
    }

    /// Drops every kept response expired by `now_ms`.
    pub fn expire(&self, now_ms: u64) -> Result<Vec<Removed>, StoreError> {
        let mut total = self.total.lock().map_err(|_| StoreError::Poisoned)?;
        self.expire_locked(&mut total, now_ms)
    }

    /// Writes what the store holds to disk (the node stops).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }

    /// Oldest first, while they are expired (or their content is gone): `ttl_days` is one
    /// length for all, so the first one alive ends the walk.
    fn expire_locked(&self, total: &mut u64, now_ms: u64) -> Result<Vec<Removed>, StoreError> {
        let mut removed = Vec::new();
        for entry in self.by_age.iter() {
            let (key, value) = entry?;
            let id = key_id(&key);
            let expired = match self.kept.get(id.as_bytes())? {
                Some(content) => {
                    let kept: KeptResponse = serde_json::from_slice(&content)?;
                    kept.expires_ms <= now_ms
                }
                None => true,
            };
            if !expired {
                break;
            }
            let (_, client) = age_entry(&value);
            self.remove_locked(total, &id, key_created(&key))?;
            removed.push(Removed {
                id,
                client,
                reason: Removal::Expired,
            });
        }
        Ok(removed)
    }

    fn remove_locked(&self, total: &mut u64, id: &str, created_ms: u64) -> Result<(), StoreError> {
        self.kept.remove(id.as_bytes())?;
        if let Some(value) = self.by_age.remove(age_key(created_ms, id))? {
            *total = total.saturating_sub(age_entry(&value).0);
        }
        Ok(())
    }
}

fn age_key(created_ms: u64, id: &str) -> Vec<u8> {
    let mut key = created_ms.to_be_bytes().to_vec();
    key.extend_from_slice(id.as_bytes());
    key
}

fn key_created(key: &[u8]) -> u64 {
    key.get(..8)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .map_or(0, u64::from_be_bytes)
}

fn key_id(key: &[u8]) -> String {
    String::from_utf8_lossy(key.get(8..).unwrap_or_default()).into_owned()
}

/// `(bytes, client)` of a `by_age` value.
fn age_entry(value: &[u8]) -> (u64, String) {
    let bytes = value
        .get(..8)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
        .map_or(0, u64::from_be_bytes);
    let client = String::from_utf8_lossy(value.get(8..).unwrap_or_default()).into_owned();
    (bytes, client)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DAY: u64 = 24 * 3600 * 1000;

    fn kept(client: &str, created_ms: u64, text: &str) -> KeptResponse {
        KeptResponse {
            client: client.into(),
            connection: "an-1".into(),
            created_ms,
            expires_ms: created_ms + 30 * DAY,
            response: json!({"id": "x", "object": "response", "output": [{"text": text}]}),
            input_items: vec![json!({"type": "message", "role": "user", "content": text})],
            chain: "resp_qrt_root".into(),
        }
    }

    fn store(max_bytes: u64) -> ResponseStore {
        ResponseStore::open(
            None,
            StoreBounds {
                max_bytes,
                ttl_ms: 30 * DAY,
            },
        )
        .unwrap()
    }

    #[test]
    fn a_kept_response_is_its_clients_only() {
        let store = store(1 << 20);
        store
            .put("resp_qrt_a", &kept("alice", 1_000, "hi"), 1_000)
            .unwrap();
        let got = store.get("resp_qrt_a", "alice", 2_000).unwrap().unwrap();
        assert_eq!(got, kept("alice", 1_000, "hi"));
        assert_eq!(store.get("resp_qrt_a", "bob", 2_000).unwrap(), None);
        assert_eq!(store.get("resp_qrt_nope", "alice", 2_000).unwrap(), None);
        // Bob cannot delete it either; Alice can, once.
        assert!(!store.delete("resp_qrt_a", "bob", 2_000).unwrap());
        assert!(store.get("resp_qrt_a", "alice", 2_000).unwrap().is_some());
        assert!(store.delete("resp_qrt_a", "alice", 2_000).unwrap());
        assert!(!store.delete("resp_qrt_a", "alice", 2_000).unwrap());
        assert_eq!(store.total_bytes(), 0);
    }

    #[test]
    fn the_oldest_are_evicted_past_max_bytes() {
        let one = serde_json::to_vec(&kept("alice", 1_000, "0123456789"))
            .unwrap()
            .len() as u64
            + "resp_qrt_0".len() as u64;
        // Room for three.
        let store = store(3 * one + one / 2);
        for n in 0..3u64 {
            let (bytes, removed) = store
                .put(
                    &format!("resp_qrt_{n}"),
                    &kept("alice", 1_000 + n, "0123456789"),
                    1_000 + n,
                )
                .unwrap();
            assert_eq!((bytes, removed.len()), (one, 0));
        }
        let (_, removed) = store
            .put("resp_qrt_3", &kept("bobby", 1_003, "0123456789"), 1_003)
            .unwrap();
        assert_eq!(
            removed,
            vec![Removed {
                id: "resp_qrt_0".into(),
                client: "alice".into(),
                reason: Removal::Evicted
            }]
        );
        assert_eq!(store.get("resp_qrt_0", "alice", 1_004).unwrap(), None);
        assert!(store.get("resp_qrt_1", "alice", 1_004).unwrap().is_some());
        assert!(store.get("resp_qrt_3", "bobby", 1_004).unwrap().is_some());
        assert_eq!(store.total_bytes(), 3 * one);
        // One larger than the whole store is refused and evicts nothing.
        let huge = kept("alice", 2_000, &"x".repeat(4 * one as usize));
        assert!(matches!(
            store.put("resp_qrt_big", &huge, 2_000),
            Err(StoreError::TooLarge { .. })
        ));
        assert_eq!(store.total_bytes(), 3 * one);
    }

    #[test]
    fn expired_responses_are_gone() {
        let store = store(1 << 20);
        store
            .put("resp_qrt_old", &kept("alice", 0, "a"), 0)
            .unwrap();
        store
            .put("resp_qrt_new", &kept("alice", DAY, "b"), DAY)
            .unwrap();
        // Past its ttl an expired one is not served, before any sweep.
        let later = 30 * DAY;
        assert_eq!(store.get("resp_qrt_old", "alice", later).unwrap(), None);
        assert!(store.get("resp_qrt_new", "alice", later).unwrap().is_some());
        let removed = store.expire(later).unwrap();
        assert_eq!(
            removed,
            vec![Removed {
                id: "resp_qrt_old".into(),
                client: "alice".into(),
                reason: Removal::Expired
            }]
        );
        assert!(store.expire(later).unwrap().is_empty());
        // A put sweeps too.
        let (_, removed) = store
            .put("resp_qrt_next", &kept("bob", 31 * DAY, "c"), 31 * DAY)
            .unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].id, "resp_qrt_new");
    }

    #[test]
    fn the_store_and_its_total_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = ResponseStore::path_beside(&dir.path().join("journal"));
        assert!(path.ends_with("journal.responses"));
        let bounds = StoreBounds {
            max_bytes: 1 << 20,
            ttl_ms: 30 * DAY,
        };
        let total = {
            let store = ResponseStore::open(Some(&path), bounds).unwrap();
            store
                .put("resp_qrt_a", &kept("alice", 5, "kept"), 5)
                .unwrap();
            store.flush().unwrap();
            store.total_bytes()
        };
        let store = ResponseStore::open(Some(&path), bounds).unwrap();
        assert_eq!(store.total_bytes(), total);
        assert_eq!(
            store.get("resp_qrt_a", "alice", 6).unwrap(),
            Some(kept("alice", 5, "kept"))
        );
    }
}
