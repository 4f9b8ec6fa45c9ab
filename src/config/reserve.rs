//! A connection's `reserve_pct` / `reserve = { "7d" = 20 }` (behaviour §13) → [`Reserve`]: the
//! share of each window kept for the account's owner. Accepted on the connection and, as the
//! contract's sample writes it right below the header, inside `[connections.limits]`.

use std::collections::BTreeMap;

use quotaroute_actors::policy::window_block::Reserve;
use quotaroute_actors::policy::window_id::{WindowId, PER_MINUTE_FAMILIES};

use super::error::ErrorSink;

/// The window names a per-window reserve may name: the subscription windows (`5h`, `7d`, and
/// Codex's `<n>m` / `<n>h` / `<n>d`) and the per-minute count families.
fn known_window(name: &str) -> bool {
    PER_MINUTE_FAMILIES.contains(&name) || WindowId::parse(name).length_ms().is_some()
}

/// The validated reserve of the connection at `prefix` (`connections[2]`), from the keys on the
/// connection and in its `limits` table (the connection's win when both are set).
pub(crate) fn build(
    on_connection: (Option<u32>, Option<BTreeMap<String, u32>>),
    in_limits: (Option<u32>, Option<BTreeMap<String, u32>>),
    prefix: &str,
    sink: &mut ErrorSink,
) -> Reserve {
    let (all, by_window) = (
        on_connection.0.or(in_limits.0),
        on_connection.1.or(in_limits.1),
    );
    let percent = |value: u32, key: &str, sink: &mut ErrorSink| -> Option<u8> {
        if value > 100 {
            sink.push(key.to_owned(), "must be a percentage from 0 to 100");
            return None;
        }
        u8::try_from(value).ok()
    };
    let all_pct = all.and_then(|value| percent(value, &format!("{prefix}.reserve_pct"), sink));
    let mut windows = BTreeMap::new();
    for (window, value) in by_window.unwrap_or_default() {
        let key = format!("{prefix}.reserve.{window}");
        if !known_window(&window) {
            sink.push(
                key,
                "is not a window: use `5h`, `7d`, a Codex window such as `300m`, or `requests` / `tokens` / `input-tokens` / `output-tokens`",
            );
            continue;
        }
        if let Some(pct) = percent(value, &key, sink) {
            windows.insert(window, pct);
        }
    }
    Reserve {
        all_pct,
        by_window: windows,
    }
}
