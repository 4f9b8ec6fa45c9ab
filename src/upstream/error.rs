//! Why an upstream request got no response head, as the pool and the client see it: the
//! URL, connecting (name lookup, TCP, the proxy's tunnel, TLS), the HTTP handshake, or the
//! exchange itself (over HTTP/1.1: [`ExchangeError`]). `egress::describe_failure` turns it into a class and a sentence.

/// Any error a connector hands back.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One upstream request's transport failure, its cause kept as its `source`.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The request's URL has no scheme or no host to connect to.
    #[error("the upstream URL has no scheme or host")]
    NotAbsolute,
    /// Opening the connection failed: name lookup, TCP, the proxy's tunnel or TLS.
    #[error("connecting failed")]
    Connect(#[source] BoxError),
    /// The HTTP/2 handshake on a new connection failed.
    #[error("the HTTP handshake failed")]
    Handshake(#[source] hyper::Error),
    /// Writing the request or reading its response head failed over HTTP/2.
    #[error("the request failed")]
    Exchange(#[source] hyper::Error),
    /// Writing the request or reading its response head failed over HTTP/1.1.
    #[error("the request failed")]
    Http1(#[source] ExchangeError),
}

impl UpstreamError {
    /// Whether the failure happened while opening the connection.
    pub fn is_connect(&self) -> bool {
        matches!(self, UpstreamError::Connect(_))
    }
}

/// Why an exchange got no response head.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("writing the request failed: {0}")]
    Write(#[source] std::io::Error),
    #[error("reading the response failed: {0}")]
    Read(#[source] std::io::Error),
    #[error("the connection closed before a response")]
    Closed,
    #[error("{0}")]
    Head(#[from] crate::upstream::h1_head::HeadError),
}

impl ExchangeError {
    /// The connection ended under the exchange (a reset or a close), as opposed to an answer
    /// that could not be read.
    pub fn is_closed(&self) -> bool {
        matches!(self, ExchangeError::Closed)
    }
}
