//! The upstream HTTP client of one provider: HTTP/1.1 and HTTP/2 (by ALPN over TLS) on its own
//! connection pool (`pool`), rustls trusting the system's roots plus the provider's `ca_file`,
//! through its egress proxy when one applies, `TCP_NODELAY` on every socket (without it each
//! SSE response stalls ~40 ms on loopback).
//!
//! Owns sending one upstream request (the request line's form, `Host`, one retry when a reused
//! connection turns out closed before the request left) and naming transport failures
//! (`egress`); knows nothing of routing.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::HOST;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::Uri;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use quotaroute_actors::policy::classify::TransportFailure;
use rustls::pki_types::CertificateDer;

use crate::upstream::egress::{self, EgressConnector};
use crate::upstream::error::UpstreamError;
use crate::upstream::pool::{Conn, Lease, Pool};

/// Why an upstream request got no response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendFailure {
    pub failure: TransportFailure,
    /// What happened, for the journal and the log: hosts and reasons, never a credential.
    pub message: String,
}

/// A cloneable pooled client; clones share the pool.
#[derive(Clone)]
pub struct UpstreamClient {
    pool: Arc<Pool>,
}

/// A request a connection gave back before any of it left, and why.
struct Unsent {
    request: http::Request<Full<Bytes>>,
    error: UpstreamError,
}

impl UpstreamClient {
    /// A direct client trusting the system's roots.
    pub fn new() -> Self {
        Self::with_egress(&[], None)
    }

    /// A client trusting the system's roots plus `extra_roots`, through `proxies` when they
    /// apply to a destination.
    pub fn with_egress(extra_roots: &[CertificateDer<'static>], proxies: Option<Matcher>) -> Self {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_connect_timeout(Some(Duration::from_secs(10)));
        http.set_keepalive(Some(Duration::from_secs(60)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(egress::client_tls(extra_roots))
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(EgressConnector::new(http, proxies));
        UpstreamClient {
            pool: Arc::new(Pool::new(https)),
        }
    }

    /// Sends `request` (its URL absolute); waits for the response head at most `timeout`.
    pub async fn send(
        &self,
        mut request: http::Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<http::Response<Incoming>, SendFailure> {
        // The scheme and authority pick the connection; the request keeps only its path, as
        // an HTTP/1.1 request line wants it.
        let parts = std::mem::take(request.uri_mut()).into_parts();
        let (Some(scheme), Some(authority)) = (parts.scheme, parts.authority) else {
            let (failure, message) =
                egress::describe_failure(&UpstreamError::NotAbsolute, "");
            return Err(SendFailure { failure, message });
        };
        *request.uri_mut() = origin_form(parts.path_and_query);
        let sent = self.request(&scheme, &authority, request);
        match tokio::time::timeout(timeout, sent).await {
            Ok(Ok(response)) => Ok(response),
            Err(_) => Err(SendFailure {
                failure: TransportFailure::Timeout,
                message: format!("no response head from {} in time", shown(&authority)),
            }),
            Ok(Err(error)) => {
                let (failure, message) = egress::describe_failure(&error, shown(&authority));
                Err(SendFailure { failure, message })
            }
        }
    }

    /// Sends `request` (origin-form) to `scheme://authority` on a pooled connection, or a new
    /// one; once more on a new one when a reused connection had closed before the request
    /// left (an upstream may drop an idle keep-alive connection at any moment).
    async fn request(
        &self,
        scheme: &Scheme,
        authority: &Authority,
        request: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<Incoming>, UpstreamError> {
        let lease = match self.pool.checkout(scheme, authority) {
            Some(lease) => lease,
            None => self.pool.connect(scheme, authority).await?,
        };
        let reused = lease.reused;
        let unsent = match self.send_on(lease, scheme, authority, request).await {
            Ok(response) => return Ok(response),
            Err(Sent::Never(unsent)) if reused => unsent,
            Err(Sent::Never(unsent)) => return Err(unsent.error),
            Err(Sent::Failed(error)) => return Err(error),
        };
        tracing::debug!(error = %unsent.error, "a reused upstream connection had closed; retrying on a new one");
        let lease = self.pool.connect(scheme, authority).await?;
        match self.send_on(lease, scheme, authority, unsent.request).await {
            Ok(response) => Ok(response),
            Err(Sent::Never(unsent)) => Err(unsent.error),
            Err(Sent::Failed(error)) => Err(error),
        }
    }

    /// Sends `request` (origin-form) on the leased connection: HTTP/1.1 with `Host` (unless
    /// the request has one), HTTP/2 with the absolute URL. An HTTP/1.1 connection goes back to
    /// the pool once the response head came.
    async fn send_on(
        &self,
        lease: Lease,
        scheme: &Scheme,
        authority: &Authority,
        mut request: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<Incoming>, Sent> {
        match lease.conn {
            Conn::Http1 {
                mut sender,
                host_header,
            } => {
                request.headers_mut().entry(HOST).or_insert(host_header);
                match sender.try_send_request(request).await {
                    Ok(response) => {
                        self.pool.checkin(lease.host, sender);
                        Ok(response)
                    }
                    Err(failed) => Err(Sent::from(failed)),
                }
            }
            Conn::Http2(mut sender) => {
                let path = std::mem::take(request.uri_mut()).into_parts().path_and_query;
                let mut parts = http::uri::Parts::default();
                parts.scheme = Some(scheme.clone());
                parts.authority = Some(authority.clone());
                parts.path_and_query = path;
                *request.uri_mut() = Uri::from_parts(parts).unwrap_or_default();
                match sender.try_send_request(request).await {
                    Ok(response) => Ok(response),
                    Err(failed) => match Sent::from(failed) {
                        Sent::Never(mut unsent) => {
                            let path = std::mem::take(unsent.request.uri_mut())
                                .into_parts()
                                .path_and_query;
                            *unsent.request.uri_mut() = origin_form(path);
                            Err(Sent::Never(unsent))
                        }
                        failed => Err(failed),
                    },
                }
            }
        }
    }
}

/// How sending on one connection failed.
enum Sent {
    /// The connection gave the request back before any of it left.
    Never(Unsent),
    /// The request (or part of it) left: it is not sent again.
    Failed(UpstreamError),
}

impl From<hyper::client::conn::TrySendError<http::Request<Full<Bytes>>>> for Sent {
    fn from(mut failed: hyper::client::conn::TrySendError<http::Request<Full<Bytes>>>) -> Self {
        match failed.take_message() {
            Some(request) => Sent::Never(Unsent {
                request,
                error: UpstreamError::Exchange(failed.into_error()),
            }),
            None => Sent::Failed(UpstreamError::Exchange(failed.into_error())),
        }
    }
}

/// The request line's target: the path and query alone (`/` when there is none).
fn origin_form(path: Option<PathAndQuery>) -> Uri {
    match path {
        Some(path) if path.as_str() != "/" => {
            let mut parts = http::uri::Parts::default();
            parts.path_and_query = Some(path);
            Uri::from_parts(parts).unwrap_or_default()
        }
        _ => Uri::default(),
    }
}

/// The host a failure message names: the authority without any user info.
fn shown(authority: &Authority) -> &str {
    let text = authority.as_str();
    text.rsplit_once('@').map_or(text, |(_, host)| host)
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient").finish_non_exhaustive()
    }
}

impl Default for UpstreamClient {
    fn default() -> Self {
        Self::new()
    }
}
