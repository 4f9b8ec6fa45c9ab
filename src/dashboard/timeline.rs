//! `GET /admin/timeline.svg?since=1h`: the incident timeline of a live node, drawn by the very
//! `replay --svg` code (`timeline::svg::SvgBuilder`) over the tail of its journal. Owns only which
//! part of the journal is read: from a little before `since` (so bands that began earlier are
//! drawn), at most `MAX_EVENTS`, lanes from the running config.

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode};
use quotaroute_journal::{ConfigLoaded, Envelope, Event, Journal, SledJournal, SCHEMA_VERSION};
use serde::Deserialize;

use crate::node::admin::{admin_error, admin_query, admin_router};
use crate::node::app::AppState;
use crate::time_parse::parse_time;
use crate::timeline::filter::Filter;
use crate::timeline::svg::SvgBuilder;

/// What the page asks for when it says nothing.
const DEFAULT_SINCE: &str = "1h";
/// Read from this long before `since`: a cooldown, lock or open breaker that began up to then
/// is drawn from the window's left edge.
const LOOKBACK_MS: u64 = 30 * 60 * 1000;
/// Most events one picture reads (about a quarter of a second of CPU): at full load an hour of
/// `request_events = "all"` is tens of millions, and the picture would then start later.
const MAX_EVENTS: u64 = 400_000;

#[derive(Debug, Deserialize)]
pub struct TimelineQuery {
    since: Option<String>,
}

pub async fn timeline(
    State(app): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<TimelineQuery>, QueryRejection>,
) -> Response {
    let router = match admin_router(&app, &headers) {
        Ok(router) => router,
        Err(refusal) => return *refusal,
    };
    let since = match admin_query(query, None) {
        Ok(query) => query.since.unwrap_or_else(|| DEFAULT_SINCE.into()),
        Err(refusal) => return *refusal,
    };
    let now_ms = router.clock().now_ms();
    let since_ms = match parse_time(&since, now_ms) {
        Ok(ms) if ms < now_ms => ms,
        Ok(_) => {
            return admin_error(
                StatusCode::BAD_REQUEST,
                "invalid_since",
                "since must lie in the past",
            )
        }
        Err(error) => {
            return admin_error(StatusCode::BAD_REQUEST, "invalid_since", &error.to_string())
        }
    };
    // What was recorded before this request is on disk, and so in the picture.
    let _ = router.flush().await;
    let Some(reader) = app.journal_reader() else {
        return admin_error(
            StatusCode::NOT_FOUND,
            "not_found",
            "this node has no readable journal",
        );
    };
    let config = router.topology().map(|t| t.config_loaded(0));
    let drawn = tokio::task::spawn_blocking(move || draw(&reader, config, since_ms, now_ms)).await;
    let Ok(svg) = drawn else {
        return admin_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the timeline could not be drawn",
        );
    };
    let mut response = Response::new(Body::from(svg));
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("image/svg+xml"),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    response
}

/// The picture of `[since_ms, now_ms]`.
pub fn draw(
    journal: &SledJournal,
    config: Option<ConfigLoaded>,
    since_ms: u64,
    now_ms: u64,
) -> String {
    let filter = Filter {
        since_ms: Some(since_ms),
        ..Filter::default()
    };
    let mut svg = SvgBuilder::new(filter).over(since_ms, now_ms);
    let read_from_ms = since_ms.saturating_sub(LOOKBACK_MS);
    // Lanes in the running config's order, also for connections without traffic.
    if let Some(config) = config {
        svg.observe(&Envelope {
            schema_version: SCHEMA_VERSION,
            seq: 0,
            at_ms: read_from_ms,
            event: Event::ConfigLoaded(config),
        });
    }
    let last = journal.last_seq().ok().flatten().unwrap_or(0);
    let start = first_seq_at(journal, read_from_ms).max(last.saturating_sub(MAX_EVENTS));
    for envelope in journal.read_from(start).flatten() {
        if envelope.at_ms > now_ms {
            break;
        }
        svg.observe(&envelope);
    }
    svg.finish()
}

/// The first seq recorded at or after `at_ms`, by binary search (seqs are appended in time
/// order; each probe reads one record).
fn first_seq_at(journal: &SledJournal, at_ms: u64) -> u64 {
    let time_of = |seq: u64| {
        journal
            .read_from(seq)
            .flatten()
            .next()
            .map(|e| (e.seq, e.at_ms))
    };
    let Some((mut low, first_at)) = time_of(0) else {
        return 0;
    };
    if first_at >= at_ms {
        return low;
    }
    let mut high = journal.last_seq().ok().flatten().unwrap_or(low) + 1;
    // Invariant: the event at `low` is before `at_ms`; everything from `high` is not.
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        match time_of(mid) {
            Some((seq, at)) if at < at_ms => low = seq.max(mid),
            _ => high = mid,
        }
    }
    high
}

#[cfg(test)]
mod tests {
    use super::*;
    use quotaroute_journal::testkit::sample_envelopes;
    use quotaroute_journal::SledOptions;

    #[test]
    fn the_first_seq_at_a_time_is_found_by_bisection() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut journal = SledJournal::open(dir.path().join("j"), SledOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let envelopes = sample_envelopes(1, 1_000, 500);
        for batch in envelopes.chunks(24) {
            journal.write_batch(batch).unwrap_or_else(|e| panic!("{e}"));
        }
        for probe in [0, 1_000, 1_001, envelopes[250].at_ms, envelopes[499].at_ms] {
            let expected = envelopes
                .iter()
                .find(|e| e.at_ms >= probe)
                .map_or(0, |e| e.seq);
            assert_eq!(first_seq_at(&journal, probe), expected, "at {probe}");
        }
        let after_all = envelopes[499].at_ms + 1;
        assert_eq!(first_seq_at(&journal, after_all), 501);
    }
}
