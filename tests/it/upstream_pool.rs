//! The upstream client's connection pool on plain HTTP/1.1, against small loopback upstreams
//! that count the TCP connections they accept: sequential requests share one keep-alive
//! connection (origin-form request line, `Host` with the port), a connection the upstream
//! closed is replaced without the caller seeing an error, two requests in flight at once
//! take two connections, an unread response keeps its connection from being reused, a body
//! read to its end hands its connection back at once (the body reads it, `h1_conn`), and one
//! left half-read closes it. Against scripted upstreams: chunked answers reuse their connection,
//! `connection: close` and close-framed answers do not, and a cut-short body, a head that is
//! not HTTP and a close before any answer are each named.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed step fails the test loudly"
)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use quotaroute::internals::UpstreamClient;
use quotaroute_actors::policy::classify::TransportFailure;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Barrier;

/// What a counting upstream saw.
#[derive(Clone, Default)]
struct Seen {
    accepted: Arc<AtomicUsize>,
    /// Each request's target and `Host` header, as they arrived.
    requests: Arc<Mutex<Vec<(String, String)>>>,
}

impl Seen {
    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// A keep-alive HTTP/1.1 upstream answering `ok` (`/big`: 1 MiB, more than a connection reads
/// ahead of its caller); with `together`, each request waits until that many are in progress
/// at once.
async fn start_keep_alive(together: Option<usize>) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Seen::default();
    let barrier = together.map(|n| Arc::new(Barrier::new(n)));
    let counted = seen.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            counted.accepted.fetch_add(1, Ordering::SeqCst);
            let (requests, barrier) = (counted.requests.clone(), barrier.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                    let (requests, barrier) = (requests.clone(), barrier.clone());
                    async move {
                        let host = request
                            .headers()
                            .get("host")
                            .map(|v| v.to_str().unwrap().to_string())
                            .unwrap_or_default();
                        requests
                            .lock()
                            .unwrap()
                            .push((request.uri().to_string(), host));
                        if let Some(barrier) = barrier {
                            barrier.wait().await;
                        }
                        let body = if request.uri().path() == "/big" {
                            Bytes::from(vec![b'x'; 1 << 20])
                        } else {
                            Bytes::from_static(b"ok")
                        };
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(body)))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (base, seen)
}

/// An upstream that answers one request per connection and then closes it, without saying
/// `Connection: close` (as one that drops idle keep-alive connections early looks).
async fn start_closing_after_each() -> (String, Seen) {
    start_raw(|mut stream| async move {
        if !read_head(&mut stream).await {
            return;
        }
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await;
        // Dropped here: the connection closes while the client keeps it as idle.
    })
    .await
}

/// A loopback upstream that counts the connections it accepts and runs `serve` on each.
async fn start_raw<F, Fut>(serve: F) -> (String, Seen)
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Seen::default();
    let counted = seen.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            counted.accepted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(stream));
        }
    });
    (base, seen)
}

/// Reads a request's head (to its blank line) byte by byte, leaving what follows unread; false
/// when the connection closed first.
async fn read_head(stream: &mut tokio::net::TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
            return false;
        }
        head.push(byte[0]);
    }
    true
}

