//! Which pair of formats a translated request crosses: the client's API and the target's.

/// A client API served by a target of the other format (behaviour §14's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `/v1/chat/completions` on an `anthropic` target.
    ChatToMessages,
    /// `/v1/responses` on an `anthropic` target (stateless).
    ResponsesToMessages,
    /// `/v1/messages` on an `openai` target.
    MessagesToChat,
}

impl Direction {
    pub const ALL: [Direction; 3] = [
        Direction::ChatToMessages,
        Direction::ResponsesToMessages,
        Direction::MessagesToChat,
    ];

    /// Its name in `x-quotaroute-translated`, request events and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Direction::ChatToMessages => "chat>messages",
            Direction::ResponsesToMessages => "responses>messages",
            Direction::MessagesToChat => "messages>chat",
        }
    }

    /// The direction with this label.
    pub fn from_label(label: &str) -> Option<Direction> {
        Direction::ALL.into_iter().find(|d| d.label() == label)
    }

    /// Whether the client speaks Anthropic's API (its errors and streams in that shape).
    pub fn client_is_anthropic(self) -> bool {
        self == Direction::MessagesToChat
    }

    /// The target format's own path after the provider's `base_url`.
    pub fn upstream_path(self) -> &'static str {
        match self {
            Direction::ChatToMessages | Direction::ResponsesToMessages => "/messages",
            Direction::MessagesToChat => "/chat/completions",
        }
    }
}
