//! Delivering what a try served: a committed stream relayed event by event (reported and
//! charged when it ends), or a whole answer with its stored response bound and its items
//! sealed — the upstream's headers filtered, the route's added.

use std::borrow::Cow;
use std::time::{Duration, Instant as StdInstant};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::{Method, StatusCode};
use quotaroute_actors::{Decision, RoutedTarget};

use crate::node::attempt::TryContext;
use crate::node::client_gate;
use crate::node::endpoint::Endpoint;
use crate::node::header_rules;
use crate::node::kept_responses::{answer_object, Keeping, StreamKeeper};
use crate::node::metrics;
use crate::node::reply::RouteHeaders;
use crate::node::stream_relay::{self, CommittedStream};
use crate::wire::item_seal::{seal_all, Items, SealedFor};

use super::response_binding::{bind_response, stored_response_id};

/// A committed stream's response: relayed event by event, reported when it ends.
#[expect(
    clippy::too_many_arguments,
    reason = "each argument is one input the rule reads; a struct of them would only rename them"
)]
pub(super) fn stream_response(
    ctx: &TryContext<'_>,
    decision: Decision,
    target: &RoutedTarget,
    stream: CommittedStream,
    upstream_headers: HeaderMap,
    route: &mut RouteHeaders,
    started: StdInstant,
    upstream_time: Duration,
) -> Response {
    route.overhead_us = overhead_us(started, upstream_time);
    let mut stream = stream;
    if kept(ctx, route) {
        stream.keeper = Keeping::for_try(ctx, target).map(StreamKeeper::new);
    }
    if let Some(response_id) = stream.response_id.clone() {
        bind_response(ctx, target, response_id);
    }
    let input_tokens = ctx
        .live
        .attempt_metrics
        .get(&*target.connection)
        .map(|m| m.input_tokens.clone());
    // Counted only where usage is (not on count_tokens or a stored-response call's stream).
    let usage_sink = ctx.client.filter(|_| ctx.count_usage).and_then(|ticket| {
        Some(client_gate::StreamUsageSink {
            ticket: std::sync::Arc::clone(ticket),
            router: ctx.app.router()?.clone(),
            request_id: ctx.request_id.to_owned(),
            combo: ctx.combo.to_owned(),
            target: target.clone(),
        })
    });
    let charge = stream_relay::StreamCharge {
        request_bytes: ctx.client_body.len() as u64,
        usage_max_tokens: ctx.live.usage_max_tokens,
        connection: target.connection.to_string(),
        drain: ctx.live.drain,
        combo_affinity: ctx.app.inner.affinity.of(ctx.combo),
    };
    let body = stream_relay::relay_body(
        stream,
        decision,
        ctx.deadline,
        input_tokens,
        usage_sink,
        charge,
    );
    let mut response = Response::new(body);
    let mut headers = header_rules::keep_upstream(
        upstream_headers,
        &ctx.live.echoes_of(&target.connection).searches(),
    );
    // The route's headers, a content type and cache control.
    headers.reserve(RouteHeaders::MOST_ADDED + 2);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    route.apply_over_relayed(&mut headers);
    *response.headers_mut() = headers;
    metrics::request_finished(ctx.endpoint, 200);
    metrics::overhead(route.overhead_us);
    response
}

// The upstream answer's map was made with room for what is added here (a content type, cache
// control and the route's headers), so adding them never rehashes it.
const _: () = assert!(RouteHeaders::MOST_ADDED + 2 <= crate::upstream::h1_head::ANSWER_HEADROOM);

/// A whole successful answer, as the upstream sent it (bodies re-framed, headers filtered).
pub(super) fn deliver(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    route: &RouteHeaders,
) -> Response {
    metrics::overhead(route.overhead_us);
    let mut body = body;
    // A translated response is not stored anywhere (behaviour §14): nothing to bind.
    if ctx.endpoint.is_responses() && ctx.method == Method::POST && route.translated.is_none() {
        if let Some(response_id) = stored_response_id(&body) {
            bind_response(ctx, target, response_id);
        }
    }
    // Encrypted items leave sealed with the connection that made them (§10), a stored
    // response fetched again (`GET /v1/responses/{id}`) too; a translated answer's carried
    // thinking blocks are encrypted (§14); a Gemini answer's `thoughtSignature`s are sealed
    // (§15).
    let items = match (ctx.endpoint.is_responses(), route.translated.is_some()) {
        (true, true) => Some(Items::Translated),
        (true, false) => Some(Items::Upstream),
        (false, false) if ctx.endpoint.is_gemini() => Some(Items::GeminiSignatures),
        (false, true) if ctx.endpoint.is_gemini() => Some(Items::GeminiTranslated),
        (false, true) if ctx.endpoint == Endpoint::Messages => Some(Items::MessagesTranslated),
        (false, _) => None,
    };
    if let Some(items) = items {
        let client = ctx.seal_client();
        let to = SealedFor {
            client: &client,
            connection: &target.connection,
        };
        if let Cow::Owned(sealed) = seal_all(&body, &ctx.live.seal_key, to, items) {
            body = Bytes::from(sealed);
        }
    }
    // Behaviour §14: a translated answer the router keeps, as the client is given it.
    if kept(ctx, route) {
        if let (Some(keeping), Some(answer)) = (Keeping::for_try(ctx, target), answer_object(&body))
        {
            keeping.keep(answer);
        }
    }
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let mut out =
        header_rules::keep_upstream(headers, &ctx.live.echoes_of(&target.connection).searches());
    // The route's headers and a content type.
    out.reserve(RouteHeaders::MOST_ADDED + 1);
    if !out.contains_key(CONTENT_TYPE) {
        out.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    route.apply_over_relayed(&mut out);
    *response.headers_mut() = out;
    response
}

/// Whether the answer is one the router keeps (`[responses] store = true`, behaviour §14): a
/// translated Responses answer to a request that asked for it to be kept.
fn kept(ctx: &TryContext<'_>, route: &RouteHeaders) -> bool {
    ctx.kept_id.is_some()
        && route.translated.is_some()
        && ctx.endpoint == Endpoint::Responses
        && ctx.method == Method::POST
}

/// The router's own time on a request: all of it but the upstream's.
pub(super) fn overhead_us(started: StdInstant, upstream_time: Duration) -> u64 {
    started
        .elapsed()
        .saturating_sub(upstream_time)
        .as_micros()
        .min(u128::from(u64::MAX)) as u64
}
