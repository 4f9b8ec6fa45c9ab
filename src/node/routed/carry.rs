//! Which providers cannot carry a request (behaviour §14, "A target that cannot carry a request
//! is not chosen for it"): those whose hosts do not serve the client's API and to whose API the
//! request uses something with no equivalent on any API they serve (a provider serving Chat
//! Completions and Responses carries a web search by Responses). Selection leaves their targets out, so a mixed
//! combo serves it from one that can; only when none can is it 400 `unsupported_parameter`.
//! A provider's APIs are those its hosts serve now (`served_apis`: less those learned missing).
//! Only the providers the request's combo can send it to are checked: a translation is a parse
//! and a rebuild of the whole request, and a provider outside the combo is never chosen.

use std::sync::Arc;

use quotaroute_actors::policy::implicit_combo::ImplicitCombo;
use quotaroute_actors::Router;

use crate::node::endpoint::Endpoint;
use crate::node::live::LiveConfig;
use crate::node::served_apis::served_apis;
use crate::wire::translate::{carries, Direction, ParsedRequest, RequestSettings, TranslateError};

/// The providers that cannot carry a request, and why (the first refusal, and the
/// translation that refused it).
#[derive(Debug, Default)]
pub(super) struct Carry {
    pub providers: Vec<Arc<str>>,
    pub refusal: Option<(Direction, TranslateError)>,
}

/// Checks `body` (asking for `model`; parsed at most once, for the attempt too) against every provider of its combo that would
/// translate it: one translation per direction at most, and none when every such provider
/// serves the client's API.
pub(super) fn check(
    live: &LiveConfig,
    router: &Router,
    endpoint: Endpoint,
    (model, body): (&str, &ParsedRequest),
) -> Carry {
    let mut carry = Carry::default();
    // (direction, whether it carries); a config has a handful of providers.
    let mut verdicts: Vec<(Direction, bool)> = Vec::new();
    // Read only when some provider would translate (never on a same-API request).
    let mut combo: Option<ComboProviders> = None;
    for (name, provider) in &live.providers {
        let apis = served_apis(router, name, &provider.apis);
        let mut directions = endpoint.translations_to(&apis).peekable();
        if directions.peek().is_none() {
            continue;
        }
        if !combo
            .get_or_insert_with(|| ComboProviders::of(router, model))
            .may_use(name)
        {
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
                        let stream = endpoint.path_stream(direction);
                        let carries = match carries(direction, body, settings, stream) {
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

/// The providers a model's combo may send a request to.
enum ComboProviders {
    /// A named combo's targets' providers, or an implicit `provider/model`'s provider.
    Of(Vec<String>),
    /// The model names no combo the running topology knows (an implicit combo made since, or
    /// none): every provider is checked, as routing decides.
    Unknown,
}

impl ComboProviders {
    fn of(router: &Router, model: &str) -> Self {
        router
            .with_topology(|topology| {
                if let Some(combo) = topology.combo(model) {
                    let providers = combo
                        .targets
                        .iter()
                        .filter_map(|target| {
                            topology
                                .connections
                                .iter()
                                .find(|connection| connection.id == target.connection)
                                .map(|connection| connection.provider.clone())
                        })
                        .collect();
                    return ComboProviders::Of(providers);
                }
                match ImplicitCombo::parse(model) {
                    Some(implicit) => ComboProviders::Of(vec![implicit.provider.to_owned()]),
                    None => ComboProviders::Unknown,
                }
            })
            .unwrap_or(ComboProviders::Unknown)
    }

    fn may_use(&self, provider: &str) -> bool {
        match self {
            ComboProviders::Of(providers) => providers.iter().any(|p| p == provider),
            ComboProviders::Unknown => true,
        }
    }
}
