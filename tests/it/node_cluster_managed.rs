//! The three-node cluster scenarios of `node_cluster` on managed-Redis setups (issue #25):
//! a TLS-only `redis-server` whose certificate comes from a private test CA (trusted through
//! `[cluster] ca_file`, on top of the system's roots), and a three-shard Redis Cluster
//! (`redis+cluster://`), where every pipeline and script stays in one hash slot, including a
//! restart of the shard that holds the stream mid-run; and a client's `requests_per_min`
//! across two nodes on the sharded cluster (`node_cluster_clients`).

use crate::node_cluster::{
    a_429_on_one_node_locks_everywhere, a_limit_across_three_nodes_holds, redis_lost_and_back,
    Outage, RedisAt,
};
use crate::redis_support::{RedisCluster, TlsRedis};
use std::time::Duration;

/// The 100 ms of §9 is held on a plain Redis (`node_cluster`). Here every byte to Redis also
/// passes through the test build's unoptimised TLS, or one of three shards, beside the rest of
/// the suite on two cores: these assert that every lock arrives, and a looser latency.
const MANAGED_P95: Duration = Duration::from_millis(500);

fn tls_at(redis: &TlsRedis) -> RedisAt {
    RedisAt {
        url: redis.url(),
        ca_file: Some(redis.ca_file()),
    }
}

fn cluster_at(cluster: &RedisCluster) -> RedisAt {
    RedisAt {
        url: cluster.url(),
        ca_file: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_on_tls_redis_a_429_locks_everywhere_and_a_limit_holds() {
    let redis = TlsRedis::start();
    let at = tls_at(&redis);
    a_429_on_one_node_locks_everywhere(&at, MANAGED_P95).await;
    a_limit_across_three_nodes_holds(&at).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_without_its_ca_file_a_tls_redis_is_down_and_nodes_route_on() {
    let redis = TlsRedis::start();
    let cluster = crate::node_cluster::start_cluster_for_test(&RedisAt {
        url: redis.url(),
        ca_file: None,
    })
    .await;
    let client = reqwest::Client::new();
    let base = &cluster.nodes[0].base;
    let state = crate::support::admin_json(&client, base, "/admin/state").await;
    assert_eq!(state["cluster"]["redis"], "down", "{}", state["cluster"]);
    let response = crate::support::chat(&client, base, "team").await;
    assert_eq!(response.status(), 200);
    // Refused for its certificate (the system does not trust the test CA), and said so.
    let log = cluster.nodes[0].log();
    let refused = log
        .lines()
        .find(|line| line.contains("Redis unreachable"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(refused.to_lowercase().contains("certificate"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_on_a_three_shard_redis_cluster_a_429_locks_everywhere_and_a_limit_holds() {
    let redis = RedisCluster::start();
    let at = cluster_at(&redis);
    a_429_on_one_node_locks_everywhere(&at, MANAGED_P95).await;
    a_limit_across_three_nodes_holds(&at).await;
    // A client's keys share one hash slot: its lease script runs on a sharded Redis too.
    crate::node_cluster_clients::requests_per_min_holds_across_two_nodes(&at).await;
}

/// The shard holding the stream (and every node's publish mark) is killed and restarted
/// empty, as the single Redis is in `node_cluster`.
struct StreamShard<'a> {
    cluster: &'a mut RedisCluster,
    index: usize,
}

impl Outage for StreamShard<'_> {
    fn go_down(&mut self) {
        self.cluster.shards[self.index].kill();
    }

    fn come_back(&mut self) {
        self.cluster.shards[self.index].restart();
        self.cluster.wait_ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_on_a_redis_cluster_a_shard_restart_mid_run_converges() {
    let mut redis = RedisCluster::start();
    let at = cluster_at(&redis);
    let index = redis.shard_of("qr:events");
    redis_lost_and_back(
        &at,
        &mut StreamShard {
            cluster: &mut redis,
            index,
        },
    )
    .await;
}
