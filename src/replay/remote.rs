//! `replay --from URL`: pages through a live node's `GET /admin/journal?since_seq=N&limit=M`
//! (NDJSON) with the node's own pooled HTTP client (http or https). Owns the paging; never
//! interprets events.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use crate::upstream::client::UpstreamClient;

use crate::replay::ndjson_item::{parse_ndjson_line, Item};

/// Events asked for per page.
pub const PAGE_EVENTS: u64 = 10_000;

/// How long one read or connect may stall.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the live journal could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("bad --from URL `{url}`: {reason}")]
    Url { url: String, reason: String },
    #[error("cannot reach {url}: {source}")]
    Io { url: String, source: std::io::Error },
    #[error("{url} answered {status}{hint}")]
    Status {
        url: String,
        status: u16,
        hint: &'static str,
    },
    #[error("{url} sent a malformed HTTP response: {reason}")]
    Malformed { url: String, reason: String },
}

/// Every event of the node at `base_url`, page by page, until a page comes back short.
/// Tolerates either reading of `since_seq` (exclusive or inclusive): seqs already seen are dropped.
pub fn fetch_journal(
    base_url: &str,
    admin_key: Option<&str>,
    page_events: u64,
) -> Result<Vec<Item>, RemoteError> {
    let endpoint = Endpoint::parse(base_url)?;
    let mut items = Vec::new();
    let mut last_seq: Option<u64> = None;
    loop {
        let since = last_seq.map_or(0, |seq| seq + 1);
        let target = format!("/admin/journal?since_seq={since}&limit={page_events}");
        let body = endpoint.get(&target, admin_key)?;
        let text = String::from_utf8_lossy(&body);
        let mut lines = 0_u64;
        let mut new_events = 0_u64;
        for (index, line) in text.lines().enumerate() {
            let Some(item) = parse_ndjson_line(line, index + 1) else {
                continue;
            };
            lines += 1;
            match item {
                Ok(envelope) if last_seq.is_some_and(|seen| envelope.seq <= seen) => {}
                Ok(envelope) => {
                    last_seq = Some(envelope.seq);
                    new_events += 1;
                    items.push(Ok(envelope));
                }
                Err(mut damaged) => {
                    damaged.location =
                        format!("{} of the page since_seq={since}", damaged.location);
                    items.push(Err(damaged));
                }
            }
        }
        if lines < page_events || new_events == 0 {
            return Ok(items);
        }
    }
}

/// `http(s)://host:port/prefix`, parsed once.
struct Endpoint {
    url: String,
    /// The URL without a trailing slash.
    base: String,
}

impl Endpoint {
    fn parse(base_url: &str) -> Result<Endpoint, RemoteError> {
        let url_error = |reason: &str| RemoteError::Url {
            url: base_url.to_string(),
            reason: reason.to_string(),
        };
        let url = url::Url::parse(base_url).map_err(|e| url_error(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(url_error("expected an http:// or https:// URL with a host"));
        }
        Ok(Endpoint {
            url: base_url.to_string(),
            base: base_url.trim_end_matches('/').to_string(),
        })
    }

    /// One `GET` through the node's own pooled client (HTTP/1.1 or h2, TLS with the system's
    /// roots); returns the body of a 200. Replay is synchronous, so the request runs on a
    /// thread of its own with a small runtime: this works inside the binary's runtime and in a
    /// plain test alike.
    fn get(&self, target: &str, admin_key: Option<&str>) -> Result<Vec<u8>, RemoteError> {
        let io_error = |reason: String| RemoteError::Io {
            url: self.url.clone(),
            source: std::io::Error::other(reason),
        };
        let mut builder = http::Request::get(format!("{}{target}", self.base))
            .header(http::header::ACCEPT, "application/x-ndjson")
            .header(http::header::USER_AGENT, "quotaroute-replay");
        if let Some(key) = admin_key {
            let mut value = http::HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| io_error("the admin key is not a valid header value".into()))?;
            value.set_sensitive(true);
            builder = builder.header(http::header::AUTHORIZATION, value);
        }
        let request = builder
            .body(Full::new(Bytes::new()))
            .map_err(|error| io_error(error.to_string()))?;
        let fetched = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|error| error.to_string())?;
                    runtime.block_on(async {
                        let response = UpstreamClient::new()
                            .send_within(request, IO_TIMEOUT)
                            .await
                            .map_err(|failed| failed.message)?;
                        let status = response.status().as_u16();
                        let body = tokio::time::timeout(IO_TIMEOUT, response.into_body().collect())
                            .await
                            .map_err(|_| "the body did not arrive in time".to_string())?
                            .map_err(|error| error.to_string())?;
                        Ok::<_, String>((status, body.to_bytes().to_vec()))
                    })
                })
                .join()
                .unwrap_or_else(|_| Err("the fetch thread failed".to_string()))
        });
        let (status, body) = fetched.map_err(io_error)?;
        self.body_of(status, body)
    }

    fn body_of(&self, status: u16, body: Vec<u8>) -> Result<Vec<u8>, RemoteError> {
        if status != 200 {
            let hint = match status {
                401 | 403 => " (set QUOTAROUTE_ADMIN_KEY to the node's admin_key)",
                404 => " (is the admin API on? it needs server.admin_key)",
                _ => "",
            };
            return Err(RemoteError::Status {
                url: self.url.clone(),
                status,
                hint,
            });
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_and_https_urls_with_a_host_are_accepted() {
        assert!(Endpoint::parse("ftp://node:4100").is_err());
        assert!(Endpoint::parse("not a url").is_err());
        let endpoint = Endpoint::parse("http://127.0.0.1:4100/").unwrap();
        assert_eq!(endpoint.base, "http://127.0.0.1:4100");
        assert!(Endpoint::parse("https://node.corp:4100/").is_ok());
    }

    #[test]
    fn non_200_names_the_status_and_a_hint() {
        let endpoint = Endpoint::parse("http://127.0.0.1:1").unwrap();
        let error = endpoint.body_of(401, Vec::new()).unwrap_err();
        assert!(
            error.to_string().contains("QUOTAROUTE_ADMIN_KEY"),
            "{error}"
        );
    }
}
