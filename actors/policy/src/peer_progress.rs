//! How far this node has applied the cluster's shared stream: per origin node and connection,
//! the last entry applied (its origin seq and stream entry id). An entry read twice (a restart
//! that re-reads, a republish after a Redis outage) is applied once.
//!
//! Kept per connection because that is the order the journal keeps: peers' events go to their
//! connections' actors, so the journal interleaves connections but keeps each one's events in
//! stream order, and a crash loses a suffix of each — so each (origin, connection) mark is
//! exact after a restart, and the stream is re-read from the oldest mark. A peer's
//! conversation binding goes to its combo's actor instead, so it has its own lane
//! (`affinity:<combo>`, see [`lane`]): one combo journals its peer bindings in stream order.
//!
//! Which entries are new (issue #49: a peer's progress is moved by no one but that peer).
//! Anyone who can write to Redis can write an entry naming any origin and any seq, so a
//! claimed seq proves nothing, and a mark that only lets greater seqs through lets one forged
//! seq mute that origin's real entries about a connection for as long as the forged number is
//! ahead of its journal (issue #34's `u64::MAX`, then issue #49's `2^48 − 1` and a jump just
//! inside the old plausibility bound). What no writer can change is the stream's own order:
//! Redis gives every entry an id greater than every entry before it. So:
//! - an entry the origin sends for the first time (`fresh`, as its publisher marks it) is new
//!   when it comes after the lane's mark in the stream, whatever seq it claims: the origin's
//!   real first sends always come after anything forged before them, so a forged entry can
//!   hold back none of them;
//! - an entry sent again (a republish after a Redis outage, or one from a build that does not
//!   mark first sends) must also carry a greater seq than the mark: it may repeat what was
//!   applied already. A forged high seq can hold back such repeats only until the origin's
//!   next first send on that lane moves the mark back to its real seq;
//! - an entry at or before the mark in the stream was read already (a restart re-reads from
//!   the oldest mark). A Redis that restarted empty has a new stream whose ids say nothing
//!   about the old one: [`PeerProgress::forget_positions`] keeps the seqs and drops the ids.
//!
//! Part of the journal's fold (`RouterState`), so it survives restarts exactly like the state
//! it explains: the fold takes each lane's last journaled entry as its mark, as the live tail
//! does (the journal holds only entries the tail found new). Pure: it never reads Redis.

use std::borrow::Cow;
use std::collections::BTreeMap;

use quotaroute_journal::{Event, PeerApplied};
use serde::{Deserialize, Serialize};

/// No journal reaches this seq (2^48: nine years of a million events a second): an entry
/// claiming one is refused by the tail, and a mark journaled from one before it was (issue
/// #34) lets every later entry of its lane through.
pub const SEQ_NEVER_REACHED: u64 = 1 << 48;

/// The newest applied event of one origin about one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerMark {
    pub origin_seq: u64,
    pub stream_id: String,
}

/// One stream entry as [`PeerProgress::is_new`] weighs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival<'a> {
    pub origin: &'a str,
    /// Its lane ([`lane`]).
    pub lane: &'a str,
    pub origin_seq: u64,
    pub stream_id: &'a str,
    /// Its origin sends it for the first time (not a republish).
    pub fresh: bool,
}

/// The shared stream's read position, as the journal rebuilds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerProgress {
    /// Origin node → connection → its newest applied event.
    pub marks: BTreeMap<String, BTreeMap<String, PeerMark>>,
}

impl PeerProgress {
    /// Whether `entry` is new here (see the module's rules).
    pub fn is_new(&self, entry: &Arrival<'_>) -> bool {
        let Some(mark) = self
            .marks
            .get(entry.origin)
            .and_then(|by_lane| by_lane.get(entry.lane))
        else {
            return true;
        };
        let later_in_stream = parse_stream_id(entry.stream_id) > parse_stream_id(&mark.stream_id);
        let later_seq = entry.origin_seq > mark.origin_seq || mark.origin_seq >= SEQ_NEVER_REACHED;
        later_in_stream && (entry.fresh || later_seq)
    }

    /// Records that `applied` was applied (the only mutator besides
    /// [`PeerProgress::forget_positions`]): it is its lane's mark now.
    pub fn apply(&mut self, applied: &PeerApplied) {
        let lane = lane(&applied.event);
        let by_lane = self.marks.entry(applied.origin_node.clone()).or_default();
        let mark = match by_lane.get_mut(&*lane) {
            Some(mark) => mark,
            None => by_lane.entry(lane.into_owned()).or_default(),
        };
        mark.origin_seq = applied.origin_seq;
        mark.stream_id.clone_from(&applied.stream_id);
    }

