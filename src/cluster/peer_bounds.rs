//! The bounds a peer's stream entry must keep before this node applies it: the same ones the
//! node puts on what it learns itself (issue #34: the cluster trusts Redis no more than an
//! upstream). Anyone who can write to Redis can write an entry, so an entry is input, not a
//! peer's word:
//! - a lock, cooldown or disable ends no later than this node's own cap for that connection
//!   from now (`lockout.max_upstream_ms` / `max_ms` / `quota_max_ms` by the lock's source,
//!   `cooldown.max_ms`, `lockout.billing_ms`): longer is clamped, as an upstream's
//!   `Retry-After` is. A disable that claims no end at all (a peer's 401 or 403: "until an
//!   operator clears it") is held for `lockout.billing_ms` too (issue #49): this node did not
//!   see that answer itself, so after that it asks the upstream once, as it probes a billing
//!   disable, and a key that really is revoked is disabled again by its own 401;
//! - a usage reading stands no longer than its window's own length (a week at most), with a
//!   reset or without one: the one rule of `quotaroute_actors::policy::reading_end`, which
//!   bounds the node's own upstream readings the same way;
//! - an origin time ahead of this node's clock by more than [`CLOCK_SKEW_MS`] is taken as now
//!   (it decides which block or binding is newer);
//! - names are checked like a client's: a model over 256 bytes or holding control characters
//!   is refused, and so is any other string over its bound, and a connection named with
//!   another provider than this node's config gives it.
//!
//! Pure: the caps come from the topology (swapped whole on reload), time is an argument.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use quotaroute_actors::policy::reading_end::reading_ends_at_ms;
use quotaroute_actors::Topology;
use quotaroute_journal::{Event, ResetSource};

use crate::cluster::wire::Remote;
use crate::wire::body_rewrite::model_name_problem;

/// How far ahead of this node's clock an origin's time may be before it is taken as now.
pub const CLOCK_SKEW_MS: u64 = 10_000;
/// Bytes of a connection, provider, combo, request id or window name at most.
const NAME_MAX_BYTES: usize = 512;
/// Bytes of a client id (the config's bound), an error code or a reason at most.
const SHORT_MAX_BYTES: usize = 256;

/// Why an entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("`{field}` {problem}")]
    Name {
        field: &'static str,
        problem: String,
    },
    #[error("connection `{connection}` belongs to provider `{configured}` here, not `{claimed}`")]
    Provider {
        connection: String,
        configured: String,
        claimed: String,
    },
}

/// One connection's caps, from its config.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Caps {
    provider: String,
    cooldown_ms: u64,
    lock_upstream_ms: u64,
    lock_backoff_ms: u64,
    lock_quota_ms: u64,
    billing_ms: u64,
}

impl Caps {
    fn lock_ms(&self, source: ResetSource) -> u64 {
        match source {
            ResetSource::Upstream => self.lock_upstream_ms,
            ResetSource::Backoff => self.lock_backoff_ms,
            ResetSource::Quota => self.lock_quota_ms,
        }
    }
}

/// The caps of every configured connection; swapped whole when the config reloads.
#[derive(Debug)]
pub struct PeerBounds {
    table: ArcSwap<HashMap<String, Caps>>,
}

fn caps_of(topology: &Topology) -> HashMap<String, Caps> {
    topology
        .connections
        .iter()
        .map(|spec| {
            let caps = Caps {
                provider: spec.provider.clone(),
                cooldown_ms: spec.cooldown.max_ms,
                lock_upstream_ms: spec.lockout.max_upstream_ms,
                lock_backoff_ms: spec.lockout.max_ms,
                lock_quota_ms: spec.lockout.quota_max_ms,
                billing_ms: spec.lockout.billing_ms,
            };
            (spec.id.clone(), caps)
        })
        .collect()
}

/// `text` when it is at most `max` bytes and free of control characters.
fn short(field: &'static str, text: &str, max: usize) -> Result<(), Refusal> {
    let problem = if text.len() > max {
        format!("is {} bytes long; at most {max} are allowed", text.len())
    } else if text.chars().any(char::is_control) {
        "holds control characters".to_owned()
    } else {
        return Ok(());
    };
    Err(Refusal::Name { field, problem })
}

