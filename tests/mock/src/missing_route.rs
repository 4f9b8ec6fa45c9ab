//! A host without some routes (behaviour §14): which paths a key's host lacks besides the
//! generation APIs it does not serve (`MockUpstream::set_served_apis`), and how its 404 for
//! such a route reads — as OpenAI's API, a vLLM (FastAPI), an Ollama (Go) or a server behind
//! an HTML error page answers it. Set with [`MockUpstream::set_missing_routes`] and
//! [`MockUpstream::set_route_404`], or `POST /mock/routes` (`{"key", "missing": ["/v1/…"],
//! "style": "openai" | "fastapi" | "go" | "html"}`).

use serde::Deserialize;

use crate::error_bodies::{self, ErrorReply};
use crate::route_table::Route404;
use crate::state::MockUpstream;

impl Route404 {
    /// The 404 for `method path`.
    pub fn reply(self, method: &str, path: &str) -> ErrorReply {
        match self {
            Route404::Openai => error_bodies::unknown_route(method, path),
            Route404::Fastapi => ErrorReply {
                status: 404,
                content_type: "application/json",
                body: r#"{"detail":"Not Found"}"#.to_owned(),
            },
            Route404::Go => ErrorReply {
                status: 404,
                content_type: "text/plain; charset=utf-8",
                body: "404 page not found\n".to_owned(),
            },
            Route404::Html => ErrorReply {
                status: 404,
                content_type: "text/html",
                body: "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n\
                       <center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n\
                       </body>\r\n</html>\r\n"
                    .to_owned(),
            },
        }
    }
}

/// `POST /mock/routes`'s body.
#[derive(Debug, Deserialize)]
pub struct RoutesBody {
    pub key: String,
    #[serde(default)]
    pub missing: Vec<String>,
    #[serde(default)]
    pub style: Route404,
}

impl MockUpstream {
    /// Makes `key`'s host answer 404 for `paths` (exact request paths, e.g.
    /// `/v1/responses/compact`), as a host without them.
    pub fn set_missing_routes(&self, key: &str, paths: &[&str]) {
        let paths = paths.iter().map(|path| (*path).to_owned()).collect();
        self.with_routes(|routes| {
            routes.missing.insert(key.to_owned(), paths);
        });
    }

    /// How `key`'s host words its 404 for a route it lacks.
    pub fn set_route_404(&self, key: &str, style: Route404) {
        self.with_routes(|routes| {
            routes.styles.insert(key.to_owned(), style);
        });
    }

    /// The 404 `key`'s host answers for `method path` when it lacks that route.
    pub(crate) fn missing_route_reply(&self, key: &str, method: &str, path: &str) -> ErrorReply {
        let style = self.with_routes(|routes| routes.styles.get(key).copied().unwrap_or_default());
        style.reply(method, path)
    }

    /// Whether `key`'s host lacks the route `path` (besides the APIs it does not serve).
    pub(crate) fn lacks_route(&self, key: &str, path: &str) -> bool {
        self.with_routes(|routes| {
            routes
                .missing
                .get(key)
                .is_some_and(|paths| paths.iter().any(|missing| missing == path))
        })
    }
}
