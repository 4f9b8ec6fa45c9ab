//! The demo's clients: paced requests through the node's real HTTP path (OpenAI chat
//! completions for the two OpenAI combos, Anthropic messages for `claude`, Google's
//! `generateContent` for `gemini`), counting what the clients saw, and a spare client (behaviour
//! §13) sending batch work now and then, served only from quota forecast to be lost, refused
//! `no_spare_quota` otherwise. Knows nothing of the mock or the router's state.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::sync::{watch, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

use crate::upstream::client::UpstreamClient;

use super::embedded_config::{
    CLIENT_KEY, COMBO_4O, COMBO_CLAUDE, COMBO_GEMINI, COMBO_MINI, SPARE_KEY,
};

/// Client requests per second, all combos together: modest, so the table stays readable.
pub const REQUESTS_PER_SECOND: u32 = 40;
/// The spare client sends one request every this many of the others' ticks.
const SPARE_EVERY: usize = 8;
/// At most this many client requests at once.
const MAX_CONCURRENT: usize = 32;
/// A client gives up on one request after this long.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long stopping waits for requests still in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// What the clients saw, shared with the table.
#[derive(Debug, Default)]
pub struct ClientTotals {
    ok: AtomicU64,
    failed: AtomicU64,
    spare_served: AtomicU64,
    spare_refused: AtomicU64,
}

impl ClientTotals {
    /// (answered 2xx, answered otherwise or not at all).
    pub fn get(&self) -> (u64, u64) {
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }

    /// The spare client's requests: (served, refused or failed).
    pub fn spare(&self) -> (u64, u64) {
        (
            self.spare_served.load(Ordering::Relaxed),
            self.spare_refused.load(Ordering::Relaxed),
        )
    }
}

/// One kind of client request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientCall {
    /// `POST /v1/chat/completions` with this combo as the model.
    Chat(&'static str),
    /// `POST /v1/messages` with this combo as the model.
    Messages(&'static str),
    /// Google's `POST /v1beta/models/{combo}:generateContent`, the key in `x-goog-api-key`.
    Gemini(&'static str),
    /// The spare client's `POST /v1/chat/completions` with this combo as the model.
    SpareChat(&'static str),
}

/// The mix, repeated: two in five `gpt-4o-mini`, one in five each `gpt-4o`, `claude` and
/// `gemini`.
const MIX: [ClientCall; 5] = [
    ClientCall::Chat(COMBO_MINI),
    ClientCall::Messages(COMBO_CLAUDE),
    ClientCall::Chat(COMBO_MINI),
    ClientCall::Gemini(COMBO_GEMINI),
    ClientCall::Chat(COMBO_4O),
];

/// Running clients.
pub struct Traffic {
    pub totals: Arc<ClientTotals>,
    stop: watch::Sender<bool>,
    pacer: JoinHandle<()>,
}

impl Traffic {
    /// Starts sending to the node at `node`.
    pub fn start(node: SocketAddr) -> Traffic {
        let totals = Arc::new(ClientTotals::default());
        let (stop, stopped) = watch::channel(false);
        let pacer = tokio::spawn(pace(node, totals.clone(), stopped));
        Traffic {
            totals,
            stop,
            pacer,
        }
    }

    /// Sends nothing new and waits (briefly) for the requests in flight.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.pacer.await;
    }
}

async fn pace(node: SocketAddr, totals: Arc<ClientTotals>, mut stopped: watch::Receiver<bool>) {
    let client = UpstreamClient::new();
    let permits = Arc::new(Semaphore::new(MAX_CONCURRENT));
    let mut in_flight = JoinSet::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / REQUESTS_PER_SECOND.max(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let spare = std::iter::once(ClientCall::SpareChat(COMBO_MINI));
    let mix = MIX
        .iter()
        .copied()
        .cycle()
        .enumerate()
        .flat_map(|(i, call)| {
            std::iter::once(call).chain(spare.clone().filter(move |_| i % SPARE_EVERY == 0))
        });
    for call in mix {
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => break,
            _ = tick.tick() => {}
        }
        // Finished requests need no joining one by one; drop their results as we go.
        while in_flight.try_join_next().is_some() {}
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            continue;
        };
        let client = client.clone();
        let totals = totals.clone();
        in_flight.spawn(async move {
            let ok = send(&client, node, call).await;
            let counter = match (call, ok) {
                (ClientCall::SpareChat(_), true) => &totals.spare_served,
                (ClientCall::SpareChat(_), false) => &totals.spare_refused,
                (_, true) => &totals.ok,
                (_, false) => &totals.failed,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            drop(permit);
        });
    }
    let drain = async { while in_flight.join_next().await.is_some() {} };
    if tokio::time::timeout(DRAIN_TIMEOUT, drain).await.is_err() {
        in_flight.abort_all();
    }
}

/// Sends one request and reads its whole body; true when the node answered 2xx.
async fn send(client: &UpstreamClient, node: SocketAddr, call: ClientCall) -> bool {
    let key = match call {
        ClientCall::SpareChat(_) => SPARE_KEY,
        _ => CLIENT_KEY,
    };
    let (path, body) = match call {
        ClientCall::Chat(combo) | ClientCall::SpareChat(combo) => (
            "/v1/chat/completions".to_string(),
            serde_json::json!({
                "model": combo,
                "max_tokens": 16,
                "messages": [{"role": "user", "content": "Say hello from the quotaroute demo."}],
            }),
        ),
        ClientCall::Messages(combo) => (
            "/v1/messages".to_string(),
            serde_json::json!({
                "model": combo,
                "max_tokens": 16,
                "messages": [{"role": "user", "content": "Say hello from the quotaroute demo."}],
            }),
        ),
        ClientCall::Gemini(combo) => (
            format!("/v1beta/models/{combo}:generateContent"),
            serde_json::json!({
                "contents": [{"role": "user", "parts": [{"text": "Say hello from the quotaroute demo."}]}],
                "generationConfig": {"maxOutputTokens": 16},
            }),
        ),
    };
    let request = http::Request::post(format!("http://{node}{path}"))
        .header(http::header::AUTHORIZATION, format!("Bearer {key}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())));
    let Ok(request) = request else {
        return false;
    };
    match client.send_within(request, CLIENT_TIMEOUT).await {
        Ok(response) => {
            let ok = response.status().is_success();
            let body = tokio::time::timeout(CLIENT_TIMEOUT, response.into_body().collect()).await;
            ok && matches!(body, Ok(Ok(_)))
        }
        Err(_) => false,
    }
}
