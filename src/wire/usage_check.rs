//! The one check every upstream usage passes before it is priced, journaled, put in buckets or
//! sent to Redis (behaviour §11, "money holds"): counts above `server.usage_max_tokens`, and
//! cached or cache-written tokens above the prompt's, are clamped; what was clamped (and what
//! `usage_count` flagged while reading) is returned for the node to log. Pure: the bound is an
//! argument; it never logs.

use super::usage::TokenCounts;

/// One thing the check changed or found wrong, named by the count it concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageFinding {
    /// `prompt_tokens`, `tokens_in`, `cached_tokens`, …
    pub field: &'static str,
    /// What was wrong: "negative", "fractional", "not a number", "above usage_max_tokens",
    /// "above the prompt".
    pub problem: &'static str,
}

/// `counts` made sane under `max_tokens`, and what was wrong with them (empty when nothing).
pub fn checked_usage(counts: TokenCounts, max_tokens: u64) -> (TokenCounts, Vec<UsageFinding>) {
    let mut findings: Vec<UsageFinding> = counts
        .flaws
        .iter()
        .map(|(field, flaw)| UsageFinding {
            field: field.as_str(),
            problem: flaw.as_str(),
        })
        .collect();
    let mut sane = counts;
    for (field, count) in [
        ("tokens_in", &mut sane.tokens_in),
        ("tokens_out", &mut sane.tokens_out),
        ("tokens_cached", &mut sane.tokens_cached),
        ("tokens_cache_write", &mut sane.tokens_cache_write),
    ] {
        if *count > max_tokens {
            *count = max_tokens;
            findings.push(UsageFinding {
                field,
                problem: "above usage_max_tokens",
            });
        }
    }
    // Cache reads and writes are part of the prompt: never more than it.
    if sane.tokens_cache_write > sane.tokens_in {
        sane.tokens_cache_write = sane.tokens_in;
        findings.push(UsageFinding {
            field: "tokens_cache_write",
            problem: "above the prompt",
        });
    }
    let room = sane.tokens_in - sane.tokens_cache_write;
    if sane.tokens_cached > room {
        sane.tokens_cached = room;
        findings.push(UsageFinding {
            field: "tokens_cached",
            problem: "above the prompt",
        });
    }
    (sane, findings)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::wire::usage::response_usage;
    use quotaroute_journal::ApiFormat;

    const MAX: u64 = 10_000_000;

    fn check(body: &str) -> (TokenCounts, Vec<&'static str>) {
        let counts = response_usage(ApiFormat::Openai, body.as_bytes())
            .unwrap()
            .unwrap();
        let (sane, findings) = checked_usage(counts, MAX);
        (sane, findings.iter().map(|f| f.field).collect())
    }

    #[test]
    fn the_probes_values_are_clamped_never_priced_as_sent() {
        // cached_tokens 1e9 on a 5-token prompt.
        let (sane, fields) = check(
            r#"{"usage":{"prompt_tokens":5,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1000000000}}}"#,
        );
        assert_eq!(
            (sane.tokens_in, sane.tokens_out, sane.tokens_cached),
            (5, 2, 5)
        );
        assert!(fields.contains(&"tokens_cached"), "{fields:?}");
        // u64::MAX tokens.
        let (sane, fields) = check(
            r#"{"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":18446744073709551615}}"#,
        );
        assert_eq!((sane.tokens_in, sane.tokens_out), (MAX, MAX));
        assert_eq!(fields, vec!["tokens_in", "tokens_out"]);
        // Negative, fractional and string counts: read, flagged, never a reason to be free.
        let (sane, fields) = check(
            r#"{"usage":{"prompt_tokens":-5,"completion_tokens":2.5,"prompt_tokens_details":{"cached_tokens":"3"}}}"#,
        );
        assert_eq!(
            (sane.tokens_in, sane.tokens_out, sane.tokens_cached),
            (0, 3, 0)
        );
        assert_eq!(
            fields,
            vec![
                "prompt_tokens",
                "completion_tokens",
                "cached_tokens",
                "tokens_cached"
            ]
        );
        let (sane, fields) = check(r#"{"usage":{"prompt_tokens":"12","completion_tokens":4}}"#);
        assert_eq!((sane.tokens_in, sane.tokens_out), (12, 4));
        assert_eq!(fields, vec!["prompt_tokens"]);
        // A sane usage passes untouched.
        let (sane, fields) = check(
            r#"{"usage":{"prompt_tokens":50,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":40}}}"#,
        );
        assert_eq!(
            (sane.tokens_in, sane.tokens_out, sane.tokens_cached),
            (50, 7, 40)
        );
        assert!(fields.is_empty());
    }

    /// Any JSON value in any count field.
    fn count_value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<u64>().prop_map(|n| n.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            "[a-z0-9 .-]{0,8}".prop_map(|s| format!("\"{s}\"")),
            Just("null".to_string()),
            Just("true".to_string()),
            Just("{}".to_string()),
            Just("[1]".to_string()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Whatever an upstream puts in `usage`, the counts that come out are within
        /// `usage_max_tokens`, cache reads and writes within the prompt, and a whole-number
        /// count sent in range is kept as sent.
        #[test]
        fn checked_usage_is_always_sane(
            fields in proptest::collection::vec((0usize..8, count_value()), 0..8),
            max in 1u64..=MAX,
        ) {
            let names = [
                "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens",
                "cache_creation_input_tokens", "cache_read_input_tokens",
                "prompt_tokens_details", "input_tokens_details",
            ];
            let members: Vec<String> = fields
                .iter()
                .map(|(field, value)| {
                    let name = names[*field];
                    if name.ends_with("_details") {
                        format!("\"{name}\":{{\"cached_tokens\":{value}}}")
                    } else {
                        format!("\"{name}\":{value}")
                    }
                })
                .collect();
            let body = format!("{{\"usage\":{{{}}}}}", members.join(","));
            for format in [ApiFormat::Openai, ApiFormat::Anthropic] {
                let read = response_usage(format, body.as_bytes());
                prop_assert!(read.is_ok(), "{body}: {read:?}");
                if let Ok(Some(counts)) = read {
                    let (sane, _) = checked_usage(counts, max);
                    prop_assert!(sane.tokens_in <= max && sane.tokens_out <= max, "{body}");
                    prop_assert!(
                        sane.tokens_cached + sane.tokens_cache_write <= sane.tokens_in,
                        "{body}: {sane:?}"
                    );
                    if counts.flaws.is_empty() && counts.tokens_out <= max {
                        prop_assert_eq!(sane.tokens_out, counts.tokens_out);
                    }
                }
            }
        }
    }
}
