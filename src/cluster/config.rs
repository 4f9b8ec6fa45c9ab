//! `[cluster]` (contract): the Redis that nodes share (one server, TLS, or a Redis Cluster;
//! `ca_file` adds trusted roots for TLS), this node's id and the lease size.
//! Absent: one node, exactly as without this module. Validation names the key of every error;
//! the URL's password (if any) is never repeated in a message.

use std::path::PathBuf;

use serde::Deserialize;

use crate::cluster::target;

/// `lease_size` when absent.
pub const DEFAULT_LEASE_SIZE: u64 = 10;

/// The raw `[cluster]` table: every key optional, unknown keys denied.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub redis_url: Option<String>,
    pub ca_file: Option<String>,
    pub node_id: Option<String>,
    pub lease_size: Option<u64>,
}

/// The validated `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `redis://host:port[/db]` (or `rediss://`, `redis+unix://`, `redis+cluster://h1,h2`,
    /// `rediss+cluster://…`).
    pub redis_url: String,
    /// PEM roots trusted for `rediss` besides the system's (a managed Redis' private CA).
    pub ca_file: Option<PathBuf>,
    /// Names this node in the shared stream and in peers' journals.
    pub node_id: String,
    /// Units (requests or tokens) a node takes from a shared quota counter at a time.
    pub lease_size: u64,
}

/// Validates `raw`, reporting each problem through `push(key, reason)`.
pub fn build(raw: RawCluster, push: &mut dyn FnMut(&str, String)) -> ClusterConfig {
    let redis_url = match raw.redis_url {
        None => {
            push("cluster.redis_url", "is required in [cluster]".to_owned());
            String::new()
        }
        Some(url) => {
            if let Err(reason) = target::parse(&url) {
                push("cluster.redis_url", reason);
            }
            url
        }
    };
    let ca_file = raw.ca_file.map(PathBuf::from);
    if let Some(path) = &ca_file {
        if let Err(reason) = crate::tls_files::read_certificates(path) {
            push("cluster.ca_file", reason);
        }
    }
    let node_id = match raw.node_id {
        Some(id)
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
        {
            push(
                "cluster.node_id",
                format!("`{id}` must be non-empty letters, digits, `-`, `_` or `.`"),
            );
            id
        }
        Some(id) => id,
        None => default_node_id(),
    };
    let lease_size = match raw.lease_size {
        Some(0) => {
            push("cluster.lease_size", "must be at least 1".to_owned());
            DEFAULT_LEASE_SIZE
        }
        Some(size) => size,
        None => DEFAULT_LEASE_SIZE,
    };
    ClusterConfig {
        redis_url,
        ca_file,
        node_id,
        lease_size,
    }
}

/// `<host name>-<pid>`: unique per process, but new at every restart (set `node_id` to keep
/// one identity across restarts).
fn default_node_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".to_owned());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(raw: RawCluster) -> (ClusterConfig, Vec<(String, String)>) {
        let mut found = Vec::new();
        let config = build(raw, &mut |key, reason| found.push((key.to_owned(), reason)));
        (config, found)
    }

    #[test]
    fn s9_cluster_keys_are_validated_by_name() {
        let (config, found) = errors(RawCluster {
            redis_url: Some("redis://127.0.0.1:6379".into()),
            ca_file: None,
            node_id: Some("node-a".into()),
            lease_size: Some(5),
        });
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(config.node_id, "node-a");
        assert_eq!(config.lease_size, 5);

        let (_, found) = errors(RawCluster {
            redis_url: Some("http://nope".into()),
            ca_file: Some("/nonexistent/ca.pem".into()),
            node_id: Some("bad id".into()),
            lease_size: Some(0),
        });
        let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "cluster.redis_url",
                "cluster.ca_file",
                "cluster.node_id",
                "cluster.lease_size"
            ]
        );
        for url in [
            "rediss://:pw@cache.example.com:6380",
            "redis+cluster://10.0.0.1:7000,10.0.0.2:7000",
            "rediss+cluster://:pw@10.0.0.1:7000,10.0.0.2:7000",
        ] {
            let (config, found) = errors(RawCluster {
                redis_url: Some(url.into()),
                ..RawCluster::default()
            });
            assert!(found.is_empty(), "{url}: {found:?}");
            assert_eq!(config.redis_url, url);
        }

        let (config, found) = errors(RawCluster {
            redis_url: None,
            ..RawCluster::default()
        });
        assert_eq!(found[0].0, "cluster.redis_url");
        assert!(config.node_id.ends_with(&std::process::id().to_string()));
        assert_eq!(config.lease_size, DEFAULT_LEASE_SIZE);
    }
}
