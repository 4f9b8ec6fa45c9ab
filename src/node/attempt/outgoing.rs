//! The try's request (behaviour §10, §14): the client's body with `model` spliced for the
//! target, or translated to a target of the other format (to its own path, with its headers);
//! only the encrypted items the target can read; the connection's credential. Sends nothing:
//! a request that cannot be built, or is answered without sending, comes back as its
//! [`Attempted`].

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use http::header::HeaderMap;
use http_body_util::Full;
use quotaroute_actors::policy::classify::AttemptFailure;
use quotaroute_actors::RoutedTarget;

use crate::config::Secret;
use crate::node::encrypted_turn::EncryptedTurn;
use crate::node::endpoint::Endpoint;
use crate::node::live::ProviderRoute;
use crate::node::served_apis::served_apis;
use crate::node::upstream_request;
use crate::wire::body_rewrite::{rewrite, RequestInfo};
use crate::wire::foreign_thinking::without_foreign_thinking;
use crate::wire::thought_signatures;
use crate::wire::translate::{
    translate_parsed_as, Api, Direction, Echo, ParsedRequest, ReasoningKey, RequestSettings,
    TranslateError, TranslatedRequest,
};

use super::local_answer::refused;
use super::shape::{unanswered_openly, Attempted, Translation, TryContext};

/// How a try's request was made: what its sending and its answer's handling need.
pub(super) struct Outgoing<'a> {
    pub provider: &'a ProviderRoute,
    /// The translation to the target's format, when the target speaks the other one.
    pub direction: Option<Direction>,
    pub translation: Option<Translation>,
    /// The translated stream must ask the upstream for usage (the client asked for it).
    pub include_usage: bool,
    /// Encrypted items the target could not read, left out of its body.
    pub items_left_out: u32,
    /// What a translated Responses answer repeats from its request.
    pub echo: Option<Arc<Echo>>,
}

/// A Responses answer the router keeps says the id it is kept under, and one continuing a
/// kept response names it (behaviour §14).
fn kept_echo(ctx: &TryContext<'_>, direction: Direction, echo: Arc<Echo>) -> Arc<Echo> {
    if direction.client != Api::Responses || (ctx.kept_id.is_none() && ctx.continues.is_none()) {
        return echo;
    }
    let mut echo = Echo::clone(&echo);
    if let Some(id) = ctx.kept_id {
        echo = echo.kept_as(id);
    }
    if let Some(previous) = ctx.continues {
        echo = echo.continuing(previous);
    }
    Arc::new(echo)
}

