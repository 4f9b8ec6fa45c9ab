//! An HTTP/1.1 exchange's heads: the request head as written to an upstream (origin-form
//! target, `Host`, the body's `content-length`), and the response head read back (`httparse`)
//! into `http` types, with how its body is framed and whether the connection can carry another
//! request.

use std::mem::MaybeUninit;

use bytes::BytesMut;
use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING,
};
use http::{Method, StatusCode, Version};

use crate::upstream::h1_framing::{Chunk, Framing};

/// Room in a response head's map for the headers a relay adds before the answer goes on (the
/// router's `x-quotaroute-*` and `x-request-id`, a content type, cache control): made with the
/// map, so adding them does not grow it and rehash every header already in it.
pub const ANSWER_HEADROOM: usize = 12;

/// Largest response head read before the upstream's answer is called broken.
pub const MAX_HEAD_BYTES: usize = 256 * 1024;
/// Most response header lines read (hyper's client allows 100).
const MAX_HEADERS: usize = 128;

/// Why a response head could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("invalid response head: {0}")]
    Parse(httparse::Error),
    #[error("response head over {MAX_HEAD_BYTES} bytes")]
    TooLarge,
    #[error("invalid header {0} in the response")]
    Header(&'static str),
    #[error("the upstream answered 101 Switching Protocols, which a request here never asks for")]
    Upgrade,
}

/// A complete response head.
#[derive(Debug)]
pub struct ResponseHead {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub framing: Framing,
    /// The connection may carry another request once this response's body was read.
    pub keep_alive: bool,
}

/// Writes the request head for `method` `target` with `headers` into `out`: `Host` unless the
/// headers carry one, and `content-length` for a body of `body_len` bytes (none for a bodiless
/// `GET`, `HEAD`, `DELETE` or `OPTIONS`); any framing headers of the caller's are left out, since
/// the body's length is known here.
pub fn encode_request(
    method: &Method,
    target: &str,
    headers: &HeaderMap,
    host: &HeaderValue,
    body_len: usize,
    out: &mut Vec<u8>,
) {
    out.reserve(256 + headers.len() * 48);
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(if target.is_empty() {
        b"/"
    } else {
        target.as_bytes()
    });
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !headers.contains_key(HOST) {
        header_line(out, HOST.as_str(), host.as_bytes());
    }
    for (name, value) in headers {
        if name != CONTENT_LENGTH && name != TRANSFER_ENCODING {
            header_line(out, name.as_str(), value.as_bytes());
        }
    }
    let bodiless = matches!(
        *method,
        Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS
    );
    if body_len > 0 || !bodiless {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body_len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

fn header_line(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Reads the response head at the start of `buffer`, the answer to a `method` request, and
/// takes it from the buffer (informational 1xx heads before it are skipped); `None` while the
/// head has not all arrived. Header values are slices of the head's bytes, not copies.
pub fn parse_response(
    buffer: &mut BytesMut,
    method: &Method,
) -> Result<Option<ResponseHead>, HeadError> {
    loop {
        let Some(parsed) = parse_head(buffer)? else {
            return Ok(None);
        };
        if parsed.status.is_informational() {
            let _ = buffer.split_to(parsed.length);
            continue;
        }
        let head = buffer.split_to(parsed.length).freeze();
        let mut headers = HeaderMap::with_capacity(parsed.headers.len() + ANSWER_HEADROOM);
        for (name, value) in parsed.headers {
            let value = HeaderValue::from_maybe_shared(head.slice(value))
                .map_err(|_| HeadError::Header("value"))?;
            headers.append(name, value);
        }
        let (framing, framed_by_length) = framing(&headers, parsed.version, parsed.status, method)?;
        let keep_alive = framed_by_length && keeps_alive(&headers, parsed.version);
        return Ok(Some(ResponseHead {
            status: parsed.status,
            version: parsed.version,
            headers,
            framing,
            keep_alive,
        }));
    }
}

/// A head as `httparse` read it: each header's name, and where its value is in the buffer.
struct Parsed {
    status: StatusCode,
    version: Version,
    headers: Vec<(HeaderName, std::ops::Range<usize>)>,
    length: usize,
}

/// The head at the start of `buffer`, if it has all arrived.
fn parse_head(buffer: &[u8]) -> Result<Option<Parsed>, HeadError> {
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let length = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        buffer,
        &mut slots,
    ) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) if buffer.len() > MAX_HEAD_BYTES => {
            return Err(HeadError::TooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(HeadError::Parse(error)),
    };
    let status = StatusCode::from_u16(response.code.unwrap_or_default())
        .map_err(|_| HeadError::Parse(httparse::Error::Status))?;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Err(HeadError::Upgrade);
    }
    let version = match response.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let base = buffer.as_ptr() as usize;
    let mut headers = Vec::with_capacity(response.headers.len());
    for header in response.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|_| HeadError::Header("name"))?;
        let start = header.value.as_ptr() as usize - base;
        headers.push((name, start..start + header.value.len()));
    }
    Ok(Some(Parsed {
        status,
        version,
        headers,
        length,
    }))
}

