//! Priming windows on the node (behaviour §13): the driver that wakes on the node's clock
//! at each prime time, asks policy (`policy::prime`) whether a prime is due, and sends the
//! smallest request the upstream accepts through the same tries as a client's request — routed
//! to that one connection only, charged to no client, its usage and rate-limit headers read as
//! any answer's — then journals `window_primed`.

use std::time::Instant as StdInstant;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use quotaroute_actors::policy::implicit_combo::ImplicitCombo;
use quotaroute_actors::policy::prime::{prime_verdict, PrimeVerdict, PRIMED_WINDOW};
use quotaroute_actors::prime_input::prime_input;
use quotaroute_actors::{ClientTag, RouteRequest, Router};
use quotaroute_journal::{Event, WindowPrimed};
use serde_json::json;
use tokio::time::Instant;

use crate::node::app::AppState;
use crate::node::attempt::TryContext;
use crate::node::endpoint::Endpoint;
use crate::node::live::LiveConfig;
use crate::node::prime_plan::PrimePlan;
use crate::node::reply::RouteHeaders;
use crate::node::routed::serve_tries;
use crate::node::served_apis::served_apis;
use crate::wire::translate::Api;

/// The longest the driver sleeps between looks: a window that resets, a block that ends or a
/// reload is seen within it while a prime time is still recent enough to prime.
const LOOK_EVERY_MS: u64 = 60_000;

/// The client id the router's own prime requests carry in the journal (no configured client
/// can have it: client ids hold no `/`); no client is charged for them.
pub const PRIME_CLIENT: &str = "router/prime";

/// One priming connection as `/admin/state` and the dashboard show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PrimeView {
    pub connection: String,
    pub model: String,
    /// `07:00 Europe/Berlin mon,tue,wed,thu,fri`.
    pub schedule: String,
    /// When its window was last primed (Unix ms); `None` (null): never.
    pub last_primed_at_ms: Option<u64>,
    /// Its next prime time after now (Unix ms).
    pub next_prime_at_ms: Option<u64>,
}

/// Every priming connection's view at `now_ms`.
pub fn views(app: &AppState, now_ms: u64) -> Vec<PrimeView> {
    app.live()
        .primes
        .iter()
        .map(|plan| PrimeView {
            connection: plan.connection.clone(),
            model: plan.model.clone(),
            schedule: plan.schedule.to_string(),
            last_primed_at_ms: app.inner.primes.last(&plan.connection),
            next_prime_at_ms: plan.schedule.next_after(now_ms),
        })
        .collect()
}

/// Rebuilds when each connection was last primed from the journal's `window_primed` events
/// (before the node reports ready); read only when some connection primes.
pub fn fold_journal(app: &AppState) {
    if app.live().primes.is_empty() {
        return;
    }
    if let Some(reader) = app.journal_reader() {
        use quotaroute_journal::Journal as _;
        let primes: Vec<quotaroute_journal::Envelope> = reader
            .read_from(0)
            .filter_map(Result::ok)
            .filter(|envelope| matches!(envelope.event, Event::WindowPrimed(_)))
            .collect();
        app.inner.primes.fold(&primes);
    }
}

/// Starts the driver (when any connection primes, now or after a reload: it looks every
/// minute at most); it ends when the node stops.
pub fn start(app: AppState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(app))
}

async fn run(app: AppState) {
    loop {
        if app.stopping() {
            return;
        }
        let Some(router) = app.router().cloned() else {
            return;
        };
        let clock = router.clock().clone();
        let live = app.live().clone();
        if !live.primes.is_empty() {
            look(&app, &live, &router).await;
        }
        let now_ms = clock.now_ms();
        let next = live
            .primes
            .iter()
            .filter_map(|plan| plan.schedule.next_after(now_ms))
            .min();
        let wait_ms = next.map_or(LOOK_EVERY_MS, |at| {
            at.saturating_sub(now_ms).clamp(1, LOOK_EVERY_MS)
        });
        clock.sleep_ms(wait_ms).await;
    }
}

/// Primes every connection whose prime is due now.
async fn look(app: &AppState, live: &LiveConfig, router: &Router) {
    let Ok(state) = router.state().await else {
        return;
    };
    for plan in &live.primes {
        let now_ms = router.clock().now_ms();
        let input = prime_input(
            &state,
            (&plan.provider, &plan.connection, &plan.model),
            app.inner.primes.last(&plan.connection),
        );
        match prime_verdict(&plan.schedule, &input, now_ms) {
            PrimeVerdict::Due { scheduled_at_ms } => {
                prime(app, live, router, plan, scheduled_at_ms).await;
            }
            PrimeVerdict::Blocked(block) => tracing::debug!(
                connection = %plan.connection,
                block = block.as_str(),
                "prime time, but the connection is not primed"
            ),
            _ => {}
        }
    }
}

