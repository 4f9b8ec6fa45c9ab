//! The generation APIs a client or a host speaks, and which pair a translated request crosses.

/// A generation API (behaviour §14): a client speaks one, a host serves some.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Api {
    /// Chat Completions (`/chat/completions`).
    Chat,
    /// Responses (`/responses`).
    Responses,
    /// Anthropic's Messages (`/messages`).
    Messages,
    /// Google's Gemini (`models/{model}:generateContent`).
    Gemini,
}

impl Api {
    /// Every API, in §14's order of preference for a target that does not serve the client's.
    pub const ALL: [Api; 4] = [Api::Chat, Api::Responses, Api::Messages, Api::Gemini];

    /// Its name in config (`apis`), labels and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Gemini => "gemini",
        }
    }

    /// The API with this name.
    pub fn from_name(name: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|api| api.name() == name)
    }

    /// Its own path after a provider's `base_url`.
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/chat/completions",
            Api::Responses => "/responses",
            Api::Messages => "/messages",
            // The node appends `/{model}:{method}`.
            Api::Gemini => "/models",
        }
    }

    /// Whether it is Anthropic's (its errors, headers and streams in that shape).
    pub fn is_anthropic(self) -> bool {
        self == Api::Messages
    }
}

/// A client API served by a target through another API (behaviour §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Direction {
    pub client: Api,
    pub target: Api,
}

/// The label of each pair, `client>target`, `ALL`'s order.
const LABELS: [&str; 12] = [
    "chat>responses",
    "chat>messages",
    "responses>chat",
    "responses>messages",
    "messages>chat",
    "messages>responses",
    "chat>gemini",
    "responses>gemini",
    "messages>gemini",
    "gemini>chat",
    "gemini>responses",
    "gemini>messages",
];

impl Direction {
    /// `client` on a target of `target`; `None` when they are the same API (no translation).
    pub fn between(client: Api, target: Api) -> Option<Direction> {
        (client != target).then_some(Direction { client, target })
    }

    pub const CHAT_TO_RESPONSES: Direction = Direction::pair(Api::Chat, Api::Responses);
    pub const CHAT_TO_MESSAGES: Direction = Direction::pair(Api::Chat, Api::Messages);
    pub const RESPONSES_TO_CHAT: Direction = Direction::pair(Api::Responses, Api::Chat);
    pub const RESPONSES_TO_MESSAGES: Direction = Direction::pair(Api::Responses, Api::Messages);
    pub const MESSAGES_TO_CHAT: Direction = Direction::pair(Api::Messages, Api::Chat);
    pub const MESSAGES_TO_RESPONSES: Direction = Direction::pair(Api::Messages, Api::Responses);
    pub const CHAT_TO_GEMINI: Direction = Direction::pair(Api::Chat, Api::Gemini);
    pub const RESPONSES_TO_GEMINI: Direction = Direction::pair(Api::Responses, Api::Gemini);
    pub const MESSAGES_TO_GEMINI: Direction = Direction::pair(Api::Messages, Api::Gemini);
    pub const GEMINI_TO_CHAT: Direction = Direction::pair(Api::Gemini, Api::Chat);
    pub const GEMINI_TO_RESPONSES: Direction = Direction::pair(Api::Gemini, Api::Responses);
    pub const GEMINI_TO_MESSAGES: Direction = Direction::pair(Api::Gemini, Api::Messages);

    /// Every pair of two different APIs (12 for four).
    pub const ALL: [Direction; 12] = [
        Direction::CHAT_TO_RESPONSES,
        Direction::CHAT_TO_MESSAGES,
        Direction::RESPONSES_TO_CHAT,
        Direction::RESPONSES_TO_MESSAGES,
        Direction::MESSAGES_TO_CHAT,
        Direction::MESSAGES_TO_RESPONSES,
        Direction::CHAT_TO_GEMINI,
        Direction::RESPONSES_TO_GEMINI,
        Direction::MESSAGES_TO_GEMINI,
        Direction::GEMINI_TO_CHAT,
        Direction::GEMINI_TO_RESPONSES,
        Direction::GEMINI_TO_MESSAGES,
    ];

    const fn pair(client: Api, target: Api) -> Direction {
        Direction { client, target }
    }

    /// Its name in `x-quotaroute-translated`, request events and metrics (`chat>messages`).
    pub fn label(self) -> &'static str {
        Direction::ALL
            .iter()
            .position(|d| *d == self)
            .map_or("", |at| LABELS[at])
    }

    /// The direction with this label.
    pub fn from_label(label: &str) -> Option<Direction> {
        Direction::ALL.into_iter().find(|d| d.label() == label)
    }

    /// Whether the client speaks Anthropic's API (its errors and streams in that shape).
    pub fn client_is_anthropic(self) -> bool {
        self.client.is_anthropic()
    }

    /// The target API's own path after the provider's `base_url`.
    pub fn upstream_path(self) -> &'static str {
        self.target.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_has_its_own_label_both_ways() {
        for direction in Direction::ALL {
            let label = direction.label();
            assert_eq!(
                label,
                format!("{}>{}", direction.client.name(), direction.target.name())
            );
            assert_eq!(Direction::from_label(label), Some(direction));
        }
        assert_eq!(Direction::between(Api::Chat, Api::Chat), None);
        // Every pair of two different APIs is one of them.
        for client in Api::ALL {
            for target in Api::ALL {
                let found = Direction::ALL.contains(&Direction { client, target });
                assert_eq!(found, client != target, "{client:?}>{target:?}");
            }
        }
        assert_eq!(Api::from_name("gemini"), Some(Api::Gemini));
    }
}
