//! `MockUpstream`: the cloneable handle holding the mock's rules, per-key budgets, counters, the
//! compression mode and the stored Responses-API responses.
//!
//! Owns which fault (if any) a request gets and what each key has used; it never builds an HTTP
//! response. All state sits behind one short-held mutex: the mock is a test tool, not the router.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use super::auth::AuthState;
use super::compression::Compression;
use super::fault::{Fault, Rule};
use super::plan_windows::{PlanReading, SubscriptionPlan};
use super::stored::{StoredResponse, StoredResponses};

/// A key's rate-limit budget, reported in every response's rate-limit headers. Usage counts
/// from the mock's start (or the last `set_budget` for the key); once the requests are spent,
/// the key gets a real 429 with a reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateBudget {
    pub requests_limit: u64,
    pub tokens_limit: u64,
    /// What the reset headers say, from now.
    pub reset_ms: u64,
}

impl Default for RateBudget {
    fn default() -> Self {
        Self {
            requests_limit: 1_000_000,
            tokens_limit: 100_000_000,
            reset_ms: 60_000,
        }
    }
}

/// What a key has left, as reported by one response's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateSnapshot {
    pub budget: RateBudget,
    pub requests_remaining: u64,
    pub tokens_remaining: u64,
    /// The per-minute count headers are sent (`false` for a key set as a subscription
    /// account, which reports only its windows).
    pub count_headers: bool,
    /// A key with a plan: its windows after this request (their headers are sent instead).
    pub plan: Option<PlanReading>,
}

/// Requests seen, for `GET /mock/stats`: every request counts, faulted or not.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MockStats {
    pub total: u64,
    pub per_key: BTreeMap<String, u64>,
    /// key → model → requests.
    pub per_key_model: BTreeMap<String, BTreeMap<String, u64>>,
    /// Every request on a stored response (`GET`/`DELETE …/responses/{id}`, `…/input_items`,
    /// `…/cancel`), in arrival order: which key asked, and whether it was that key's.
    #[serde(default)]
    pub stored_lookups: Vec<StoredLookup>,
    /// key → the most requests it had in progress at once, counted until each answer's
    /// headers (so a JSON answer's `Latency` fault counts).
    #[serde(default)]
    pub max_in_flight: BTreeMap<String, u64>,
}

/// One request on a stored response, as [`MockStats::stored_lookups`] records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredLookup {
    pub key: String,
    pub response_id: String,
    /// `get`, `delete`, `input_items` or `cancel`.
    pub action: String,
    /// The response existed and belonged to `key`.
    pub found: bool,
}

impl MockStats {
    /// The most requests `key` had in progress at once.
    pub fn max_in_flight_for(&self, key: &str) -> u64 {
        self.max_in_flight.get(key).copied().unwrap_or(0)
    }

    pub fn for_key(&self, key: &str) -> u64 {
        self.per_key.get(key).copied().unwrap_or(0)
    }

    pub fn for_key_model(&self, key: &str, model: &str) -> u64 {
        self.per_key_model
            .get(key)
            .and_then(|models| models.get(model))
            .copied()
            .unwrap_or(0)
    }

    /// How many stored-response requests `key` made.
    pub fn stored_lookups_for(&self, key: &str) -> usize {
        self.stored_lookups
            .iter()
            .filter(|lookup| lookup.key == key)
            .count()
    }
}

/// The decision for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// 1, 2, 3… in arrival order since the mock started (never reset): makes response ids
    /// unique yet deterministic.
    pub sequence: u64,
    pub fault: Option<Fault>,
    /// The key's budget was already spent before this request.
    pub budget_exhausted: bool,
    /// Headers to report, after this request's usage.
    pub rate: RateSnapshot,
}

#[derive(Debug, Default)]
struct Usage {
    requests: u64,
    tokens: u64,
}

/// One request in progress on a key (see [`MockUpstream::enter`]).
pub(crate) struct InProgress {
    mock: MockUpstream,
    key: String,
}

impl Drop for InProgress {
    fn drop(&mut self) {
        if let Some(current) = self.mock.lock().in_progress.get_mut(&self.key) {
            *current = current.saturating_sub(1);
        }
    }
}