    /// The stream was lost (Redis came back empty): its entry ids mean nothing in the new one,
    /// so every mark keeps only its seq, and the new stream is read from its start.
    pub fn forget_positions(&mut self) {
        for mark in self.marks.values_mut().flat_map(BTreeMap::values_mut) {
            mark.stream_id = "0-0".to_owned();
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

    fn arrival<'a>(lane: &'a str, seq: u64, stream_id: &'a str, fresh: bool) -> Arrival<'a> {
        Arrival {
            origin: "a",
            lane,
            origin_seq: seq,
            stream_id,
            fresh,
        }
    }

    #[test]
    fn s9_each_entry_is_new_once_per_connection() {
        let mut progress = PeerProgress::default();
        assert!(progress.is_new(&arrival("k1", 5, "100-3", true)));
        progress.apply(&applied("a", "k1", 5, "100-3"));
        // Read again (a restart re-reads from the oldest mark): not new, however marked.
        for fresh in [true, false] {
            assert!(!progress.is_new(&arrival("k1", 5, "100-3", fresh)));
            assert!(!progress.is_new(&arrival("k1", 4, "100-2", fresh)));
        }
        assert!(progress.is_new(&arrival("k1", 6, "100-4", true)));
        let other = Arrival {
            origin: "b",
            ..arrival("k1", 1, "100-1", true)
        };
        assert!(progress.is_new(&other));
        // The journal may hold a later event of another connection first.
        progress.apply(&applied("a", "k2", 9, "100-7"));
        assert!(
            progress.is_new(&arrival("k1", 6, "100-5", true)),
            "k1's own order decides"
        );
    }

    #[test]
    fn s9_a_republished_entry_is_applied_once() {
        let mut progress = PeerProgress::default();
        progress.apply(&applied("a", "k1", 5, "100-3"));
        // The origin publishes 4..=6 again after a Redis outage: only 6 is new.
        assert!(!progress.is_new(&arrival("k1", 4, "200-0", false)));
        assert!(!progress.is_new(&arrival("k1", 5, "200-1", false)));
        assert!(progress.is_new(&arrival("k1", 6, "200-2", false)));
    }

    /// Issue #49: a forged seq (`2^48 − 1` for an origin not seen yet, or a jump inside any
    /// plausibility bound for one seen) mutes none of the origin's later first sends, also
    /// when the forged mark comes back from the journal after a restart.
    #[test]
    fn a_forged_seq_mutes_none_of_the_origins_later_entries() {
        for forged in [SEQ_NEVER_REACHED - 1, 5 + 10_000_000] {
            let mut progress = PeerProgress::default();
            progress.apply(&applied("a", "k1", 5, "100-1"));
            progress.apply(&applied("a", "k1", forged, "100-2"));
            let restarted = progress.clone();
            for progress in [&mut progress, &mut restarted.clone()] {
                assert!(
                    progress.is_new(&arrival("k1", 6, "100-3", true)),
                    "{forged}"
                );
                progress.apply(&applied("a", "k1", 6, "100-3"));
                assert_eq!(progress.marks["a"]["k1"].origin_seq, 6);
                // Back on the origin's own seqs: a republish of 6 is passed over, 7 is new.
                assert!(!progress.is_new(&arrival("k1", 6, "100-4", false)));
                assert!(progress.is_new(&arrival("k1", 7, "100-5", false)));
            }
        }
    }

    #[test]
    fn a_forged_mark_journaled_before_seqs_were_bounded_mutes_nothing() {
        let mut progress = PeerProgress::default();
        progress.apply(&applied("a", "k1", 5, "100-1"));
        progress.apply(&applied("a", "k1", u64::MAX, "100-2"));
        assert!(
            progress.is_new(&arrival("k1", 6, "100-3", false)),
            "the origin's next event applies, even one sent again"
        );
    }

    #[test]
    fn a_lost_stream_keeps_the_seqs_and_forgets_the_ids() {
        let mut progress = PeerProgress::default();
        progress.apply(&applied("a", "k1", 5, "9999999999999-1"));
        progress.forget_positions();
        // The new stream's ids are lower; its republish of 5 is still passed over.
        assert!(!progress.is_new(&arrival("k1", 5, "100-0", false)));
        assert!(progress.is_new(&arrival("k1", 6, "100-1", false)));
        assert!(progress.is_new(&arrival("k1", 6, "100-1", true)));
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
