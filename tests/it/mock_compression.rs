//! The mock upstream compressing like a CDN, over real loopback HTTP: every encoding on JSON,
//! error and SSE answers decodes to the plain answer, streams arrive event by event,
//! `Accept-Encoding` negotiation, the control endpoint, and the compression faults.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use std::time::{Duration, Instant};

use async_compression::tokio::bufread::{BrotliDecoder, GzipDecoder, ZlibDecoder, ZstdDecoder};
use quotaroute_mock::{self as mock_upstream, Compression, Fault, MockUpstream, Rule};
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncRead, AsyncReadExt};

const BROWSER_LIKE: &str = "gzip, deflate, br, zstd";

async fn start(mode: Compression, rules: Vec<Rule>) -> (String, MockUpstream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mock = MockUpstream::new();
    mock.set_compression(mode);
    mock.set_rules(rules);
    tokio::spawn(mock_upstream::serve(listener, mock.clone()));
    (base, mock)
}

async fn send(base: &str, path: &str, body: &Value, accept: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .bearer_auth("sk-test-1234567890wxyz")
        .json(body);
    if let Some(accept) = accept {
        request = request.header("accept-encoding", accept);
    }
    request.send().await.unwrap()
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_owned())
}

/// A decoder for `Content-Encoding: encoding` over `reader`.
fn decoder<'a, R: AsyncBufRead + Unpin + Send + 'a>(
    encoding: &str,
    reader: R,
) -> Box<dyn AsyncRead + Unpin + Send + 'a> {
    match encoding {
        "gzip" => Box::new(GzipDecoder::new(reader)),
        "deflate" => Box::new(ZlibDecoder::new(reader)),
        "br" => Box::new(BrotliDecoder::new(reader)),
        "zstd" => Box::new(ZstdDecoder::new(reader)),
        other => panic!("unexpected encoding {other}"),
    }
}

async fn decode(encoding: &str, bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    decoder(encoding, bytes).read_to_end(&mut plain).await?;
    Ok(plain)
}

