//! The client key a connection last presented and the client it was found to be, so the
//! connection's next requests with the same key are identified without hashing it again
//! (`clients::identity` hashes every presented key with SHA-256 to look it up).
//!
//! Held by one client connection and dropped with it; never logged or shown (`Debug` prints
//! no key). A key is remembered only once the config's directory found it, for the config
//! that found it: after a reload the next request looks its key up again. The comparison with
//! a remembered key is constant-time over its bytes.

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};

/// One connection's remembered key (shared by the requests of an HTTP/2 connection).
#[derive(Default)]
pub struct KnownKey {
    known: Mutex<Option<Known>>,
}

struct Known {
    key: Box<[u8]>,
    /// The config whose directory found the key (a `LiveConfig`): its allocation, kept so its
    /// address stays its own while remembered.
    config: Weak<dyn Any + Send + Sync>,
    client: usize,
}

impl std::fmt::Debug for KnownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KnownKey(***)")
    }
}

impl KnownKey {
    /// The client owning `key` under `live` (the config): the remembered one when `key` is the
    /// key this connection presented last under the same config, else `look_up`'s answer
    /// (remembered when it names a client).
    pub fn client<C: Any + Send + Sync>(
        &self,
        live: &Arc<C>,
        key: &str,
        look_up: impl FnOnce(&str) -> Option<usize>,
    ) -> Option<usize> {
        let Ok(mut known) = self.known.lock() else {
            return look_up(key);
        };
        if let Some(known) = known.as_ref() {
            let same_config =
                std::ptr::eq(known.config.as_ptr().cast::<()>(), Arc::as_ptr(live).cast());
            if same_config && constant_time_eq::constant_time_eq(&known.key, key.as_bytes()) {
                return Some(known.client);
            }
        }
        let client = look_up(key)?;
        *known = Some(Known {
            key: key.as_bytes().into(),
            config: Arc::downgrade(live) as Weak<dyn Any + Send + Sync>,
            client,
        });
        Some(client)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// `known.client(config, key)`, and whether the directory was asked.
    fn identify(known: &KnownKey, config: &Arc<u8>, key: &str) -> (Option<usize>, bool) {
        let asked = Cell::new(false);
        let client = known.client(config, key, |key| {
            asked.set(true);
            match key {
                "sk-a" => Some(0),
                "sk-b" => Some(1),
                _ => None,
            }
        });
        (client, asked.get())
    }

    #[test]
    fn the_same_key_under_the_same_config_is_not_looked_up_again() {
        let known = KnownKey::default();
        let config = Arc::new(1);
        assert_eq!(identify(&known, &config, "sk-a"), (Some(0), true));
        assert_eq!(identify(&known, &config, "sk-a"), (Some(0), false));
        // Another key, a wrong one, a prefix: looked up, and a wrong one is not remembered.
        assert_eq!(identify(&known, &config, "sk-b"), (Some(1), true));
        assert_eq!(identify(&known, &config, "sk-x"), (None, true));
        assert_eq!(identify(&known, &config, "sk-"), (None, true));
        assert_eq!(identify(&known, &config, "sk-b"), (Some(1), false));
        // Another config (a reload): looked up again.
        let reloaded = Arc::new(1);
        assert_eq!(identify(&known, &reloaded, "sk-b"), (Some(1), true));
        assert_eq!(identify(&known, &config, "sk-b"), (Some(1), true));
    }

    #[test]
    fn debug_shows_no_key() {
        let known = KnownKey::default();
        let _ = identify(&known, &Arc::new(1), "sk-a");
        assert_eq!(format!("{known:?}"), "KnownKey(***)");
    }
}
