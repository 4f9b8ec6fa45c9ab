//! quotaroute: the node (config, HTTP, upstream client, CLI, replay) and the embedding facade.

pub use quotaroute_actors as actors;
pub use quotaroute_journal as journal;

pub mod api_error;
pub mod cli;
pub mod cli_output;
pub mod clients;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod credentials;
pub mod dashboard;
#[cfg(feature = "demo")]
pub mod demo;
pub mod journal_reader;
pub mod journal_verify;
pub mod node;
pub mod replay;
pub mod routes;
pub mod telemetry;
pub mod time_parse;
pub mod timeline;
pub mod tls_files;
pub mod upstream;
pub mod wire;