/// How the body of a `status` answer to `method` with `headers` is framed (RFC 9112 §6.3), and
/// whether the connection may carry another request after it (its end is known without the
/// close, and its framing is not in doubt).
fn framing(
    headers: &HeaderMap,
    version: Version,
    status: StatusCode,
    method: &Method,
) -> Result<(Framing, bool), HeadError> {
    if *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok((Framing::Done, true));
    }
    if let Some(last) = headers.get_all(TRANSFER_ENCODING).iter().next_back() {
        // RFC 9112 §6.1: an HTTP/1.0 message's transfer coding is faulty framing.
        if version == Version::HTTP_10 {
            return Err(HeadError::Header("transfer-encoding"));
        }
        // With a content-length too it may be a smuggling attempt (§6.3): read as the
        // transfer coding says, and never reused.
        let alone = !headers.contains_key(CONTENT_LENGTH);
        let chunked = last
            .as_bytes()
            .rsplit(|byte| *byte == b',')
            .next()
            .is_some_and(|coding| coding.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        // A transfer coding that is not chunked last is read until the close.
        return Ok(if chunked {
            (Framing::Chunked(Chunk::Size), alone)
        } else {
            (Framing::UntilClose, false)
        });
    }
    let mut length: Option<u64> = None;
    for value in headers.get_all(CONTENT_LENGTH) {
        for part in value.as_bytes().split(|byte| *byte == b',') {
            let part = part.trim_ascii();
            let parsed = std::str::from_utf8(part)
                .ok()
                .filter(|text| !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()))
                .and_then(|text| text.parse::<u64>().ok())
                .ok_or(HeadError::Header("content-length"))?;
            if length.is_some_and(|seen| seen != parsed) {
                return Err(HeadError::Header("content-length"));
            }
            length = Some(parsed);
        }
    }
    Ok(match length {
        Some(length) => (Framing::Length(length), true),
        None => (Framing::UntilClose, false),
    })
}

