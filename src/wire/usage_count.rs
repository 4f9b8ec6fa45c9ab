//! One token count of an upstream's `usage`, read from whatever JSON value the upstream put
//! there (behaviour §11: usage is checked before it is counted). A negative, fractional or
//! non-numeric count does not make the whole `usage` unreadable (which would make the answer
//! free): it is read as the nearest sane count and the flaw is remembered, per field, for the
//! node to log. It must not decide limits (`usage_check` clamps against `usage_max_tokens`).

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// What was wrong with a count as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountFlaw {
    /// Below zero: read as 0.
    Negative,
    /// Not a whole number: rounded up (a fraction of a token is still a token).
    Fractional,
    /// A string, bool, array or object: a string holding a number is read as that number,
    /// anything else as 0.
    NotNumeric,
}

impl CountFlaw {
    const ALL: [CountFlaw; 3] = [
        CountFlaw::Negative,
        CountFlaw::Fractional,
        CountFlaw::NotNumeric,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CountFlaw::Negative => "negative",
            CountFlaw::Fractional => "fractional",
            CountFlaw::NotNumeric => "not a number",
        }
    }
}

/// The `usage` fields a flaw can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountField {
    PromptTokens,
    CompletionTokens,
    InputTokens,
    OutputTokens,
    CacheCreationInputTokens,
    CacheReadInputTokens,
    CachedTokens,
}

impl CountField {
    const ALL: [CountField; 7] = [
        CountField::PromptTokens,
        CountField::CompletionTokens,
        CountField::InputTokens,
        CountField::OutputTokens,
        CountField::CacheCreationInputTokens,
        CountField::CacheReadInputTokens,
        CountField::CachedTokens,
    ];

    /// The field's name as upstreams send it.
    pub fn as_str(self) -> &'static str {
        match self {
            CountField::PromptTokens => "prompt_tokens",
            CountField::CompletionTokens => "completion_tokens",
            CountField::InputTokens => "input_tokens",
            CountField::OutputTokens => "output_tokens",
            CountField::CacheCreationInputTokens => "cache_creation_input_tokens",
            CountField::CacheReadInputTokens => "cache_read_input_tokens",
            CountField::CachedTokens => "cached_tokens",
        }
    }
}

/// Which (field, flaw) pairs a usage had: a bit set, so the counts stay `Copy` and cost nothing
/// when all is well.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountFlaws(u32);

impl CountFlaws {
    fn bit(field: CountField, flaw: CountFlaw) -> u32 {
        let field = CountField::ALL
            .iter()
            .position(|f| *f == field)
            .unwrap_or(0);
        let flaw = CountFlaw::ALL.iter().position(|f| *f == flaw).unwrap_or(0);
        1 << (field * CountFlaw::ALL.len() + flaw)
    }

    pub fn add(&mut self, field: CountField, flaw: CountFlaw) {
        self.0 |= Self::bit(field, flaw);
    }

    pub fn merge(&mut self, other: CountFlaws) {
        self.0 |= other.0;
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Some count was negative or not a number: what was read is no report of what was used
    /// (a fraction, rounded up, still is).
    pub fn any_unreadable(self) -> bool {
        self.iter().any(|(_, flaw)| flaw != CountFlaw::Fractional)
    }

    /// Every (field, flaw) pair, in field order.
    pub fn iter(self) -> impl Iterator<Item = (CountField, CountFlaw)> {
        CountField::ALL.into_iter().flat_map(move |field| {
            CountFlaw::ALL
                .into_iter()
                .filter(move |flaw| self.0 & Self::bit(field, *flaw) != 0)
                .map(move |flaw| (field, flaw))
        })
    }
}

/// One count as read: its sane value and what was wrong with it, if anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    pub value: u64,
    pub flaw: Option<CountFlaw>,
}

impl Count {
    fn ok(value: u64) -> Self {
        Count { value, flaw: None }
    }

    fn flawed(value: u64, flaw: CountFlaw) -> Self {
        Count {
            value,
            flaw: Some(flaw),
        }
    }

