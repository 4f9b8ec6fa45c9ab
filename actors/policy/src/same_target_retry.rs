//! Same-target retries (behaviour §4, §10, §14): after one try of a target, whether that same
//! target is tried again and with what changed. A list of rules ([`RULES`]), each naming the
//! refusal it answers, what the next try changes (a refreshed credential, the encrypted items
//! or the thinking blocks left out) and how many times per target; [`SameTargetRetries`] is
//! one target's count of them. The retry is not a new attempt (nothing fails over) but it is
//! an upstream request: the request's budget (`RequestPlan::same_target_again`) must allow it,
//! and [`WhenSpent`] says what the try counts as when it does not.
//!
//! Pure: state + the try's result → the rule that fires. The node's one try loop
//! (`node::attempt::try_target`) sends, asks here, applies the change (the I/O) and sends
//! again. Trying OTHER targets is failover's (`policy::request`), never this file's.

use quotaroute_journal::OutcomeClass;

use crate::outcome::AttemptResult;

/// The upstream's code for an encrypted item it cannot read (OpenAI, behaviour §10).
pub const INVALID_ENCRYPTED_CONTENT: &str = "invalid_encrypted_content";

/// What a try carried that a refusal can be about, as the node saw it send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Carried {
    /// Its credential comes from a source that can be loaded again (a command, a file,
    /// OAuth): not a key written in the config.
    pub refreshable_credential: bool,
    /// At least one encrypted item went up as the client sent it (an untranslated try).
    pub encrypted_items: bool,
    /// Thinking blocks with their signatures went back to their account (a translated try,
    /// behaviour §14).
    pub thinking_signatures: bool,
}

/// A refusal a same-target rule answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 401 to a credential whose source can load it again (issue 13).
    Unauthorized,
    /// 400 `invalid_encrypted_content` to a try that carried encrypted items: an item the
    /// router could not attribute, or a key rotated since it was sealed.
    UnreadableEncryptedItem,
    /// Anthropic's 400 for a thinking block whose signature it cannot verify
    /// (`invalid_request_error`, "…: Invalid `signature` in `thinking` block") to a try that
    /// carried thinking blocks.
    ThinkingSignature,
}

impl Refusal {
    /// Whether a try that carried `carried` and ended with `result` was refused this way.
    pub fn matches(self, result: &AttemptResult, carried: Carried) -> bool {
        let bad_request = result.class == OutcomeClass::ClientError && result.status == Some(400);
        match self {
            Refusal::Unauthorized => {
                carried.refreshable_credential
                    && result.class == OutcomeClass::AuthFailed
                    && result.status == Some(401)
            }
            Refusal::UnreadableEncryptedItem => {
                carried.encrypted_items
                    && bad_request
                    && result.error_code.as_deref() == Some(INVALID_ENCRYPTED_CONTENT)
            }
            Refusal::ThinkingSignature => {
                carried.thinking_signatures
                    && bad_request
                    && result
                        .message
                        .as_deref()
                        .is_some_and(|message| message.contains("signature"))
            }
        }
    }

    /// For log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Unauthorized => "unauthorized",
            Refusal::UnreadableEncryptedItem => "unreadable_encrypted_item",
            Refusal::ThinkingSignature => "thinking_signature",
        }
    }
}

/// What the next try of the same target changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The credential loaded again (one load shared by every request that got the 401); the
    /// next try sends the fresh one.
    RefreshCredential,
    /// Every encrypted item left out: the turn loses that hidden reasoning, not the
    /// conversation. Holds for the request's later tries too.
    LeaveEncryptedItemsOut,
    /// The thinking blocks (with their signatures) left out, as encrypted items they came
    /// from. Holds for the request's later tries too.
    LeaveThinkingOut,
}

impl Change {
    /// For log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::RefreshCredential => "refresh_credential",
            Change::LeaveEncryptedItemsOut => "leave_encrypted_items_out",
            Change::LeaveThinkingOut => "leave_thinking_out",
        }
    }
}