/// Whether the connection stays open after this response: HTTP/1.1 unless `Connection: close`,
/// HTTP/1.0 only with `Connection: keep-alive`.
fn keeps_alive(headers: &HeaderMap, version: Version) -> bool {
    let has = |token: &[u8]| {
        headers.get_all(CONNECTION).iter().any(|value| {
            value
                .as_bytes()
                .split(|byte| *byte == b',')
                .any(|part| part.trim_ascii().eq_ignore_ascii_case(token))
        })
    };
    if version == Version::HTTP_10 {
        has(b"keep-alive")
    } else {
        !has(b"close")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The head read from `wire`, and the bytes left after it.
    fn parsed(wire: &[u8], method: &Method) -> Result<Option<(ResponseHead, Vec<u8>)>, HeadError> {
        let mut buffer = BytesMut::from(wire);
        Ok(parse_response(&mut buffer, method)?.map(|head| (head, buffer.to_vec())))
    }

    fn complete(wire: &[u8]) -> (ResponseHead, Vec<u8>) {
        parsed(wire, &Method::POST).unwrap().expect("a whole head")
    }

    #[test]
    fn an_answers_map_takes_the_headers_a_relay_adds_without_growing() {
        // Four headers as the bench mock answers, and ten as OpenAI's (its rate-limit family).
        for count in [4, 10] {
            let lines: String = (0..count).map(|i| format!("x-up-{i}: v\r\n")).collect();
            let wire = format!("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n{lines}\r\n");
            let (mut head, _) = complete(wire.as_bytes());
            let capacity = head.headers.capacity();
            for i in 0..ANSWER_HEADROOM - 1 {
                head.headers.insert(
                    HeaderName::try_from(format!("x-added-{i}")).unwrap(),
                    HeaderValue::from_static("1"),
                );
            }
            assert_eq!(head.headers.capacity(), capacity, "{count} headers");
        }
    }

    #[test]
    fn a_request_head_carries_host_the_headers_and_its_length() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer sk-x"));
        headers.append("x-many", HeaderValue::from_static("1"));
        headers.append("x-many", HeaderValue::from_static("2"));
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("999"));
        headers.insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        let mut out = Vec::new();
        let host = HeaderValue::from_static("api.test:8080");
        encode_request(&Method::POST, "/v1/chat?x=1", &headers, &host, 12, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /v1/chat?x=1 HTTP/1.1\r\nhost: api.test:8080\r\nauthorization: Bearer sk-x\r\n\
             x-many: 1\r\nx-many: 2\r\ncontent-length: 12\r\n\r\n"
        );
        let mut out = Vec::new();
        headers.clear();
        headers.insert(HOST, HeaderValue::from_static("own.test"));
        encode_request(&Method::GET, "", &headers, &host, 0, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET / HTTP/1.1\r\nhost: own.test\r\n\r\n"
        );
        let mut out = Vec::new();
        encode_request(&Method::POST, "/t", &HeaderMap::new(), &host, 0, &mut out);
        assert!(String::from_utf8(out)
            .unwrap()
            .ends_with("content-length: 0\r\n\r\n"));
    }

    #[test]
    fn a_response_head_gives_status_headers_framing_and_keep_alive() {
        let wire = b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n\
                     Retry-After: 3\r\nSet-Cookie: a\r\nSet-Cookie: b\r\nContent-Length: 17\r\n\r\n{\"error\":\"slow\"}";
        let (head, rest) = complete(wire);
        assert_eq!(head.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(rest, b"{\"error\":\"slow\"}");
        assert_eq!(head.headers["retry-after"], "3");
        assert_eq!(head.headers.get_all("set-cookie").iter().count(), 2);
        assert_eq!(head.framing, Framing::Length(17));
        assert!(head.keep_alive);
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let framing = |head: &str| {
            let (head, _) = complete(format!("HTTP/1.1 200 OK\r\n{head}\r\n").as_bytes());
            (head.framing, head.keep_alive)
        };
        assert_eq!(
            framing("Transfer-Encoding: chunked\r\n"),
            (Framing::Chunked(Chunk::Size), true)
        );
        assert_eq!(
            framing("Transfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n"),
            (Framing::Chunked(Chunk::Size), false),
            "transfer-encoding wins over content-length, and the connection is not reused"
        );
        assert_eq!(
            framing("Transfer-Encoding: gzip\r\n"),
            (Framing::UntilClose, false)
        );
        assert_eq!(framing(""), (Framing::UntilClose, false));
        assert_eq!(
            framing("Content-Length: 5, 5\r\n"),
            (Framing::Length(5), true)
        );
        assert_eq!(
            framing("Content-Length: 5\r\nConnection: close\r\n"),
            (Framing::Length(5), false)
        );
        let (head, _) = complete(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n");
        assert!(!head.keep_alive);
        let (head, _) =
            complete(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(head.keep_alive);
        let (head, _) = complete(b"HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!(head.framing, Framing::Done);
        assert!(head.keep_alive);
        let (head, _) = parsed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n",
            &Method::HEAD,
        )
        .unwrap()
        .unwrap();
        assert_eq!(head.framing, Framing::Done);
    }

    #[test]
    fn an_http_1_0_transfer_coding_is_faulty_framing() {
        let wire =
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";
        assert_eq!(
            parsed(wire, &Method::POST).unwrap_err(),
            HeadError::Header("transfer-encoding")
        );
    }

    #[test]
    fn conflicting_or_invalid_lengths_are_refused() {
        for bad in [
            "Content-Length: 5, 6",
            "Content-Length: -1",
            "Content-Length: 5\r\nContent-Length: 6",
            "Content-Length: +5",
            "Content-Length: ",
        ] {
            let wire = format!("HTTP/1.1 200 OK\r\n{bad}\r\n\r\n");
            assert_eq!(
                parsed(wire.as_bytes(), &Method::POST).unwrap_err(),
                HeadError::Header("content-length"),
                "{bad}"
            );
        }
    }

    #[test]
    fn partial_informational_oversized_and_broken_heads() {
        assert!(matches!(
            parsed(b"HTTP/1.1 200 OK\r\nContent-", &Method::POST),
            Ok(None)
        ));
        // An informational head is taken and skipped; the final head after it is read.
        let mut buffer = BytesMut::from(&b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"[..]);
        assert!(parse_response(&mut buffer, &Method::POST)
            .unwrap()
            .is_none());
        assert_eq!(&buffer[..], b"HTTP/1.1 200 OK\r\n");
        buffer.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
        let head = parse_response(&mut buffer, &Method::POST).unwrap().unwrap();
        assert_eq!(
            (head.status, head.framing),
            (StatusCode::OK, Framing::Length(2))
        );
        assert_eq!(&buffer[..], b"ok");
        assert_eq!(
            parsed(b"HTTP/1.1 101 Switching Protocols\r\n\r\n", &Method::POST).unwrap_err(),
            HeadError::Upgrade
        );
        let mut huge = b"HTTP/1.1 200 OK\r\n".to_vec();
        while huge.len() <= MAX_HEAD_BYTES {
            huge.extend_from_slice(
                b"x: 0123456789012345678901234567890123456789012345678901234567890123456789\r\n",
            );
        }
        assert!(parsed(&huge, &Method::POST).is_err());
        assert!(matches!(
            parsed(b"SMTP ready\r\n\r\n", &Method::POST),
            Err(HeadError::Parse(_))
        ));
        let many: String = (0..MAX_HEADERS + 1)
            .map(|i| format!("x-{i}: 1\r\n"))
            .collect();
        let wire = format!("HTTP/1.1 200 OK\r\n{many}\r\n");
        assert!(matches!(
            parsed(wire.as_bytes(), &Method::POST),
            Err(HeadError::Parse(_))
        ));
    }
}
