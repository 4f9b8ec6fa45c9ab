//! `CredentialStore`: every connection's [`Credential`], built per config load. A reload
//! keeps the credential (its current token, its flight, its watch) of every connection whose
//! provider and source did not change, so a reload never re-runs a command or spends a
//! rotating refresh token; a changed or new source gets a new credential and its first load.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use quotaroute_actors::SharedClock;

use crate::config::{Config, Secret};
use crate::credentials::credential::Credential;
use crate::credentials::journal::CredentialJournal;
use crate::credentials::loaded::CredentialView;
use crate::credentials::watch;
use crate::upstream::client::UpstreamClient;

#[derive(Debug)]
pub struct CredentialStore {
    /// FxHash: connection ids from the config (every attempt looks its key up).
    by_connection: FxHashMap<String, Arc<Credential>>,
    journal: Arc<CredentialJournal>,
}

impl CredentialStore {
    /// The credentials of `config`'s connections, reusing `previous`'s where nothing changed.
    /// `client_of` gives a provider's upstream client (an OAuth token endpoint is reached
    /// through it).
    pub fn build(
        config: &Config,
        client_of: impl Fn(&str) -> UpstreamClient,
        previous: Option<&CredentialStore>,
        clock: SharedClock,
    ) -> Self {
        let journal = previous.map_or_else(
            || Arc::new(CredentialJournal::new()),
            |store| store.journal.clone(),
        );
        let by_connection = config
            .connections
            .iter()
            .map(|connection| {
                let kept = previous
                    .and_then(|store| store.by_connection.get(&connection.id))
                    .filter(|old| {
                        old.provider == connection.provider
                            && *old.source() == connection.credential
                    })
                    .cloned();
                let credential = kept.unwrap_or_else(|| {
                    let credential = Arc::new(Credential::new(
                        &connection.id,
                        &connection.provider,
                        &connection.credential,
                        &client_of(&connection.provider),
                        journal.clone(),
                        clock.clone(),
                    ));
                    watch::start(&credential);
                    credential
                });
                (connection.id.clone(), credential)
            })
            .collect();
        Self {
            by_connection,
            journal,
        }
    }

    pub fn get(&self, connection: &str) -> Option<&Arc<Credential>> {
        self.by_connection.get(connection)
    }

    /// Where the credential events go (attach the router once it runs).
    pub fn journal(&self) -> &Arc<CredentialJournal> {
        &self.journal
    }

    /// Every credential's admin view, by connection id.
    pub fn views(&self) -> Vec<CredentialView> {
        let mut views: Vec<CredentialView> = self
            .by_connection
            .values()
            .map(|credential| credential.view())
            .collect();
        views.sort_by(|a, b| a.connection.cmp(&b.connection));
        views
    }

    /// Stops every credential's watch (the node stops).
    pub fn stop_watches(&self) {
        for credential in self.by_connection.values() {
            credential.stop_watch();
        }
    }

    /// Every upstream secret now in use or just replaced, for masking echoes.
    pub fn secrets(&self) -> Vec<Secret> {
        self.by_connection
            .values()
            .flat_map(|credential| credential.secrets())
            .collect()
    }
}
