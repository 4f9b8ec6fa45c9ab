//! A window's identity (behaviour §6, §13): what its name says — the kind of window, the model
//! it is about, whether it is the cluster's share of a configured limit, and how long it is.
//! Names stay strings where they are stored (the journal, snapshots, `/admin/state`, Redis);
//! every rule that reads one parses it here, once: `WindowId::parse` is the only reader of a
//! window name, and [`CountedKind`] the only table of the configured limits' names.
//!
//! The names: `5h`, `7d`, `7d:<model>`, `<n>m` / `<n>h` / `<n>d` (Codex), the per-minute count
//! windows `requests:<model>` / `tokens:<model>` / `input-tokens:<model>` /
//! `output-tokens:<model>`, a configured limit (`requests_5h`, `tokens_7d:<model>`), and a
//! configured limit's cluster share (`requests_5h@cluster`, `tokens_7d@cluster:<model>`).

use crate::window::WindowShape;

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;
const DAY_MS: u64 = 24 * HOUR_MS;

/// Marks a configured limit's share across nodes (behaviour §9), before any `:<model>`.
const CLUSTER_MARK: &str = "@cluster";

/// Whose count a window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowScope {
    /// This connection's, as an upstream, a push or the router's own count reports it.
    Connection,
    /// A configured limit's share across nodes (`@cluster`, a lease's reading).
    Cluster,
}

/// A window name, parsed: borrowed from the name it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowId<'a> {
    name: &'a str,
    /// Everything before `:<model>`, the scope mark included.
    base: &'a str,
    /// `base` without the scope mark: `5h`, `requests`, `requests_5h`, …
    kind: &'a str,
    model: Option<&'a str>,
    scope: WindowScope,
}

impl<'a> WindowId<'a> {
    /// Reads `name`; every string is some window (an operator may push any name).
    pub fn parse(name: &'a str) -> Self {
        let (base, model) = match name.split_once(':') {
            Some((base, model)) => (base, Some(model)),
            None => (name, None),
        };
        let (kind, scope) = match base.strip_suffix(CLUSTER_MARK) {
            Some(kind) => (kind, WindowScope::Cluster),
            None => (base, WindowScope::Connection),
        };
        WindowId {
            name,
            base,
            kind,
            model,
            scope,
        }
    }

    /// The name as stored.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The kind of window, without model or scope: `7d` for `7d:opus`, `requests_5h` for
    /// `requests_5h@cluster`.
    pub fn kind(&self) -> &'a str {
        self.kind
    }

    /// The one model the window is about; `None`: every model of its connection.
    pub fn model(&self) -> Option<&'a str> {
        self.model
    }

    pub fn scope(&self) -> WindowScope {
        self.scope
    }

    /// Whether it concerns `model`: windows without a model (`5h`, `7d`, `requests_5h`)
    /// concern every model; `<kind>:<model>` only that one.
    pub fn applies_to(&self, model: &str) -> bool {
        self.model.is_none_or(|window_model| window_model == model)
    }

    /// How long the window is, from its name; `None` when the name says nothing of its length
    /// (an operator's pushed window, a cluster share).
    pub fn length_ms(&self) -> Option<u64> {
        if self.scope == WindowScope::Cluster {
            return None;
        }
        if let Some(counted) = CountedKind::of_kind(self.kind) {
            return Some(counted.shape().window_ms());
        }
        // The short count windows upstream headers report are per minute (§13).
        if PER_MINUTE_FAMILIES.contains(&self.kind) {
            return self.model.map(|_| MINUTE_MS);
        }
        let unit_at = self.kind.len().checked_sub(1)?;
        let (count, unit) = self.kind.split_at_checked(unit_at)?;
        let count: u64 = count.parse().ok().filter(|count| *count > 0)?;
        let unit_ms = match unit {
            "m" => MINUTE_MS,
            "h" => HOUR_MS,
            "d" => DAY_MS,
            _ => return None,
        };
        count.checked_mul(unit_ms)
    }

    /// The names a per-window reserve may be set under for this window, most specific first:
    /// its base (`7d` for `7d:opus`), then its period (`5h` for a counted `requests_5h`).
    pub fn reserve_keys(&self) -> [&'a str; 2] {
        let period = self
            .base
            .rsplit_once('_')
            .map_or(self.base, |(_, period)| period);
        [self.base, period]
    }

    /// The name of this configured limit's share across nodes: `requests_5h@cluster`,
    /// `tokens_7d@cluster:<model>`, so it applies to the same models as the limit.
    pub fn cluster_share(&self) -> String {
        match self.model {
            Some(model) => format!("{}{CLUSTER_MARK}:{model}", self.kind),
            None => format!("{}{CLUSTER_MARK}", self.kind),
        }
    }
}

