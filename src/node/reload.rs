//! Reloading the config file (SIGHUP or `POST /admin/reload`): validate it whole, then swap the
//! live config and hand the new topology to the router, which keeps everything learned about
//! connections that remain. `listen`, `journal.*` and `cluster.*` take effect only after a
//! restart (a cluster node's shared limits follow the reload); so does opening the response
//! store and its bounds (`[responses]`), though `store = false` stops keeping at once.

use crate::config;
use crate::node::app::AppState;
use crate::node::live::LiveConfig;

/// A short digest of a config text, to tell configs apart in the journal.
pub fn digest(text: &str) -> String {
    format!("{:08x}", crc32fast::hash(text.as_bytes()))
}

/// Reloads from the node's config path; `Err` holds every validation error, one per line.
pub async fn reload(app: &AppState) -> Result<String, String> {
    let Some(path) = app.inner.config_path.clone() else {
        return Err("this node was started without a config file (demo): nothing to reload".into());
    };
    let Some(router) = app.router() else {
        return Err("the router is still replaying its journal".into());
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|error| format!("{}: cannot read the file: {error}", path.display()))?;
    let config = config::load(&path).map_err(|errors| errors.to_string())?;
    let topology = config::topology::topology(&config, &digest(&text));
    if let Some(cluster) = app.cluster() {
        // `[cluster]` itself takes effect only after a restart; its limits follow the reload.
        cluster.leases.reload(&topology);
        cluster.peer_bounds.reload(&topology);
        cluster.client_leases.reload(&config.clients);
    }
    if config.responses.store && app.response_store().is_none() {
        tracing::warn!(
            "[responses] store = true takes effect after a restart (its store opens at start)"
        );
    }
    let live = LiveConfig::reloaded(&config, &app.inner.live.load());
    app.inner.live.store(std::sync::Arc::new(live));
    router
        .reload(topology)
        .await
        .map_err(|error| format!("reload failed: {error}"))?;
    tracing::info!(path = %path.display(), "config reloaded");
    Ok(config.summary())
}
