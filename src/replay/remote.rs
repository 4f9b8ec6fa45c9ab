//! `replay --from URL`: pages through a live node's `GET /admin/journal?since_seq=N&limit=M`
//! (NDJSON) with a tiny blocking HTTP/1.1 client over `TcpStream` — loopback/plain `http` only,
//! so replay needs no async runtime and no TLS. Owns the wire; never interprets events.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::replay::source::{parse_ndjson_line, Item};

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
        let target = format!(
            "{}/admin/journal?since_seq={since}&limit={page_events}",
            endpoint.path
        );
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

/// `http://host:port/prefix`, parsed once.
struct Endpoint {
    url: String,
    host_header: String,
    address: String,
    /// The URL's path without a trailing slash (`""` for the root).
    path: String,
}

impl Endpoint {
    fn parse(base_url: &str) -> Result<Endpoint, RemoteError> {
        let url_error = |reason: &str| RemoteError::Url {
            url: base_url.to_string(),
            reason: reason.to_string(),
        };
        let url = url::Url::parse(base_url).map_err(|e| url_error(&e.to_string()))?;
        if url.scheme() != "http" {
            return Err(url_error(
                "only http:// is supported (use a loopback or tunnel)",
            ));
        }
        let host = url.host_str().ok_or_else(|| url_error("no host"))?;
        let port = url.port_or_known_default().unwrap_or(80);
        let host_header = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        Ok(Endpoint {
            url: base_url.to_string(),
            host_header,
            address: format!("{host}:{port}"),
            path: url.path().trim_end_matches('/').to_string(),
        })
    }

    /// One `GET`, `Connection: close`; returns the body of a 200.
    fn get(&self, target: &str, admin_key: Option<&str>) -> Result<Vec<u8>, RemoteError> {
        let io_error = |source| RemoteError::Io {
            url: self.url.clone(),
            source,
        };
        let mut stream = TcpStream::connect(&self.address).map_err(io_error)?;
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .map_err(io_error)?;
        stream
            .set_write_timeout(Some(IO_TIMEOUT))
            .map_err(io_error)?;
        let authorization = admin_key
            .map(|key| format!("Authorization: Bearer {key}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: {}\r\n{authorization}Accept: application/x-ndjson\r\n\
             User-Agent: quotaroute-replay\r\nConnection: close\r\n\r\n",
            self.host_header
        );
        stream.write_all(request.as_bytes()).map_err(io_error)?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).map_err(io_error)?;
        self.body_of(&response)
    }

    fn body_of(&self, response: &[u8]) -> Result<Vec<u8>, RemoteError> {
        let malformed = |reason: &str| RemoteError::Malformed {
            url: self.url.clone(),
            reason: reason.to_string(),
        };
        let split = find(response, b"\r\n\r\n").ok_or_else(|| malformed("no end of headers"))?;
        let head = std::str::from_utf8(&response[..split]).map_err(|_| malformed("headers"))?;
        let body = &response[split + 4..];
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| malformed("status line"))?;
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
        let mut chunked = false;
        let mut length = None;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            } else if name.eq_ignore_ascii_case("content-length") {
                length = value.parse::<usize>().ok();
            }
        }
        if chunked {
            return dechunk(body).ok_or_else(|| malformed("bad chunked encoding"));
        }
        Ok(match length {
            Some(length) => body.get(..length).unwrap_or(body).to_vec(),
            None => body.to_vec(),
        })
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Decodes a `Transfer-Encoding: chunked` body (extensions and trailers ignored).
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = find(body, b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_joined() {
        let body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
        assert_eq!(dechunk(body).unwrap(), b"hello, world");
        assert!(dechunk(b"5\r\nhel").is_none());
    }

    #[test]
    fn only_plain_http_urls_are_accepted() {
        assert!(Endpoint::parse("https://node:4100").is_err());
        assert!(Endpoint::parse("not a url").is_err());
        let endpoint = Endpoint::parse("http://127.0.0.1:4100/").unwrap();
        assert_eq!(endpoint.address, "127.0.0.1:4100");
        assert_eq!(endpoint.path, "");
    }

    #[test]
    fn non_200_names_the_status_and_a_hint() {
        let endpoint = Endpoint::parse("http://127.0.0.1:1").unwrap();
        let error = endpoint
            .body_of(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n")
            .unwrap_err();
        assert!(
            error.to_string().contains("QUOTAROUTE_ADMIN_KEY"),
            "{error}"
        );
    }
}
