//! The shapes of one upstream try (behaviour §3, §4): what a try needs from its request
//! ([`TryContext`]), how it ended ([`Attempted`]: its classified result and what the client may
//! get of it) and what a failed one leaves for the final answer ([`LastFailure`]). Holds no
//! I/O: the try itself is `try_target`'s and `send`'s.

use bytes::Bytes;
use http::header::HeaderMap;
use http::{Method, StatusCode};
use quotaroute_actors::policy::classify::{failure_class, AttemptFailure, BodyFailure};
use quotaroute_actors::policy::rate_limit_headers::UsageReading;
use quotaroute_actors::policy::request::LastAttempt;
use quotaroute_actors::AttemptResult;
use quotaroute_journal::{ApiFormat as JournalFormat, OutcomeClass};
use tokio::time::Instant;

use crate::clients::ClientTicket;
use crate::node::app::AppState;
use crate::node::encrypted_turn::EncryptedTurn;
use crate::node::endpoint::Endpoint;
use crate::node::live::LiveConfig;
use crate::node::stream_relay::CommittedStream;
use crate::telemetry::RequestSpan;
use crate::wire::body_rewrite::RequestInfo;
use crate::wire::content_coding::Coding;
use crate::wire::translate::{Direction, ParsedRequest};

/// The last real upstream failure, which decides the answer when the tries ran out (§7).
pub(crate) enum LastFailure {
    Upstream {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// A failure without an upstream answer to pass on, and what the client may be told of
    /// it: never an upstream address or a key command (those are in the attempt's journaled
    /// message).
    Failed {
        class: OutcomeClass,
        failure: Option<AttemptFailure>,
        public: String,
    },
}

impl LastFailure {
    /// What the answer rule (`policy::request::final_answer`) needs of it.
    pub(crate) fn as_last_attempt(&self) -> LastAttempt {
        match self {
            LastFailure::Upstream { status, .. } => LastAttempt::Status(status.as_u16()),
            LastFailure::Failed {
                failure: Some(AttemptFailure::Body(BodyFailure::TooLarge)),
                ..
            } => LastAttempt::TooLarge,
            LastFailure::Failed { class, .. } => LastAttempt::Class(*class),
        }
    }
}

/// What one try needs from its request.
pub(crate) struct TryContext<'a> {
    pub app: &'a AppState,
    pub live: &'a LiveConfig,
    pub endpoint: Endpoint,
    pub method: Method,
    /// The model name the client asked for (combo or `provider/model`), for logs.
    pub combo: &'a str,
    /// The parsed body of a routed POST, whose `model` is rewritten per target; `None`: the
    /// body goes as it came (the stored-response endpoints).
    pub info: Option<&'a RequestInfo>,
    pub client_body: &'a Bytes,
    /// The client's body parsed for the carry check, which its translation reuses when it
    /// sends that body.
    pub parsed: Option<&'a ParsedRequest>,
    pub client_headers: &'a HeaderMap,
    pub path_and_query: &'a str,
    pub request_id: &'a str,
    pub force_include_usage: bool,
    /// Whether a success's token usage counts (not for `count_tokens` or stored responses).
    pub count_usage: bool,
    pub deadline: Instant,
    /// telemetry: the request's server span (off when not traced).
    pub trace: &'a RequestSpan,
    /// The admitted client's ticket, whose usage a success counts when `count_usage`.
    pub client: Option<&'a std::sync::Arc<ClientTicket>>,
    /// The request's encrypted items (behaviour §10), when it has any: each target gets only
    /// those it can read.
    pub encrypted: Option<&'a EncryptedTurn>,
    /// The id a translated Responses answer is kept under (`[responses] store = true`,
    /// behaviour §14); `None`: not kept.
    pub kept_id: Option<&'a str>,
    /// The kept response this request continued (`previous_response_id`, expanded before it
    /// was routed), which its answer names.
    pub continues: Option<&'a str>,
    /// The first kept response of the chain this request's answer joins, when kept.
    pub kept_chain: Option<&'a str>,
}

