//! How far this node has read the cluster's shared stream: the last entry id applied, and per
//! origin node the last origin seq applied, so an entry read twice (a republish after a Redis
//! outage, a restart that re-reads) is applied once.
//!
//! Part of the journal's fold (`RouterState`), so it survives restarts exactly like the state
//! it explains. Pure: it never reads Redis.

use std::collections::BTreeMap;

use quotaroute_journal::PeerApplied;
use serde::{Deserialize, Serialize};

/// The shared stream's read position, as the journal rebuilds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerProgress {
    /// The newest stream entry id applied (`None`: never read).
    pub stream_id: Option<String>,
    /// Origin node → the newest of its journal seqs applied here.
    pub origin_seqs: BTreeMap<String, u64>,
}

impl PeerProgress {
    /// Whether `origin`'s event `origin_seq` is new here.
    pub fn is_new(&self, origin: &str, origin_seq: u64) -> bool {
        self.origin_seqs
            .get(origin)
            .is_none_or(|seen| origin_seq > *seen)
    }

    /// Records that `applied` was read (the only mutator).
    pub fn apply(&mut self, applied: &PeerApplied) {
        let seen = self
            .origin_seqs
            .entry(applied.origin_node.clone())
            .or_default();
        *seen = (*seen).max(applied.origin_seq);
        if stream_id_after(&applied.stream_id, self.stream_id.as_deref()) {
            self.stream_id = Some(applied.stream_id.clone());
        }
    }
}

/// Whether Redis stream id `id` (`<ms>-<n>`) comes after `current`.
pub fn stream_id_after(id: &str, current: Option<&str>) -> bool {
    let Some(current) = current else {
        return true;
    };
    parse_stream_id(id) > parse_stream_id(current)
}

fn parse_stream_id(id: &str) -> (u64, u64) {
    let (ms, n) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), n.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use quotaroute_journal::Event;

    use super::*;

    fn applied(origin: &str, seq: u64, stream_id: &str) -> PeerApplied {
        PeerApplied {
            origin_node: origin.into(),
            origin_seq: seq,
            origin_at_ms: 1,
            stream_id: stream_id.into(),
            event: Box::new(Event::NodeStopped(quotaroute_journal::NodeStopped {
                reason: "x".into(),
                uptime_ms: 0,
            })),
        }
    }

    #[test]
    fn s9_each_origin_seq_is_new_once() {
        let mut progress = PeerProgress::default();
        assert!(progress.is_new("a", 5));
        progress.apply(&applied("a", 5, "1700000000000-3"));
        assert!(!progress.is_new("a", 5));
        assert!(!progress.is_new("a", 4));
        assert!(progress.is_new("a", 6));
        assert!(progress.is_new("b", 1));
    }

    #[test]
    fn s9_stream_ids_compare_as_numbers() {
        let mut progress = PeerProgress::default();
        progress.apply(&applied("a", 1, "1700000000000-10"));
        progress.apply(&applied("a", 2, "1700000000000-9"));
        assert_eq!(progress.stream_id.as_deref(), Some("1700000000000-10"));
        assert!(stream_id_after("1700000000001-0", Some("1700000000000-10")));
        assert!(!stream_id_after("999-0", Some("1700000000000-10")));
    }
}
