//! The decided design's own floor (`design` mode): what quotaroute's design makes every request
//! do beyond the leanest hyper relay, and nothing more. The model and `stream` read from the
//! body; one ask to a combo actor (ractor) that picks a key and journals its decision; a
//! non-streaming answer read whole for its usage (`wire::usage::response_summary`, which is also
//! the check that a 2xx body is JSON); one message to the key's connection actor, which counts
//! the outcome and journals it. The journal is the router's own: `JournalHandle`'s writer thread
//! over a sled journal on disk. No client auth, limits, failover, cooldowns, breaker or headers.

use std::borrow::Cow;
use std::error::Error;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use quotaroute_journal::{
    AffinityOutcome, Event, JournalHandle, RequestSucceeded, RouteDecided, SledJournal,
    SledOptions, WriterConfig,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::Deserialize;

/// The keys of the shared bench's one combo (`../shared/bench/quotaroute-bench.toml`).
const CONNECTIONS: [&str; 3] = ["k1", "k2", "k3"];
const COMBO: &str = "mock-gpt";
const PROVIDER: &str = "mock";

/// What the design reads of every request body: the model it names and whether it streams.
#[derive(Deserialize)]
pub struct RequestHead<'a> {
    #[serde(borrow)]
    pub model: Cow<'a, str>,
    #[serde(default)]
    pub stream: bool,
}

/// One request's served outcome, as the connection actor receives it.
pub struct Served {
    pub request_id: String,
    pub connection: u16,
    pub model: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub stream: bool,
    pub started_ms: u64,
}

/// The actors and the journal every request goes through.
pub struct Design {
    /// What the contract adds to every request (`contract` mode), else nothing.
    pub contract: Option<crate::contract::Contract>,
    combo: ActorRef<RouteAsk>,
    connections: Vec<ActorRef<Box<Served>>>,
    requests: AtomicU64,
}

impl Design {
    /// Opens the journal under `journal_dir` and starts the combo and one actor per key.
    pub async fn start(
        journal_dir: &Path,
        contract: Option<crate::contract::Contract>,
    ) -> Result<Arc<Self>, Box<dyn Error>> {
        let journal = SledJournal::open(journal_dir, SledOptions::default())?;
        let journal = JournalHandle::spawn(Box::new(journal), WriterConfig::default())?;
        let (combo, _) = Actor::spawn(
            None,
            ComboActor,
            ComboState {
                journal: journal.clone(),
                decisions: 0,
            },
        )
        .await?;
        let mut connections = Vec::new();
        for id in CONNECTIONS {
            let (connection, _) = Actor::spawn(
                None,
                ConnectionActor,
                ConnectionState {
                    id,
                    journal: journal.clone(),
                    served: 0,
                    tokens: 0,
                },
            )
            .await?;
            connections.push(connection);
        }
        Ok(Arc::new(Design {
            contract,
            combo,
            connections,
            requests: AtomicU64::new(0),
        }))
    }

    /// Asks the combo for a key: the request's id and the key's index.
    pub async fn route(&self, model: &str) -> Option<(String, u16)> {
        let request_id = format!("req-{:016x}", self.requests.fetch_add(1, Ordering::Relaxed));
        let chosen = ractor::call!(
            self.combo,
            RouteAsk,
            (request_id.clone(), model.to_string())
        )
        .ok()?;
        Some((request_id, chosen))
    }

    /// Tells the key's connection actor how the request ended.
    pub fn served(&self, served: Served) {
        if let Some(connection) = self.connections.get(usize::from(served.connection)) {
            let _ = connection.cast(Box::new(served));
        }
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// A route request: the request's id and model; the reply is the chosen key's index.
pub struct RouteAsk((String, String), RpcReplyPort<u16>);

impl From<((String, String), RpcReplyPort<u16>)> for RouteAsk {
    fn from((ask, reply): ((String, String), RpcReplyPort<u16>)) -> Self {
        RouteAsk(ask, reply)
    }
}

struct ComboActor;

struct ComboState {
    journal: JournalHandle,
    decisions: u64,
}

impl Actor for ComboActor {
    type Msg = RouteAsk;
    type State = ComboState;
    type Arguments = ComboState;

    async fn pre_start(
        &self,
        _myself: ActorRef<RouteAsk>,
        state: ComboState,
    ) -> Result<ComboState, ActorProcessingErr> {
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<RouteAsk>,
        RouteAsk((request_id, model), reply): RouteAsk,
        state: &mut ComboState,
    ) -> Result<(), ActorProcessingErr> {
        // The bench combo's weights, 2:1:1, taken in turn.
        let chosen: u16 = match state.decisions % 4 {
            0 | 1 => 0,
            2 => 1,
            _ => 2,
        };
        state.decisions += 1;
        state.journal.append(
            now_ms(),
            Event::RouteDecided(RouteDecided {
                request_id: request_id.into(),
                generation: 1,
                combo: COMBO.into(),
                model: model.into(),
                room: vec![1000, 500, 500],
                chosen: Some(chosen),
                order: vec![chosen],
                skipped: Vec::new(),
                affinity: AffinityOutcome::None,
                client: None,
                group: None,
                paces: Vec::new(),
            }),
        );
        let _ = reply.send(chosen);
        Ok(())
    }
}

struct ConnectionActor;

struct ConnectionState {
    id: &'static str,
    journal: JournalHandle,
    served: u64,
    tokens: u64,
}

impl Actor for ConnectionActor {
    type Msg = Box<Served>;
    type State = ConnectionState;
    type Arguments = ConnectionState;

    async fn pre_start(
        &self,
        _myself: ActorRef<Box<Served>>,
        state: ConnectionState,
    ) -> Result<ConnectionState, ActorProcessingErr> {
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Box<Served>>,
        served: Box<Served>,
        state: &mut ConnectionState,
    ) -> Result<(), ActorProcessingErr> {
        let now = now_ms();
        state.served += 1;
        state.tokens += served.tokens_in + served.tokens_out;
        let served = *served;
        state.journal.append(
            now,
            Event::RequestSucceeded(RequestSucceeded {
                request_id: served.request_id.into(),
                combo: COMBO.into(),
                provider: PROVIDER.into(),
                connection: state.id.to_string().into(),
                model: served.model.into(),
                status: 200,
                attempt: 1,
                latency_ms: now.saturating_sub(served.started_ms),
                tokens_in: served.tokens_in,
                tokens_out: served.tokens_out,
                stream: served.stream,
                skipped: Vec::new(),
                tokens_cached: 0,
                tokens_cache_write: 0,
                client: None,
                cost_usd: None,
                translated: None,
                usage_estimated: false,
                items_left_out: 0,
                period_spend_pusd: None,
                period_start_ms: None,
            }),
        );
        Ok(())
    }
}
