//! Which connections prime their window (behaviour §13) and when each last did: the plans read
//! from the config ([`PrimePlan`], in the live config) and the node's book of primes
//! ([`PrimeBook`], rebuilt from the journal's `window_primed` on start). The driver that uses
//! them is `prime_driver`.

use std::collections::HashMap;
use std::sync::Mutex;

use quotaroute_actors::policy::prime::PrimeSchedule;
use quotaroute_journal::Event;

use crate::config::Config;

/// One connection that primes: its schedule and the model it primes with.
#[derive(Debug, Clone, PartialEq)]
pub struct PrimePlan {
    pub connection: String,
    pub provider: String,
    /// A model the connection serves: the first of its `models`, else the first a combo
    /// sends to it.
    pub model: String,
    pub schedule: PrimeSchedule,
}

/// Every connection of `config` with a `prime_at`, and a model it serves (one without any —
/// no `models` and in no combo — is left out, with a warning: nothing says what it serves).
pub fn plans(config: &Config) -> Vec<PrimePlan> {
    config
        .connections
        .iter()
        .filter_map(|connection| {
            let schedule = connection.prime.clone()?;
            let model = connection
                .models
                .as_ref()
                .and_then(|models| models.first().cloned())
                .or_else(|| {
                    config
                        .combos
                        .iter()
                        .flat_map(|combo| &combo.targets)
                        .find(|target| target.connection == connection.id)
                        .map(|target| target.model.clone())
                });
            let Some(model) = model else {
                tracing::warn!(
                    connection = %connection.id,
                    "prime_at is set but no model is known for the connection (no `models`, in no combo): it is not primed"
                );
                return None;
            };
            Some(PrimePlan {
                connection: connection.id.clone(),
                provider: connection.provider.clone(),
                model,
                schedule,
            })
        })
        .collect()
}

/// When each connection was last primed (Unix ms the prime was served), for the rule's "one
/// per window" and the admin view.
#[derive(Debug, Default)]
pub struct PrimeBook {
    primed: Mutex<HashMap<String, u64>>,
}

impl PrimeBook {
    pub fn last(&self, connection: &str) -> Option<u64> {
        self.primed
            .lock()
            .ok()
            .and_then(|primed| primed.get(connection).copied())
    }

    pub fn record(&self, connection: &str, at_ms: u64) {
        if let Ok(mut primed) = self.primed.lock() {
            let last = primed.entry(connection.to_owned()).or_insert(at_ms);
            *last = (*last).max(at_ms);
        }
    }

    /// Folds the journal's `window_primed` events in (on start).
    pub fn fold<'a>(&self, envelopes: impl IntoIterator<Item = &'a quotaroute_journal::Envelope>) {
        for envelope in envelopes {
            if let Event::WindowPrimed(primed) = &envelope.event {
                self.record(&primed.connection, envelope.at_ms);
            }
        }
    }
}
