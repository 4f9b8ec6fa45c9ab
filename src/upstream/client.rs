//! The pooled upstream HTTP client of one provider: hyper-util over HTTP/1.1 and HTTP/2 (by
//! ALPN over TLS), rustls trusting the system's roots plus the provider's `ca_file`, through
//! its egress proxy when one applies, `TCP_NODELAY` on every socket (without it each SSE
//! response stalls ~40 ms on loopback).
//!
//! Owns sending one upstream request and naming transport failures (`egress`); knows nothing
//! of routing.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioExecutor;
use quotaroute_actors::policy::classify::TransportFailure;
use rustls::pki_types::CertificateDer;

use crate::upstream::egress::{self, EgressConnector};

/// Why an upstream request got no response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendFailure {
    pub failure: TransportFailure,
    /// What happened, for the journal and the log: hosts and reasons, never a credential.
    pub message: String,
}

/// A cloneable pooled client.
#[derive(Clone)]
pub struct UpstreamClient {
    client: Client<HttpsConnector<EgressConnector>, Full<Bytes>>,
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
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(256)
            .build(https);
        UpstreamClient { client }
    }

    /// Sends `request`; waits for the response head at most `timeout`.
    pub async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<http::Response<Incoming>, SendFailure> {
        let host = request
            .uri()
            .authority()
            .map_or_else(String::new, |a| a.to_string());
        match tokio::time::timeout(timeout, self.client.request(request)).await {
            Err(_) => Err(SendFailure {
                failure: TransportFailure::Timeout,
                message: format!("no response head from {host} in time"),
            }),
            Ok(Ok(response)) => Ok(response),
            Ok(Err(error)) => {
                let (failure, message) = egress::describe_failure(&error, &host);
                Err(SendFailure { failure, message })
            }
        }
    }
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
