//! How the router reaches an upstream through a company network (contract `providers.ca_file`,
//! `providers.proxy`): which roots its TLS trusts (the system's, plus the provider's own CA
//! file), whether a connection goes through an HTTP proxy (CONNECT, as curl reads
//! `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY`), and what a person is told when that fails.
//!
//! The pieces are hyper-util's proxy matcher and CONNECT tunnel, rustls and the system's
//! certificate store; this file only wires them and names their failures.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioIo;
use quotaroute_actors::policy::classify::TransportFailure;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpStream;
use tower::Service;

use crate::upstream::error::{BoxError, ExchangeError, UpstreamError};

/// Where a provider's connections go: straight to the upstream, or through a proxy.
#[derive(Clone)]
pub struct EgressConnector {
    http: HttpConnector,
    proxies: Option<Arc<Matcher>>,
}

impl EgressConnector {
    pub fn new(http: HttpConnector, proxies: Option<Matcher>) -> Self {
        EgressConnector {
            http,
            proxies: proxies.map(Arc::new),
        }
    }
}

impl Service<http::Uri> for EgressConnector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, destination: http::Uri) -> Self::Future {
        let intercept = self
            .proxies
            .as_ref()
            .and_then(|matcher| matcher.intercept(&destination));
        let mut http = self.http.clone();
        Box::pin(async move {
            let Some(intercept) = intercept else {
                return http.call(destination).await.map_err(Into::into);
            };
            let mut tunnel = Tunnel::new(intercept.uri().clone(), http);
            if let Some(auth) = intercept.basic_auth() {
                tunnel = tunnel.with_auth(auth.clone());
            }
            tunnel
                .call(destination)
                .await
                .map_err(|error| Box::new(ProxyFailed(error.to_string())) as BoxError)
        })
    }
}

/// The proxy refused or broke the tunnel (its text, never its credentials).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ProxyFailed(String);

/// The proxies for one provider: its `proxy` (for every scheme) when set, else the
/// environment as curl reads it; `NO_PROXY` applies either way. `None`: always direct.
pub fn proxy_matcher(
    explicit: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<Matcher> {
    let read =
        |upper: &str, lower: &str| env(lower).or_else(|| env(upper)).filter(|v| !v.is_empty());
    let no = read("NO_PROXY", "no_proxy").unwrap_or_default();
    let builder = match explicit {
        Some(url) => Matcher::builder().all(url.to_string()),
        None => {
            let all = read("ALL_PROXY", "all_proxy");
            let http = read("HTTP_PROXY", "http_proxy").or_else(|| all.clone());
            let https = read("HTTPS_PROXY", "https_proxy").or(all);
            if http.is_none() && https.is_none() {
                return None;
            }
            Matcher::builder()
                .http(http.unwrap_or_default())
                .https(https.unwrap_or_default())
        }
    };
    Some(builder.no(no).build())
}

/// The system's trusted roots, read once (the bundled Mozilla list when the system has none).
pub(crate) fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let native = rustls_native_certs::load_native_certs().certs;
        if !native.is_empty() {
            return native;
        }
        tracing::warn!("no system CA certificates found; trusting the bundled Mozilla roots");
        Vec::new()
    })
}

/// The TLS client config of one provider: system roots plus `extra` (its `ca_file`). ALPN
/// (h2, then http/1.1) is the connector's to set.
pub fn client_tls(extra: &[CertificateDer<'static>]) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    let system = system_roots();
    if system.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    } else {
        let _ = roots.add_parsable_certificates(system.iter().cloned());
    }
    let _ = roots.add_parsable_certificates(extra.iter().cloned());
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|builder| {
            builder
                .with_root_certificates(roots.clone())
                .with_no_client_auth()
        })
        .unwrap_or_else(|_| {
            rustls::ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth()
        })
}

/// What failed in reaching `host`, as its class and a sentence a person can act on.
pub fn describe_failure(error: &UpstreamError, host: &str) -> (TransportFailure, String) {
    if let UpstreamError::NotAbsolute = error {
        return (TransportFailure::Other, error.to_string());
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return (TransportFailure::Tls, tls_message(tls, host));
        }
        if let Some(proxy) = current.downcast_ref::<ProxyFailed>() {
            return (
                TransportFailure::Connect,
                format!("the egress proxy refused the tunnel to {host}: {}", proxy.0),
            );
        }
        // An io::Error's `source` skips the error it wraps (hyper-rustls wraps one io::Error in
        // another around rustls's): descend through `get_ref` instead.
        source = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => current.source(),
        };
    }
    let failure = transport_failure(error);
    let what = match failure {
        TransportFailure::Dns => "could not resolve",
        TransportFailure::Connect => "could not connect to",
        TransportFailure::Reset => "connection reset by",
        _ => "request failed to",
    };
    let detail = std::error::Error::source(error)
        .map(|inner| format!(": {inner}"))
        .unwrap_or_default();
    (failure, format!("{what} {host}{detail}"))
}