impl TryContext<'_> {
    /// The admitted client's id for log lines (`-`: none).
    pub(crate) fn client_id(&self) -> &str {
        self.client.map_or("-", |ticket| &ticket.tag().id)
    }

    /// The client an answer's encrypted items are sealed for, and whose seals its request's
    /// items must carry (behaviour §10, §11): the admitted client (empty: none, whose seals
    /// are never made).
    pub(crate) fn seal_client(&self) -> std::sync::Arc<str> {
        self.client.map_or_else(
            || std::sync::Arc::from(""),
            |ticket| ticket.tag().id.clone(),
        )
    }

    pub(crate) fn anthropic(&self) -> bool {
        self.endpoint.format() == JournalFormat::Anthropic
    }

    pub(super) fn streaming(&self) -> bool {
        self.info.is_some_and(|info| info.stream)
    }
}

/// How one try against one target ended: its classified result (for the plan and the report)
/// and what the client may get of it.
pub(crate) struct Attempted {
    pub result: AttemptResult,
    pub payload: Payload,
    /// The translation the try went through and what it dropped (behaviour §14).
    pub translation: Option<Translation>,
    /// A success the upstream answered, whose usage the client is charged once the plan
    /// delivers it (`charge::bill`); never a local count or a refused translation.
    pub bills_client: bool,
    /// The try went upstream; false for an answer given here (a refused translation, a local
    /// count): `x-quotaroute-attempts` counts only what was sent, and a refusal names no
    /// connection.
    pub sent: bool,
}

/// A try served by a target of the other format.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Translation {
    pub direction: Direction,
    /// Tuning parameters left out, in the client's names (`x-quotaroute-dropped`).
    pub dropped: Vec<String>,
    /// Thinking blocks the try carried back to their connection (a Responses client's
    /// reasoning items): a 400 refusing their signatures is retried without them.
    pub thinking_restored: u32,
}

/// What a try leaves for the client.
pub(crate) enum Payload {
    /// A stream past its first content, to relay.
    Stream {
        stream: Box<CommittedStream>,
        headers: HeaderMap,
    },
    /// A whole upstream answer: a success or a client error to deliver, or a failure to pass
    /// through if it is the last.
    Answer {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
    },
    /// No answer to pass on.
    Nothing {
        failure: Option<AttemptFailure>,
        public: String,
    },
}

impl Payload {
    pub(crate) fn is_stream(&self) -> bool {
        matches!(self, Payload::Stream { .. })
    }

    /// What the answer remembers of this try when it failed.
    pub(crate) fn into_last_failure(self, class: OutcomeClass) -> LastFailure {
        match self {
            Payload::Answer {
                status,
                headers,
                body,
            } => LastFailure::Upstream {
                status,
                headers,
                body,
            },
            Payload::Nothing { failure, public } => LastFailure::Failed {
                class,
                failure,
                public,
            },
            Payload::Stream { .. } => LastFailure::Failed {
                class,
                failure: None,
                public: "the stream failed".to_string(),
            },
        }
    }
}

/// A try that failed without an answer: its class from `failure` (never picked by hand), the
/// journaled `detail` (it may name hosts or key commands) and what the client is told.
pub(crate) fn unanswered(
    failure: AttemptFailure,
    status: Option<u16>,
    detail: &str,
    public: &str,
) -> Attempted {
    let class = failure_class(failure);
    let mut result = AttemptResult::failure(class, status);
    result.message = Some(detail.to_string());
    Attempted {
        result,
        payload: Payload::Nothing {
            failure: Some(failure),
            public: public.to_string(),
        },
        translation: None,
        bills_client: false,
        sent: true,
    }
}

/// [`unanswered`] with nothing to hide from the client.
pub(crate) fn unanswered_openly(
    failure: AttemptFailure,
    status: Option<u16>,
    message: &str,
) -> Attempted {
    unanswered(failure, status, message, message)
}

/// An upstream's answer as it arrived: its status and headers, read; its body, not yet.
pub(super) struct UpstreamAnswer {
    pub status: StatusCode,
    /// Kept whole: relayed (masked) and classified.
    pub headers: HeaderMap,
    pub body: crate::upstream::driven::UpstreamIncoming,
    /// The body's `Content-Encoding`, undone as it is read.
    pub codings: Vec<Coding>,
    /// The rate-limit headers' readings (behaviour §13), whatever the answer.
    pub usage: Vec<UsageReading>,
    /// The router's clock when it was sent: the same `now` its policy reads.
    pub now_ms: u64,
}
