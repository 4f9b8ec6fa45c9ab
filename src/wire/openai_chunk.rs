//! How an OpenAI chat / completions chunk is read on the hot path: what its `choices` hold
//! (count, content per behaviour §3, finish reason), its `usage` and whether it is an error,
//! decoded straight from the bytes without building the choices. It must not say what that
//! means for the router (that is `stream_watch`).

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::usage::UsageFields;

/// An OpenAI chat or completions chunk.
#[derive(Deserialize)]
pub(super) struct OpenAiChunk<'a> {
    #[serde(default)]
    pub(super) choices: Option<ChoicesSummary>,
    #[serde(default)]
    pub(super) usage: Option<UsageFields>,
    #[serde(default, borrow)]
    pub(super) error: Option<&'a RawValue>,
}

/// What the `choices` array of a chunk holds, read without building it.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ChoicesSummary {
    pub(super) count: usize,
    /// Some choice has a non-empty delta field other than `role`, or non-empty `text`.
    pub(super) has_content: bool,
    pub(super) has_finish_reason: bool,
}

impl<'de> Deserialize<'de> for ChoicesSummary {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ChoicesVisitor;
        impl<'de> Visitor<'de> for ChoicesVisitor {
            type Value = ChoicesSummary;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_unit<E>(self) -> Result<ChoicesSummary, E> {
                Ok(ChoicesSummary::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ChoicesSummary, A::Error> {
                let mut summary = ChoicesSummary::default();
                while let Some(choice) = seq.next_element::<Choice>()? {
                    summary.count += 1;
                    summary.has_content |= choice.delta.is_some_and(|d| d.0) || choice.text.0;
                    summary.has_finish_reason |= choice.finish_reason.0;
                }
                Ok(summary)
            }
        }
        deserializer.deserialize_any(ChoicesVisitor)
    }
}

#[derive(Deserialize)]
struct Choice {
    /// Chat: whether the delta has content.
    #[serde(default)]
    delta: Option<DeltaHasContent>,
    /// Completions: whether `text` is non-empty.
    #[serde(default)]
    text: NonEmpty,
    #[serde(default)]
    finish_reason: NonEmpty,
}

/// Whether a delta object has a non-empty field other than `role` (behaviour §3).
struct DeltaHasContent(bool);

impl<'de> Deserialize<'de> for DeltaHasContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DeltaVisitor;
        impl<'de> Visitor<'de> for DeltaVisitor {
            type Value = DeltaHasContent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a delta object")
            }
            fn visit_unit<E>(self) -> Result<DeltaHasContent, E> {
                Ok(DeltaHasContent(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DeltaHasContent, A::Error> {
                let mut has_content = false;
                while let Some(IsRole(is_role)) = map.next_key::<IsRole>()? {
                    if is_role {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        has_content |= map.next_value::<NonEmpty>()?.0;
                    }
                }
                Ok(DeltaHasContent(has_content))
            }
        }
        deserializer.deserialize_any(DeltaVisitor)
    }
}

/// Whether a map key is `role`.
struct IsRole(bool);

impl<'de> Deserialize<'de> for IsRole {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = IsRole;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, key: &str) -> Result<IsRole, E> {
                Ok(IsRole(key == "role"))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Whether a JSON value carries something: `null`, `""`, `[]` and `{}` do not.
#[derive(Default)]
struct NonEmpty(bool);

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NonEmptyVisitor;
        impl<'de> Visitor<'de> for NonEmptyVisitor {
            type Value = NonEmpty;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<NonEmpty, E> {
                Ok(NonEmpty(false))
            }
            fn visit_none<E>(self) -> Result<NonEmpty, E> {
                Ok(NonEmpty(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<NonEmpty, E> {
                Ok(NonEmpty(true))
            }
            fn visit_i64<E>(self, _: i64) -> Result<NonEmpty, E> {
                Ok(NonEmpty(true))
            }
            fn visit_u64<E>(self, _: u64) -> Result<NonEmpty, E> {
                Ok(NonEmpty(true))
            }
            fn visit_f64<E>(self, _: f64) -> Result<NonEmpty, E> {
                Ok(NonEmpty(true))
            }
            fn visit_str<E>(self, text: &str) -> Result<NonEmpty, E> {
                Ok(NonEmpty(!text.is_empty()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NonEmpty, A::Error> {
                let mut any = false;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(NonEmpty(any))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NonEmpty, A::Error> {
                let mut any = false;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(NonEmpty(any))
            }
        }
        deserializer.deserialize_any(NonEmptyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(choices: &str) -> (usize, bool, bool) {
        let data = format!("{{\"choices\":{choices}}}");
        let chunk: OpenAiChunk<'_> = serde_json::from_str(&data).unwrap();
        let summary = chunk.choices.unwrap_or_default();
        (
            summary.count,
            summary.has_content,
            summary.has_finish_reason,
        )
    }

    #[test]
    fn s3_content_is_any_non_empty_delta_field_but_role() {
        let table = [
            (r#"[]"#, (0, false, false)),
            (r#"null"#, (0, false, false)),
            (r#"[{"delta":{"role":"assistant"}}]"#, (1, false, false)),
            (
                r#"[{"delta":{"role":"assistant","content":"","tool_calls":[],"x":{}}}]"#,
                (1, false, false),
            ),
            (
                r#"[{"delta":null,"finish_reason":"stop"}]"#,
                (1, false, true),
            ),
            (r#"[{"delta":{"content":" "}}]"#, (1, true, false)),
            (
                r#"[{"delta":{"tool_calls":[{"index":0}]}}]"#,
                (1, true, false),
            ),
            (r#"[{"delta":{"audio":{"data":"AAA"}}}]"#, (1, true, false)),
            (
                r#"[{"delta":{"\u0072ole":"assistant"}}]"#,
                (1, false, false),
            ),
            (
                r#"[{"delta":{}},{"delta":{"content":"b"}}]"#,
                (2, true, false),
            ),
            (r#"[{"text":"x","finish_reason":null}]"#, (1, true, false)),
        ];
        for (choices, expected) in table {
            assert_eq!(summary(choices), expected, "{choices}");
        }
    }

    #[test]
    fn s3_malformed_choices_do_not_parse() {
        for choices in [r#""x""#, "[1]", r#"[{"delta":"text"}]"#, "{}"] {
            let data = format!("{{\"choices\":{choices}}}");
            assert!(
                serde_json::from_str::<OpenAiChunk<'_>>(&data).is_err(),
                "{choices}"
            );
        }
    }
}
