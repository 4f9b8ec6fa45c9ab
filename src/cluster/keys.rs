//! The Redis key names the nodes of a cluster share. Only connection ids, node ids and counts
//! are ever written under them: no key, token or upstream message (secrets never reach Redis).

/// The stream of every node's shared state changes (`XADD … MAXLEN ~`).
pub const STREAM: &str = "qr:events";
/// Entries kept in the stream at most (approximately): a node away for longer than this many
/// changes catches up from its own journal only.
pub const STREAM_MAX_LEN: u64 = 100_000;
/// Sorted set: node id → the last time (Unix ms) it said it was alive.
pub const NODES: &str = "qr:nodes";
/// A node is listed among the peers when it was alive within this much.
pub const PEER_ALIVE_MS: u64 = 10_000;

/// The last journal seq `node` published (it resumes after it on restart).
pub fn published(node: &str) -> String {
    format!("qr:published:{node}")
}

/// The prefix of one shared quota counter of `connection` for `limit` (`requests_5h`,
/// `tokens_7d:<model>`, …); the time bin's number follows it.
pub fn usage_prefix(connection: &str, limit: &str) -> String {
    format!("qr:usage:{connection}:{limit}:")
}
