//! `CredentialJournal`: where credential events go — the router's recorder, which journals
//! them like every other event. Credentials load before the journal is replayed (the first
//! load starts with the node), so events until then wait here and are handed over, in order
//! and with their own times, once the router is attached.
//!
//! Owns nothing but that hand-over; the events are built (and kept secret-free) by
//! `credential`.

use std::sync::Mutex;

use quotaroute_actors::Router;
use quotaroute_journal::Event;

/// Events kept while no router is attached; beyond this the oldest are dropped.
const MAX_WAITING: usize = 1_000;

/// Shared by every credential of a node, across reloads.
#[derive(Default)]
pub struct CredentialJournal {
    sink: Mutex<Sink>,
}

#[derive(Default)]
enum Sink {
    #[default]
    Detached,
    Waiting(Vec<(u64, Event)>),
    Router(Router),
}

impl std::fmt::Debug for CredentialJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialJournal").finish_non_exhaustive()
    }
}

impl CredentialJournal {
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on events go to `router`; those recorded before go first.
    pub fn attach(&self, router: Router) {
        let Ok(mut sink) = self.sink.lock() else {
            return;
        };
        if let Sink::Waiting(waiting) = std::mem::take(&mut *sink) {
            for (at_ms, event) in waiting {
                router.record_credential(at_ms, event);
            }
        }
        *sink = Sink::Router(router);
    }

    /// The events waiting for a router (tests read what a credential recorded).
    pub fn waiting(&self) -> Vec<Event> {
        match self.sink.lock().as_deref() {
            Ok(Sink::Waiting(waiting)) => waiting.iter().map(|(_, event)| event.clone()).collect(),
            _ => Vec::new(),
        }
    }

    /// Journals `event` (a `credential_refreshed` or `credential_failed`) that happened at
    /// `at_ms`.
    pub fn record(&self, at_ms: u64, event: Event) {
        let Ok(mut sink) = self.sink.lock() else {
            return;
        };
        match &mut *sink {
            Sink::Router(router) => router.record_credential(at_ms, event),
            Sink::Waiting(waiting) => {
                if waiting.len() >= MAX_WAITING {
                    waiting.remove(0);
                }
                waiting.push((at_ms, event));
            }
            Sink::Detached => *sink = Sink::Waiting(vec![(at_ms, event)]),
        }
    }
}