#[derive(Debug, Default)]
struct MockState {
    /// key → requests in progress now.
    in_progress: HashMap<String, u64>,
    rules: Vec<(Rule, u32)>,
    stats: MockStats,
    budgets: HashMap<String, RateBudget>,
    usage: HashMap<String, Usage>,
    /// The last sequence handed out; unlike `stats.total`, never reset.
    sequence: u64,
    compression: Compression,
    /// The most text chunks an OpenAI-format or Anthropic answer has, whatever its
    /// `max_tokens` (`None`: as it asks).
    reply_cap: Option<u64>,
    /// Extra headers on every answer to a key (Codex's `x-codex-*` windows, plan headers).
    response_headers: HashMap<String, Vec<(String, String)>>,
    /// Keys that answer like subscription accounts: no per-minute count headers.
    subscription_keys: std::collections::HashSet<String>,
    /// Keys with a plan's rolling windows (they answer like subscription accounts too).
    plans: HashMap<String, SubscriptionPlan>,
    stored: StoredResponses,
    auth: AuthState,
    prompt_caches: super::prompt_cache::PromptCaches,
    /// The last [`RECENT_BODIES`] request bodies with their paths, oldest first.
    recent: std::collections::VecDeque<(String, bytes::Bytes)>,
    /// The last [`RECENT_BODIES`] request heads as text, oldest first.
    recent_heads: std::collections::VecDeque<String>,
    /// Keys whose host serves only these generation APIs (`chat`, `responses`, `messages`):
    /// the others' paths answer 404 as an unknown route. Absent: every API.
    served_apis: HashMap<String, Vec<String>>,
    /// Routes keys' hosts lack, and how their 404 reads (`missing_route`).
    routes: crate::route_table::MissingRoutes,
}

/// How many request bodies the mock keeps for tests to read.
const RECENT_BODIES: usize = 64;

/// A handle on one mock upstream; clones share the same state.
#[derive(Debug, Clone, Default)]
pub struct MockUpstream {
    state: Arc<Mutex<MockState>>,
    /// SSE events handed to the connection, over every stream (see `stream_events_sent`).
    events_sent: Arc<std::sync::atomic::AtomicU64>,
}

impl MockUpstream {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, MockState> {
        // A panicking test thread must not wedge the mock for the others.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `key`'s host serve only `apis` of the generation APIs (`chat`, `responses`,
    /// `messages`), as a chat-only vLLM or the responses-only Codex backend: the others answer
    /// 404 as an unknown route.
    pub fn set_served_apis(&self, key: &str, apis: &[&str]) {
        let apis = apis.iter().map(|api| (*api).to_owned()).collect();
        self.lock().served_apis.insert(key.to_owned(), apis);
    }

    /// Runs `change` on the missing routes' state, under the mock's mutex.
    pub(crate) fn with_routes<T>(
        &self,
        change: impl FnOnce(&mut crate::route_table::MissingRoutes) -> T,
    ) -> T {
        change(&mut self.lock().routes)
    }

    /// Whether `key`'s host serves the generation API `api`.
    pub(crate) fn serves_api(&self, key: &str, api: &str) -> bool {
        self.lock()
            .served_apis
            .get(key)
            .is_none_or(|apis| apis.iter().any(|served| served == api))
    }

