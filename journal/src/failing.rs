//! [`FailingJournal`]: wraps any [`Journal`] and fails its writes while a [`FailSwitch`] is on,
//! to test how the writer lives through disk trouble. Reads always pass through.

use crate::error::{Damage, JournalError};
use crate::event::Envelope;
use crate::store::{Journal, PruneReport, Snapshot};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Turns a [`FailingJournal`]'s failures on and off from outside the writer thread.
#[derive(Debug, Clone, Default)]
pub struct FailSwitch(Arc<AtomicBool>);

impl FailSwitch {
    pub fn set_failing(&self, failing: bool) {
        self.0.store(failing, Ordering::SeqCst);
    }

    pub fn is_failing(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A journal whose writes, flushes, snapshots and prunes fail with
/// [`JournalError::Injected`] while its switch is on.
pub struct FailingJournal<J: Journal> {
    inner: J,
    switch: FailSwitch,
}

impl<J: Journal> FailingJournal<J> {
    /// Wraps `inner`; the returned switch starts off (writes succeed).
    pub fn new(inner: J) -> (Self, FailSwitch) {
        let switch = FailSwitch::default();
        (
            FailingJournal {
                inner,
                switch: switch.clone(),
            },
            switch,
        )
    }

    fn check(&self) -> Result<(), JournalError> {
        if self.switch.is_failing() {
            Err(JournalError::Injected)
        } else {
            Ok(())
        }
    }
}

impl<J: Journal> Journal for FailingJournal<J> {
    fn write_record(&mut self, first_seq: u64, record: &[u8]) -> Result<(), JournalError> {
        self.check()?;
        self.inner.write_record(first_seq, record)
    }

    fn flush(&mut self) -> Result<(), JournalError> {
        self.check()?;
        self.inner.flush()
    }

    fn last_seq(&self) -> Result<Option<u64>, JournalError> {
        self.inner.last_seq()
    }

    fn read_from(&self, from: u64) -> Box<dyn Iterator<Item = Result<Envelope, Damage>> + '_> {
        self.inner.read_from(from)
    }

    fn put_snapshot(
        &mut self,
        seq: u64,
        at_ms: u64,
        state_version: u16,
        state: &[u8],
    ) -> Result<(), JournalError> {
        self.check()?;
        self.inner.put_snapshot(seq, at_ms, state_version, state)
    }

    fn snapshots(&self) -> Vec<Result<Snapshot, Damage>> {
        self.inner.snapshots()
    }

    fn prune(&mut self, older_than_ms: u64) -> Result<PruneReport, JournalError> {
        self.check()?;
        self.inner.prune(older_than_ms)
    }
}
