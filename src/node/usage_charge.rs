//! What an answered attempt is charged (behaviour §11, "money holds"): the usage the upstream
//! reported, checked (`wire::usage_check`: clamped to `server.usage_max_tokens`, cache within
//! the prompt) and every problem logged naming the connection and the field (never a key); or,
//! when no usage came (a stream the client left, an upstream that sent none), an estimate:
//! input from the request body's bytes, output from the text relayed. It only computes and
//! logs; the caller counts the result against buckets, the client and the journal.

use crate::wire::content_bytes::estimated_tokens;
use crate::wire::usage::TokenCounts;
use crate::wire::usage_check::checked_usage;

/// The usage an attempt is charged, and whether the router estimated it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Charged {
    pub counts: TokenCounts,
    pub estimated: bool,
}

/// `reported` checked against `max_tokens`, each problem logged (warn) for `connection`.
pub fn checked(reported: TokenCounts, max_tokens: u64, connection: &str) -> TokenCounts {
    let (sane, findings) = checked_usage(reported, max_tokens);
    for finding in &findings {
        tracing::warn!(
            connection,
            field = finding.field,
            problem = finding.problem,
            "upstream usage clamped before it was counted"
        );
    }
    sane
}

/// What a stream still running has used so far, for its client's budget (`ClientTicket::
/// running`): each count the larger of what was reported (checked) and the estimate, as
/// [`charged`] would charge it without its closing usage. Nothing is logged: it runs per event.
pub fn so_far(
    reported: TokenCounts,
    request_bytes: u64,
    content_bytes: u64,
    max_tokens: u64,
) -> TokenCounts {
    let (sane, _) = checked_usage(reported, max_tokens);
    TokenCounts {
        tokens_in: sane
            .tokens_in
            .max(estimated_tokens(request_bytes).min(max_tokens)),
        tokens_out: sane
            .tokens_out
            .max(estimated_tokens(content_bytes).min(max_tokens)),
        ..sane
    }
}

/// What a stream or answer whose usage is `reported` (`complete`: its closing usage came) is
/// charged. Without the closing usage (or with a negative or non-numeric count in it), each count is the larger of what was reported and the
/// estimate: `request_bytes` / 4 in, `content_bytes` / 4 out (both clamped like a report).
pub fn charged(
    reported: TokenCounts,
    complete: bool,
    request_bytes: u64,
    content_bytes: u64,
    max_tokens: u64,
    connection: &str,
) -> Charged {
    let sane = checked(reported, max_tokens, connection);
    // A negative or non-numeric count is no report: the estimate stands in for it.
    if complete && !reported.flaws.any_unreadable() {
        return Charged {
            counts: sane,
            estimated: false,
        };
    }
    let estimate_in = estimated_tokens(request_bytes).min(max_tokens);
    let estimate_out = estimated_tokens(content_bytes).min(max_tokens);
    let counts = TokenCounts {
        tokens_in: sane.tokens_in.max(estimate_in),
        tokens_out: sane.tokens_out.max(estimate_out),
        ..sane
    };
    let estimated = counts != sane;
    if estimated {
        tracing::info!(
            connection,
            tokens_in = counts.tokens_in,
            tokens_out = counts.tokens_out,
            "no usage came from the upstream: an estimate is charged"
        );
    }
    Charged { counts, estimated }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_usage_is_charged_as_checked_and_a_missing_one_as_estimated() {
        let reported = TokenCounts {
            tokens_in: 30,
            tokens_out: 12,
            ..TokenCounts::default()
        };
        let complete = charged(reported, true, 4_000, 4_000, 1_000, "c1");
        assert_eq!(complete.counts, reported);
        assert!(!complete.estimated);
        // Anthropic left after `message_start`: its input is known, its output estimated.
        let left = charged(reported, false, 40, 4_000, 1_000, "c1");
        assert_eq!((left.counts.tokens_in, left.counts.tokens_out), (30, 1_000));
        assert!(left.estimated);
        // Nothing reported at all.
        let none = charged(TokenCounts::default(), false, 401, 7, 1_000_000, "c1");
        assert_eq!((none.counts.tokens_in, none.counts.tokens_out), (101, 2));
        assert!(none.estimated);
        // An empty request and no text: nothing to estimate, nothing estimated.
        let empty = charged(TokenCounts::default(), false, 0, 0, 1_000, "c1");
        assert!(!empty.estimated);
        // A report beyond the bound is clamped whether complete or not.
        let huge = TokenCounts {
            tokens_in: u64::MAX,
            tokens_out: u64::MAX,
            ..TokenCounts::default()
        };
        let clamped = charged(huge, true, 0, 0, 10_000_000, "c1");
        assert_eq!(
            (clamped.counts.tokens_in, clamped.counts.tokens_out),
            (10_000_000, 10_000_000)
        );
    }
}
