//! The routes each mock host lacks and how its 404 for one reads (behaviour §14): the table
//! the mock's state holds, and the four ways real hosts word that 404.

use serde::Deserialize;

/// How a host's 404 for a route it lacks reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route404 {
    /// `{"error":{"message":"Invalid URL (POST /v1/responses)",…}}`.
    #[default]
    Openai,
    /// vLLM and other FastAPI servers: `{"detail":"Not Found"}`.
    Fastapi,
    /// Ollama and other Go servers: `404 page not found` as plain text.
    Go,
    /// An nginx error page in front of the host.
    Html,
}

/// The routes each key's host lacks and how it says so.
#[derive(Debug, Default)]
pub struct MissingRoutes {
    pub(crate) missing: std::collections::HashMap<String, Vec<String>>,
    pub(crate) styles: std::collections::HashMap<String, Route404>,
}
