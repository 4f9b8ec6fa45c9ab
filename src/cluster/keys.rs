//! The Redis key names the nodes of a cluster share. Only connection ids, node ids and counts
//! are ever written under them: no key, token or upstream message (secrets never reach Redis).
//!
//! On a Redis Cluster every pipeline and every Lua script touches keys of one hash slot only:
//! a node's publish mark carries the stream's name as its hash tag (`{qr:events}`), and one
//! connection's quota counters share the tag `{usage:<connection>}`, one client's the tag
//! `{client:<id>}`.

/// The stream of every node's shared state changes (`XADD … MAXLEN ~`).
pub const STREAM: &str = "qr:events";
/// Entries kept in the stream at most (approximately): a node away for longer than this many
/// changes catches up from its own journal only.
pub const STREAM_MAX_LEN: u64 = 100_000;
/// Sorted set: node id → the last time (Unix ms) it said it was alive.
pub const NODES: &str = "qr:nodes";
/// A node is listed among the peers when it was alive within this much.
pub const PEER_ALIVE_MS: u64 = 10_000;

/// The last journal seq `node` published (it resumes after it on restart); in the stream's
/// hash slot, so the `XADD`s and the mark go in one pipeline.
pub fn published(node: &str) -> String {
    format!("{{{STREAM}}}:published:{node}")
}

/// The prefix of one shared quota counter of `connection` for `limit` (`requests_5h`,
/// `tokens_7d:<model>`, …); the time bin's number follows it. The hash tag starts with
/// `usage:`, so it is never empty, and is the same for every key of one connection.
pub fn usage_prefix(connection: &str, limit: &str) -> String {
    format!("qr:{{usage:{connection}}}:{limit}:")
}

/// The prefix of one shared counter of `client` for `limit` (`requests_per_min`, …,
/// `budget_usd`); `g:<bin>` (units granted) or `s:<bin>` (units spent) follows it. One
/// client's keys share the hash tag `{client:<id>}`, so one Lua script may touch them all.
pub fn client_prefix(client: &str, limit: &str) -> String {
    format!("qr:{{client:{client}}}:{limit}:")
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::Slot;

    #[test]
    fn s9_keys_used_together_share_one_hash_slot() {
        let stream = Slot::for_key(STREAM);
        for node in ["node-a", "n}b", "{x}"] {
            assert_eq!(Slot::for_key(published(node)), stream, "{node}");
        }
        for connection in ["oa-1", "an-2", "odd}id", "{", "}"] {
            let slots: Vec<Slot> = ["requests_5h", "tokens_7d:gpt-{4o}"]
                .iter()
                .flat_map(|limit| {
                    let prefix = usage_prefix(connection, limit);
                    (0..168u64).map(move |bin| Slot::for_key(format!("{prefix}{bin}")))
                })
                .collect();
            assert!(
                slots.iter().all(|slot| *slot == slots[0]),
                "{connection}: {slots:?}"
            );
        }
        for client in ["team-a", "odd}id", "{", "}", ""] {
            let slots: Vec<Slot> = ["requests_per_min", "budget_usd"]
                .iter()
                .flat_map(|limit| {
                    let prefix = client_prefix(client, limit);
                    (0..24u64).flat_map(move |bin| {
                        [
                            Slot::for_key(format!("{prefix}g:{bin}")),
                            Slot::for_key(format!("{prefix}s:{bin}")),
                        ]
                    })
                })
                .collect();
            assert!(slots.iter().all(|slot| *slot == slots[0]), "{client}");
        }
        assert_ne!(
            Slot::for_key(usage_prefix("oa-1", "requests_5h")),
            Slot::for_key(usage_prefix("oa-2", "requests_5h")),
            "connections spread over the shards"
        );
    }
}
