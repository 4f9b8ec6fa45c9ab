//! The switch every stream reader and writer keeps between its fast paths (typed reads, direct
//! writes) and the whole-`Value` path they must agree with: the node always takes the fast
//! paths; a test turns the switch to produce the reference its bytes are compared with.

/// Whether a reader or writer goes through whole `Value`s: never outside tests (zero-sized
/// there).
#[derive(Debug, Default, Clone, Copy)]
pub struct WholeValues {
    #[cfg(test)]
    on: bool,
}

impl WholeValues {
    /// Whether the fast paths are taken (always, outside tests).
    pub fn fast(self) -> bool {
        #[cfg(test)]
        let whole = self.on;
        #[cfg(not(test))]
        let whole = false;
        !whole
    }

    /// Tests: read and write through whole `Value`s (`on`), or take the fast paths.
    #[cfg(test)]
    pub fn set(&mut self, on: bool) {
        self.on = on;
    }
}