/// The request of one try to `target` with `credential`, or the try's end when nothing can
/// be sent: the target left the config, a refused translation.
// The `Err` is the try's end, returned at most once: boxing it would allocate per try.
#[expect(
    clippy::result_large_err,
    reason = "the `Err` is the try's end, returned at most once: boxing it would allocate per try"
)]
pub(super) fn prepare<'a>(
    ctx: &TryContext<'a>,
    target: &RoutedTarget,
    credential: &Secret,
) -> Result<(http::Request<Full<Bytes>>, Outgoing<'a>), Attempted> {
    let live = ctx.live;
    let (Some(provider), Some(auth)) = (
        live.providers.get(&*target.provider),
        live.connection_auth.get(&*target.connection),
    ) else {
        // The config changed under this request: the target cannot be tried.
        return Err(unanswered_openly(
            AttemptFailure::NotSent,
            None,
            "target left the config",
        ));
    };
    // A target that does not serve the client's API: the request in one it serves, to its
    // own path (behaviour §14); otherwise the byte-preserving splice.
    let directions = directions(ctx, target, provider);
    let mut direction = directions.first().copied();
    let mut translation = None;
    let mut include_usage = false;
    let mut translated_left_out = 0;
    let mut echo = None;
    let mut anthropic_beta = None;
    // Google's paths name the model, not the body: the body goes byte for byte to
    // `models/{model}:{method}`, a stream always as SSE (behaviour §15).
    let gemini_method = ctx.endpoint.gemini_method();
    let (upstream_body, path_and_query): (Bytes, Cow<'_, str>) = match (ctx.info, direction) {
        (Some(_), None) if gemini_method.is_some() => {
            let (body, left_out) = gemini_body(ctx, &target.connection);
            translated_left_out = left_out;
            let path = gemini_method.map(|method| gemini_upstream_path(&target.model, method));
            (body, Cow::Owned(path.unwrap_or_default()))
        }
        (Some(info), None) => {
            let (body, left_out) = same_api_body(ctx, info, &target.model);
            translated_left_out = left_out;
            (body, Cow::Borrowed(ctx.path_and_query))
        }
        (Some(_), Some(first)) => {
            // Thinking goes back only to the connection that made it, for the client it was
            // handed to, and not at all after a refused signature (`try_target`).
            let client = ctx.seal_client();
            let reasoning =
                (!ctx.encrypted.is_some_and(EncryptedTurn::leaves_all_out)).then(|| ReasoningKey {
                    key: &live.seal_key,
                    client: &client,
                    connection: &target.connection,
                });
            let settings = RequestSettings {
                model: &target.model,
                default_max_tokens: live.translation.default_max_tokens,
                reasoning,
            };
            let client_stream = ctx.endpoint.path_stream(first);
            let rest = directions.get(1..).unwrap_or_default();
            let (chosen, result) = first_carried(
                (first, rest),
                (ctx.parsed, ctx.client_body),
                settings,
                client_stream,
            );
            direction = Some(chosen);
            let direction = chosen;
            match result {
                Ok(translated) => {
                    include_usage = translated.include_usage;
                    translated_left_out = translated.reasoning.left_out;
                    // A kept answer says the id it is kept under (behaviour §14).
                    echo = Some(kept_echo(ctx, direction, translated.echo));
                    anthropic_beta = translated.anthropic_beta;
                    translation = Some(Translation {
                        direction,
                        dropped: translated.dropped,
                        thinking_restored: translated.reasoning.restored,
                    });
                    let path = match direction.target {
                        Api::Gemini => Cow::Owned(gemini_upstream_path(
                            &target.model,
                            gemini_generation(translated.stream),
                        )),
                        _ => Cow::Borrowed(direction.upstream_path()),
                    };
                    (translated.body, path)
                }
                Err(error) => return Err(refused(first, &error)),
            }
        }
        (None, _) => (ctx.client_body.clone(), Cow::Borrowed(ctx.path_and_query)),
    };
    // Only the encrypted items this target can read (behaviour §10); a translated body's
    // were opened (or left out) by the translation, a Gemini body's signatures above.
    let (upstream_body, items_left_out) = match ctx.encrypted {
        Some(encrypted) if direction.is_none() => {
            encrypted.body_for(upstream_body, &target.connection)
        }
        _ => (upstream_body, translated_left_out),
    };
    let Ok(mut request) = upstream_request::build(
        ctx.method.clone(),
        provider,
        (credential, *auth),
        &path_and_query,
        ctx.client_headers,
        ctx.request_id,
        upstream_body,
    ) else {
        return Err(unanswered_openly(
            AttemptFailure::NotSent,
            None,
            "bad upstream URL",
        ));
    };
    if let Some(direction) = direction {
        translated_headers(direction, anthropic_beta, request.headers_mut());
    }
    Ok((
        request,
        Outgoing {
            provider,
            direction,
            translation,
            include_usage,
            items_left_out,
            echo,
        },
    ))
}

/// The client's body with `model` spliced for the target (the byte-preserving splice), less a
/// Messages history's thinking no Messages host reads (a Gemini key's), with how many blocks
/// were left out.
fn same_api_body(ctx: &TryContext<'_>, info: &RequestInfo, model: &str) -> (Bytes, u32) {
    let body = rewrite(ctx.client_body, info, model, ctx.force_include_usage);
    match ctx.endpoint {
        Endpoint::Messages => without_foreign_thinking(&body).unwrap_or((body, 0)),
        _ => (body, 0),
    }
}

/// A Gemini client's body for a Gemini `connection`: its sealed `thoughtSignature`s restored
/// when this connection made them and left out otherwise (behaviour §15), with how many were
/// left out; the rest byte for byte.
fn gemini_body(ctx: &TryContext<'_>, connection: &str) -> (Bytes, u32) {
    let client = ctx.seal_client();
    thought_signatures::body_for(ctx.client_body, &ctx.live.seal_key, &client, connection)
        .unwrap_or_else(|| (ctx.client_body.clone(), 0))
}

