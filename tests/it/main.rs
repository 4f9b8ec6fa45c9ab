//! The node's integration tests, one binary: the real `quotaroute` binary, the mock upstream,
//! real clients and browsers on loopback. One binary links axum, hyper and reqwest once rather
//! than once per file. Each module is one area (`node_*`, `reliability_*`, `replay_*`, …).

#![expect(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

mod redis_support;
mod reliability_support;
mod replay_support;
mod support;

mod config_errors;
mod config_prime;
mod config_secrets;
mod config_starter;
mod demo_cli;
mod hostile_input;
mod hot_text;
mod journal_verify;
mod mock_compression;
mod mock_endpoints;
mod mock_faults;
mod mock_gemini;
mod node_affinity;
mod node_client_limits;
mod node_clients;
mod node_clients_affinity;
mod node_cluster;
mod node_cluster_affinity;
mod node_cluster_clients;
mod node_cluster_forged_ends;
mod node_cluster_hostile;
mod node_cluster_managed;
mod node_codex_encrypted;
mod node_codex_windows;
mod node_credentials;
mod node_dashboard;
mod node_egress;
mod node_encrypted_caps;
mod node_encrypted_items;
mod node_endpoints;
mod node_every_path;
mod node_fair_queue;
mod node_forecast;
mod node_gemini_clients;
mod node_gemini_cross;
mod node_gemini_native;
mod node_gemini_pool;
mod node_gemini_pool_clients;
mod node_gemini_query_key;
mod node_gemini_signatures;
mod node_guarded_reads;
mod node_header_resets;
mod node_low_ones;
mod node_model_answers;
mod node_money;
mod node_pacing;
mod node_pacing_default;
mod node_papercuts;
mod node_prime;
mod node_read_your_writes;
mod node_refusal_clients;
mod node_responses_store;
mod node_restart;
mod node_route_404;
mod node_routing;
mod node_sdk;
mod node_seal_key;
mod node_spare;
mod node_spent_pool;
mod node_telemetry;
mod node_translate;
mod node_translate_clients;
mod node_translate_host_clients;
mod node_translate_hosts;
mod node_translate_reasoning;
mod node_upgrade;
mod node_web_search;
mod node_wire;
mod readme_commands;
mod release_fixture_make;
mod release_fixtures;
mod reliability_bad_input;
mod reliability_crash;
mod reliability_disk;
mod reliability_faults;
mod reliability_full_disk;
mod reliability_parsers;
mod reliability_secrets;
mod replay_client;
mod replay_fixture;
mod replay_incident;
mod replay_remote;
mod replay_speed;
mod upstream_pool;
