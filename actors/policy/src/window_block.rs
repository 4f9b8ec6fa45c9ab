//! Window blocks (behaviour §13, admission side): which of a target's windows block it — one
//! an upstream reports spent, or one whose share left is within the owner's reserve. Pure:
//! window readings + reserve + now → block; how fast a target may be spent is `pace`'s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::pace::PaceWindow;
use crate::window_id::WindowId;

/// Contract: `reserve_pct` on a connection, or `reserve = { "7d" = 20 }` per window: the share
/// of a window kept for the account's owner.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Reserve {
    /// Every window's reserve, in percent.
    pub all_pct: Option<u8>,
    /// Per window name (its base, before any `:<model>`), overriding `all_pct`.
    pub by_window: BTreeMap<String, u8>,
}

impl Reserve {
    /// The reserve of `window`: its base name's (`7d` for `7d:opus`; `5h` for a counted
    /// `requests_5h`), else every window's.
    pub fn pct_for(&self, window: &str) -> Option<u8> {
        // No reserve by name: nothing to read in the name.
        if self.by_window.is_empty() {
            return self.all_pct;
        }
        let [base, period] = WindowId::parse(window).reserve_keys();
        self.by_window
            .get(base)
            .or_else(|| self.by_window.get(period))
            .copied()
            .or(self.all_pct)
    }

    /// Whether what is left of `window` is within its reserve (reset or not: the caller
    /// knows whether it has passed).
    pub fn holds(&self, window: &PaceWindow) -> bool {
        self.pct_for(window.window())
            .is_some_and(|pct| u32::from(window.left_pm) <= u32::from(pct) * 10)
    }
}

/// Why a window hard-blocks its target (§13): the upstream says it is spent, or what is left
/// is within the owner's reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowBlockReason {
    /// `quota_exhausted`.
    Spent,
    /// `reserved`.
    Reserved,
}

/// A window that blocks its target until `until_ms` (`None`: no reset known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowBlock {
    pub reason: WindowBlockReason,
    pub window: String,
    pub until_ms: Option<u64>,
}

/// The first window among `windows` (already narrowed to the requested model) that blocks
/// its target at `now_ms`: one an upstream or a push reports used to its limit (a configured
/// limit the router counts only saturates, §6), else one whose share left is within its
/// reserve. Windows past their reset block nothing.
pub fn window_block<'a>(
    windows: impl IntoIterator<Item = &'a PaceWindow>,
    reserve: &Reserve,
    now_ms: u64,
) -> Option<WindowBlock> {
    let mut reserved = None;
    for window in windows {
        if window.resets_at_ms.is_some_and(|reset| now_ms >= reset) {
            continue;
        }
        if window.reported && window.left_pm == 0 {
            return Some(WindowBlock {
                reason: WindowBlockReason::Spent,
                window: window.window().to_owned(),
                until_ms: window.resets_at_ms,
            });
        }
        if reserved.is_none() && reserve.holds(window) {
            reserved = Some(WindowBlock {
                reason: WindowBlockReason::Reserved,
                window: window.window().to_owned(),
                until_ms: window.resets_at_ms,
            });
        }
    }
    reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_735_689_600_000;
    const HOUR_MS: u64 = 3_600_000;
    const DAY_MS: u64 = 24 * HOUR_MS;

    fn reported(name: &str, used: u64, limit: u64, resets_in_ms: Option<u64>) -> PaceWindow {
        PaceWindow::of(name, used, limit, resets_in_ms.map(|ms| NOW + ms), true)
    }

    #[test]
    fn spent_windows_block_until_their_reset_and_reserves_hold() {
        let none = Reserve::default();
        let spent = window_block(&[reported("5h", 100, 100, Some(HOUR_MS))], &none, NOW);
        assert_eq!(
            spent,
            Some(WindowBlock {
                reason: WindowBlockReason::Spent,
                window: "5h".into(),
                until_ms: Some(NOW + HOUR_MS),
            })
        );
        // One request left of a million is not spent (left rounds up).
        assert_eq!(
            window_block(
                &[reported("5h", 999_999, 1_000_000, Some(HOUR_MS))],
                &none,
                NOW
            ),
            None
        );
        // A counted limit at its limit only saturates.
        let counted = PaceWindow::of("requests_5h", 100, 100, None, false);
        assert_eq!(
            window_block(std::slice::from_ref(&counted), &none, NOW),
            None
        );
        let reserve = Reserve {
            all_pct: Some(10),
            by_window: BTreeMap::from([("7d".to_owned(), 20), ("5h".to_owned(), 5)]),
        };
        let kept = window_block(
            &[
                reported("5h", 94, 100, Some(HOUR_MS)),
                reported("7d:opus", 80, 100, Some(DAY_MS)),
            ],
            &reserve,
            NOW,
        );
        assert_eq!(
            kept.map(|b| (b.reason, b.window)),
            Some((WindowBlockReason::Reserved, "7d:opus".into()))
        );
        // A counted `requests_5h` takes the `5h` reserve.
        let counted = PaceWindow::of("requests_5h", 96, 100, None, false);
        assert_eq!(
            window_block(&[counted], &reserve, NOW).map(|b| b.reason),
            Some(WindowBlockReason::Reserved)
        );
        // A spent window wins over an earlier reserved one; a past reset blocks nothing.
        let both = window_block(
            &[
                reported("7d", 90, 100, Some(DAY_MS)),
                reported("5h", 100, 100, Some(HOUR_MS)),
            ],
            &reserve,
            NOW,
        );
        assert_eq!(both.map(|b| b.reason), Some(WindowBlockReason::Spent));
        assert_eq!(
            window_block(&[reported("5h", 100, 100, Some(0))], &reserve, NOW),
            None
        );
    }
}
