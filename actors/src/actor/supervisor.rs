//! RouterSupervisor: spawns one actor per provider breaker, connection and combo from a
//! topology, restarts a failed one from the recorder's fold of the journal, spawns implicit
//! `provider/model` combos on first use, and applies reloads without losing learned state.
//!
//! It calls no actor (the recorder's fold is read directly) and nothing calls it back, so no
//! two actors wait on each other.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use quotaroute_journal::{ActionBy, DisableReason, Event};
use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent,
};

use crate::actor::breaker::{BreakerActor, BreakerArgs};
use crate::actor::combo::{ComboActor, ComboArgs};
use crate::actor::connection::{ConnectionActor, ConnectionArgs};
use crate::actor::messages::{
    BreakerMsg, ComboMsg, ComboSetup, ConnectionMsg, RoutedTarget, TargetRuntime,
};
use crate::clock::SharedClock;
use crate::policy::quota_share::DrrKeys;
use crate::policy::router_state::RouterState;
use crate::policy::topology::{ComboSpec, Topology};
use crate::recorder::Recorder;
use crate::registry::Registry;
use crate::view::ConnectionView;

/// Messages to the supervisor.
pub enum SupervisorMsg {
    /// The combo for a model name, spawning an implicit one if the name qualifies.
    EnsureCombo(String, RpcReplyPort<Option<ActorRef<ComboMsg>>>),
    /// Apply a new topology, keeping learned state.
    Reload(Box<Topology>, RpcReplyPort<()>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Child {
    Connection(String),
    Breaker(String),
    Combo(String),
}

pub struct RouterSupervisor;

pub struct SupervisorArgs {
    pub topology: Topology,
    pub generation: u64,
    pub state: RouterState,
    pub registry: Arc<Registry>,
    pub recorder: Recorder,
    pub clock: SharedClock,
}

pub struct SupervisorState {
    topology: Topology,
    generation: u64,
    registry: Arc<Registry>,
    recorder: Recorder,
    clock: SharedClock,
    children: HashMap<ActorId, Child>,
    /// Combos currently running, with their specs (explicit and implicit).
    combos: HashMap<String, ComboSpec>,
    stopping: HashSet<ActorId>,
}

impl SupervisorState {
    fn combo_setup(&self, spec: &ComboSpec) -> ComboSetup {
        let keys = DrrKeys::new(spec.strategy, &spec.target_infos())
            .with_exponent_pm(spec.pacing.knobs().exponent_pm);
        let targets = spec
            .targets
            .iter()
            .enumerate()
            .filter_map(|(index, target)| {
                let connection = self.topology.connection(&target.connection)?;
                let provider = self.topology.provider(&connection.provider)?;
                Some(TargetRuntime {
                    target: Arc::new(RoutedTarget {
                        index: u16::try_from(index).ok()?,
                        connection: Arc::from(target.connection.as_str()),
                        provider: Arc::from(provider.name.as_str()),
                        model: Arc::from(target.model.as_str()),
                        format: provider.format,
                        weight: target.weight,
                    }),
                    exec_key: keys.key(index)?.clone(),
                    max_concurrent: connection.max_concurrent,
                    in_flight: self.registry.in_flight(&connection.id),
                })
            })
            .collect();
        ComboSetup {
            keys,
            name: Arc::from(spec.name.as_str()),
            spec: spec.clone(),
            generation: self.generation,
            targets,
            breaker_settings: self
                .topology
                .providers
                .iter()
                .map(|p| (p.name.clone(), p.breaker.clone()))
                .collect(),
            affinity: self.topology.affinity,
        }
    }

    fn subscribers_of_connection(&self, id: &str) -> Vec<ActorRef<ComboMsg>> {
        let tables = self.registry.load();
        self.combos
            .values()
            .filter(|c| c.targets.iter().any(|t| t.connection == id))
            .filter_map(|c| tables.combos.get(&c.name).cloned())
            .collect()
    }

    fn subscribers_of_provider(&self, provider: &str) -> Vec<ActorRef<ComboMsg>> {
        let tables = self.registry.load();
        self.combos
            .values()
            .filter(|c| {
                c.targets.iter().any(|t| {
                    self.topology
                        .connection(&t.connection)
                        .is_some_and(|conn| conn.provider == provider)
                })
            })
            .filter_map(|c| tables.combos.get(&c.name).cloned())
            .collect()
    }

    async fn spawn_connection(
        &mut self,
        supervisor: ActorCell,
        id: &str,
        state: &RouterState,
    ) -> Result<(), ActorProcessingErr> {
        let Some(spec) = self.topology.connection(id).cloned() else {
            return Ok(());
        };
        let args = ConnectionArgs {
            state: state.connection(&spec.provider, id),
            subscribers: self.subscribers_of_connection(id),
            spec,
            recorder: self.recorder.clone(),
            clock: self.clock.clone(),
        };
        let (actor, _) = Actor::spawn_linked(None, ConnectionActor, args, supervisor).await?;
        self.children
            .insert(actor.get_id(), Child::Connection(id.to_string()));
        let id = id.to_string();
        self.registry.update(|t| {
            t.connections.insert(id.clone(), actor.clone());
        });
        Ok(())
    }

    async fn spawn_breaker(
        &mut self,
        supervisor: ActorCell,
        provider: &str,
        state: &RouterState,
    ) -> Result<(), ActorProcessingErr> {
        let Some(spec) = self.topology.provider(provider).cloned() else {
            return Ok(());
        };
        let args = BreakerArgs {
            provider: spec.name.clone(),
            settings: spec.breaker.clone(),
            state: state.breaker(provider),
            subscribers: self.subscribers_of_provider(provider),
            recorder: self.recorder.clone(),
            clock: self.clock.clone(),
            hint: self.registry.breaker_hint(provider),
        };
        let (actor, _) = Actor::spawn_linked(None, BreakerActor, args, supervisor).await?;
        self.children
            .insert(actor.get_id(), Child::Breaker(provider.to_string()));
        let provider = provider.to_string();
        self.registry.update(|t| {
            t.breakers.insert(provider.clone(), actor.clone());
        });
        Ok(())
    }

    /// Spawns a combo whose views are computed from `state`; returns its ref.
    async fn spawn_combo(
        &mut self,
        supervisor: ActorCell,
        spec: ComboSpec,
        state: &RouterState,
    ) -> Result<ActorRef<ComboMsg>, ActorProcessingErr> {
        let now_ms = self.clock.now_ms();
        let setup = self.combo_setup(&spec);
        let mut connections = HashMap::new();
        let mut breakers = HashMap::new();
        for runtime in &setup.targets {
            let id = runtime.target.connection.to_string();
            if let Some(conn_spec) = self.topology.connection(&id) {
                let learned = state.connection(&conn_spec.provider, &id);
                connections.insert(
                    id.clone(),
                    Arc::new(ConnectionView::of(&learned, conn_spec, now_ms)),
                );
            }
            let provider = runtime.target.provider.to_string();
            let breaker = state.breaker(&provider);
            breakers.insert(provider, Arc::new(breaker));
        }
        let args = ComboArgs {
            setup,
            deficits: state.deficits.get(&spec.name).cloned().unwrap_or_default(),
            bindings: state.affinity.get(&spec.name).cloned().unwrap_or_default(),
            demand: state
                .pacing
                .demand
                .get(&spec.name)
                .cloned()
                .unwrap_or_default(),
            connections,
            breakers,
            registry: self.registry.clone(),
            recorder: self.recorder.clone(),
            clock: self.clock.clone(),
        };
        let (actor, _) = Actor::spawn_linked(None, ComboActor, args, supervisor).await?;
        self.children
            .insert(actor.get_id(), Child::Combo(spec.name.clone()));
        let name = spec.name.clone();
        self.combos.insert(spec.name.clone(), spec);
        self.registry.update(|t| {
            t.combos.insert(name.clone(), actor.clone());
        });
        Ok(actor)
    }

    /// While the implicit combos fill `max_implicit_combos`, drops the least recently used one:
    /// its actor stops and the connections and breakers it subscribed to forget it. A request
    /// still holding its decision finishes on what it has; its next call finds it gone.
    fn make_room_for_implicit(&mut self) {
        let cap = self.topology.max_implicit_combos.max(1);
        loop {
            let tables = self.registry.load_full();
            if tables.implicit_used.len() < cap {
                return;
            }
            let Some(oldest) = tables
                .implicit_used
                .iter()
                .min_by_key(|(_, used)| used.load(std::sync::atomic::Ordering::Relaxed))
                .map(|(name, _)| name.clone())
            else {
                return;
            };
            tracing::debug!(combo = %oldest, "implicit combo table full: least recently used dropped");
            let spec = self.combos.remove(&oldest);
            self.stop_child(tables.combos.get(&oldest).map(|a| a.get_cell()));
            self.registry.update(|t| {
                t.combos.remove(&oldest);
                t.implicit_used.remove(&oldest);
            });
            let Some(spec) = spec else { continue };
            let tables = self.registry.load();
            let mut providers = HashSet::new();
            for target in &spec.targets {
                if let Some(actor) = tables.connections.get(&target.connection) {
                    let _ = actor.cast(ConnectionMsg::SetSubscribers(
                        self.subscribers_of_connection(&target.connection),
                    ));
                }
                if let Some(connection) = self.topology.connection(&target.connection) {
                    providers.insert(connection.provider.clone());
                }
            }
            for provider in providers {
                if let Some(actor) = tables.breakers.get(&provider) {
                    let _ = actor.cast(BreakerMsg::SetSubscribers(
                        self.subscribers_of_provider(&provider),
                    ));
                }
            }
        }
    }

    /// Tells every connection and breaker actor which combos route to it.
    fn resubscribe_all(&self) {
        let tables = self.registry.load();
        for (id, actor) in &tables.connections {
            let _ = actor.cast(ConnectionMsg::SetSubscribers(
                self.subscribers_of_connection(id),
            ));
        }
        for (provider, actor) in &tables.breakers {
            let _ = actor.cast(BreakerMsg::SetSubscribers(
                self.subscribers_of_provider(provider),
            ));
        }
    }

    /// The fold as spawning reads it, with the conversation groups of the combos `keep_groups`
    /// names only (the recorder's lock is held while it is copied: see `recorder`).
    fn folded_state(&self, keep_groups: impl Fn(&str) -> bool) -> RouterState {
        self.recorder
            .read(|state| state.copy_without_traffic_tables(keep_groups))
    }

    fn stop_child(&mut self, cell: Option<ActorCell>) {
        if let Some(cell) = cell {
            self.stopping.insert(cell.get_id());
            cell.stop(Some("removed by reload".to_string()));
        }
    }

    async fn reload(
        &mut self,
        supervisor: ActorCell,
        topology: Topology,
    ) -> Result<(), ActorProcessingErr> {
        // Groups only of the combos this reload spawns (the running ones keep their own).
        let state = self.folded_state(|combo| {
            topology.combo(combo).is_some() && !self.combos.contains_key(combo)
        });
        let old = std::mem::replace(&mut self.topology, topology);
        self.generation = state.next_generation().max(self.generation + 1);
        let loaded = self.topology.config_loaded(self.generation);
        let now_ms = self.clock.now_ms();
        self.recorder
            .record_one(now_ms, Event::ConfigLoaded(loaded));
        if let Some(rule) = self.topology.pacing_rule(self.generation) {
            self.recorder.record_one(now_ms, Event::PacingRule(rule));
        }
        tracing::info!(generation = self.generation, "config reloaded");

        // Providers: stop removed, reconfigure kept, spawn new.
        let tables = self.registry.load_full();
        for provider in &old.providers {
            let actor = tables.breakers.get(&provider.name);
            match self.topology.provider(&provider.name) {
                None => {
                    self.stop_child(actor.map(|a| a.get_cell()));
                    let name = provider.name.clone();
                    self.registry.update(|t| {
                        t.breakers.remove(&name);
                    });
                }
                Some(spec) => {
                    if let Some(actor) = actor {
                        let _ = actor.cast(BreakerMsg::Reconfigure(spec.breaker.clone()));
                    }
                }
            }
        }
        for provider in self.topology.providers.clone() {
            if old.provider(&provider.name).is_none() {
                self.spawn_breaker(supervisor.clone(), &provider.name, &state)
                    .await?;
            }
        }
        // Connections: the same, and a reload re-enables auth-disabled ones (behaviour §4).
        for connection in &old.connections {
            let actor = tables.connections.get(&connection.id);
            match self.topology.connection(&connection.id) {
                None => {
                    self.stop_child(actor.map(|a| a.get_cell()));
                    let id = connection.id.clone();
                    self.registry.update(|t| {
                        t.connections.remove(&id);
                    });
                }
                Some(spec) => {
                    if let Some(actor) = actor {
                        let _ = actor.cast(ConnectionMsg::Reconfigure(Box::new(spec.clone())));
                        let auth_disabled = state.connections.get(&spec.id).is_some_and(|c| {
                            c.health
                                .disabled()
                                .is_some_and(|d| d.reason == DisableReason::Auth)
                        });
                        if auth_disabled {
                            let _ = actor.cast(ConnectionMsg::Clear(ActionBy::Reload, None));
                        }
                    }
                }
            }
        }
        for connection in self.topology.connections.clone() {
            if old.connection(&connection.id).is_none() {
                self.spawn_connection(supervisor.clone(), &connection.id, &state)
                    .await?;
            }
        }
        // Combos: explicit ones from the new topology; implicit ones recomputed.
        let running: Vec<String> = self.combos.keys().cloned().collect();
        for name in running {
            let spec = self
                .topology
                .combo(&name)
                .cloned()
                .or_else(|| self.topology.implicit_combo(&name));
            let actor = tables.combos.get(&name).cloned();
            match spec {
                None => {
                    self.stop_child(actor.map(|a| a.get_cell()));
                    self.combos.remove(&name);
                    self.registry.update(|t| {
                        t.combos.remove(&name);
                        t.implicit_used.remove(&name);
                    });
                }
                Some(spec) => {
                    let setup = self.combo_setup(&spec);
                    self.combos.insert(name.clone(), spec);
                    if let Some(actor) = actor {
                        let _ = actor.cast(ComboMsg::Reconfigure(Box::new(setup)));
                    }
                }
            }
        }
        for spec in self.topology.combos.clone() {
            if !self.combos.contains_key(&spec.name) {
                self.spawn_combo(supervisor.clone(), spec, &state).await?;
            }
        }
        self.registry.update(|t| {
            t.topology = Arc::new(Some(self.topology.clone()));
        });
        self.resubscribe_all();
        Ok(())
    }

    async fn restart(
        &mut self,
        supervisor: ActorCell,
        child: Child,
    ) -> Result<(), ActorProcessingErr> {
        let state =
            self.folded_state(|combo| matches!(&child, Child::Combo(name) if name == combo));
        tracing::warn!(?child, "restarting failed actor from the journal's fold");
        match child {
            Child::Connection(id) => self.spawn_connection(supervisor, &id, &state).await?,
            Child::Breaker(provider) => self.spawn_breaker(supervisor, &provider, &state).await?,
            Child::Combo(name) => {
                if let Some(spec) = self.combos.get(&name).cloned() {
                    self.spawn_combo(supervisor, spec, &state).await?;
                    self.resubscribe_all();
                }
            }
        }
        Ok(())
    }
}

impl Actor for RouterSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = SupervisorState {
            topology: args.topology,
            generation: args.generation,
            registry: args.registry,
            recorder: args.recorder,
            clock: args.clock,
            children: HashMap::new(),
            combos: HashMap::new(),
            stopping: HashSet::new(),
        };
        let topology = state.topology.clone();
        state.registry.update(|t| {
            t.topology = Arc::new(Some(topology.clone()));
        });
        for spec in &topology.combos {
            state
                .spawn_combo(myself.get_cell(), spec.clone(), &args.state)
                .await?;
        }
        for provider in &topology.providers {
            state
                .spawn_breaker(myself.get_cell(), &provider.name, &args.state)
                .await?;
        }
        for connection in &topology.connections {
            state
                .spawn_connection(myself.get_cell(), &connection.id, &args.state)
                .await?;
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: SupervisorMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::EnsureCombo(name, reply) => {
                if let Some(existing) = state.registry.load().combos.get(&name) {
                    let _ = reply.send(Some(existing.clone()));
                    return Ok(());
                }
                let implicit = state.topology.implicit_combo(&name);
                if implicit.is_some() {
                    state.make_room_for_implicit();
                }
                let spawned = match implicit {
                    Some(spec) => {
                        let learned = state.folded_state(|combo| combo == name);
                        let actor = state
                            .spawn_combo(myself.get_cell(), spec.clone(), &learned)
                            .await?;
                        let tables = state.registry.load();
                        for target in &spec.targets {
                            if let Some(conn) = tables.connections.get(&target.connection) {
                                let _ = conn.cast(ConnectionMsg::Subscribe(actor.clone()));
                            }
                        }
                        let providers: HashSet<String> = spec
                            .targets
                            .iter()
                            .filter_map(|t| state.topology.connection(&t.connection))
                            .map(|c| c.provider.clone())
                            .collect();
                        for provider in providers {
                            if let Some(breaker) = tables.breakers.get(&provider) {
                                let _ = breaker.cast(BreakerMsg::Subscribe(actor.clone()));
                            }
                        }
                        let used =
                            Arc::new(std::sync::atomic::AtomicU64::new(state.registry.tick()));
                        state.registry.update(|t| {
                            t.implicit_used.insert(name.clone(), used.clone());
                        });
                        Some(actor)
                    }
                    None => None,
                };
                let _ = reply.send(spawned);
            }
            SupervisorMsg::Reload(topology, reply) => {
                state.reload(myself.get_cell(), *topology).await?;
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, error) => {
                let id = cell.get_id();
                if let Some(child) = state.children.remove(&id) {
                    tracing::error!(?child, %error, "actor failed");
                    state.restart(myself.get_cell(), child).await?;
                }
            }
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                let id = cell.get_id();
                state.stopping.remove(&id);
                state.children.remove(&id);
            }
            _ => {}
        }
        Ok(())
    }
}