fn model(field: &'static str, text: &str) -> Result<(), Refusal> {
    match model_name_problem(text) {
        Some(problem) => Err(Refusal::Name { field, problem }),
        None => Ok(()),
    }
}

fn optional(field: &'static str, text: Option<&str>, max: usize) -> Result<(), Refusal> {
    text.map_or(Ok(()), |text| short(field, text, max))
}

/// Lowers `until_ms` to `latest` when it is later; `true` when it did.
fn clamp(until_ms: &mut u64, latest: u64) -> bool {
    let over = *until_ms > latest;
    if over {
        *until_ms = latest;
    }
    over
}

impl PeerBounds {
    pub fn from_topology(topology: &Topology) -> Self {
        PeerBounds {
            table: ArcSwap::from_pointee(caps_of(topology)),
        }
    }

    /// A reload: the new config's caps.
    pub fn reload(&self, topology: &Topology) {
        self.table.store(Arc::new(caps_of(topology)));
    }

    /// Checks `remote` at `now_ms`: `Err` refuses it; `Ok(true)` says a time in it was clamped
    /// to this node's bounds (it is applied and journaled clamped).
    pub fn check(&self, remote: &mut Remote, now_ms: u64) -> Result<bool, Refusal> {
        let mut clamped = false;
        if remote.at_ms > now_ms.saturating_add(CLOCK_SKEW_MS) {
            remote.at_ms = now_ms;
            clamped = true;
        }
        let table = self.table.load();
        let at_ms = remote.at_ms;
        let event = &mut remote.event;
        if let Some(connection) = event.connection() {
            short("connection", connection, NAME_MAX_BYTES)?;
        }
        if let Some(provider) = event.provider() {
            short("provider", provider, NAME_MAX_BYTES)?;
        }
        // An entry about a connection this node lacks is the router's to pass over.
        let caps = event.connection().and_then(|id| table.get(id));
        if let (Some(caps), Some(claimed)) = (caps, event.provider()) {
            if caps.provider != claimed {
                return Err(Refusal::Provider {
                    connection: event.connection().unwrap_or_default().to_owned(),
                    configured: caps.provider.clone(),
                    claimed: claimed.to_owned(),
                });
            }
        }
        let from_now = |cap: u64| now_ms.saturating_add(cap);
        match event {
            Event::ModelLocked(locked) => {
                model("model", &locked.model)?;
                optional("error_code", locked.error_code.as_deref(), SHORT_MAX_BYTES)?;
                if let Some(caps) = caps {
                    clamped |= clamp(&mut locked.until_ms, from_now(caps.lock_ms(locked.source)));
                }
            }
            Event::ModelUnlocked(unlocked) => model("model", &unlocked.model)?,
            Event::ConnectionCooldown(cooldown) => {
                if let Some(caps) = caps {
                    clamped |= clamp(&mut cooldown.until_ms, from_now(caps.cooldown_ms));
                }
            }
            Event::ConnectionDisabled(disabled) => {
                optional(
                    "error_code",
                    disabled.error_code.as_deref(),
                    SHORT_MAX_BYTES,
                )?;
                if let Some(caps) = caps {
                    let latest = from_now(caps.billing_ms);
                    let until_ms = disabled.until_ms.get_or_insert(u64::MAX);
                    clamped |= clamp(until_ms, latest);
                }
            }
            Event::UsageObserved(reading) => {
                short("window", &reading.window, NAME_MAX_BYTES)?;
                let ends_at_ms = reading_ends_at_ms(&reading.window, at_ms, reading.resets_at_ms);
                clamped |= reading.resets_at_ms != Some(ends_at_ms);
                reading.resets_at_ms = Some(ends_at_ms);
            }
            Event::AffinityBound(bound) => {
                short("combo", &bound.combo, NAME_MAX_BYTES)?;
                short("request_id", &bound.request_id, NAME_MAX_BYTES)?;
                short("client", &bound.client, SHORT_MAX_BYTES)?;
                model("model", &bound.model)?;
                optional(
                    "moved_from",
                    bound.moved_from.as_deref(),
                    2 * NAME_MAX_BYTES,
                )?;
                optional("reason", bound.reason.as_deref(), SHORT_MAX_BYTES)?;
            }
            _ => {}
        }
        Ok(clamped)
    }
}

