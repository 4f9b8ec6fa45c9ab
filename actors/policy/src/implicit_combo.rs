//! The implicit combo's name (behaviour §2): `provider/model` asks for every connection of
//! `provider` that serves `model`. Built and read only here; the journal, the wire and the
//! price list keep the joined string.

use std::fmt;

/// `provider/model`, split at its first `/` (a model name may hold more, as
/// `openrouter/meta-llama/llama-3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImplicitCombo<'a> {
    pub provider: &'a str,
    pub model: &'a str,
}

impl<'a> ImplicitCombo<'a> {
    pub fn new(provider: &'a str, model: &'a str) -> Self {
        ImplicitCombo { provider, model }
    }

    /// The parts of `name`; `None` when it holds no `/` (so names no implicit combo).
    pub fn parse(name: &'a str) -> Option<Self> {
        let (provider, model) = name.split_once('/')?;
        Some(ImplicitCombo { provider, model })
    }

    /// The joined name, as clients send it and the journal records it.
    pub fn name(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for ImplicitCombo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_splits_at_its_first_slash_and_joins_back() {
        let combo = ImplicitCombo::parse("openrouter/meta-llama/llama-3").unwrap();
        assert_eq!(
            (combo.provider, combo.model),
            ("openrouter", "meta-llama/llama-3")
        );
        assert_eq!(combo.name(), "openrouter/meta-llama/llama-3");
        assert_eq!(ImplicitCombo::parse("gpt-4o"), None);
        assert_eq!(
            ImplicitCombo::new("openai", "gpt-4o").name(),
            "openai/gpt-4o"
        );
    }
}
