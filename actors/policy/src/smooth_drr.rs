//! The one smooth deficit-round-robin turn (Shreedhar and Varghese; behaviour §2 step 3 and
//! §11): every participant adds its weight, the one served pays Σw, and credit stays within
//! ±Σw so a participant that sat out (or comes back) takes no burst. The combos' target
//! deficits (`drr`), the fair queue's client deficits (`fair_queue`) and conversation
//! affinity's leads (`affinity`, the mirror image: what a target ran *ahead*, bounded below
//! only so a long run of held turns shows) all take their turns here. Pure arithmetic.

/// One turn's Σw over the participants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    total: i64,
}

impl Turn {
    /// The turn of participants weighing `weights` (saturating).
    pub fn of(weights: impl IntoIterator<Item = i64>) -> Turn {
        Turn {
            total: weights.into_iter().fold(0i64, i64::saturating_add),
        }
    }

    /// Σw.
    pub fn total(self) -> i64 {
        self.total
    }

    /// `credit` kept within ±Σw.
    pub fn bounded(self, credit: i64) -> i64 {
        credit.clamp(-self.total, self.total)
    }

    /// A participant's credit after the turn: its `weight` added, Σw paid when it `won`,
    /// within ±Σw.
    pub fn credit_after(self, credit: i64, weight: i64, won: bool) -> i64 {
        let credit = credit.saturating_add(weight);
        self.bounded(if won { credit - self.total } else { credit })
    }

    /// A participant's lead (how far it ran ahead of its share) after giving up its `weight`
    /// for the turn: never more than Σw below its share (no banked credit).
    pub fn lead_given(self, lead: i64, weight: i64) -> i64 {
        (lead - weight).max(-self.total)
    }

    /// The served participant's lead after the turn: Σw more, unbounded above.
    pub fn lead_won(self, lead: i64) -> i64 {
        lead + self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_winner_pays_the_sum_and_credit_stays_within_it() {
        let turn = Turn::of([2, 1]);
        assert_eq!(turn.total(), 3);
        assert_eq!(turn.credit_after(0, 2, true), -1);
        assert_eq!(turn.credit_after(0, 1, false), 1);
        assert_eq!(turn.credit_after(3, 1, false), 3, "bounded above");
        assert_eq!(turn.credit_after(-3, 1, true), -3, "bounded below");
        // Leads are the mirror image, bounded below only.
        assert_eq!(turn.lead_given(-2, 2), -3);
        assert_eq!(turn.lead_won(40), 43);
    }
}
