//! Building one upstream request from the client's: the provider's URL for the same `/v1/…`
//! path, the connection's credential instead of the client's, the client's other headers, the
//! provider's extra headers, and the body with only `model` rewritten.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http_body_util::Full;

use crate::config::{ApiFormat, AuthKind, Secret};
use crate::node::live::ProviderRoute;

/// Headers never forwarded: the client's own credentials, and hop-by-hop or recomputed ones.
const DROPPED: [&str; 10] = [
    "authorization",
    "x-api-key",
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "upgrade",
    "proxy-authorization",
];

/// The upstream request for `path_and_query` (the part after `/v1`).
pub fn build(
    provider: &ProviderRoute,
    credential: &Secret,
    auth: AuthKind,
    path_and_query: &str,
    client_headers: &HeaderMap,
    request_id: &str,
    body: Bytes,
) -> Result<http::Request<Full<Bytes>>, http::Error> {
    let uri = format!("{}{}", provider.base_url, path_and_query);
    let mut builder = http::Request::post(uri);
    if let Some(headers) = builder.headers_mut() {
        for (name, value) in client_headers {
            if !DROPPED.contains(&name.as_str()) {
                headers.append(name.clone(), value.clone());
            }
        }
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
            (None, _, _) => {
                if let Ok(value) = HeaderValue::from_str(&format!("Bearer {key}")) {
                    headers.insert(header::AUTHORIZATION, sensitive(value));
                }
            }
        }
        if let Ok(value) = HeaderValue::from_str(request_id) {
            headers.insert(HeaderName::from_static("x-request-id"), value);
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    builder.body(Full::new(body))
}

/// Marks a credential header so hyper never logs it.
fn sensitive(mut value: HeaderValue) -> HeaderValue {
    value.set_sensitive(true);
    value
}
