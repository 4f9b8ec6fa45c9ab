//! Building one upstream request from the client's: the provider's URL for the same `/v1/…`
//! path, the connection's credential instead of the client's, the client's other headers, the
//! provider's extra headers, and the body with only `model` rewritten.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http_body_util::Full;

use crate::config::{ApiFormat, AuthKind, Secret};
use crate::node::header_rules;
use crate::node::live::ProviderRoute;

/// The upstream request for `path_and_query` (the part after `/v1`).
pub fn build(
    method: http::Method,
    provider: &ProviderRoute,
    (credential, auth): (&Secret, AuthKind),
    path_and_query: &str,
    client_headers: &HeaderMap,
    request_id: &str,
    body: Bytes,
) -> Result<http::Request<Full<Bytes>>, http::Error> {
    let builder = http::Request::builder().method(method);
    let mut builder = match provider.known_uris.get(path_and_query) {
        Some(uri) => builder.uri(uri.clone()),
        None => {
            let mut uri = String::with_capacity(provider.base_url.len() + path_and_query.len());
            uri.push_str(&provider.base_url);
            uri.push_str(path_and_query);
            builder.uri(uri)
        }
    };
    if let Some(headers) = builder.headers_mut() {
        // Room for every header at once, so the map is never rehashed as it fills: the
        // client's, the provider's, and the router's own below plus a trace's `traceparent`.
        headers.reserve(client_headers.len() + provider.headers.len() + ROUTER_HEADERS);
        header_rules::copy_client(client_headers, headers);
        if let Some(host) = &provider.host {
            headers.insert(header::HOST, host.clone());
        }
        headers.insert(header::ACCEPT_ENCODING, provider.accept_encoding.clone());
        for (name, value) in &provider.headers {
            headers.insert(name.clone(), value.clone());
        }
        let key = credential.expose();
        // Contract: `x-api-key` for anthropic-format API keys, otherwise `Authorization: Bearer`.
        match (&provider.auth_header, provider.format, auth) {
            (Some(name), _, _) => {
                if let Ok(value) = HeaderValue::from_str(key) {
                    headers.insert(name.clone(), sensitive(value));
                }
            }
            (None, ApiFormat::Anthropic, AuthKind::ApiKey) => {
                if let Ok(value) = HeaderValue::from_str(key) {
                    headers.insert(HeaderName::from_static("x-api-key"), sensitive(value));
                }
            }
            // AI Studio keys go in `x-goog-api-key`, never in the URL; Vertex AI takes the
            // key command's token (or OAuth's) as Bearer (behaviour §15).
            (None, ApiFormat::Gemini, AuthKind::ApiKey) if !provider.vertex => {
                if let Ok(value) = HeaderValue::from_str(key) {
                    headers.insert(HeaderName::from_static("x-goog-api-key"), sensitive(value));
                }
            }
            (None, _, _) => {
                if let Ok(value) = bearer(key) {
                    headers.insert(header::AUTHORIZATION, sensitive(value));
                }
            }
        }
        if let Ok(value) = HeaderValue::from_str(request_id) {
            headers.insert(crate::node::reply::REQUEST_ID, value);
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    builder.body(Full::new(body))
}

/// `Bearer <key>` as a header value, written into one buffer (no formatting machinery: this
/// runs on every upstream request).
fn bearer(key: &str) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    let mut value = bytes::BytesMut::with_capacity(BEARER.len() + key.len());
    value.extend_from_slice(BEARER);
    value.extend_from_slice(key.as_bytes());
    HeaderValue::from_maybe_shared(value.freeze())
}

const BEARER: &[u8] = b"Bearer ";

/// The headers the router adds to every upstream request: `Host`, `Accept-Encoding`, the
/// credential, the request id, `Content-Type`, and an attempt span's `traceparent`.
const ROUTER_HEADERS: usize = 6;

/// Marks a credential header so hyper never logs it.
fn sensitive(mut value: HeaderValue) -> HeaderValue {
    value.set_sensitive(true);
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(format: ApiFormat, auth_header: Option<&'static str>) -> ProviderRoute {
        ProviderRoute {
            base_url: "http://upstream.test/v1".to_string(),
            known_uris: crate::node::known_uris::KnownUris::new("http://upstream.test/v1"),
            span_attributes: std::sync::Arc::new(crate::telemetry::finished::provider_attributes(
                "p", None,
            )),
            format,
            apis: Vec::new(),
            auth_header: auth_header.map(HeaderName::from_static),
            headers: vec![(
                HeaderName::from_static("openai-organization"),
                HeaderValue::from_static("org-team"),
            )],
            accept_encoding: HeaderValue::from_static("identity"),
            host: Some(HeaderValue::from_static("upstream.test")),
            client: crate::upstream::client::UpstreamClient::new(),
            vertex: false,
        }
    }

    fn client_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer sk-qr-client-key"),
            ("x-api-key", "sk-qr-client-key"),
            ("host", "router.test"),
            ("content-length", "999"),
            ("openai-beta", "assistants=v2"),
            ("anthropic-version", "2023-06-01"),
            ("accept-encoding", "gzip, deflate, br, zstd"),
            ("expect", "100-continue"),
        ] {
            headers.insert(name, HeaderValue::from_static(value));
        }
        headers
    }

    fn built(provider: &ProviderRoute, auth: AuthKind) -> http::Request<Full<Bytes>> {
        build(
            http::Method::POST,
            provider,
            (&Secret::new("sk-upstream-secret"), auth),
            "/chat/completions",
            &client_headers(),
            "req-7",
            Bytes::from_static(b"{}"),
        )
        .unwrap()
    }

    fn get<'r>(request: &'r http::Request<Full<Bytes>>, name: &str) -> Option<&'r str> {
        request.headers().get(name).map(|v| v.to_str().unwrap())
    }

    #[test]
    fn openai_format_sends_the_connection_key_as_bearer_never_the_clients() {
        let request = built(&provider(ApiFormat::OpenAi, None), AuthKind::ApiKey);
        assert_eq!(request.uri(), "http://upstream.test/v1/chat/completions");
        assert_eq!(
            get(&request, "authorization"),
            Some("Bearer sk-upstream-secret")
        );
        assert!(request.headers()["authorization"].is_sensitive());
        assert_eq!(
            get(&request, "x-api-key"),
            None,
            "the client's x-api-key is dropped"
        );
        // The provider's own host, never the client's.
        assert_eq!(get(&request, "host"), Some("upstream.test"));
        assert_eq!(get(&request, "content-length"), None);
        // The client's other headers and the provider's extra ones go through.
        assert_eq!(get(&request, "openai-beta"), Some("assistants=v2"));
        assert_eq!(get(&request, "openai-organization"), Some("org-team"));
        assert_eq!(get(&request, "x-request-id"), Some("req-7"));
        assert_eq!(get(&request, "content-type"), Some("application/json"));
        // The router asks for its own coding and drops hop-by-hop headers.
        assert_eq!(get(&request, "accept-encoding"), Some("identity"));
        assert_eq!(get(&request, "expect"), None);
    }

    #[test]
    fn gemini_keys_go_in_x_goog_api_key_and_vertex_tokens_as_bearer() {
        let mut headers = client_headers();
        headers.insert("x-goog-api-key", HeaderValue::from_static("client-goog"));
        let gemini = provider(ApiFormat::Gemini, None);
        let studio = |auth| {
            build(
                http::Method::POST,
                &gemini,
                (&Secret::new("AIza-upstream"), auth),
                "/models/gemini-2.5-flash:generateContent",
                &headers,
                "req-8",
                Bytes::from_static(b"{}"),
            )
            .unwrap()
        };
        let request = studio(AuthKind::ApiKey);
        assert_eq!(get(&request, "x-goog-api-key"), Some("AIza-upstream"));
        assert!(request.headers()["x-goog-api-key"].is_sensitive());
        assert_eq!(get(&request, "authorization"), None);
        assert!(
            !request.uri().to_string().contains("AIza"),
            "never in the URL"
        );
        let request = studio(AuthKind::OAuth);
        assert_eq!(get(&request, "authorization"), Some("Bearer AIza-upstream"));
        assert_eq!(get(&request, "x-goog-api-key"), None);

        let vertex = ProviderRoute {
            vertex: true,
            ..provider(ApiFormat::Gemini, None)
        };
        let request = build(
            http::Method::POST,
            &vertex,
            (&Secret::new("ya29.token"), AuthKind::ApiKey),
            "/models/gemini-2.5-flash:generateContent",
            &headers,
            "req-9",
            Bytes::from_static(b"{}"),
        )
        .unwrap();
        assert_eq!(get(&request, "authorization"), Some("Bearer ya29.token"));
        assert_eq!(get(&request, "x-goog-api-key"), None);
    }

    #[test]
    fn anthropic_api_keys_go_in_x_api_key_and_oauth_tokens_as_bearer() {
        let request = built(&provider(ApiFormat::Anthropic, None), AuthKind::ApiKey);
        assert_eq!(get(&request, "x-api-key"), Some("sk-upstream-secret"));
        assert_eq!(
            get(&request, "authorization"),
            None,
            "the client's bearer is dropped"
        );
        assert_eq!(get(&request, "anthropic-version"), Some("2023-06-01"));

        let request = built(&provider(ApiFormat::Anthropic, None), AuthKind::OAuth);
        assert_eq!(
            get(&request, "authorization"),
            Some("Bearer sk-upstream-secret")
        );
        assert_eq!(get(&request, "x-api-key"), None);
    }

    #[test]
    fn auth_header_carries_the_raw_key_instead() {
        let request = built(
            &provider(ApiFormat::OpenAi, Some("api-key")),
            AuthKind::ApiKey,
        );
        assert_eq!(get(&request, "api-key"), Some("sk-upstream-secret"));
        assert!(request.headers()["api-key"].is_sensitive());
        assert_eq!(get(&request, "authorization"), None);
        assert_eq!(get(&request, "x-api-key"), None);
    }
}