#[cfg(test)]
mod tests {
    use quotaroute_journal::{
        AffinityBound, ConnectionCooldown, ConnectionDisabled, DisableReason, LockReason,
        ModelLocked, OutcomeClass, UsageObserved, UsageSource,
    };

    use super::*;

    const NOW: u64 = 1_796_166_000_000;
    const HOUR: u64 = 3_600_000;
    const DAY: u64 = 24 * HOUR;
    const YEAR: u64 = 365 * DAY;

    fn bounds() -> PeerBounds {
        let spec = quotaroute_actors::ConnectionSpec::new(
            "k1",
            "openai",
            quotaroute_journal::AuthKind::ApiKey,
            1,
        );
        PeerBounds::from_topology(&Topology::new(Vec::new(), vec![spec], Vec::new(), "", ""))
    }

    fn remote(event: Event) -> Remote {
        Remote {
            node: "node-a".into(),
            seq: 1,
            at_ms: NOW,
            event,
            fresh: true,
        }
    }

    fn locked(model: &str, until_ms: u64, source: ResetSource) -> Event {
        Event::ModelLocked(ModelLocked {
            provider: "openai".into(),
            connection: "k1".into(),
            model: model.into(),
            reason: LockReason::RateLimited,
            status: Some(429),
            error_code: None,
            until_ms,
            failure_count: 1,
            source,
        })
    }

    #[test]
    fn a_73_year_lock_or_cooldown_is_cut_to_this_nodes_own_caps() {
        let bounds = bounds();
        let mut entry = remote(locked("gpt-4o", NOW + 73 * YEAR, ResetSource::Upstream));
        assert_eq!(bounds.check(&mut entry, NOW), Ok(true));
        let Event::ModelLocked(lock) = &entry.event else {
            panic!()
        };
        assert_eq!(lock.until_ms, NOW + 7 * DAY, "lockout.max_upstream_ms");
        let mut backoff = remote(locked("gpt-4o", NOW + DAY, ResetSource::Backoff));
        assert_eq!(bounds.check(&mut backoff, NOW), Ok(true));
        let Event::ModelLocked(lock) = &backoff.event else {
            panic!()
        };
        assert_eq!(lock.until_ms, NOW + 1_800_000, "lockout.max_ms");
        // Within the cap: applied as sent.
        let mut fine = remote(locked("gpt-4o", NOW + 60_000, ResetSource::Upstream));
        assert_eq!(bounds.check(&mut fine, NOW), Ok(false));

        let mut cooldown = remote(Event::ConnectionCooldown(ConnectionCooldown {
            provider: "openai".into(),
            connection: "k1".into(),
            class: OutcomeClass::ServerError,
            status: Some(503),
            level: 0,
            until_ms: u64::MAX,
            from_retry_after: true,
        }));
        assert_eq!(bounds.check(&mut cooldown, NOW), Ok(true));
        let Event::ConnectionCooldown(cooldown) = &cooldown.event else {
            panic!()
        };
        assert_eq!(cooldown.until_ms, NOW + 300_000, "cooldown.max_ms");

        let mut reading = remote(Event::UsageObserved(UsageObserved {
            provider: "openai".into(),
            connection: "k1".into(),
            window: "5h".into(),
            used: 10,
            limit: 10,
            resets_at_ms: Some(NOW + 73 * YEAR),
            source: UsageSource::Header,
        }));
        assert_eq!(bounds.check(&mut reading, NOW), Ok(true));
        let Event::UsageObserved(reading) = &reading.event else {
            panic!()
        };
        assert_eq!(
            reading.resets_at_ms,
            Some(NOW + 5 * HOUR),
            "the window's own length"
        );
    }

    fn spent(window: &str, resets_at_ms: Option<u64>) -> Event {
        Event::UsageObserved(UsageObserved {
            provider: "openai".into(),
            connection: "k1".into(),
            window: window.into(),
            used: 10_000,
            limit: 10_000,
            resets_at_ms,
            source: UsageSource::Header,
        })
    }

