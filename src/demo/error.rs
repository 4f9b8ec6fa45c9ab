//! Why the demo could not run: each failure names what to do about it.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot start the simulated upstream on 127.0.0.1: {0}")]
    MockBind(std::io::Error),
    #[error("cannot create the journal directory {path}: {reason}")]
    JournalDir { path: PathBuf, reason: String },
    #[error("the embedded config is invalid (a bug): {0}")]
    Config(String),
    #[error(
        "cannot listen on {addr}: {reason}. Is another quotaroute running there? \
         Pick another address with `quotaroute demo --listen 127.0.0.1:0` (any free port)."
    )]
    ListenBusy { addr: SocketAddr, reason: String },
    #[error("cannot start the node: {0}")]
    Node(String),
    #[error("cannot read the journal at {path}: {reason}")]
    Journal { path: PathBuf, reason: String },
}
