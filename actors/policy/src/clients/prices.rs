//! What a model's tokens cost (behaviour §11): `[[prices]]` (USD per million tokens) or a
//! `prices_file` in LiteLLM's `model_prices_and_context_window.json` shape (USD per token).
//! Held as pico-USD (10⁻¹² USD) per token so that spend adds up exactly. Pure: the file's text
//! is an argument.

use std::collections::HashMap;

use crate::implicit_combo::ImplicitCombo;

/// Pico-USD per token of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelPrice {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// Pico-USD in one USD.
pub const PUSD_PER_USD: f64 = 1e12;

/// USD per token → pico-USD per token (rounded to the nearest pico-dollar).
pub fn per_token_usd(usd: f64) -> u64 {
    (usd * PUSD_PER_USD).round().max(0.0) as u64
}

/// USD per million tokens → pico-USD per token.
pub fn per_million_usd(usd: f64) -> u64 {
    (usd * 1e6).round().max(0.0) as u64
}

/// Pico-USD → USD.
pub fn to_usd(pusd: u64) -> f64 {
    pusd as f64 / PUSD_PER_USD
}

impl ModelPrice {
    /// The cost of one request's usage. `tokens_in` includes the cache reads and writes (as
    /// the node counts it), which are priced at their own rates.
    pub fn cost_pusd(&self, tokens_in: u64, tokens_out: u64, cached: u64, cache_write: u64) -> u64 {
        let fresh = tokens_in.saturating_sub(cached.saturating_add(cache_write));
        fresh
            .saturating_mul(self.input)
            .saturating_add(tokens_out.saturating_mul(self.output))
            .saturating_add(cached.saturating_mul(self.cache_read))
            .saturating_add(cache_write.saturating_mul(self.cache_write))
    }
}

/// Model name → price.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PriceTable {
    by_model: HashMap<String, ModelPrice>,
}

impl PriceTable {
    pub fn insert(&mut self, model: String, price: ModelPrice) {
        self.by_model.insert(model, price);
    }

    pub fn len(&self) -> usize {
        self.by_model.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_model.is_empty()
    }

    /// The price of `model` on `provider`: the model's own name, else `provider/model`
    /// (LiteLLM keys some models so), else the part after the last `/`.
    pub fn get(&self, provider: &str, model: &str) -> Option<&ModelPrice> {
        // No prices (the usual case): no key hashed, no `provider/model` formatted, per answer.
        if self.by_model.is_empty() {
            return None;
        }
        if let Some(price) = self.by_model.get(model) {
            return Some(price);
        }
        if let Some(price) = self
            .by_model
            .get(&ImplicitCombo::new(provider, model).name())
        {
            return Some(price);
        }
        model
            .rsplit_once('/')
            .and_then(|(_, bare)| self.by_model.get(bare))
    }

    /// Reads a LiteLLM price list: `{"<model>": {"input_cost_per_token": …,
    /// "output_cost_per_token": …, "cache_read_input_token_cost": …,
    /// "cache_creation_input_token_cost": …, …}, …}`. Entries without an input or output price
    /// (images, the `sample_spec` header) are skipped; a missing cache price is the input
    /// price. Returns the number of models read.
    pub fn read_litellm(&mut self, text: &str) -> Result<usize, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
        let serde_json::Value::Object(models) = value else {
            return Err("must be a JSON object of model name → prices".to_owned());
        };
        let mut read = 0;
        for (model, entry) in models {
            let number = |key: &str| entry.get(key).and_then(serde_json::Value::as_f64);
            let (Some(input), Some(output)) = (
                number("input_cost_per_token"),
                number("output_cost_per_token"),
            ) else {
                continue;
            };
            let input = per_token_usd(input);
            self.by_model.insert(
                model,
                ModelPrice {
                    input,
                    output: per_token_usd(output),
                    cache_read: number("cache_read_input_token_cost").map_or(input, per_token_usd),
                    cache_write: number("cache_creation_input_token_cost")
                        .map_or(input, per_token_usd),
                },
            );
            read += 1;
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_million_prices_cost_exactly() {
        let price = ModelPrice {
            input: per_million_usd(3.0),
            output: per_million_usd(15.0),
            cache_read: per_million_usd(0.3),
            cache_write: per_million_usd(3.75),
        };
        // 1000 in (200 cached, 100 written), 500 out:
        // 700×3 + 500×15 + 200×0.3 + 100×3.75 = 2100 + 7500 + 60 + 375 = 10035 µUSD
        assert_eq!(price.cost_pusd(1_000, 500, 200, 100), 10_035_000_000);
        assert!((to_usd(10_035_000_000) - 0.010035).abs() < 1e-12);
    }

    #[test]
    fn litellm_files_are_read_per_token() {
        let mut table = PriceTable::default();
        let read = table
            .read_litellm(
                r#"{
                "sample_spec": {"max_tokens": "set to max"},
                "claude-sonnet-4-5": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
                    "cache_read_input_token_cost": 3e-07, "cache_creation_input_token_cost": 3.75e-06,
                    "litellm_provider": "anthropic"},
                "gpt-4o-mini": {"input_cost_per_token": 1.5e-07, "output_cost_per_token": 6e-07}
            }"#,
            )
            .unwrap();
        assert_eq!(read, 2);
        let sonnet = table.get("anthropic", "claude-sonnet-4-5").unwrap();
        assert_eq!(sonnet.input, per_million_usd(3.0));
        assert_eq!(sonnet.cache_write, per_million_usd(3.75));
        let mini = table.get("openai", "openai/gpt-4o-mini").unwrap();
        assert_eq!(mini.cache_read, mini.input);
        assert!(table.get("openai", "unknown").is_none());
        assert!(table.read_litellm("[]").is_err());
    }
}
