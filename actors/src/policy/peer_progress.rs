//! How far this node has applied the cluster's shared stream: per origin node and connection,
//! the last origin seq applied and its stream entry id. An entry read twice (a republish after
//! a Redis outage, a restart that re-reads) is applied once.
//!
//! Kept per connection because that is the order the journal keeps: peers' events go to their
//! connections' actors, so the journal interleaves connections but keeps each one's events in
//! stream order, and a crash loses a suffix of each — so each (origin, connection) mark is
//! exact after a restart, and the stream is re-read from the oldest mark. A peer's
//! conversation binding goes to its combo's actor instead, so it has its own lane
//! (`affinity:<combo>`, see [`lane`]): one combo journals its peer bindings in stream order.
//!
//! Part of the journal's fold (`RouterState`), so it survives restarts exactly like the state
//! it explains. Pure: it never reads Redis.

use std::borrow::Cow;
use std::collections::BTreeMap;

use quotaroute_journal::{Event, PeerApplied};
use serde::{Deserialize, Serialize};

/// No journal reaches this seq (2^48: nine years of a million events a second). A mark at or
/// above it came from a forged entry applied before the tail bounded seqs (issue #34: one
/// `seq = u64::MAX` muted an origin's later events about a connection for good, and was
/// journaled): such a mark is ignored, so it mutes nothing, and the next sane one replaces it.
pub const SEQ_NEVER_REACHED: u64 = 1 << 48;

/// The newest applied event of one origin about one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerMark {
    pub origin_seq: u64,
    pub stream_id: String,
}

/// The shared stream's read position, as the journal rebuilds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerProgress {
    /// Origin node → connection → its newest applied event.
    pub marks: BTreeMap<String, BTreeMap<String, PeerMark>>,
}

impl PeerProgress {
    /// Whether `origin`'s event `origin_seq` about `connection` is new here.
    pub fn is_new(&self, origin: &str, connection: &str, origin_seq: u64) -> bool {
        self.marks
            .get(origin)
            .and_then(|by_connection| by_connection.get(connection))
            .is_none_or(|mark| origin_seq > mark.origin_seq || mark.origin_seq >= SEQ_NEVER_REACHED)
    }

    /// Records that `applied` was applied (the only mutator).
    pub fn apply(&mut self, applied: &PeerApplied) {
        let lane = lane(&applied.event);
        let by_connection = self.marks.entry(applied.origin_node.clone()).or_default();
        let mark = match by_connection.get_mut(&*lane) {
            Some(mark) => mark,
            None => by_connection.entry(lane.into_owned()).or_default(),
        };
        if applied.origin_seq >= mark.origin_seq || mark.origin_seq >= SEQ_NEVER_REACHED {
            mark.origin_seq = applied.origin_seq;
            mark.stream_id.clone_from(&applied.stream_id);
        }
    }

    /// Where a restarted node reads the stream from: the oldest mark (entries after it that
    /// were applied already are passed over by [`PeerProgress::is_new`]); `None`: the start.
    pub fn resume_from(&self) -> Option<String> {
        self.marks
            .values()
            .flat_map(|by_connection| by_connection.values())
            .map(|mark| mark.stream_id.as_str())
            .min_by_key(|id| parse_stream_id(id))
            .map(str::to_owned)
    }
}

/// The actor whose journal order a peer's `event` follows, as the key of its mark: its
/// connection, or `affinity:<combo>` for a conversation binding (applied by the combo).
pub fn lane(event: &Event) -> Cow<'_, str> {
    match event {
        Event::AffinityBound(bound) => Cow::Owned(format!("affinity:{}", bound.combo)),
        other => Cow::Borrowed(other.connection().unwrap_or_default()),
    }
}

/// A Redis stream id `<ms>-<n>` as numbers (malformed parts read as 0).
pub fn parse_stream_id(id: &str) -> (u64, u64) {
    let (ms, n) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), n.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use quotaroute_journal::testkit::succeeded;

    use super::*;

    fn applied(origin: &str, connection: &str, seq: u64, stream_id: &str) -> PeerApplied {
        PeerApplied {
            origin_node: origin.into(),
            origin_seq: seq,
            origin_at_ms: 1,
            stream_id: stream_id.into(),
            event: Box::new(succeeded("openai", connection, "m", 1, 1)),
        }
    }

    #[test]
    fn s9_each_origin_seq_is_new_once_per_connection() {
        let mut progress = PeerProgress::default();
        assert!(progress.is_new("a", "k1", 5));
        progress.apply(&applied("a", "k1", 5, "100-3"));
        assert!(!progress.is_new("a", "k1", 5));
        assert!(!progress.is_new("a", "k1", 4));
        assert!(progress.is_new("a", "k1", 6));
        assert!(progress.is_new("b", "k1", 1));
        // The journal may hold a later event of another connection first.
        progress.apply(&applied("a", "k2", 9, "100-7"));
        assert!(progress.is_new("a", "k1", 6), "k1's own order decides");
    }

    #[test]
    fn a_forged_mark_journaled_before_seqs_were_bounded_mutes_nothing() {
        let mut progress = PeerProgress::default();
        progress.apply(&applied("a", "k1", 5, "100-1"));
        progress.apply(&applied("a", "k1", u64::MAX, "100-2"));
        assert!(
            progress.is_new("a", "k1", 6),
            "the origin's next event applies"
        );
        progress.apply(&applied("a", "k1", 6, "100-3"));
        assert_eq!(progress.marks["a"]["k1"].origin_seq, 6);
        assert!(!progress.is_new("a", "k1", 6));
    }

    #[test]
    fn s9_a_restart_resumes_at_the_oldest_mark() {
        let mut progress = PeerProgress::default();
        assert_eq!(progress.resume_from(), None);
        progress.apply(&applied("a", "k1", 1, "1700000000000-10"));
        progress.apply(&applied("a", "k2", 2, "1700000000000-9"));
        progress.apply(&applied("b", "k1", 1, "1700000000001-0"));
        assert_eq!(progress.resume_from().as_deref(), Some("1700000000000-9"));
        assert!(parse_stream_id("1700000000001-0") > parse_stream_id("1700000000000-10"));
    }
}