fn get(url: &str) -> http::Request<Full<Bytes>> {
    http::Request::get(url)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// Sends a GET and reads the whole answer.
async fn fetch(client: &UpstreamClient, url: &str) -> (u16, String) {
    let response = client
        .send_within(get(url), Duration::from_secs(10))
        .await
        .unwrap_or_else(|failure| panic!("{url}: {}", failure.message));
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn sequential_requests_share_one_keep_alive_connection() {
    let (base, seen) = start_keep_alive(None).await;
    let client = UpstreamClient::new();
    for n in 0..5 {
        let (status, body) = fetch(&client, &format!("{base}/v1/models?page={n}")).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
    }
    assert_eq!(seen.accepted(), 1, "five requests, one connection");
    // A clone shares the pool.
    let (status, _) = fetch(&client.clone(), &format!("{base}/")).await;
    assert_eq!(status, 200);
    assert_eq!(seen.accepted(), 1);
    let requests = seen.requests.lock().unwrap().clone();
    let port = base.rsplit(':').next().unwrap();
    assert_eq!(requests.len(), 6);
    assert_eq!(
        requests[0],
        ("/v1/models?page=0".to_string(), format!("127.0.0.1:{port}")),
        "origin-form request line and Host with the port"
    );
    assert_eq!(requests[5].0, "/");
}

#[tokio::test]
async fn a_connection_the_upstream_closed_is_replaced_without_an_error() {
    let (base, seen) = start_closing_after_each().await;
    let client = UpstreamClient::new();
    for _ in 0..5 {
        let (status, body) = fetch(&client, &format!("{base}/v1/models")).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
    }
    assert_eq!(seen.accepted(), 5, "each request on a new connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_requests_in_flight_take_two_connections_then_both_are_reused() {
    // Each request is answered only once both are in progress, so they overlap.
    let (base, seen) = start_keep_alive(Some(2)).await;
    let client = UpstreamClient::new();
    let url = format!("{base}/v1/models");
    let (first, second) = tokio::join!(fetch(&client, &url), fetch(&client, &url));
    assert_eq!((first.0, second.0), (200, 200));
    assert_eq!(seen.accepted(), 2);
    // Each body handed its connection back as it was read to the end: two more at once go
    // on the same two connections.
    let (first, second) = tokio::join!(fetch(&client, &url), fetch(&client, &url));
    assert_eq!((first.0, second.0), (200, 200));
    assert_eq!(seen.accepted(), 2, "both connections were reused");
}

#[tokio::test]
async fn a_response_still_being_read_keeps_its_connection_busy() {
    let (base, seen) = start_keep_alive(None).await;
    let client = UpstreamClient::new();
    let url = format!("{base}/v1/models");
    let unread = client
        .send_within(get(&format!("{base}/big")), Duration::from_secs(10))
        .await
        .unwrap();
    // Its body is not read yet: the next request cannot go on that connection.
    let (status, _) = fetch(&client, &url).await;
    assert_eq!(status, 200);
    assert_eq!(seen.accepted(), 2);
    let body = unread.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.len(), 1 << 20);
    // Both bodies were read to the end, so both connections are back; the next two in a row
    // reuse them.
    fetch(&client, &url).await;
    fetch(&client, &url).await;
    assert_eq!(seen.accepted(), 2);
}

#[tokio::test]
async fn a_body_left_half_read_closes_its_connection_and_the_pool_opens_another() {
    let (base, seen) = start_keep_alive(None).await;
    let client = UpstreamClient::new();
    let url = format!("{base}/v1/models");
    let mut half_read = client
        .send_within(get(&format!("{base}/big")), Duration::from_secs(10))
        .await
        .unwrap()
        .into_body();
    let first = half_read.frame().await.unwrap().unwrap();
    assert!(first.data_ref().is_some_and(|data| data.len() < 1 << 20));
    // Its connection still holds the rest of the answer: it can take no other request, and
    // dropping the body closes it.
    drop(half_read);
    let (status, body) = fetch(&client, &url).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    assert_eq!(seen.accepted(), 2, "a new connection for the next request");
    for _ in 0..3 {
        fetch(&client, &url).await;
    }
    assert_eq!(seen.accepted(), 2, "and that one is reused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_read_on_another_task_than_its_head_drives_its_own_connection() {
    let (base, seen) = start_keep_alive(None).await;
    let client = UpstreamClient::new();
    let response = client
        .send_within(get(&format!("{base}/big")), Duration::from_secs(10))
        .await
        .unwrap();
    // The connection has no task of its own: the body reads it wherever it is polled.
    let read = tokio::spawn(async move { response.into_body().collect().await });
    let body = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the body is read without a connection task")
        .unwrap()
        .unwrap()
        .to_bytes();
    assert_eq!(body.len(), 1 << 20);
    fetch(&client, &format!("{base}/v1/models")).await;
    assert_eq!(
        seen.accepted(),
        1,
        "read to its end, the connection was reused"
    );
}

#[tokio::test]
async fn a_refused_connection_and_a_url_without_host_are_named() {
    let client = UpstreamClient::new();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let failure = client
        .send_within(
            get(&format!("http://127.0.0.1:{port}/v1/models")),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    assert_eq!(failure.failure, TransportFailure::Connect);
    assert!(
        failure
            .message
            .starts_with(&format!("could not connect to 127.0.0.1:{port}")),
        "{}",
        failure.message
    );
    let failure = client
        .send_within(get("/v1/models"), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(failure.failure, TransportFailure::Other);
    assert_eq!(failure.message, "the upstream URL has no scheme or host");
}

/// An upstream that reads each request's head and answers it with `answer` as written, on
/// connections it keeps open (unless `close` after each answer).
async fn start_scripted(answer: &'static [u8], close: bool) -> (String, Seen) {
    start_raw(move |mut stream| async move {
        loop {
            if !read_head(&mut stream).await {
                return;
            }
            // Written in two pieces, so the client reads a head or body in parts.
            let (first, second) = answer.split_at(answer.len() / 2);
            let _ = stream.write_all(first).await;
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = stream.write_all(second).await;
            if close {
                return;
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_chunked_answer_gives_its_connection_back_and_one_saying_close_does_not() {
    let (base, seen) = start_scripted(
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\n\r\n",
        false,
    )
    .await;
    let client = UpstreamClient::new();
    for _ in 0..3 {
        let (status, body) = fetch(&client, &format!("{base}/v1/models")).await;
        assert_eq!((status, body.as_str()), (200, "abcdefg"));
    }
    assert_eq!(
        seen.accepted(),
        1,
        "read to its last chunk, the connection was reused"
    );

    let (base, seen) = start_scripted(
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
        false,
    )
    .await;
    for _ in 0..3 {
        let (status, body) = fetch(&client, &format!("{base}/v1/models")).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
    }
    assert_eq!(seen.accepted(), 3, "`connection: close` is not reused");

    // An answer framed by the close is read to the close.
    let (base, seen) = start_scripted(b"HTTP/1.1 200 OK\r\n\r\nuntil the close", true).await;
    for _ in 0..2 {
        let (status, body) = fetch(&client, &format!("{base}/v1/models")).await;
        assert_eq!((status, body.as_str()), (200, "until the close"));
    }
    assert_eq!(seen.accepted(), 2);
}

#[tokio::test]
async fn an_answer_cut_short_not_http_or_missing_is_named() {
    let client = UpstreamClient::new();
    // The head arrives, the body stops short of its length: reading the body fails.
    let (base, _) = start_scripted(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", true).await;
    let response = client
        .send_within(get(&format!("{base}/v1/models")), Duration::from_secs(5))
        .await
        .unwrap();
    let error = response.into_body().collect().await.unwrap_err();
    assert!(
        error.to_string().contains("closed before the body's end"),
        "{error}"
    );

    // What comes back is not HTTP.
    let (base, _) = start_scripted(b"SSH-2.0-OpenSSH_9.6\r\n\r\n", true).await;
    let failure = client
        .send_within(get(&format!("{base}/v1/models")), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(failure.failure, TransportFailure::Other);
    assert!(
        failure.message.contains("invalid response head"),
        "{}",
        failure.message
    );

    // The upstream closes without an answer: a reset, as hyper named it.
    let (base, _) = start_scripted(b"", true).await;
    let failure = client
        .send_within(get(&format!("{base}/v1/models")), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(failure.failure, TransportFailure::Reset);
    assert!(
        failure
            .message
            .starts_with("connection reset by 127.0.0.1:"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn an_answer_before_the_request_body_is_read_is_returned_and_not_reused() {
    // The upstream reads the head alone, answers 413 and stops reading (as a server or load
    // balancer refusing a body too large does), keeping the connection open.
    let (base, seen) = start_raw(|mut stream| async move {
        if !read_head(&mut stream).await {
            return;
        }
        let _ = stream
            .write_all(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 9\r\n\r\ntoo large")
            .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let client = UpstreamClient::new();
    // More than the loopback socket's buffers take, so the write waits on the upstream.
    let large = Bytes::from(vec![b'x'; 64 << 20]);
    for _ in 0..2 {
        let request = http::Request::post(format!("{base}/v1/chat/completions"))
            .body(Full::new(large.clone()))
            .unwrap();
        let response = client
            .send_within(request, Duration::from_secs(10))
            .await
            .unwrap_or_else(|failure| panic!("{}", failure.message));
        assert_eq!(response.status(), 413);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"too large");
    }
    assert_eq!(
        seen.accepted(),
        2,
        "a request not all sent leaves its connection unusable"
    );
}
