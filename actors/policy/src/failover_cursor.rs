//! Where one request stands in its decided order (behaviour §3): the targets a failover may
//! still take — each target at most once per request, in the decided order — and the attempt
//! budget that says what follows each attempt (`RequestPlan`).
//!
//! Pure. The `Decision` a request holds on the node and each request of `--what-if` keep one,
//! so a failover advances and counts its attempt the same way in both; which candidate is
//! admitted is `admission::take_first_admitted`'s.

use crate::request::RequestPlan;

/// One request's decided order, its place in it and its attempt budget.
#[derive(Debug, Clone)]
pub struct FailoverCursor {
    /// The decision's order (positions in the combo's targets).
    order: Vec<usize>,
    /// Offset in `order` of the first target a failover may take.
    next: usize,
    plan: RequestPlan,
}

impl FailoverCursor {
    /// A request whose first attempt went to `order[first]`, with `(max_attempts,
    /// max_upstream_requests)` as its budget.
    pub fn new(order: Vec<usize>, first: usize, limits: (u32, u32)) -> Self {
        FailoverCursor {
            order,
            next: first.saturating_add(1),
            plan: RequestPlan::new(limits.0, limits.1),
        }
    }

    /// The decided order.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// A failover's candidates: the targets after the last one taken, in order.
    pub fn untried(&self) -> &[usize] {
        self.order.get(self.next..).unwrap_or_default()
    }

    /// A failover took the candidate at `offset` in [`FailoverCursor::untried`] (`None`: none
    /// was admitted, and none is left for a later one). Counts the attempt sent there and
    /// returns that target's offset in the order.
    pub fn took(&mut self, taken: Option<usize>) -> Option<usize> {
        let Some(offset) = taken else {
            self.next = self.order.len();
            return None;
        };
        let at = self.next.saturating_add(offset);
        self.next = at.saturating_add(1);
        self.plan.attempt_sent();
        Some(at)
    }

    pub fn plan(&self) -> &RequestPlan {
        &self.plan
    }

    pub fn plan_mut(&mut self) -> &mut RequestPlan {
        &mut self.plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failover_takes_each_target_once_in_order_and_counts_its_attempt() {
        // Decided order 4, 2, 7, 1; the first attempt went to the second (2).
        let mut cursor = FailoverCursor::new(vec![4, 2, 7, 1], 1, (3, 8));
        assert_eq!(cursor.plan().upstream_requests(), 1);
        assert_eq!(cursor.untried(), &[7, 1]);
        // 7 is passed over, 1 is taken.
        assert_eq!(cursor.took(Some(1)), Some(3));
        assert_eq!(cursor.plan().upstream_requests(), 2);
        assert!(cursor.untried().is_empty());
        assert_eq!(cursor.took(None), None);
        assert_eq!(cursor.plan().upstream_requests(), 2);
    }

    #[test]
    fn nothing_admitted_leaves_nothing_for_a_later_failover() {
        let mut cursor = FailoverCursor::new(vec![0, 1, 2], 0, (3, 8));
        assert_eq!(cursor.took(None), None);
        assert!(cursor.untried().is_empty());
        assert_eq!(cursor.plan().upstream_requests(), 1);
    }
}