/// What kind of transport failure `error` is, from the errors it carries (typed: io error kinds
/// and hyper's own predicates, never its text). A connect failure that is neither refused nor
/// unreachable is the name lookup, the only other step of connecting (TLS and proxies are
/// named before this is asked).
fn transport_failure(error: &UpstreamError) -> TransportFailure {
    use std::io::ErrorKind;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            match io.kind() {
                ErrorKind::ConnectionRefused
                | ErrorKind::HostUnreachable
                | ErrorKind::NetworkUnreachable
                | ErrorKind::AddrNotAvailable => return TransportFailure::Connect,
                // An open connection that timed out (keep-alive probes unanswered) died under
                // the exchange.
                ErrorKind::TimedOut if error.is_connect() => return TransportFailure::Connect,
                ErrorKind::TimedOut => return TransportFailure::Reset,
                ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
                | ErrorKind::UnexpectedEof => return TransportFailure::Reset,
                _ => {}
            }
        }
        if let Some(exchange) = current.downcast_ref::<ExchangeError>() {
            if exchange.is_closed() {
                return TransportFailure::Reset;
            }
        }
        if let Some(hyper) = current.downcast_ref::<hyper::Error>() {
            if hyper.is_incomplete_message() || hyper.is_closed() || hyper.is_canceled() {
                return TransportFailure::Reset;
            }
        }
        source = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => current.source(),
        };
    }
    if error.is_connect() {
        TransportFailure::Dns
    } else {
        TransportFailure::Other
    }
}

fn tls_message(error: &rustls::Error, host: &str) -> String {
    use rustls::CertificateError as Cert;
    match error {
        rustls::Error::InvalidCertificate(Cert::UnknownIssuer) => {
            format!("certificate signed by unknown authority for {host} (add its CA to providers.ca_file)")
        }
        rustls::Error::InvalidCertificate(Cert::Expired | Cert::ExpiredContext { .. }) => {
            format!("certificate expired for {host}")
        }
        rustls::Error::InvalidCertificate(
            Cert::NotValidForName | Cert::NotValidForNameContext { .. },
        ) => {
            format!("certificate is not valid for the name {host}")
        }
        other => format!("TLS with {host} failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_names_connecting_only_while_connecting() {
        let timed_out = || std::io::Error::from(std::io::ErrorKind::TimedOut);
        let connecting = UpstreamError::Connect(Box::new(timed_out()));
        assert_eq!(
            describe_failure(&connecting, "h.test").0,
            TransportFailure::Connect
        );
        // An open connection whose keep-alive probes went unanswered died under the exchange.
        let open = UpstreamError::Http1(ExchangeError::Read(timed_out()));
        let (failure, message) = describe_failure(&open, "h.test");
        assert_eq!(failure, TransportFailure::Reset);
        assert!(
            message.starts_with("connection reset by h.test"),
            "{message}"
        );
        let closed = UpstreamError::Http1(ExchangeError::Closed);
        assert_eq!(
            describe_failure(&closed, "h.test").0,
            TransportFailure::Reset
        );
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    }

    fn proxied(matcher: &Option<Matcher>, uri: &str) -> Option<String> {
        matcher
            .as_ref()?
            .intercept(&uri.parse().unwrap())
            .map(|i| i.uri().to_string())
    }

    #[test]
    fn the_environment_picks_proxies_as_curl_reads_it() {
        assert!(proxy_matcher(None, env(&[])).is_none());
        let matcher = proxy_matcher(
            None,
            env(&[
                ("HTTPS_PROXY", "http://proxy.corp:3128"),
                ("NO_PROXY", "internal.corp, 10.0.0.0/8"),
            ]),
        );
        assert_eq!(
            proxied(&matcher, "https://api.openai.com/v1").as_deref(),
            Some("http://proxy.corp:3128/")
        );
        assert_eq!(proxied(&matcher, "http://api.openai.com/v1"), None);
        assert_eq!(proxied(&matcher, "https://vllm.internal.corp/v1"), None);
        assert_eq!(proxied(&matcher, "https://10.0.0.5/v1"), None);
        // Lower case wins, as in curl.
        let matcher = proxy_matcher(
            None,
            env(&[
                ("https_proxy", "http://lower:1"),
                ("HTTPS_PROXY", "http://upper:2"),
            ]),
        );
        assert_eq!(
            proxied(&matcher, "https://x.test/").as_deref(),
            Some("http://lower:1/")
        );
    }

    #[test]
    fn an_explicit_proxy_covers_every_scheme_but_not_no_proxy_hosts() {
        let matcher = proxy_matcher(
            Some("http://proxy.corp:3128"),
            env(&[("NO_PROXY", "127.0.0.1")]),
        );
        assert!(proxied(&matcher, "http://api.test/v1").is_some());
        assert!(proxied(&matcher, "https://api.test/v1").is_some());
        assert_eq!(proxied(&matcher, "https://127.0.0.1:9/v1"), None);
    }
}
