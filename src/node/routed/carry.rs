//! Which providers cannot carry a request (behaviour §14, "A target that cannot carry a request
//! is not chosen for it"): those whose hosts do not serve the client's API and to whose API the
//! request uses something with no equivalent on any API they serve (a provider serving Chat
//! Completions and Responses carries a web search by Responses). Selection leaves their targets out, so a mixed
//! combo serves it from one that can; only when none can is it 400 `unsupported_parameter`.
//! A provider's APIs are those its hosts serve now (`served_apis`: less those learned missing).

use std::sync::Arc;

use quotaroute_actors::Router;

use crate::node::endpoint::Endpoint;
use crate::node::live::LiveConfig;
use crate::node::served_apis::served_apis;
use crate::wire::translate::{translate_request, Direction, RequestSettings, TranslateError};

/// The providers that cannot carry a request, and why (the first refusal, and the
/// translation that refused it).
#[derive(Debug, Default)]
pub(super) struct Carry {
    pub providers: Vec<Arc<str>>,
    pub refusal: Option<(Direction, TranslateError)>,
}

/// Checks `body` against every provider that would translate it: one translation per
/// direction at most, and none when every provider serves the client's API.
pub(super) fn check(live: &LiveConfig, router: &Router, endpoint: Endpoint, body: &[u8]) -> Carry {
    let mut carry = Carry::default();
    // (direction, whether it carries); a config has a handful of providers.
    let mut verdicts: Vec<(Direction, bool)> = Vec::new();
    for (name, provider) in &live.providers {
        let apis = served_apis(router, name, &provider.apis);
        let mut directions = endpoint.translations_to(&apis).peekable();
        if directions.peek().is_none() {
            continue;
        }
        // Carried when any API the provider serves carries it (the attempt takes the first).
        let carries =
            directions.any(
                |direction| match verdicts.iter().find(|(d, _)| *d == direction) {
                    Some((_, carries)) => *carries,
                    None => {
                        let settings = RequestSettings {
                            model: "",
                            default_max_tokens: live.translation.default_max_tokens,
                            reasoning: None,
                        };
                        let carries = match translate_request(direction, body, settings) {
                            Err(refusal @ TranslateError::Unsupported { .. }) => {
                                carry.refusal.get_or_insert((direction, refusal));
                                false
                            }
                            // A body that is not a request of its API is answered by the try (400).
                            _ => true,
                        };
                        verdicts.push((direction, carries));
                        carries
                    }
                },
            );
        if !carries {
            carry.providers.push(Arc::from(name.as_str()));
        }
    }
    carry
}
