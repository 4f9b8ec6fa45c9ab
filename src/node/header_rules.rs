//! Which headers cross the router, either way (contract "Headers"): hop-by-hop and connection
//! headers never do; the client's credentials, cookies and browser context stay with the
//! router; the upstream's framing and coding headers are recomputed because the router decodes
//! and re-frames bodies; the node owns CORS, so the upstream's `Access-Control-*` (and its
//! `X-Powered-By`) stay behind; every other upstream header reaches the client, with any echo
//! of the connection's key masked.

use http::header::{HeaderMap, HeaderName, CONNECTION};

use crate::wire::upstream_mask::{found_header_value, mask_header_value, EchoSearch};

/// Hop-by-hop and connection headers (RFC 9110 §7.6.1), in both directions (and every
/// `proxy-*`). Each list below is a `match`: one length-and-bytes dispatch per header instead of
/// a string comparison per entry, as every header of every request passes through these.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "http2-settings"
            | "expect"
            | "proxy-connection"
    ) || name.starts_with("proxy-")
}

/// Client headers that never go upstream besides the hop-by-hop ones: its credentials (the
/// connection's replace them), what the router recomputes (`host`, framing, codings: the router
/// decodes the body and asks the upstream for its own `accept-encoding`), and the browser's
/// context (`sec-fetch-*` too), which would make an upstream treat a server-to-server call as a
/// browser's, and the router's own request headers (`x-quotaroute-*`, such as the
/// `x-quotaroute-affinity` hint: the router's business, not the provider's).
fn is_client_only(name: &str) -> bool {
    matches!(
        name,
        "authorization"
            | "x-api-key"
            | "api-key"
            | "x-goog-api-key"
            | "host"
            | "content-length"
            | "content-encoding"
            | "accept-encoding"
            | "cookie"
            | "origin"
            | "referer"
    ) || name.starts_with("sec-fetch-")
        || name.starts_with("x-quotaroute-")
}

/// Upstream headers the client never gets: the router frames and codes the body itself, the
/// upstream's cookies and alternative services belong to the upstream's host, and the node
/// owns CORS (`access-control-*`).
fn is_upstream_only(name: &str) -> bool {
    matches!(
        name,
        "content-length"
            | "content-encoding"
            | "set-cookie"
            | "alt-svc"
            | "strict-transport-security"
            | "x-powered-by"
    ) || name.starts_with("access-control-")
}

/// Headers the sender named in its `Connection` header (they are hop-by-hop too).
fn named_in_connection(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect()
}

