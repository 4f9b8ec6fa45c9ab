//! Sane seq marks: a peer's entry whose seq is far ahead of anything that peer has shown is
//! refused, so it is never applied and never journaled as a mark (issue #34: one forged
//! `seq = u64::MAX` muted a peer's later updates about a connection for good, since an
//! (origin, connection) mark only lets greater seqs through).
//!
//! A seq is an origin's journal seq, which grows by at most [`SEQ_PER_MS`] per millisecond of
//! its clock (a journal writing a million events a second). So from the first entry this
//! node accepted of an origin (seq₀ at time t₀), an entry at time t may carry at most
//! seq₀ + (t − t₀ + [`CLOCK_SKEW_MS`]) × [`SEQ_PER_MS`], with t no later than this node's clock
//! plus the skew: forged entries cannot walk the bound up faster than time passes. An origin
//! never seen may start anywhere below [`FIRST_SEQ_MAX`]. After a restart the bound starts
//! from the journal's marks (their seq, and the time in their stream id).
//!
//! Pure: time is an argument.

use std::collections::HashMap;

use quotaroute_actors::policy::peer_progress::{parse_stream_id, PeerProgress, SEQ_NEVER_REACHED};

use crate::cluster::peer_bounds::CLOCK_SKEW_MS;

/// The fastest an origin's journal seq may grow, per millisecond.
pub const SEQ_PER_MS: u64 = 1_000;
/// The highest first seq of an origin never seen (2^48: nine years of a million events a
/// second; the journal's fold ignores marks from there up, see `peer_progress`).
pub const FIRST_SEQ_MAX: u64 = SEQ_NEVER_REACHED - 1;
/// Origins remembered at most; past it the bound of a new origin is [`FIRST_SEQ_MAX`] only.
const ORIGINS_MAX: usize = 4_096;

/// Why a seq is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("seq {seq} is ahead of what `{origin}` has shown (at most {allowed} now)")]
pub struct SeqAhead {
    pub origin: String,
    pub seq: u64,
    pub allowed: u64,
}

/// The first seq and time accepted of each origin.
#[derive(Debug, Default)]
pub struct SeqGuard {
    first: HashMap<String, (u64, u64)>,
}

impl SeqGuard {
    /// From the journal's marks: each origin's greatest seq, at its stream id's time.
    pub fn from_progress(progress: &PeerProgress) -> Self {
        let mut first: HashMap<String, (u64, u64)> = HashMap::new();
        for (origin, lanes) in &progress.marks {
            // A forged mark journaled before seqs were bounded sets no bound.
            for mark in lanes.values().filter(|m| m.origin_seq <= FIRST_SEQ_MAX) {
                let at_ms = parse_stream_id(&mark.stream_id).0;
                let entry = first.entry(origin.clone()).or_insert((0, 0));
                *entry = (*entry).max((mark.origin_seq, at_ms));
            }
        }
        SeqGuard { first }
    }

    /// Whether `origin`'s entry `seq`, stamped `at_ms`, is within bounds at `now_ms`.
    pub fn check(
        &mut self,
        origin: &str,
        seq: u64,
        at_ms: u64,
        now_ms: u64,
    ) -> Result<(), SeqAhead> {
        let at_ms = at_ms.min(now_ms.saturating_add(CLOCK_SKEW_MS));
        let allowed = match self.first.get(origin) {
            Some(&(first_seq, first_at_ms)) => {
                let elapsed = at_ms.saturating_sub(first_at_ms) + CLOCK_SKEW_MS;
                first_seq.saturating_add(elapsed.saturating_mul(SEQ_PER_MS))
            }
            None => FIRST_SEQ_MAX,
        };
        if seq > allowed {
            return Err(SeqAhead {
                origin: origin.to_owned(),
                seq,
                allowed,
            });
        }
        if !self.first.contains_key(origin) && self.first.len() < ORIGINS_MAX {
            self.first.insert(origin.to_owned(), (seq, at_ms));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use quotaroute_actors::policy::peer_progress::PeerMark;

    use super::*;

    const NOW: u64 = 1_796_166_000_000;

    #[test]
    fn a_seq_far_ahead_of_what_a_peer_showed_is_refused() {
        let mut guard = SeqGuard::default();
        assert!(
            guard.check("node-a", u64::MAX, NOW, NOW).is_err(),
            "first sight"
        );
        assert!(guard.check("node-a", FIRST_SEQ_MAX + 1, NOW, NOW).is_err());
        assert_eq!(guard.check("node-a", 1_000, NOW, NOW), Ok(()));
        // Within the skew's allowance at once, and more as time passes.
        assert_eq!(guard.check("node-a", 1_000 + 10_000_000, NOW, NOW), Ok(()));
        assert!(guard.check("node-a", 1_000 + 10_000_001, NOW, NOW).is_err());
        assert_eq!(
            guard.check("node-a", 1_000 + 70_000_000, NOW + 60_000, NOW + 60_000),
            Ok(())
        );
        assert!(guard.check("node-a", u64::MAX, NOW, NOW).is_err());
        // A forged time far ahead earns nothing beyond the skew.
        assert!(guard
            .check("node-a", 1_000 + 30_000_001, u64::MAX, NOW)
            .is_err());
        // Lower seqs (a republish) are the marks' business, not this bound's.
        assert_eq!(guard.check("node-a", 5, NOW, NOW), Ok(()));
    }

    #[test]
    fn after_a_restart_the_bound_starts_at_the_journals_sane_marks() {
        let mut progress = PeerProgress::default();
        let lanes = progress.marks.entry("node-a".into()).or_default();
        lanes.insert(
            "k1".into(),
            PeerMark {
                origin_seq: 500,
                stream_id: format!("{NOW}-0"),
            },
        );
        lanes.insert(
            "k2".into(),
            PeerMark {
                origin_seq: 700,
                stream_id: format!("{}-3", NOW - 5),
            },
        );
        progress.marks.entry("node-a".into()).or_default().insert(
            "k3".into(),
            PeerMark {
                origin_seq: u64::MAX,
                stream_id: format!("{NOW}-9"),
            },
        );
        let mut guard = SeqGuard::from_progress(&progress);
        assert!(guard
            .check("node-a", 700 + 10_000_001, NOW - 5, NOW)
            .is_err());
        assert_eq!(
            guard.check("node-a", 700 + 10_000_000, NOW - 5, NOW),
            Ok(())
        );
    }
}
