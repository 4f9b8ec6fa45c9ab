//! Test support for the policy files: the live side of the replay-equals-live pattern — decide,
//! apply each event at once (as the actor does), keep the journal, and check that a fresh state
//! replaying it ends up equal.

use std::fmt::Debug;

use quotaroute_journal::Event;

/// A policy state folded by `apply(at_ms, &Event)`.
pub(crate) trait Reducer: Clone + PartialEq + Debug {
    fn apply_event(&mut self, at_ms: u64, event: &Event);
}

/// A policy state driven live, with its settings and the journal of what it emitted.
pub(crate) struct Live<S, T> {
    pub(crate) state: S,
    pub(crate) s: T,
    pub(crate) journal: Vec<(u64, Event)>,
    initial: S,
}

impl<S: Reducer, T> Live<S, T> {
    pub(crate) fn with(state: S, s: T) -> Self {
        Live {
            initial: state.clone(),
            state,
            s,
            journal: Vec::new(),
        }
    }

    /// Applies `events` at `now` and journals them; returns them for the test to inspect.
    pub(crate) fn commit(&mut self, now: u64, events: Vec<Event>) -> Vec<Event> {
        for event in &events {
            self.state.apply_event(now, event);
            self.journal.push((now, event.clone()));
        }
        events
    }

    /// A fresh state that replayed the journal.
    pub(crate) fn replayed(&self) -> S {
        let mut fresh = self.initial.clone();
        for (at, event) in &self.journal {
            fresh.apply_event(*at, event);
        }
        fresh
    }

    pub(crate) fn assert_replay_equals_live(&self) {
        assert_eq!(
            self.replayed(),
            self.state,
            "replay must rebuild the live state"
        );
    }
}
