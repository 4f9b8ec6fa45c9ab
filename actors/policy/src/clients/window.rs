//! A counter over a sliding window of the one window shape (`policy::window::WindowShape`),
//! kept in a ring of its bins: memory is bounded whatever the traffic, and the window slides
//! one bin at a time (a bin's amount leaves the window when the whole bin has). Pure: `now_ms`
//! is always an argument.

use crate::window::WindowShape;

/// One amount per bin of `shape`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinnedWindow {
    shape: WindowShape,
    /// `(bin number, amount)`; slot `n % len` holds bin `n` when it is current.
    slots: Vec<(u64, u64)>,
}

impl BinnedWindow {
    pub fn new(shape: WindowShape) -> Self {
        let shape = WindowShape {
            bin_ms: shape.bin_ms.max(1),
            bins: shape.bins.max(1),
        };
        BinnedWindow {
            shape,
            slots: vec![(u64::MAX, 0); usize::try_from(shape.bins).unwrap_or(1)],
        }
    }

    /// A client's per-minute window.
    pub fn per_minute() -> Self {
        Self::new(WindowShape::PER_MINUTE)
    }

    /// A client's per-day window.
    pub fn per_day() -> Self {
        Self::new(WindowShape::PER_DAY)
    }

    pub fn window_ms(&self) -> u64 {
        self.shape.window_ms()
    }

    fn live(&self, bin: u64, now_bin: u64) -> bool {
        bin != u64::MAX && self.shape.is_live(bin, now_bin)
    }

    /// Adds `amount` at `now_ms`.
    pub fn add(&mut self, now_ms: u64, amount: u64) {
        let bin = self.shape.bin_of(now_ms);
        let len = self.slots.len() as u64;
        let slot = &mut self.slots[(bin % len) as usize];
        if slot.0 != bin {
            *slot = (bin, 0);
        }
        slot.1 = slot.1.saturating_add(amount);
    }

    /// The amount inside the window ending at `now_ms`.
    pub fn used(&self, now_ms: u64) -> u64 {
        let now_bin = self.shape.bin_of(now_ms);
        self.slots
            .iter()
            .filter(|(bin, _)| self.live(*bin, now_bin))
            .fold(0u64, |sum, (_, amount)| sum.saturating_add(*amount))
    }

    /// How long from `now_ms` until the amount in the window is below `limit` again (0 when it
    /// already is).
    pub fn frees_in_ms(&self, now_ms: u64, limit: u64) -> u64 {
        let now_bin = self.shape.bin_of(now_ms);
        let mut live: Vec<(u64, u64)> = self
            .slots
            .iter()
            .copied()
            .filter(|(bin, _)| self.live(*bin, now_bin))
            .collect();
        live.sort_unstable();
        let mut used = live
            .iter()
            .fold(0u64, |sum, (_, amount)| sum.saturating_add(*amount));
        if used < limit {
            return 0;
        }
        for (bin, amount) in live {
            used = used.saturating_sub(amount);
            if used < limit {
                return self.shape.leaves_at_ms(bin).saturating_sub(now_ms).max(1);
            }
        }
        self.window_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_leave_the_window_bin_by_bin() {
        let mut window = BinnedWindow::per_minute();
        window.add(1_000, 3);
        window.add(31_000, 2);
        assert_eq!(window.used(31_000), 5);
        assert_eq!(window.used(59_999), 5);
        // The first bin (0–5 s) leaves at 60 s.
        assert_eq!(window.used(60_000), 2);
        assert_eq!(window.used(95_000), 0);
    }

    #[test]
    fn frees_in_says_when_the_amount_drops_below_the_limit() {
        let mut window = BinnedWindow::per_minute();
        window.add(1_000, 3);
        window.add(31_000, 2);
        assert_eq!(window.frees_in_ms(40_000, 6), 0);
        // Below 5 once the 0–5 s bin leaves at 60 s.
        assert_eq!(window.frees_in_ms(40_000, 5), 20_000);
        // Below 2 only once both bins have left (the 30–35 s bin at 90 s).
        assert_eq!(window.frees_in_ms(40_000, 2), 50_000);
    }

    #[test]
    fn memory_is_the_bins_whatever_the_traffic() {
        let mut window = BinnedWindow::per_minute();
        for at in (0..10_000_000).step_by(997) {
            window.add(at, 1);
        }
        assert_eq!(window.slots.len(), 12);
        assert!(window.used(10_000_000) <= 61);
    }
}