    /// Issue #49: forged entries with no end (`resets_at_ms: null`, a disable without
    /// `until_ms`) get one: a reading its window's length, a disable `lockout.billing_ms`.
    #[test]
    fn an_entry_with_no_end_gets_one() {
        let bounds = bounds();
        for (window, length) in [
            ("5h", 5 * HOUR),
            ("7d", 7 * DAY),
            ("requests:gpt-4o", 60_000),
            ("monthly", 7 * DAY),
            // A forged name ending in a character of two bytes is a name of no known length
            // (it panicked the node's cluster task while the length was read by bytes).
            ("5é", 7 * DAY),
            ("é", 7 * DAY),
        ] {
            let mut entry = remote(spent(window, None));
            assert_eq!(bounds.check(&mut entry, NOW), Ok(true), "{window}");
            let Event::UsageObserved(reading) = &entry.event else {
                panic!()
            };
            assert_eq!(reading.resets_at_ms, Some(NOW + length), "{window}");
        }
        // A reset within the window is applied as sent.
        let mut fine = remote(spent("requests:gpt-4o", Some(NOW + 6_000)));
        assert_eq!(bounds.check(&mut fine, NOW), Ok(false));

        let disable = |until_ms| {
            Event::ConnectionDisabled(ConnectionDisabled {
                provider: "openai".into(),
                connection: "k1".into(),
                reason: DisableReason::Auth,
                status: Some(401),
                error_code: None,
                until_ms,
            })
        };
        let mut forever = remote(disable(None));
        assert_eq!(bounds.check(&mut forever, NOW), Ok(true));
        let Event::ConnectionDisabled(disabled) = &forever.event else {
            panic!()
        };
        assert_eq!(disabled.until_ms, Some(NOW + HOUR), "lockout.billing_ms");
        let mut short = remote(disable(Some(NOW + 60_000)));
        assert_eq!(bounds.check(&mut short, NOW), Ok(false));
    }

    #[test]
    fn long_or_control_names_and_a_wrong_provider_are_refused() {
        let bounds = bounds();
        let huge = "m".repeat(1 << 20);
        let mut entry = remote(locked(&huge, NOW + 1_000, ResetSource::Upstream));
        assert!(matches!(
            bounds.check(&mut entry, NOW),
            Err(Refusal::Name { field: "model", .. })
        ));
        let mut entry = remote(locked("gpt\n4o", NOW + 1_000, ResetSource::Upstream));
        assert!(bounds.check(&mut entry, NOW).is_err());
        let mut entry = remote(locked(&"m".repeat(256), NOW + 1_000, ResetSource::Upstream));
        assert_eq!(
            bounds.check(&mut entry, NOW),
            Ok(false),
            "256 bytes is fine"
        );
        let Event::ModelLocked(mut other) = locked("m", NOW + 1_000, ResetSource::Upstream) else {
            panic!()
        };
        other.provider = "anthropic".into();
        let mut entry = remote(Event::ModelLocked(other));
        assert!(matches!(
            bounds.check(&mut entry, NOW),
            Err(Refusal::Provider { .. })
        ));
        let mut binding = remote(Event::AffinityBound(AffinityBound {
            request_id: "r".into(),
            combo: "pool".into(),
            group: 1,
            client: "c".repeat(300),
            provider: "openai".into(),
            connection: "k1".into(),
            model: "m".into(),
            moved_from: None,
            reason: None,
        }));
        assert!(matches!(
            bounds.check(&mut binding, NOW),
            Err(Refusal::Name {
                field: "client",
                ..
            })
        ));
    }

    #[test]
    fn an_origin_time_from_the_future_is_taken_as_now() {
        let bounds = bounds();
        let mut entry = remote(locked("m", NOW + 1_000, ResetSource::Upstream));
        entry.at_ms = u64::MAX;
        assert_eq!(bounds.check(&mut entry, NOW), Ok(true));
        assert_eq!(entry.at_ms, NOW);
        entry.at_ms = NOW + CLOCK_SKEW_MS;
        assert_eq!(bounds.check(&mut entry, NOW), Ok(false), "within the skew");
    }
}