/// The per-minute count families upstream headers report per model (`requests:<model>`, …).
pub const PER_MINUTE_FAMILIES: [&str; 4] = ["requests", "tokens", "input-tokens", "output-tokens"];

/// Which count a limit is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Requests,
    Tokens,
}

/// A configured limit's kind (contract: `[connections.limits]`): its name, what it counts and
/// over which window. A per-model limit is `<kind>:<model>` (`tokens_7d:gpt-4o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountedKind {
    Requests5h,
    Tokens5h,
    Requests7d,
    Tokens7d,
}

impl CountedKind {
    pub const ALL: [CountedKind; 4] = [
        CountedKind::Requests5h,
        CountedKind::Tokens5h,
        CountedKind::Requests7d,
        CountedKind::Tokens7d,
    ];

    /// Its name in the config, `/admin/state` and the leases.
    pub const fn name(self) -> &'static str {
        match self {
            CountedKind::Requests5h => "requests_5h",
            CountedKind::Tokens5h => "tokens_5h",
            CountedKind::Requests7d => "requests_7d",
            CountedKind::Tokens7d => "tokens_7d",
        }
    }

    pub const fn metric(self) -> Metric {
        match self {
            CountedKind::Requests5h | CountedKind::Requests7d => Metric::Requests,
            CountedKind::Tokens5h | CountedKind::Tokens7d => Metric::Tokens,
        }
    }

    pub const fn shape(self) -> WindowShape {
        match self {
            CountedKind::Requests5h | CountedKind::Tokens5h => WindowShape::FIVE_HOURS,
            CountedKind::Requests7d | CountedKind::Tokens7d => WindowShape::SEVEN_DAYS,
        }
    }

    /// The limit whose name is `kind` (without `:<model>`).
    pub fn of_kind(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|counted| counted.name() == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_lengths_from_their_names() {
        let cases = [
            ("5h", Some(5 * HOUR_MS)),
            ("7d", Some(7 * DAY_MS)),
            ("7d:claude-opus", Some(7 * DAY_MS)),
            ("300m", Some(300 * MINUTE_MS)),
            ("requests:gpt-4o", Some(MINUTE_MS)),
            ("input-tokens:claude", Some(MINUTE_MS)),
            ("requests_5h", Some(5 * HOUR_MS)),
            ("tokens_7d:gpt-4o", Some(7 * DAY_MS)),
            ("requests_5h@cluster", None),
            ("tokens_7d@cluster:gpt-4o", None),
            ("requests", None),
            ("0h", None),
            ("h", None),
            ("", None),
            ("5x", None),
            ("99999999999999999999d", None),
            // A name ending in a character of more than one byte (a pushed window may have any
            // name): no length, and no panic.
            ("é", None),
            ("5é", None),
            ("7d:é", Some(7 * DAY_MS)),
        ];
        for (name, expected) in cases {
            assert_eq!(WindowId::parse(name).length_ms(), expected, "{name}");
        }
    }

    #[test]
    fn a_name_says_its_kind_model_and_scope() {
        let cases = [
            ("5h", "5h", None, WindowScope::Connection),
            ("7d:opus", "7d", Some("opus"), WindowScope::Connection),
            ("requests_5h", "requests_5h", None, WindowScope::Connection),
            (
                "tokens@cluster:m",
                "tokens",
                Some("m"),
                WindowScope::Cluster,
            ),
            (
                "requests_7d@cluster:gpt-4o",
                "requests_7d",
                Some("gpt-4o"),
                WindowScope::Cluster,
            ),
        ];
        for (name, kind, model, scope) in cases {
            let id = WindowId::parse(name);
            assert_eq!((id.kind(), id.model(), id.scope()), (kind, model, scope));
            assert_eq!(id.name(), name);
            assert!(id.applies_to("opus") == model.is_none_or(|m| m == "opus"));
        }
    }

    #[test]
    fn a_limit_s_cluster_share_applies_to_the_same_models() {
        for (limit, share) in [
            ("requests_5h", "requests_5h@cluster"),
            ("requests_7d:gpt-4o", "requests_7d@cluster:gpt-4o"),
        ] {
            let limit = WindowId::parse(limit);
            assert_eq!(limit.cluster_share(), share);
            let share = WindowId::parse(share);
            assert_eq!(share.model(), limit.model());
            assert_eq!(share.kind(), limit.kind());
        }
    }

    #[test]
    fn reserve_keys_are_the_base_then_the_period() {
        assert_eq!(WindowId::parse("7d:opus").reserve_keys(), ["7d", "7d"]);
        assert_eq!(
            WindowId::parse("requests_5h").reserve_keys(),
            ["requests_5h", "5h"]
        );
    }
}