/// The requests every encoding is tried on: `(name, path, body, rules)`.
fn cases() -> Vec<(&'static str, &'static str, Value, Vec<Rule>)> {
    vec![
        (
            "chat json",
            "/v1/chat/completions",
            json!({"model": "gpt-4o", "messages": []}),
            vec![],
        ),
        (
            "messages json",
            "/v1/messages",
            json!({"model": "claude", "max_tokens": 4, "messages": []}),
            vec![],
        ),
        (
            "openai 500",
            "/v1/chat/completions",
            json!({"model": "gpt-4o"}),
            vec![Rule::always(Fault::Status(500))],
        ),
        (
            "anthropic 429",
            "/v1/messages",
            json!({"model": "claude", "max_tokens": 4}),
            vec![Rule::rate_limited(3)],
        ),
        (
            "html 502",
            "/v1/chat/completions",
            json!({"model": "gpt-4o"}),
            vec![Rule::always(Fault::Status(502))],
        ),
        (
            "chat sse",
            "/v1/chat/completions",
            json!({"model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true}}),
            vec![],
        ),
        (
            "responses sse",
            "/v1/responses",
            json!({"model": "gpt-5", "input": "hi", "stream": true}),
            vec![],
        ),
        (
            "messages sse",
            "/v1/messages",
            json!({"model": "claude", "max_tokens": 3, "stream": true}),
            vec![],
        ),
        (
            "stream error",
            "/v1/messages",
            json!({"model": "claude", "max_tokens": 3, "stream": true}),
            vec![Rule::always(Fault::StreamFailBeforeContent)],
        ),
    ]
}

#[tokio::test]
async fn every_encoding_decodes_to_the_plain_answer() {
    for mode in ["gzip", "deflate", "br", "zstd"] {
        for (name, path, body, rules) in cases() {
            // Two fresh mocks so both answers carry the same sequence numbers (ids).
            let (plain_base, _) = start(Compression::Off, rules.clone()).await;
            let plain_response = send(&plain_base, path, &body, Some(BROWSER_LIKE)).await;
            assert_eq!(header(&plain_response, "content-encoding"), None, "{name}");
            let status = plain_response.status();
            let plain = plain_response.bytes().await.unwrap();

            let (base, _) = start(mode.parse().unwrap(), rules).await;
            let response = send(&base, path, &body, Some(BROWSER_LIKE)).await;
            assert_eq!(response.status(), status, "{mode} {name}");
            assert_eq!(
                header(&response, "content-encoding").as_deref(),
                Some(mode),
                "{mode} {name}"
            );
            assert_eq!(
                header(&response, "vary").as_deref(),
                Some("accept-encoding"),
                "{mode} {name}"
            );
            let streaming = header(&response, "content-type")
                .unwrap()
                .starts_with("text/event-stream");
            let length = response.content_length();
            let compressed = response.bytes().await.unwrap();
            if streaming {
                assert_eq!(length, None, "{mode} {name}: streams have no length");
            } else {
                assert_eq!(length, Some(compressed.len() as u64), "{mode} {name}");
            }
            assert_ne!(compressed, plain, "{mode} {name}");
            let decoded = decode(mode, &compressed).await.unwrap();
            assert_eq!(
                String::from_utf8(decoded).unwrap(),
                String::from_utf8(plain.to_vec()).unwrap(),
                "{mode} {name}"
            );
        }
    }
}

/// The `Content-Encoding` a request with `accept` gets from a mock in `mode`.
async fn negotiated(mode: Compression, accept: Option<&str>) -> Option<String> {
    let (base, _) = start(mode, vec![]).await;
    let response = send(
        &base,
        "/v1/chat/completions",
        &json!({"model": "m"}),
        accept,
    )
    .await;
    let encoding = header(&response, "content-encoding");
    let body = response.bytes().await.unwrap();
    let plain = match &encoding {
        Some(encoding) => decode(encoding, &body).await.unwrap(),
        None => body.to_vec(),
    };
    let parsed: Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(parsed["object"], "chat.completion");
    encoding
}

#[tokio::test]
async fn accept_encoding_is_negotiated_with_q_values() {
    let auto = Compression::Auto;
    assert_eq!(
        negotiated(auto, Some(BROWSER_LIKE)).await.as_deref(),
        Some("zstd")
    );
    assert_eq!(
        negotiated(auto, Some("gzip;q=0, br")).await.as_deref(),
        Some("br")
    );
    assert_eq!(
        negotiated(auto, Some("gzip;q=0.8, deflate;q=0.9"))
            .await
            .as_deref(),
        Some("deflate")
    );
    assert_eq!(
        negotiated(auto, Some("*;q=0.5, zstd;q=0")).await.as_deref(),
        Some("br")
    );
    assert_eq!(negotiated(auto, Some("identity")).await, None);
    assert_eq!(negotiated(auto, None).await, None);
    // A named mode only when the request accepts it.
    assert_eq!(
        negotiated(Compression::Gzip, Some(BROWSER_LIKE))
            .await
            .as_deref(),
        Some("gzip")
    );
    assert_eq!(negotiated(Compression::Gzip, Some("br, zstd")).await, None);
    assert_eq!(negotiated(Compression::Off, Some(BROWSER_LIKE)).await, None);
}

#[tokio::test]
async fn identity_answers_still_vary_on_accept_encoding() {
    let (base, _) = start(Compression::Auto, vec![]).await;
    let response = send(&base, "/v1/chat/completions", &json!({"model": "m"}), None).await;
    assert_eq!(header(&response, "content-encoding"), None);
    assert_eq!(
        header(&response, "vary").as_deref(),
        Some("accept-encoding")
    );
    // Off: exactly today's answer, no Vary.
    let (base, _) = start(Compression::Off, vec![]).await;
    let response = send(&base, "/v1/chat/completions", &json!({"model": "m"}), None).await;
    assert_eq!(header(&response, "vary"), None);
}

#[tokio::test]
async fn control_endpoint_sets_and_reads_the_mode() {
    let (base, mock) = start(Compression::Off, vec![]).await;
    let client = reqwest::Client::new();
    let read = || async {
        client
            .get(format!("{base}/mock/compression"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    assert_eq!(read().await, json!({"mode": "off"}));
    let posted = client
        .post(format!("{base}/mock/compression"))
        .json(&json!({"mode": "br"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 204);
    assert_eq!(mock.compression(), Compression::Br);
    assert_eq!(read().await, json!({"mode": "br"}));
    let response = send(
        &base,
        "/v1/chat/completions",
        &json!({"model": "m"}),
        Some("br"),
    )
    .await;
    assert_eq!(header(&response, "content-encoding").as_deref(), Some("br"));
    let refused = client
        .post(format!("{base}/mock/compression"))
        .json(&json!({"mode": "lz4"}))
        .send()
        .await
        .unwrap();
    assert!(refused.status().is_client_error());
    assert_eq!(mock.compression(), Compression::Br);
    // The control API itself is never compressed.
    let stats = client
        .get(format!("{base}/mock/stats"))
        .header("accept-encoding", "br")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&stats, "content-encoding"), None);
}

/// Reads a streaming body through a decoder as it arrives: the decoded text, with the time each
/// complete event (`\n\n`) was decoded, from `started`.
async fn decode_incrementally(
    response: reqwest::Response,
    encoding: &str,
    started: Instant,
) -> Vec<(Duration, String)> {
    let chunks = futures_util::stream::unfold(response, |mut response| async move {
        match response.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), response)),
            Ok(None) => None,
            Err(error) => Some((Err(std::io::Error::other(error)), response)),
        }
    });
    let reader = tokio_util::io::StreamReader::new(Box::pin(chunks));
    let mut decoded = decoder(encoding, reader);
    let mut events = Vec::new();
    let mut pending = String::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = decoded.read(&mut buffer).await.unwrap();
        if read == 0 {
            return events;
        }
        pending.push_str(std::str::from_utf8(&buffer[..read]).unwrap());
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            events.push((started.elapsed(), event));
        }
    }
}

