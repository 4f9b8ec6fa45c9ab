//! Which Redis `[cluster] redis_url` names and how to reach it: one server (`redis://`,
//! `rediss://` = TLS, `redis+unix://`) or a Redis Cluster (`redis+cluster://h1:p1,h2:p2`,
//! `rediss+cluster://` with TLS), trusting the system's roots plus `[cluster] ca_file`.
//!
//! Owns parsing and building clients only; connecting is `link`'s. No message repeats the
//! URL, so a password in it never reaches a log or an error.

use std::path::Path;

use base64::Engine;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{Client, TlsCertificates};
use rustls::pki_types::CertificateDer;

/// A Redis to connect to: cheap to clone (each task keeps its own connection).
#[derive(Clone)]
pub enum Target {
    Single(Box<Client>),
    Cluster(Box<ClusterClient>),
}

/// The shape of a `redis_url`, before a client is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedUrl {
    /// `redis://…` / `rediss://…` URLs, one per seed node (one for a single server).
    pub nodes: Vec<String>,
    pub cluster: bool,
    pub tls: bool,
}

/// What a wrong `redis_url` looks like, for `cluster.redis_url`'s message.
const EXPECTED: &str = "expected redis://HOST:PORT, rediss://HOST:PORT (TLS) or \
                        redis+cluster://HOST:PORT,HOST:PORT (Redis Cluster)";

/// Splits `url` into its seed nodes. A cluster URL's user and password (before the last `@`)
/// go to every node; a database number is refused there (Redis Cluster has only 0).
pub fn parse(url: &str) -> Result<ParsedUrl, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("not a Redis URL: {EXPECTED}"))?;
    let (base_scheme, cluster) = match scheme {
        "redis" | "rediss" | "redis+unix" | "unix" => (scheme, false),
        "redis+cluster" => ("redis", true),
        "rediss+cluster" => ("rediss", true),
        _ => return Err(format!("unknown scheme `{scheme}`: {EXPECTED}")),
    };
    let tls = base_scheme == "rediss";
    if !cluster {
        Client::open(url).map_err(|_| format!("not a Redis URL: {EXPECTED}"))?;
        return Ok(ParsedUrl {
            nodes: vec![url.to_owned()],
            cluster,
            tls,
        });
    }
    let (userinfo, hosts) = match rest.rsplit_once('@') {
        Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
        None => (String::new(), rest),
    };
    let hosts = hosts.trim_end_matches('/');
    if hosts.contains('/') {
        return Err("a Redis Cluster has only database 0: drop the `/DB` part".to_owned());
    }
    let nodes: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|host| !host.is_empty())
        .map(|host| format!("{base_scheme}://{userinfo}{host}"))
        .collect();
    if nodes.is_empty() {
        return Err(format!("names no node: {EXPECTED}"));
    }
    for node in &nodes {
        Client::open(node.as_str()).map_err(|_| format!("a node is not HOST:PORT: {EXPECTED}"))?;
    }
    Ok(ParsedUrl {
        nodes,
        cluster,
        tls,
    })
}

/// PEM text of the system's roots plus `extra`: given to the redis crate as its trust, which
/// otherwise replaces the system's roots with the file (providers' rule: both are trusted).
fn trust_pem(extra: &[CertificateDer<'static>]) -> Vec<u8> {
    let engine = base64::engine::general_purpose::STANDARD;
    let mut pem = String::new();
    for certificate in crate::upstream::egress::system_roots().iter().chain(extra) {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = engine.encode(certificate.as_ref());
        for line in body.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    pem.into_bytes()
}

/// The client for `url`, trusting the system's roots plus the certificates of `ca_file`.
pub fn build(url: &str, ca_file: Option<&Path>) -> Result<Target, String> {
    let parsed = parse(url)?;
    let extra = match ca_file {
        Some(path) => crate::tls_files::read_certificates(path)?,
        None => Vec::new(),
    };
    let certificates = || TlsCertificates {
        client_tls: None,
        root_cert: Some(trust_pem(&extra)),
    };
    let failed =
        |error: redis::RedisError| format!("cannot use this Redis URL: {:?}", error.kind());
    if parsed.cluster {
        // A few quick retries (a redirection, a moved slot); a shard that is down is the
        // link's timeout to report, not a wait of minutes (the crate's default backoff).
        let mut builder = ClusterClientBuilder::new(parsed.nodes.iter().map(String::as_str))
            .retries(3)
            .min_retry_wait(10)
            .max_retry_wait(200);
        if parsed.tls {
            builder = builder.certs(certificates());
        }
        return builder
            .build()
            .map(|client| Target::Cluster(Box::new(client)))
            .map_err(failed);
    }
    let client = if parsed.tls {
        Client::build_with_tls(url, certificates())
    } else {
        Client::open(url)
    };
    client
        .map(|client| Target::Single(Box::new(client)))
        .map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s9_single_tls_and_cluster_urls_parse_into_their_nodes() {
        let single = parse("redis://127.0.0.1:6379").unwrap();
        assert_eq!((single.cluster, single.tls), (false, false));
        let tls = parse("rediss://:secret@cache.example.com:6380/0").unwrap();
        assert_eq!((tls.cluster, tls.tls), (false, true));
        let cluster = parse("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001").unwrap();
        assert!(cluster.cluster && !cluster.tls);
        assert_eq!(
            cluster.nodes,
            ["redis://:pw@10.0.0.1:7000", "redis://:pw@10.0.0.2:7001"]
        );
        let tls_cluster = parse("rediss+cluster://h1:7000,h2:7000/").unwrap();
        assert!(tls_cluster.cluster && tls_cluster.tls);
        assert_eq!(tls_cluster.nodes, ["rediss://h1:7000", "rediss://h2:7000"]);
    }

    #[test]
    fn s9_bad_urls_are_refused_without_repeating_the_password() {
        for url in [
            "http://h:1",
            "nope",
            "redis+cluster://",
            "redis+cluster://:hunter2@h1:7000/3",
            "memcached://:hunter2@h:1",
        ] {
            let error = parse(url).unwrap_err();
            assert!(!error.contains("hunter2"), "{url}: {error}");
        }
    }

    #[test]
    fn s9_tls_trust_is_the_system_roots_plus_the_ca_file() {
        let extra = CertificateDer::from(vec![1u8, 2, 3]);
        let pem = String::from_utf8(trust_pem(std::slice::from_ref(&extra))).unwrap();
        let count = pem.matches("BEGIN CERTIFICATE").count();
        assert_eq!(count, crate::upstream::egress::system_roots().len() + 1);
        assert!(pem.ends_with("AQID\n-----END CERTIFICATE-----\n"), "{pem}");
        assert!(build("rediss+cluster://127.0.0.1:1,127.0.0.1:2", None).is_ok());
        assert!(build("rediss://127.0.0.1:1", None).is_ok());
    }
}
