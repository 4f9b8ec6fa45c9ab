//! Sane seqs: an entry claiming a seq no journal reaches ([`SEQ_NEVER_REACHED`], 2^48: nine
//! years of a million events a second) is refused, never applied nor journaled.
//!
//! That is all a seq can be checked against. A bound from what an origin has shown before
//! (issue #34's: its first seq plus a million per millisecond since) cannot tell a forged entry
//! from a real one either: anyone who writes to Redis can claim any seq up to that bound (a
//! jump of ten million, issue #49), and can set the bound itself by being the first to name an
//! origin (a forged seq of 1 refuses a long-running origin's real ones for hours). So a forged
//! seq is made harmless instead: whether an entry is new is decided by the stream's own order
//! for the origin's first sends, and by seq only for what it sends again (`peer_progress`).
//!
//! Pure.

use quotaroute_actors::policy::peer_progress::SEQ_NEVER_REACHED;

/// Why a seq is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("seq {seq} of `{origin}` is beyond any journal (at most {})", SEQ_NEVER_REACHED - 1)]
pub struct SeqBeyondAnyJournal {
    pub origin: String,
    pub seq: u64,
}

/// Whether `origin`'s entry `seq` could be a journal's.
pub fn check(origin: &str, seq: u64) -> Result<(), SeqBeyondAnyJournal> {
    if seq >= SEQ_NEVER_REACHED {
        return Err(SeqBeyondAnyJournal {
            origin: origin.to_owned(),
            seq,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seq_beyond_any_journal_is_refused() {
        assert!(check("node-a", u64::MAX).is_err());
        assert!(check("node-a", SEQ_NEVER_REACHED).is_err());
        assert_eq!(check("node-a", SEQ_NEVER_REACHED - 1), Ok(()));
        assert_eq!(check("node-a", 1), Ok(()));
    }
}