/// The smallest request `plan`'s connection accepts in an API its provider serves: the
/// endpoint, its path after the provider's `base_url`, the body and the headers it needs.
fn smallest_request(api: Api, model: &str) -> (Endpoint, String, serde_json::Value) {
    let hi = "hi";
    match api {
        Api::Messages => (
            Endpoint::Messages,
            "/messages".to_owned(),
            json!({"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": hi}]}),
        ),
        Api::Chat => (
            Endpoint::ChatCompletions,
            "/chat/completions".to_owned(),
            json!({"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": hi}]}),
        ),
        // The Responses API's smallest allowed `max_output_tokens` is 16.
        Api::Responses => (
            Endpoint::Responses,
            "/responses".to_owned(),
            json!({"model": model, "input": hi, "max_output_tokens": 16, "store": false}),
        ),
        Api::Gemini => (
            Endpoint::GeminiGenerate,
            format!(
                "/models/{}:generateContent",
                model.strip_prefix("models/").unwrap_or(model)
            ),
            json!({
                "contents": [{"role": "user", "parts": [{"text": hi}]}],
                "generationConfig": {"maxOutputTokens": 1}
            }),
        ),
    }
}

/// Sends `plan`'s prime for `scheduled_at_ms`; on a 2xx answer records and journals it.
async fn prime(
    app: &AppState,
    live: &LiveConfig,
    router: &Router,
    plan: &PrimePlan,
    scheduled_at_ms: u64,
) {
    let Some(provider) = live.providers.get(&plan.provider) else {
        return;
    };
    let apis = served_apis(router, &plan.provider, &provider.apis);
    let Some(api) = [Api::Messages, Api::Chat, Api::Responses, Api::Gemini]
        .into_iter()
        .find(|api| apis.contains(api))
    else {
        return;
    };
    let (endpoint, path, body) = smallest_request(api, &plan.model);
    let body = Bytes::from(body.to_string());
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if api == Api::Messages {
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static("2023-06-01"),
        );
    }
    let request_id: std::sync::Arc<str> = format!("{}-prime", app.next_request_id()).into();
    let combo = ImplicitCombo::new(&plan.provider, &plan.model).name();
    let decision = router
        .route(RouteRequest {
            request_id: request_id.clone(),
            model: combo.as_str().into(),
            format: endpoint.format(),
            translatable: false,
            cannot_carry: Vec::new(),
            only_connection: Some(plan.connection.clone()),
            encrypted_maker: None,
            affinity: None,
            client: ClientTag {
                id: std::sync::Arc::from(PRIME_CLIENT),
                weight: 1,
                class: quotaroute_actors::policy::clients::class::RequestClass::Normal,
            },
        })
        .await;
    let decision = match decision {
        Ok(decision) => decision,
        Err(error) => {
            tracing::info!(connection = %plan.connection, %error, "prime not routed");
            return;
        }
    };
    let started = StdInstant::now();
    let mut route = RouteHeaders {
        request_id: request_id.clone(),
        ..RouteHeaders::default()
    };
    let context = TryContext {
        app,
        live,
        endpoint,
        method: http::Method::POST,
        combo: &combo,
        info: None,
        client_body: &body,
        parsed: None,
        client_headers: &headers,
        path_and_query: &path,
        request_id: &request_id,
        force_include_usage: false,
        count_usage: true,
        deadline: Instant::now() + live.request_timeout,
        trace: &crate::telemetry::RequestSpan::off(), // telemetry: primes are not traced
        client: None,
        encrypted: None,
        kept_id: None,
        continues: None,
        kept_chain: None,
    };
    let response = serve_tries(&context, decision, &mut route, started).await;
    let status = response.status();
    // The answer is read to its end so the connection is free; nobody reads it.
    let _ = http_body_util::BodyExt::collect(response.into_body()).await;
    if !status.is_success() {
        tracing::info!(connection = %plan.connection, %status, "prime refused by the upstream");
        return;
    }
    let at_ms = router.clock().now_ms();
    app.inner.primes.record(&plan.connection, at_ms);
    router.record_prime(
        at_ms,
        WindowPrimed {
            provider: plan.provider.clone(),
            connection: plan.connection.clone(),
            window: PRIMED_WINDOW.to_owned(),
            model: plan.model.clone(),
            at: scheduled_at_ms,
            request_id: request_id.to_string(),
        },
    );
    tracing::info!(connection = %plan.connection, model = %plan.model, "window primed");
}