#[tokio::test]
async fn streams_are_compressed_event_by_event() {
    let pause = Duration::from_millis(600);
    for mode in ["gzip", "deflate", "br", "zstd"] {
        let slow = Rule::always(Fault::SlowStart {
            events: 3,
            pause_ms: pause.as_millis() as u64,
        });
        let (base, _) = start(mode.parse().unwrap(), vec![slow]).await;
        let started = Instant::now();
        let response = send(
            &base,
            "/v1/responses",
            &json!({"model": "gpt-5", "input": "hi", "stream": true}),
            Some(BROWSER_LIKE),
        )
        .await;
        assert_eq!(header(&response, "content-encoding").as_deref(), Some(mode));
        let events = decode_incrementally(response, mode, started).await;
        let names: Vec<&str> = events
            .iter()
            .map(|(_, event)| event.lines().next().unwrap())
            .collect();
        assert_eq!(
            names[..3],
            [
                "event: response.created",
                "event: response.in_progress",
                "event: response.output_item.added"
            ],
            "{mode}"
        );
        assert!(events[2].1.contains("\"reasoning\""), "{mode}");
        // The three events before the pause were decoded well before it ended…
        assert!(events[2].0 < pause / 2, "{mode}: {:?}", events[2].0);
        // …and the rest only after it.
        assert!(events[3].0 >= pause, "{mode}: {:?}", events[3].0);
        assert_eq!(names.last(), Some(&"event: response.completed"), "{mode}");
    }
}

#[tokio::test]
async fn corrupt_compressed_is_gzip_cut_short() {
    // Whatever the mode and the request's Accept-Encoding.
    let (base, _) = start(
        Compression::Off,
        vec![Rule::always(Fault::CorruptCompressed)],
    )
    .await;
    let response = send(&base, "/v1/chat/completions", &json!({"model": "m"}), None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-encoding").as_deref(),
        Some("gzip")
    );
    let body = response.bytes().await.unwrap();
    assert_eq!(&body[..3], &[0x1f, 0x8b, 0x08], "a valid gzip header");
    assert!(decode("gzip", &body).await.is_err());

    let response = send(
        &base,
        "/v1/messages",
        &json!({"model": "claude", "max_tokens": 6, "stream": true}),
        Some("br"),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-encoding").as_deref(),
        Some("gzip")
    );
    let body = response.bytes().await.unwrap();
    assert_eq!(&body[..2], &[0x1f, 0x8b]);
    // The first events decode; then the gzip data ends mid-stream.
    let mut reader = GzipDecoder::new(&body[..]);
    let mut partial = Vec::new();
    let mut buffer = [0u8; 256];
    let error = loop {
        match reader.read(&mut buffer).await {
            Ok(0) => panic!("the truncated stream decoded to the end"),
            Ok(read) => partial.extend_from_slice(&buffer[..read]),
            Err(error) => break error,
        }
    };
    let text = String::from_utf8(partial).unwrap();
    assert!(text.starts_with("event: message_start"), "{text}");
    assert!(!text.contains("message_stop"), "{text}");
    assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof, "{error}");
}

#[tokio::test]
async fn mislabelled_compression_sends_plain_bytes_as_gzip() {
    let (base, _) = start(
        Compression::Auto,
        vec![Rule::always(Fault::MislabelledCompression)],
    )
    .await;
    let response = send(
        &base,
        "/v1/chat/completions",
        &json!({"model": "m"}),
        Some(BROWSER_LIKE),
    )
    .await;
    assert_eq!(
        header(&response, "content-encoding").as_deref(),
        Some("gzip")
    );
    let body = response.bytes().await.unwrap();
    let parsed: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(parsed["object"], "chat.completion");
    assert!(decode("gzip", &body).await.is_err());

    let response = send(
        &base,
        "/v1/chat/completions",
        &json!({"model": "m", "stream": true}),
        None,
    )
    .await;
    assert_eq!(
        header(&response, "content-encoding").as_deref(),
        Some("gzip")
    );
    let text = response.text().await.unwrap();
    assert!(text.starts_with("data: {"), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn stream_cut_after_content_stays_cut_when_compressed() {
    let (base, _) = start(
        Compression::Gzip,
        vec![Rule::always(Fault::StreamFailAfterContent)],
    )
    .await;
    let mut response = send(
        &base,
        "/v1/chat/completions",
        &json!({"model": "m", "stream": true}),
        Some("gzip"),
    )
    .await;
    assert_eq!(
        header(&response, "content-encoding").as_deref(),
        Some("gzip")
    );
    let mut compressed = Vec::new();
    let cut = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => compressed.extend_from_slice(&chunk),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(cut, "the connection should be cut");
    let mut reader = GzipDecoder::new(&compressed[..]);
    let mut partial = Vec::new();
    let _ = reader.read_to_end(&mut partial).await;
    let text = String::from_utf8(partial).unwrap();
    assert!(text.contains("\"content\":\"This\""), "{text}");
    assert!(text.contains("\"error\""), "{text}");
}
