//! One window of a client's usage as `/admin/clients` shows it, on this node or summed across
//! the cluster.

use serde::Serialize;

/// One window of `/admin/clients`' `usage`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageView {
    pub window: &'static str,
    pub used: u64,
    pub limit: Option<u64>,
}
