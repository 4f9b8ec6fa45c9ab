//! The targets one request may take, as selection reads them: each target's identity (a
//! [`RoutedTarget`] of the combo) beside what §2 sees of it now (its [`TargetView`] — the seam
//! where a per-target pace joins later), and the one rule that narrows them to a stored
//! response's connection (`only_connection`). Also the fair queue's question "is the pool
//! full", asked of the same candidates by selection's own room rule.

use std::borrow::Cow;
use std::sync::Arc;

use crate::quota_share::{pool_full, TargetView};
use crate::selection::target::RoutedTarget;

/// The targets of one request: `views[i]` is what selection sees of `targets[positions[i]]`.
#[derive(Debug, Clone, Copy)]
pub struct Candidates<'a> {
    /// Every target of the combo, in config order (what `positions` point into).
    pub targets: &'a [Arc<RoutedTarget>],
    /// The targets of the request's format, as positions in `targets`.
    pub positions: &'a [usize],
    /// What selection sees of each, in the order of `positions`.
    pub views: &'a [TargetView],
}

/// [`Candidates`] narrowed to one connection (or borrowed as they are).
pub(crate) struct Narrowed<'a> {
    pub positions: Cow<'a, [usize]>,
    pub views: Cow<'a, [TargetView]>,
}

impl<'a> Candidates<'a> {
    /// The combo's target at `position`.
    pub fn target(&self, position: usize) -> &'a RoutedTarget {
        &self.targets[position]
    }

    /// Only the candidates on `only` when it names a connection (behaviour §3's stored
    /// responses: a continuation goes to the account that holds its response).
    pub(crate) fn on_connection(&self, only: Option<&str>) -> Narrowed<'a> {
        let Some(only) = only else {
            return Narrowed {
                positions: Cow::Borrowed(self.positions),
                views: Cow::Borrowed(self.views),
            };
        };
        let (positions, views) = self
            .positions
            .iter()
            .zip(self.views)
            .filter(|(&position, _)| &*self.targets[position].connection == only)
            .map(|(&position, view)| (position, view.clone()))
            .unzip::<_, _, Vec<_>, Vec<_>>();
        Narrowed {
            positions: Cow::Owned(positions),
            views: Cow::Owned(views),
        }
    }

    /// Behaviour §11: whether a request on these candidates (on `only` when it names a
    /// connection) waits for a released slot rather than being routed now — selection's own
    /// room rule ([`pool_full`]), so the queue and §2 never disagree on what "room" is.
    pub fn pool_full(&self, only: Option<&str>) -> bool {
        pool_full(&self.on_connection(only).views)
    }
}
