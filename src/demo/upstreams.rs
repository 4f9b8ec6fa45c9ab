//! The simulated upstream accounts: the mock upstream on an ephemeral loopback port (the
//! Anthropic keys with their plans' windows), and a task that plays the [`Scenario`] on it as
//! time passes. Knows nothing of the node.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use quotaroute_mock::{self as mock_upstream, MockUpstream};

use super::embedded_config::upstream_key;
use super::error::DemoError;
use super::scenario::{anthropic_plans, Scenario};

/// How often the script checks whether the rules change.
const SCRIPT_TICK: Duration = Duration::from_millis(50);

/// The running mock and its script.
pub struct SimulatedUpstreams {
    pub addr: SocketAddr,
    pub mock: MockUpstream,
    server: JoinHandle<()>,
    script: Option<JoinHandle<()>>,
}

impl SimulatedUpstreams {
    /// Starts the mock on `127.0.0.1:0` with the scenario's opening rules; nothing changes
    /// until [`SimulatedUpstreams::play`].
    pub async fn start(scenario: &Scenario) -> Result<Self, DemoError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(DemoError::MockBind)?;
        let addr = listener.local_addr().map_err(DemoError::MockBind)?;
        let mock = MockUpstream::new();
        mock.set_rules(scenario.rules_at(Duration::ZERO));
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| {
                u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
            });
        for (connection, plan) in anthropic_plans(now_ms) {
            mock.set_plan(&upstream_key(connection), plan);
        }
        let server = tokio::spawn(mock_upstream::serve(listener, mock.clone()));
        Ok(SimulatedUpstreams {
            addr,
            mock,
            server,
            script: None,
        })
    }

    /// Plays `scenario` on the mock, its clock starting at `started`.
    pub fn play(&mut self, scenario: Scenario, started: Instant) {
        if let Some(old) =
            self.script
                .replace(tokio::spawn(play(scenario, started, self.mock.clone())))
        {
            old.abort();
        }
    }

    /// `http://127.0.0.1:PORT`, the providers' base (without `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the script and the server.
    pub fn stop(self) {
        if let Some(script) = self.script {
            script.abort();
        }
        self.server.abort();
    }
}

/// Replaces the mock's rules each time the scenario's rules change.
async fn play(scenario: Scenario, started: Instant, mock: MockUpstream) {
    let mut current = scenario.rules_at(Duration::ZERO);
    let mut tick = tokio::time::interval(SCRIPT_TICK);
    loop {
        tick.tick().await;
        let rules = scenario.rules_at(started.elapsed());
        if rules != current {
            mock.set_rules(rules.clone());
            current = rules;
        }
    }
}