/// The client's headers that go upstream, appended to `out`.
pub fn copy_client(client: &HeaderMap, out: &mut HeaderMap) {
    let named = named_in_connection(client);
    for (name, value) in client {
        if is_hop_by_hop(name) || is_client_only(name.as_str()) || named.contains(name) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
}

/// The upstream's response headers that reach the client, appended to `out`, with any of
/// `secrets` in a value (an upstream echoing the key it was sent) masked.
pub fn copy_upstream(upstream: &HeaderMap, secrets: &[&str], out: &mut HeaderMap) {
    let named = named_in_connection(upstream);
    for (name, value) in upstream {
        if is_hop_by_hop(name) || is_upstream_only(name.as_str()) || named.contains(name) {
            continue;
        }
        out.append(name.clone(), mask_header_value(value, secrets));
    }
}

/// [`copy_upstream`] on headers the caller owns, in place: the few that stay behind removed, the
/// rest masked where a secret occurs, no header name hashed again. Headers of different names
/// may change places (HTTP gives their order no meaning); values of one name keep theirs. The
/// secrets come as the searchers built when they were loaded (`Echoes::searches`).
pub fn keep_upstream(mut upstream: HeaderMap, searches: &[Option<&EchoSearch>]) -> HeaderMap {
    let mut named = named_in_connection(&upstream);
    named.extend(
        upstream
            .keys()
            .filter(|name| is_hop_by_hop(name) || is_upstream_only(name.as_str()))
            .cloned(),
    );
    for name in &named {
        upstream.remove(name);
    }
    // The longest value decides whether any secret can occur at all (most cannot).
    let longest = upstream
        .values()
        .map(|value| value.len())
        .max()
        .unwrap_or(0);
    if searches
        .iter()
        .flatten()
        .any(|search| search.secret_len() <= longest)
    {
        for value in upstream.values_mut() {
            if let Some(masked) = found_header_value(value, searches) {
                *value = masked;
            }
        }
    }
    upstream
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    fn names(headers: &HeaderMap) -> Vec<&str> {
        let mut names: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        names
    }

    #[test]
    fn client_hop_by_hop_credentials_and_browser_context_stay_behind() {
        let client = map(&[
            ("authorization", "Bearer sk-qr-client"),
            ("x-api-key", "sk-qr-client"),
            ("api-key", "sk-qr-client"),
            ("x-goog-api-key", "sk-qr-client"),
            ("connection", "keep-alive, x-trace-hop"),
            ("x-trace-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("http2-settings", "AAMAAABkAARAAAAAAAIAAAAA"),
            ("expect", "100-continue"),
            ("upgrade", "h2c"),
            ("te", "trailers"),
            ("trailer", "x-checksum"),
            ("proxy-authorization", "Basic dXNlcjpwYXNz"),
            ("proxy-connection", "keep-alive"),
            ("accept-encoding", "gzip, br"),
            ("content-encoding", "gzip"),
            ("cookie", "session=1"),
            ("origin", "https://app.example"),
            ("sec-fetch-dest", "empty"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "tools-2024-04-04"),
            ("openai-beta", "assistants=v2"),
            ("user-agent", "openai-node/5"),
            ("x-quotaroute-affinity", "session-1"),
            ("x-quotaroute-anything", "1"),
        ]);
        let mut out = HeaderMap::new();
        copy_client(&client, &mut out);
        assert_eq!(
            names(&out),
            vec![
                "anthropic-beta",
                "anthropic-version",
                "openai-beta",
                "user-agent"
            ]
        );
    }

    #[test]
    fn upstream_headers_reach_the_client_except_framing_and_key_echoes() {
        let upstream = map(&[
            ("x-request-id", "req_abc"),
            ("openai-processing-ms", "321"),
            ("x-ratelimit-remaining-requests", "99"),
            ("anthropic-ratelimit-tokens-reset", "2026-12-01T10:00:00Z"),
            ("retry-after", "3"),
            ("content-type", "application/json"),
            ("content-length", "1234"),
            ("content-encoding", "gzip"),
            ("transfer-encoding", "chunked"),
            ("connection", "close"),
            ("set-cookie", "__cf_bm=x"),
            ("alt-svc", "h3=\":443\""),
            ("x-mock-key", "sk-upstream-secret-1"),
            ("access-control-allow-origin", "*"),
            ("access-control-allow-credentials", "true"),
            ("x-powered-by", "Express"),
        ]);
        let mut out = HeaderMap::new();
        copy_upstream(&upstream, &["sk-upstream-secret-1"], &mut out);
        assert_eq!(
            names(&out),
            vec![
                "anthropic-ratelimit-tokens-reset",
                "content-type",
                "openai-processing-ms",
                "retry-after",
                "x-mock-key",
                "x-ratelimit-remaining-requests",
                "x-request-id",
            ]
        );
        assert_eq!(out["x-mock-key"], "***");
        // Kept in place: the same headers, the same values, in order for each name.
        let mut both = upstream.clone();
        both.append("x-request-id", HeaderValue::from_static("req_second"));
        let secret = EchoSearch::new("sk-upstream-secret-1");
        let kept = keep_upstream(both.clone(), &[secret.as_ref()]);
        let mut copied = HeaderMap::new();
        copy_upstream(&both, &["sk-upstream-secret-1"], &mut copied);
        assert_eq!(names(&kept), names(&copied));
        for name in copied.keys() {
            let kept: Vec<_> = kept.get_all(name).iter().collect();
            let copied: Vec<_> = copied.get_all(name).iter().collect();
            assert_eq!(kept, copied, "{name}");
        }
    }

    proptest::proptest! {
        /// Masking with the searchers built when the secrets were loaded masks what masking
        /// with the secrets' text masks, in every value: a secret alone, twice, inside
        /// another word, split, the previous secret, values shorter than either.
        #[test]
        fn kept_with_searchers_masks_what_copying_masks(
            values in proptest::collection::vec("(sk-a1|sk-b22|sk-|a1|x|;| ){0,6}", 1..6),
            current in "(sk-a1|sk-b22|a1|)",
            previous in "(sk-b22|sk-a1|x|)",
        ) {
            let mut upstream = HeaderMap::new();
            for (at, value) in values.iter().enumerate() {
                let value = HeaderValue::from_str(value).unwrap();
                upstream.append(if at % 2 == 0 { "x-echo" } else { "x-request-id" }, value);
            }
            let searches = [EchoSearch::new(&current), EchoSearch::new(&previous)];
            let kept = keep_upstream(upstream.clone(), &searches.each_ref().map(Option::as_ref));
            let mut copied = HeaderMap::new();
            copy_upstream(&upstream, &[&current, &previous], &mut copied);
            for name in ["x-echo", "x-request-id"] {
                let kept: Vec<_> = kept.get_all(name).iter().collect();
                let copied: Vec<_> = copied.get_all(name).iter().collect();
                proptest::prop_assert_eq!(kept, copied);
            }
        }
    }

    #[test]
    fn kept_in_place_a_header_the_connection_header_names_stays_behind() {
        let upstream = map(&[
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("x-request-id", "req_abc"),
            ("x-echo", "Bearer sk-upstream-secret-1 again"),
        ]);
        let secret = EchoSearch::new("sk-upstream-secret-1");
        let kept = keep_upstream(
            upstream,
            &[EchoSearch::new(""), secret].each_ref().map(Option::as_ref),
        );
        assert_eq!(names(&kept), vec!["x-echo", "x-request-id"]);
        assert_eq!(kept["x-echo"], "Bearer *** again");
    }
}
