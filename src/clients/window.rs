//! A counter over a sliding window, kept in a fixed number of time bins: memory is bounded
//! whatever the traffic, and the window slides one bin at a time (a bin's amount leaves the
//! window when the whole bin has). Pure: `now_ms` is always an argument.

/// `bins` bins of `bin_ms` each; the window is `bins × bin_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinnedWindow {
    bin_ms: u64,
    /// `(bin number, amount)`; slot `n % len` holds bin `n` when it is current.
    slots: Vec<(u64, u64)>,
}

impl BinnedWindow {
    pub fn new(bins: usize, bin_ms: u64) -> Self {
        BinnedWindow {
            bin_ms: bin_ms.max(1),
            slots: vec![(u64::MAX, 0); bins.max(1)],
        }
    }

    /// One minute in 12 bins of 5 s.
    pub fn per_minute() -> Self {
        Self::new(12, 5_000)
    }

    /// 24 hours in 24 bins of one hour.
    pub fn per_day() -> Self {
        Self::new(24, 3_600_000)
    }

    pub fn window_ms(&self) -> u64 {
        self.bin_ms * self.slots.len() as u64
    }

    fn live(&self, bin: u64, now_bin: u64) -> bool {
        bin != u64::MAX && bin <= now_bin && now_bin - bin < self.slots.len() as u64
    }

    /// Adds `amount` at `now_ms`.
    pub fn add(&mut self, now_ms: u64, amount: u64) {
        let bin = now_ms / self.bin_ms;
        let len = self.slots.len() as u64;
        let slot = &mut self.slots[(bin % len) as usize];
        if slot.0 != bin {
            *slot = (bin, 0);
        }
        slot.1 = slot.1.saturating_add(amount);
    }

    /// The amount inside the window ending at `now_ms`.
    pub fn used(&self, now_ms: u64) -> u64 {
        let now_bin = now_ms / self.bin_ms;
        self.slots
            .iter()
            .filter(|(bin, _)| self.live(*bin, now_bin))
            .fold(0u64, |sum, (_, amount)| sum.saturating_add(*amount))
    }

    /// How long from `now_ms` until the amount in the window is below `limit` again (0 when it
    /// already is).
    pub fn frees_in_ms(&self, now_ms: u64, limit: u64) -> u64 {
        let now_bin = now_ms / self.bin_ms;
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
                // Bin `bin` leaves the window when `now_bin - bin` reaches the bin count.
                let leaves_at = (bin + self.slots.len() as u64) * self.bin_ms;
                return leaves_at.saturating_sub(now_ms).max(1);
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