/// What a refused try counts as when the request's budget (`max_upstream_requests`) leaves
/// no upstream request for the retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenSpent {
    /// The refusal stands as it was classified.
    Stands,
    /// Not sent: the change cured what the target was refused for (a replaced credential),
    /// only this request's budget is spent — the target is not at fault (no disable).
    NotSent,
}

/// One same-target rule: a refusal, what the retry changes, how many times per target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SameTargetRule {
    pub refusal: Refusal,
    pub change: Change,
    /// Retries this rule gives one target.
    pub times: u8,
    pub when_spent: WhenSpent,
}

/// The same-target rules, asked in this order. A try ends with one refusal at most, so the
/// order only matters to a reader.
pub const RULES: [SameTargetRule; 3] = [
    SameTargetRule {
        refusal: Refusal::Unauthorized,
        change: Change::RefreshCredential,
        times: 1,
        when_spent: WhenSpent::NotSent,
    },
    SameTargetRule {
        refusal: Refusal::UnreadableEncryptedItem,
        change: Change::LeaveEncryptedItemsOut,
        times: 1,
        when_spent: WhenSpent::Stands,
    },
    SameTargetRule {
        refusal: Refusal::ThinkingSignature,
        change: Change::LeaveThinkingOut,
        times: 1,
        when_spent: WhenSpent::Stands,
    },
];

/// One target's same-target retries so far: how often each of [`RULES`] fired. Starts at
/// nothing for every target a request tries; lives on the stack (no allocation per try).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SameTargetRetries {
    fired: [u8; RULES.len()],
}