    /// How many SSE events every stream so far handed to its connection: what the mock
    /// generated (a stream whose reader went away stops generating).
    pub fn stream_events_sent(&self) -> u64 {
        self.events_sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The counter behind [`stream_events_sent`](Self::stream_events_sent).
    pub(crate) fn events_sent_counter(&self) -> Arc<std::sync::atomic::AtomicU64> {
        Arc::clone(&self.events_sent)
    }

    /// Remembers one request's path and body (the last [`RECENT_BODIES`]).
    pub(crate) fn record_body(&self, path: &str, body: &bytes::Bytes) {
        let mut state = self.lock();
        if state.recent.len() == RECENT_BODIES {
            state.recent.pop_front();
        }
        state.recent.push_back((path.to_owned(), body.clone()));
    }

    /// Remembers one request's head as text: method, path with query, every header (the last
    /// [`RECENT_BODIES`]), so a test can check a secret never reached the upstream.
    pub(crate) fn record_head(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) {
        let mut head = format!("{method} {uri}\n");
        for (name, value) in headers {
            head.push_str(&format!(
                "{name}: {}\n",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        let mut state = self.lock();
        if state.recent_heads.len() == RECENT_BODIES {
            state.recent_heads.pop_front();
        }
        state.recent_heads.push_back(head);
    }

    /// The last request heads the mock received (`METHOD path?query` then `name: value`
    /// lines), oldest first.
    pub fn recent_heads(&self) -> Vec<String> {
        self.lock().recent_heads.iter().cloned().collect()
    }

    /// The last request bodies the mock received, with their paths, oldest first.
    pub fn recent_bodies(&self) -> Vec<(String, bytes::Bytes)> {
        self.lock().recent.iter().cloned().collect()
    }

    /// Runs `change` on the credential checks' state (`auth`), under the mock's mutex.
    pub(crate) fn with_auth<T>(&self, change: impl FnOnce(&mut AuthState) -> T) -> T {
        change(&mut self.lock().auth)
    }

    /// Serves `body` from `key`'s prompt cache (and remembers its prefixes).
    pub(crate) fn prompt_cache(
        &self,
        key: &str,
        body: &serde_json::Value,
    ) -> super::prompt_cache::CacheUse {
        self.lock().prompt_caches.serve(key, body)
    }

    /// Replaces every rule (and their spent counts).
    pub fn set_rules(&self, rules: Vec<Rule>) {
        self.lock().rules = rules.into_iter().map(|rule| (rule, 0)).collect();
    }

    /// Appends one rule after the existing ones.
    pub fn add_rule(&self, rule: Rule) {
        self.lock().rules.push((rule, 0));
    }

    pub fn clear_rules(&self) {
        self.lock().rules.clear();
    }

    /// The rules with how many times each has fired.
    pub fn rules(&self) -> Vec<(Rule, u32)> {
        self.lock().rules.clone()
    }

    pub fn stats(&self) -> MockStats {
        self.lock().stats.clone()
    }

    pub fn reset_stats(&self) {
        self.lock().stats = MockStats::default();
    }

    /// Sets a key's budget and starts its usage from zero.
    pub fn set_budget(&self, key: &str, budget: RateBudget) {
        let mut state = self.lock();
        state.budgets.insert(key.to_owned(), budget);
        state.usage.remove(key);
    }

    /// Compresses every upstream answer from now on as `mode` says (the default is
    /// [`Compression::Off`]).
    pub fn set_compression(&self, mode: Compression) {
        self.lock().compression = mode;
    }

    pub fn compression(&self) -> Compression {
        self.lock().compression
    }

    /// Answers every OpenAI-format and Anthropic request from now on with at most `chunks` text
    /// chunks, whatever its `max_tokens` asks (`None`: as it asks, the default), as a model that
    /// is done before its limit: a translated request carries the router's default
    /// `max_tokens`, which otherwise makes its answer the longest the mock gives (4096 chunks).
    pub fn cap_reply_chunks(&self, chunks: Option<u64>) {
        self.lock().reply_cap = chunks;
    }

    pub fn reply_cap(&self) -> Option<u64> {
        self.lock().reply_cap
    }

    /// Puts `headers` on every answer to `key` from now on (replacing earlier ones; an empty
    /// list removes them), as Codex puts its `x-codex-*` windows on every reply.
    pub fn set_response_headers(&self, key: &str, headers: Vec<(String, String)>) {
        let mut state = self.lock();
        if headers.is_empty() {
            state.response_headers.remove(key);
        } else {
            state.response_headers.insert(key.to_owned(), headers);
        }
    }

    /// Makes `key` answer like a subscription account (Claude or ChatGPT plans): only the
    /// windows its extra headers report, no per-minute `*-limit` / `*-remaining` counts.
    pub fn set_subscription_account(&self, key: &str) {
        self.lock().subscription_keys.insert(key.to_owned());
    }

    /// Gives `key` a subscription plan's rolling 5-hour and weekly windows: each answer reports
    /// them in its provider's headers (Anthropic's `anthropic-ratelimit-unified-*`, Codex's
    /// `x-codex-primary/secondary-*`), and a spent window answers 429 until its reset.
    pub fn set_plan(&self, key: &str, plan: SubscriptionPlan) {
        let mut state = self.lock();
        state.subscription_keys.insert(key.to_owned());
        state.plans.insert(key.to_owned(), plan);
    }

    /// `key`'s plan as it stands (its windows' use).
    pub fn plan(&self, key: &str) -> Option<SubscriptionPlan> {
        self.lock().plans.get(key).copied()
    }

    /// The extra headers for `key` (see [`Self::set_response_headers`]).
    pub(crate) fn response_headers(&self, key: &str) -> Vec<(String, String)> {
        self.lock()
            .response_headers
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    pub(crate) fn store_response(&self, id: String, stored: StoredResponse) {
        self.lock().stored.insert(id, stored);
    }

    /// A copy of the response `id` if `key` stored it.
    pub(crate) fn stored_response(&self, key: &str, id: &str) -> Option<StoredResponse> {
        self.lock().stored.get(key, id).cloned()
    }

    /// Applies `change` to the response `id` if `key` stored it, and returns the result.
    pub(crate) fn update_stored_response(
        &self,
        key: &str,
        id: &str,
        change: impl FnOnce(&mut StoredResponse),
    ) -> Option<StoredResponse> {
        let mut state = self.lock();
        let stored = state.stored.get_mut(key, id)?;
        change(stored);
        Some(stored.clone())
    }

    pub(crate) fn delete_stored_response(&self, key: &str, id: &str) -> bool {
        self.lock().stored.remove(key, id)
    }

    pub(crate) fn record_stored_lookup(&self, lookup: StoredLookup) {
        self.lock().stats.stored_lookups.push(lookup);
    }

    /// Marks one request of `key` in progress until the guard drops, keeping the key's peak.
    pub(crate) fn enter(&self, key: &str) -> InProgress {
        let mut state = self.lock();
        let now = {
            let current = state.in_progress.entry(key.to_owned()).or_default();
            *current += 1;
            *current
        };
        let peak = state.stats.max_in_flight.entry(key.to_owned()).or_default();
        *peak = (*peak).max(now);
        InProgress {
            mock: self.clone(),
            key: key.to_owned(),
        }
    }

    /// Counts the request, picks its fault and charges the key's budget (`tokens` only when the
    /// request will succeed).
    pub fn admit(&self, key: &str, model: &str, streaming: bool, tokens: u64) -> Admission {
        let mut state = self.lock();
        state.stats.total += 1;
        state.sequence += 1;
        let sequence = state.sequence;
        *state.stats.per_key.entry(key.to_owned()).or_default() += 1;
        // Requests on stored responses of unknown ids have no model.
        if !model.is_empty() {
            *state
                .stats
                .per_key_model
                .entry(key.to_owned())
                .or_default()
                .entry(model.to_owned())
                .or_default() += 1;
        }

        let fault = state
            .rules
            .iter_mut()
            .find(|(rule, fired)| {
                rule.key.as_deref().is_none_or(|wanted| wanted == key)
                    && rule.model.as_deref().is_none_or(|wanted| wanted == model)
                    && rule.times.is_none_or(|times| *fired < times)
                    && (streaming || !rule.fault.streaming_only())
            })
            .map(|(rule, fired)| {
                *fired += 1;
                rule.fault.clone()
            });

        // A request a fault refuses never reaches the plan's count, as a refused one never
        // counts; a slow answer does.
        let serves = fault.as_ref().is_none_or(Fault::still_serves);
        let plan = match state.plans.get_mut(key) {
            Some(plan) if serves => Some(plan.admit(now_ms())),
            _ => None,
        };
        let budget = state.budgets.get(key).copied().unwrap_or_default();
        let usage = state.usage.entry(key.to_owned()).or_default();
        let budget_exhausted = usage.requests >= budget.requests_limit
            || plan.is_some_and(|plan| plan.spent_until_ms.is_some());
        usage.requests += 1;
        if fault.is_none() && !budget_exhausted {
            usage.tokens += tokens;
        }
        let rate = RateSnapshot {
            budget,
            requests_remaining: budget.requests_limit.saturating_sub(usage.requests),
            tokens_remaining: budget.tokens_limit.saturating_sub(usage.tokens),
            count_headers: !state.subscription_keys.contains(key),
            plan,
        };
        Admission {
            sequence,
            fault,
            budget_exhausted,
            rate,
        }
    }
}

/// The wall clock in Unix ms: plan windows reset on real time, as the providers' do.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_matching_rule_wins_and_times_run_out() {
        let mock = MockUpstream::new();
        mock.set_rules(vec![
            Rule::always(Fault::Status(503)).for_key("k1").times(2),
            Rule::always(Fault::Status(500)).for_model("m2"),
        ]);
        let faults: Vec<_> = (0..3)
            .map(|_| mock.admit("k1", "m1", false, 0).fault)
            .collect();
        assert_eq!(
            faults,
            vec![Some(Fault::Status(503)), Some(Fault::Status(503)), None]
        );
        assert_eq!(
            mock.admit("k2", "m2", false, 0).fault,
            Some(Fault::Status(500))
        );
        assert_eq!(mock.admit("k2", "m1", false, 0).fault, None);
        let stats = mock.stats();
        assert_eq!(stats.total, 5);
        assert_eq!(stats.for_key("k1"), 3);
        assert_eq!(stats.for_key_model("k2", "m2"), 1);
    }

    #[test]
    fn stream_faults_skip_non_streaming_requests() {
        let mock = MockUpstream::new();
        mock.set_rules(vec![Rule::always(Fault::StreamFailAfterContent)]);
        assert_eq!(mock.admit("k", "m", false, 0).fault, None);
        assert_eq!(
            mock.admit("k", "m", true, 0).fault,
            Some(Fault::StreamFailAfterContent)
        );
    }

    #[test]
    fn budget_counts_down_then_is_exhausted() {
        let mock = MockUpstream::new();
        mock.set_budget(
            "k",
            RateBudget {
                requests_limit: 2,
                tokens_limit: 100,
                reset_ms: 1000,
            },
        );
        let first = mock.admit("k", "m", false, 30);
        assert_eq!(first.rate.requests_remaining, 1);
        assert_eq!(first.rate.tokens_remaining, 70);
        assert!(!first.budget_exhausted);
        assert!(!mock.admit("k", "m", false, 30).budget_exhausted);
        let third = mock.admit("k", "m", false, 30);
        assert!(third.budget_exhausted);
        assert_eq!(third.rate.requests_remaining, 0);
        assert_eq!(third.rate.tokens_remaining, 40);
    }
}