    /// A float count: whole and non-negative is fine; a fraction rounds up; beyond `u64` is
    /// `u64::MAX` (clamped later against `usage_max_tokens`).
    fn from_f64(value: f64) -> Self {
        if value.is_nan() {
            return Count::flawed(0, CountFlaw::NotNumeric);
        }
        if value < 0.0 {
            return Count::flawed(0, CountFlaw::Negative);
        }
        let whole = value.ceil();
        // `as` saturates at u64::MAX for values beyond it.
        let read = whole as u64;
        if whole != value {
            Count::flawed(read, CountFlaw::Fractional)
        } else {
            Count::ok(read)
        }
    }

    /// A string count: a number in a string is read as that number (still flagged).
    fn from_text(text: &str) -> Self {
        match text.trim().parse::<f64>() {
            Ok(number) if number.is_finite() => Count {
                flaw: Some(CountFlaw::NotNumeric),
                ..Count::from_f64(number)
            },
            _ => Count::flawed(0, CountFlaw::NotNumeric),
        }
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor;
        impl<'de> Visitor<'de> for CountVisitor {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a token count")
            }
            fn visit_u64<E>(self, value: u64) -> Result<Count, E> {
                Ok(Count::ok(value))
            }
            fn visit_i64<E>(self, value: i64) -> Result<Count, E> {
                Ok(if value < 0 {
                    Count::flawed(0, CountFlaw::Negative)
                } else {
                    Count::ok(value.unsigned_abs())
                })
            }
            fn visit_f64<E>(self, value: f64) -> Result<Count, E> {
                Ok(Count::from_f64(value))
            }
            fn visit_str<E>(self, value: &str) -> Result<Count, E> {
                Ok(Count::from_text(value))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Count, E> {
                Ok(Count::flawed(0, CountFlaw::NotNumeric))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Count::flawed(0, CountFlaw::NotNumeric))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Count::flawed(0, CountFlaw::NotNumeric))
            }
        }
        deserializer.deserialize_any(CountVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Count {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn every_json_value_reads_as_a_sane_count_and_its_flaw() {
        let table = [
            ("5", 5, None),
            ("0", 0, None),
            ("18446744073709551615", u64::MAX, None),
            ("-5", 0, Some(CountFlaw::Negative)),
            ("-9223372036854775808", 0, Some(CountFlaw::Negative)),
            ("1.5", 2, Some(CountFlaw::Fractional)),
            ("2.0", 2, None),
            ("-0.5", 0, Some(CountFlaw::Negative)),
            ("1e300", u64::MAX, None),
            ("\"12\"", 12, Some(CountFlaw::NotNumeric)),
            ("\"lots\"", 0, Some(CountFlaw::NotNumeric)),
            ("\"NaN\"", 0, Some(CountFlaw::NotNumeric)),
            ("true", 0, Some(CountFlaw::NotNumeric)),
            ("[1,2]", 0, Some(CountFlaw::NotNumeric)),
            ("{\"a\":1}", 0, Some(CountFlaw::NotNumeric)),
        ];
        for (json, value, flaw) in table {
            assert_eq!(read(json), Count { value, flaw }, "{json}");
        }
    }

    #[test]
    fn flaws_are_kept_per_field() {
        let mut flaws = CountFlaws::default();
        assert!(flaws.is_empty());
        flaws.add(CountField::CachedTokens, CountFlaw::Negative);
        flaws.add(CountField::PromptTokens, CountFlaw::NotNumeric);
        let mut other = CountFlaws::default();
        other.add(CountField::OutputTokens, CountFlaw::Fractional);
        flaws.merge(other);
        let seen: Vec<_> = flaws.iter().collect();
        assert_eq!(
            seen,
            vec![
                (CountField::PromptTokens, CountFlaw::NotNumeric),
                (CountField::OutputTokens, CountFlaw::Fractional),
                (CountField::CachedTokens, CountFlaw::Negative),
            ]
        );
    }
}
