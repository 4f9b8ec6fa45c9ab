//! What selection names a target and a conversation by: [`RoutedTarget`] (one target of a
//! combo as a request holds it) and [`AffinityKey`] (a conversation group as the combo keys
//! it). Plain data, shared by the combo actor, the request's `Decision` and `--what-if`.

use std::sync::Arc;

use quotaroute_journal::ApiFormat;

/// One target as handed to a request: cheap to clone (shared strings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedTarget {
    /// Index in the combo's target list.
    pub index: u16,
    pub connection: Arc<str>,
    pub provider: Arc<str>,
    /// The upstream model to ask for.
    pub model: Arc<str>,
    pub format: ApiFormat,
    pub weight: u32,
}

/// A conversation as the combo keys it: the group's digest (already namespaced by client) and
/// the client, journaled with its binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityKey {
    pub group: u64,
    pub client: Arc<str>,
}