/// Google's generation method for a request that streams or not.
fn gemini_generation(stream: bool) -> &'static str {
    match stream {
        true => "streamGenerateContent",
        false => "generateContent",
    }
}

/// `/models/{model}:{method}` after a Gemini provider's `base_url`; a stream is asked for as
/// SSE whatever framing the client asked for (the node re-frames it).
fn gemini_upstream_path(model: &str, method: &str) -> String {
    const MODELS: &str = "/models/";
    const SSE: &str = "?alt=sse";
    let model = model.strip_prefix("models/").unwrap_or(model);
    let sse = if method == "streamGenerateContent" {
        SSE
    } else {
        ""
    };
    // Pushed into one buffer of its size (`format!`'s machinery costs more than the path).
    let mut path = String::with_capacity(MODELS.len() + model.len() + 1 + method.len() + sse.len());
    path.push_str(MODELS);
    path.push_str(model);
    path.push(':');
    path.push_str(method);
    path.push_str(sse);
    path
}

/// The headers a translated request needs: Anthropic's required `anthropic-version` on the
/// way to Messages; none of Anthropic's own on the way to another API.
/// The translations a target may take, in order (none for a request that goes as is): a
/// request the first API cannot carry goes by the next that can (`translations_to`).
fn directions(
    ctx: &TryContext<'_>,
    target: &RoutedTarget,
    provider: &ProviderRoute,
) -> Vec<Direction> {
    match (ctx.info, ctx.app.router()) {
        (None, _) => Vec::new(),
        (Some(_), Some(router)) => ctx
            .endpoint
            .translations_to(&served_apis(router, &target.provider, &provider.apis))
            .collect(),
        (Some(_), None) => ctx.endpoint.translations_to(&provider.apis).collect(),
    }
}

/// The request by `first`, or else by the first of `rest` that carries it; the first's
/// refusal when none does.
fn first_carried(
    (first, rest): (Direction, &[Direction]),
    body: (Option<&ParsedRequest>, &[u8]),
    settings: RequestSettings<'_>,
    client_stream: Option<bool>,
) -> (Direction, Result<TranslatedRequest, TranslateError>) {
    let tried = rest.iter().copied();
    let refused = match translate_parsed_as(first, body, settings, client_stream) {
        Err(refused @ TranslateError::Unsupported { .. }) => refused,
        other => return (first, other),
    };
    for next in tried {
        if let Ok(translated) = translate_parsed_as(next, body, settings, client_stream) {
            return (next, Ok(translated));
        }
    }
    (first, Err(refused))
}

fn translated_headers(direction: Direction, beta: Option<&'static str>, headers: &mut HeaderMap) {
    const VERSION: http::HeaderName = http::HeaderName::from_static("anthropic-version");
    const BETA: http::HeaderName = http::HeaderName::from_static("anthropic-beta");
    if !direction.target.is_anthropic() {
        headers.remove(VERSION);
        headers.remove(BETA);
        return;
    }
    if !headers.contains_key(VERSION) {
        headers.insert(VERSION, http::HeaderValue::from_static("2023-06-01"));
    }
    if let Some(beta) = beta {
        headers.append(BETA, http::HeaderValue::from_static(beta));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemini_upstream_path_names_the_model_and_asks_a_stream_as_sse() {
        for (model, method, path) in [
            (
                "gemini-2.5-flash",
                "generateContent",
                "/models/gemini-2.5-flash:generateContent",
            ),
            (
                "models/gemini-2.5-pro",
                "streamGenerateContent",
                "/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            ),
            ("tuned/é-1", "countTokens", "/models/tuned/é-1:countTokens"),
            ("", "embedContent", "/models/:embedContent"),
        ] {
            let written = gemini_upstream_path(model, method);
            assert_eq!(written, path);
            // Its buffer was its size: no growth on the way.
            assert_eq!(written.capacity(), written.len(), "{path}");
        }
    }
}
