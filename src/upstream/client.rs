//! The upstream HTTP client of one provider: HTTP/1.1 and HTTP/2 (by ALPN over TLS) on its own
//! connection pool (`pool`), rustls trusting the system's roots plus the provider's `ca_file`,
//! through its egress proxy when one applies, `TCP_NODELAY` on every socket (without it each
//! SSE response stalls ~40 ms on loopback).
//!
//! Owns sending one upstream request (the request line's form, one retry when a reused
//! connection turns out closed before the request left) and naming transport failures
//! (`egress`); knows nothing of routing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::Either;
use futures_util::TryFutureExt;
use http::header::HeaderValue;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::Uri;
use http_body_util::Full;
use hyper::body::Body as _;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use quotaroute_actors::policy::classify::TransportFailure;
use rustls::pki_types::CertificateDer;

use crate::upstream::driven::{H1Body, UpstreamIncoming};
use crate::upstream::egress::{self, EgressConnector};
use crate::upstream::error::UpstreamError;
use crate::upstream::h1_conn::H1Conn;
use crate::upstream::h1_head::encode_request;
use crate::upstream::pool::{Conn, HostId, Lease, Pool};
use crate::upstream::send_batch::SendsUnderWay;

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
    sends: Arc<SendsUnderWay>,
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
            sends: Arc::new(SendsUnderWay::default()),
        }
    }

    /// Sends `request` (its URL absolute); waits for the response head at most `timeout`.
    pub async fn send_within(
        &self,
        request: http::Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<http::Response<UpstreamIncoming>, SendFailure> {
        let deadline = tokio::time::Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(far_future);
        self.send(request, deadline).await
    }

    /// Sends `request` (its URL absolute); waits for the response head until `deadline` (for a
    /// caller that has read the clock already).
    pub async fn send(
        &self,
        mut request: http::Request<Full<Bytes>>,
        deadline: tokio::time::Instant,
    ) -> Result<http::Response<UpstreamIncoming>, SendFailure> {
        // The scheme and authority pick the connection; the request keeps only its path, as
        // an HTTP/1.1 request line wants it.
        let parts = std::mem::take(request.uri_mut()).into_parts();
        let (Some(scheme), Some(authority)) = (parts.scheme, parts.authority) else {
            let (failure, message) = egress::describe_failure(&UpstreamError::NotAbsolute, "");
            return Err(SendFailure { failure, message });
        };
        *request.uri_mut() = origin_form(parts.path_and_query);
        let sent = self.request(&scheme, &authority, request);
        match tokio::time::timeout_at(deadline, sent).await {
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
    ) -> Result<http::Response<UpstreamIncoming>, UpstreamError> {
        // Connecting is rare and its future is large (TLS, both handshakes): boxed, it stays
        // out of the state of every request's future, which the node's handler futures hold
        // and move.
        let _under_way = self.sends.enter().await;
        let lease = match self.pool.checkout(scheme, authority) {
            Some(lease) => lease,
            None => Box::pin(self.pool.connect(scheme, authority)).await?,
        };
        let reused = lease.reused;
        match start(&self.pool, lease, scheme, authority, request).await {
            Ok(response) => Ok(response),
            Err(Unanswered {
                error,
                unsent: Some(request),
            }) if reused => {
                tracing::debug!(%error, "a reused upstream connection had closed; retrying on a new one");
                Box::pin(self.retry(scheme, authority, request)).await
            }
            Err(unanswered) => Err(unanswered.error),
        }
    }

    /// Sends a request a reused connection gave back unsent, on a new connection; once.
    async fn retry(
        &self,
        scheme: &Scheme,
        authority: &Authority,
        mut request: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<UpstreamIncoming>, UpstreamError> {
        if request.uri().scheme().is_some() {
            // It was on its way over HTTP/2, with its absolute URL.
            let path = std::mem::take(request.uri_mut())
                .into_parts()
                .path_and_query;
            *request.uri_mut() = origin_form(path);
        }
        let lease = self.pool.connect(scheme, authority).await?;
        start(&self.pool, lease, scheme, authority, request)
            .await
            .map_err(|unanswered| unanswered.error)
    }
}

/// A request that got no response head: why, and the request when none of it left.
struct Unanswered {
    error: UpstreamError,
    unsent: Option<http::Request<Full<Bytes>>>,
}

/// Starts sending `request` (origin-form) on the leased connection: HTTP/1.1 by the router's
/// own exchange (`h1_conn`), whose body holds the connection and puts it back in `pool`;
/// HTTP/2 through hyper, with the absolute URL. A plain function, so the request is held by
/// the exchange's future alone, not by one more layer of `async` state.
fn start(
    pool: &Arc<Pool>,
    lease: Lease,
    scheme: &Scheme,
    authority: &Authority,
    mut request: http::Request<Full<Bytes>>,
) -> impl Future<Output = Result<http::Response<UpstreamIncoming>, Unanswered>> {
    match lease.conn {
        Conn::Http1 { conn, host_header } => Either::Left(exchange_http1(
            conn,
            host_header,
            pool.clone(),
            lease.host,
            request,
        )),
        Conn::Http2(mut sender) => {
            let path = std::mem::take(request.uri_mut())
                .into_parts()
                .path_and_query;
            let mut parts = http::uri::Parts::default();
            parts.scheme = Some(scheme.clone());
            parts.authority = Some(authority.clone());
            parts.path_and_query = path;
            *request.uri_mut() = Uri::from_parts(parts).unwrap_or_default();
            let sending = sender.try_send_request(request);
            Either::Right(
                sending
                    .map_ok(|response| response.map(UpstreamIncoming::Http2))
                    .map_err(|mut failed| Unanswered {
                        unsent: failed.take_message(),
                        error: UpstreamError::Exchange(failed.into_error()),
                    }),
            )
        }
    }
}

/// One request and its answer's head on an HTTP/1.1 connection, with `Host` unless the request
/// has one; the body reads the rest from the connection, which goes back to `pool` at its end.
async fn exchange_http1(
    conn: H1Conn,
    host_header: HeaderValue,
    pool: Arc<Pool>,
    host: HostId,
    request: http::Request<Full<Bytes>>,
) -> Result<http::Response<UpstreamIncoming>, Unanswered> {
    let (parts, body) = request.into_parts();
    let body = whole(body);
    let target = parts.uri.path_and_query().map_or("/", PathAndQuery::as_str);
    let mut head = Vec::new();
    encode_request(
        &parts.method,
        target,
        &parts.headers,
        &host_header,
        body.len(),
        &mut head,
    );
    match conn.exchange(&parts.method, &head, &body).await {
        Ok((answer, conn)) => {
            let body = H1Body::new(conn, &answer, pool, host);
            let mut response = http::Response::new(UpstreamIncoming::Http1(body));
            *response.status_mut() = answer.status;
            *response.version_mut() = answer.version;
            *response.headers_mut() = answer.headers;
            Ok(response)
        }
        Err(failed) => Err(Unanswered {
            unsent: failed
                .unsent
                .then(|| http::Request::from_parts(parts, Full::new(body))),
            error: UpstreamError::Http1(failed.error),
        }),
    }
}

/// The bytes of a request body, which is whole already.
fn whole(mut body: Full<Bytes>) -> Bytes {
    let mut unwoken = Context::from_waker(Waker::noop());
    match Pin::new(&mut body).poll_frame(&mut unwoken) {
        Poll::Ready(Some(Ok(frame))) => frame.into_data().unwrap_or_default(),
        _ => Bytes::new(),
    }
}

/// A deadline no timeout reaches (about 30 years on), for a timeout too long to add to now.
fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(86_400 * 365 * 30)
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