impl SameTargetRetries {
    /// The first of [`RULES`] with a retry left for this target that answers a try which
    /// carried `carried` and ended with `result`, counted as fired; `None`: the result stands.
    pub fn after_try(
        &mut self,
        result: &AttemptResult,
        carried: Carried,
    ) -> Option<SameTargetRule> {
        let (rule, fired) = RULES
            .iter()
            .zip(self.fired.iter_mut())
            .find(|(rule, fired)| **fired < rule.times && rule.refusal.matches(result, carried))?;
        *fired += 1;
        Some(*rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unauthorized() -> AttemptResult {
        AttemptResult::failure(OutcomeClass::AuthFailed, Some(401))
    }

    fn unreadable_item() -> AttemptResult {
        AttemptResult::failure(OutcomeClass::ClientError, Some(400))
            .with_error_code(INVALID_ENCRYPTED_CONTENT)
    }

    fn refused_signature() -> AttemptResult {
        let mut result = AttemptResult::failure(OutcomeClass::ClientError, Some(400));
        result.error_code = Some("invalid_request_error".into());
        result.message =
            Some("messages.1.content.0: Invalid `signature` in `thinking` block".into());
        result
    }

    const EVERYTHING: Carried = Carried {
        refreshable_credential: true,
        encrypted_items: true,
        thinking_signatures: true,
    };

    fn change_after(
        retries: &mut SameTargetRetries,
        result: &AttemptResult,
        carried: Carried,
    ) -> Option<Change> {
        retries.after_try(result, carried).map(|rule| rule.change)
    }

    #[test]
    fn each_refusal_is_answered_by_its_change() {
        let cases = [
            (
                unauthorized(),
                Change::RefreshCredential,
                WhenSpent::NotSent,
            ),
            (
                unreadable_item(),
                Change::LeaveEncryptedItemsOut,
                WhenSpent::Stands,
            ),
            (
                refused_signature(),
                Change::LeaveThinkingOut,
                WhenSpent::Stands,
            ),
        ];
        for (result, change, when_spent) in cases {
            let rule = SameTargetRetries::default().after_try(&result, EVERYTHING);
            assert_eq!(
                rule.map(|r| (r.change, r.when_spent)),
                Some((change, when_spent))
            );
        }
    }

    #[test]
    fn a_refusal_of_what_the_try_did_not_carry_stands() {
        // A key written in the config cannot be loaded again: its 401 is classified.
        let static_key = Carried {
            refreshable_credential: false,
            ..EVERYTHING
        };
        assert_eq!(
            change_after(
                &mut SameTargetRetries::default(),
                &unauthorized(),
                static_key
            ),
            None
        );
        // Encrypted items left out already (or none readable by the target): nothing to drop.
        let no_items = Carried {
            encrypted_items: false,
            ..EVERYTHING
        };
        assert_eq!(
            change_after(
                &mut SameTargetRetries::default(),
                &unreadable_item(),
                no_items
            ),
            None
        );
        // A try that restored no thinking block: a 400 about a signature is the client's.
        let no_thinking = Carried {
            thinking_signatures: false,
            ..EVERYTHING
        };
        assert_eq!(
            change_after(
                &mut SameTargetRetries::default(),
                &refused_signature(),
                no_thinking
            ),
            None
        );
    }

    #[test]
    fn other_outcomes_are_not_retried_on_the_same_target() {
        let mut retries = SameTargetRetries::default();
        let others = [
            AttemptResult::success(200, 10, 5),
            AttemptResult::failure(OutcomeClass::AuthFailed, Some(403)),
            AttemptResult::failure(OutcomeClass::RateLimited, Some(429)),
            AttemptResult::failure(OutcomeClass::ServerError, Some(500)),
            // A 400 with another code, or none.
            AttemptResult::failure(OutcomeClass::ClientError, Some(400))
                .with_error_code("invalid_request_error"),
            AttemptResult::failure(OutcomeClass::ClientError, Some(400)),
            // The code with another status.
            AttemptResult::failure(OutcomeClass::ClientError, Some(422))
                .with_error_code(INVALID_ENCRYPTED_CONTENT),
        ];
        for result in &others {
            assert_eq!(
                change_after(&mut retries, result, EVERYTHING),
                None,
                "{result:?}"
            );
        }
        assert_eq!(retries, SameTargetRetries::default(), "nothing fired");
    }

    #[test]
    fn each_rule_retries_a_target_once() {
        for result in [unauthorized(), unreadable_item(), refused_signature()] {
            let mut retries = SameTargetRetries::default();
            assert!(change_after(&mut retries, &result, EVERYTHING).is_some());
            // The same refusal again: it stands.
            assert_eq!(change_after(&mut retries, &result, EVERYTHING), None);
            assert_eq!(change_after(&mut retries, &result, EVERYTHING), None);
        }
    }

    #[test]
    fn rules_compose_when_two_refusals_meet_one_target() {
        // A 401 first: the credential refreshed; then the fresh one's try meets an item it
        // cannot read: the items left out; a 401 again now stands (the refresh was spent).
        let mut retries = SameTargetRetries::default();
        assert_eq!(
            change_after(&mut retries, &unauthorized(), EVERYTHING),
            Some(Change::RefreshCredential)
        );
        assert_eq!(
            change_after(&mut retries, &unreadable_item(), EVERYTHING),
            Some(Change::LeaveEncryptedItemsOut)
        );
        assert_eq!(
            change_after(&mut retries, &unauthorized(), EVERYTHING),
            None
        );

        // The other order, translated: a refused signature, then a 401.
        let translated = Carried {
            encrypted_items: false,
            ..EVERYTHING
        };
        let mut retries = SameTargetRetries::default();
        assert_eq!(
            change_after(&mut retries, &refused_signature(), translated),
            Some(Change::LeaveThinkingOut)
        );
        assert_eq!(
            change_after(&mut retries, &unauthorized(), translated),
            Some(Change::RefreshCredential)
        );
        assert_eq!(
            change_after(&mut retries, &refused_signature(), translated),
            None
        );
    }

    #[test]
    fn every_target_starts_with_its_retries_unspent() {
        let mut first = SameTargetRetries::default();
        assert!(first.after_try(&unauthorized(), EVERYTHING).is_some());
        // The next target of the same request gets a state of its own.
        let mut next = SameTargetRetries::default();
        assert!(next.after_try(&unauthorized(), EVERYTHING).is_some());
    }
}
