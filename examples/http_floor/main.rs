//! The floor of the HTTP stack quotaroute is built on, for `bench/floor.sh`: the same hyper
//! server (hyper-util auto, HTTP/1 and h2), the same hyper-util pooled client and tokio
//! runtime, and nothing else — no auth, no routing, no body inspection, no journal. It reads
//! the client's body whole (as the router does), sends it to one upstream and relays the
//! answer's body as it arrives: frame by frame, or with `coalesce` as the router relays a
//! stream, the frames that already arrived gathered into one client write (up to two yields
//! for hyper's connection task to hand over the next one, as `node/stream_relay/schedule.rs`).
//!
//! With `driven`, the upstream HTTP/1.1 connection is driven by the request that holds it, as
//! the router's (`upstream/driven.rs`): no connection task, each poll of the answer polls the
//! connection first and takes every frame it already decoded into one client write; the
//! connection goes back to a plain pool at the body's end. The leanest relay hyper allows.
//!
//! With `design`, the driven relay also does what quotaroute's decided design makes every
//! request do, and nothing more (`design.rs`): the floor of the design, not of hyper.
//!
//! With `contract`, the design's floor also does what the contract asks of every answered
//! request (`contract.rs`): the client's key checked, headers filtered both ways, the
//! credential set, the `x-quotaroute-*` headers and the metrics.
//!
//! `cargo run --release --example http_floor -- 127.0.0.1:18183 http://127.0.0.1:18180 [coalesce|driven|design|contract [JOURNAL_DIR]]`

mod contract;
mod design;

// The router's allocator (`src/main.rs`), so the floor allocates as it does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::convert::Infallible;
use std::error::Error;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::body::{Body, Frame};
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use quotaroute::wire::sse::{SseEvent, SseParser};
use quotaroute::wire::stream_watch::{matters_after_commit, StreamFormat, StreamUsage};
use tokio::net::TcpListener;

type Upstream = Client<HttpConnector, Full<Bytes>>;
type Reply = Response<http_body_util::combinators::UnsyncBoxBody<Bytes, hyper::Error>>;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let listen: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:18183".to_string())
        .parse()?;
    let upstream: Uri = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:18180".to_string())
        .parse()?;
    let mode = args.next();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match mode.as_deref() {
        Some("driven") => return runtime.block_on(serve_driven(listen, upstream, None)),
        Some(mode @ ("design" | "contract")) => {
            let journal_dir = match args.next() {
                Some(dir) => std::path::PathBuf::from(dir),
                None => std::env::temp_dir().join(format!("http-floor-{}", std::process::id())),
            };
            let contract = (mode == "contract").then(contract::Contract::new);
            return runtime.block_on(async move {
                let design = design::Design::start(&journal_dir, contract).await?;
                serve_driven(listen, upstream, Some(design)).await
            });
        }
        _ => {}
    }
    runtime.block_on(serve(listen, upstream, mode.as_deref() == Some("coalesce")))
}

async fn serve(listen: SocketAddr, upstream: Uri, coalesce: bool) -> Result<(), Box<dyn Error>> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new()).build(connector);
    let upstream = Arc::new(upstream);
    let listener = TcpListener::bind(listen).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let (client, upstream) = (client.clone(), upstream.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (client, upstream) = (client.clone(), upstream.clone());
                async move { Ok::<_, Infallible>(forward(&client, &upstream, request, coalesce).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn forward(
    client: &Upstream,
    upstream: &Uri,
    request: Request<Incoming>,
    coalesce: bool,
) -> Reply {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|collected| collected.to_bytes()) else {
        return status(StatusCode::BAD_REQUEST);
    };
    let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let Ok(uri) = format!("{upstream}{}", path.trim_start_matches('/')).parse::<Uri>() else {
        return status(StatusCode::BAD_REQUEST);
    };
    let mut builder = Request::builder().method(parts.method).uri(uri);
    if let Some(content_type) = parts.headers.get(http::header::CONTENT_TYPE) {
        builder = builder.header(http::header::CONTENT_TYPE, content_type);
    }
    let Ok(outgoing) = builder.body(Full::new(body)) else {
        return status(StatusCode::BAD_REQUEST);
    };
    match client.request(outgoing).await {
        Ok(response) if coalesce => response.map(|body| Coalesced::new(body).boxed_unsync()),
        Ok(response) => response.map(|body| body.boxed_unsync()),
        Err(_) => status(StatusCode::BAD_GATEWAY),
    }
}

fn status(code: StatusCode) -> Reply {
    let mut response = Response::new(
        Full::new(Bytes::new())
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = code;
    response
}

/// Most bytes gathered into one client write (the router's `COALESCE_BYTES`).
const COALESCE_BYTES: usize = 64 * 1024;

/// How many times a poll lets hyper's connection task hand over a frame it already read.
const READY_FRAME_YIELDS: u8 = 2;

/// An answer body whose frames that already arrived leave as one.
struct Coalesced {
    inner: Incoming,
    gathered: BytesMut,
    yields_left: u8,
    ended: bool,
}

impl Coalesced {
    fn new(inner: Incoming) -> Self {
        Coalesced {
            inner,
            gathered: BytesMut::new(),
            yields_left: READY_FRAME_YIELDS,
            ended: false,
        }
    }

    fn take(&mut self) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        self.yields_left = READY_FRAME_YIELDS;
        Poll::Ready(Some(Ok(Frame::data(self.gathered.split().freeze()))))
    }
}

impl Body for Coalesced {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                return if this.gathered.is_empty() {
                    Poll::Ready(None)
                } else {
                    this.take()
                };
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.gathered.extend_from_slice(&data);
                        if this.gathered.len() >= COALESCE_BYTES {
                            return this.take();
                        }
                    }
                    Err(_trailers) => {}
                },
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => this.ended = true,
                Poll::Pending if this.gathered.is_empty() => return Poll::Pending,
                Poll::Pending if this.yields_left > 0 => {
                    this.yields_left -= 1;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Pending => return this.take(),
            }
        }
    }
}

type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An idle upstream HTTP/1.1 connection: its sender and the future that drives it.
struct Idle {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    driver: Driver,
}

type IdleConns = Arc<std::sync::Mutex<Vec<Idle>>>;

async fn serve_driven(
    listen: SocketAddr,
    upstream: Uri,
    design: Option<Arc<design::Design>>,
) -> Result<(), Box<dyn Error>> {
    let authority = upstream.authority().ok_or("upstream has no host")?.clone();
    let base = Arc::new(upstream.to_string());
    let idle: IdleConns = Arc::default();
    let listener = TcpListener::bind(listen).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let (idle, base, authority) = (idle.clone(), base.clone(), authority.clone());
        let design = design.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (idle, base, authority) = (idle.clone(), base.clone(), authority.clone());
                let design = design.clone();
                async move {
                    Ok::<_, Infallible>(
                        forward_driven(&idle, &base, &authority, request, design).await,
                    )
                }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn connect(authority: &http::uri::Authority) -> Option<Idle> {
    let stream = tokio::net::TcpStream::connect(authority.as_str())
        .await
        .ok()?;
    stream.set_nodelay(true).ok()?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    Some(Idle {
        sender,
        driver: Box::pin(async move {
            let _ = conn.await;
        }),
    })
}

/// The request for the upstream: the client's method and path under `base`; with the contract,
/// the client's headers filtered and the chosen key's credential, else its content type only.
fn upstream_request(
    parts: http::request::Parts,
    base: &str,
    authority: &http::uri::Authority,
    body: Bytes,
    contract: Option<(&contract::Contract, u16)>,
) -> Option<Request<Full<Bytes>>> {
    let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let uri = format!("{base}{}", path.trim_start_matches('/'))
        .parse::<Uri>()
        .ok()?;
    let mut builder = Request::builder()
        .method(parts.method)
        .uri(uri)
        .header(http::header::HOST, authority.as_str());
    match contract {
        Some((contract, chosen)) => {
            if let Some(headers) = builder.headers_mut() {
                contract.upstream_headers(&parts.headers, chosen, headers);
            }
        }
        None => {
            if let Some(content_type) = parts.headers.get(http::header::CONTENT_TYPE) {
                builder = builder.header(http::header::CONTENT_TYPE, content_type);
            }
        }
    }
    builder.body(Full::new(body)).ok()
}

async fn forward_driven(
    idle: &IdleConns,
    base: &str,
    authority: &http::uri::Authority,
    request: Request<Incoming>,
    design: Option<Arc<design::Design>>,
) -> Reply {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|collected| collected.to_bytes()) else {
        return status(StatusCode::BAD_REQUEST);
    };
    let started_ms = design::now_ms();
    let started = std::time::Instant::now();
    let contract = design.as_ref().and_then(|design| design.contract.as_ref());
    if contract.is_some_and(|contract| !contract.admits(&parts.headers)) {
        return status(StatusCode::UNAUTHORIZED);
    }
    let mut routed = None;
    if let Some(design) = &design {
        let Ok(head) = serde_json::from_slice::<design::RequestHead>(&body) else {
            return status(StatusCode::BAD_REQUEST);
        };
        let Some((request_id, connection)) = design.route(&head.model).await else {
            return status(StatusCode::SERVICE_UNAVAILABLE);
        };
        routed = Some((
            design.clone(),
            request_id,
            connection,
            head.model.into_owned(),
            head.stream,
        ));
    }
    let chosen = routed.as_ref().map(|(_, _, chosen, _, _)| *chosen);
    let Some(outgoing) = upstream_request(parts, base, authority, body, contract.zip(chosen))
    else {
        return status(StatusCode::BAD_REQUEST);
    };
    let sent = std::time::Instant::now();
    let taken = idle.lock().ok().and_then(|mut list| list.pop());
    let mut conn = match taken {
        Some(conn) => conn,
        None => match connect(authority).await {
            Some(conn) => conn,
            None => return status(StatusCode::BAD_GATEWAY),
        },
    };
    let mut sending = std::pin::pin!(conn.sender.send_request(outgoing));
    let mut ended = false;
    let answer = std::future::poll_fn(|cx| {
        if !ended && conn.driver.as_mut().poll(cx).is_ready() {
            ended = true;
        }
        sending.as_mut().poll(cx)
    })
    .await;
    let Ok(response) = answer else {
        return status(StatusCode::BAD_GATEWAY);
    };
    let mut served = routed.map(|(design, request_id, connection, model, stream)| {
        let served = design::Served {
            request_id,
            connection,
            model,
            tokens_in: 0,
            tokens_out: 0,
            stream,
            started_ms,
        };
        (design, served)
    });
    let (mut parts, body) = response.into_parts();
    if let (Some(contract), Some((_, served))) = (contract, &served) {
        let upstream_us = sent.elapsed().as_micros();
        let overhead_us = started.elapsed().as_micros().saturating_sub(upstream_us);
        parts.headers = contract.answer_headers(
            std::mem::take(&mut parts.headers),
            served.connection,
            &served.request_id,
            u64::try_from(overhead_us).unwrap_or(u64::MAX),
        );
    }
    let driven = Driven {
        body,
        conn: (!ended).then_some(conn),
        idle: idle.clone(),
        gathered: BytesMut::new(),
        finished: false,
    };
    match served.take() {
        None => Response::from_parts(parts, driven.boxed_unsync()),
        Some((design, mut served)) if !served.stream => {
            // A whole answer is read before its status goes out: its usage is charged and a
            // 2xx whose body is not JSON is an error, not a relayed answer.
            let Ok(answer) = driven.collect().await.map(|collected| collected.to_bytes()) else {
                return status(StatusCode::BAD_GATEWAY);
            };
            let Ok(summary) = quotaroute::wire::usage::response_summary(&answer) else {
                return status(StatusCode::BAD_GATEWAY);
            };
            if let Some(counts) = summary.counts {
                (served.tokens_in, served.tokens_out) = (counts.tokens_in, counts.tokens_out);
            }
            design.served(served);
            let body = Full::new(answer)
                .map_err(|never: Infallible| match never {})
                .boxed_unsync();
            Response::from_parts(parts, body)
        }
        Some(at_end) => {
            // A stream's outcome is told when its last byte has gone.
            let watched = Watched {
                inner: driven,
                parser: SseParser::new(),
                events: Vec::new(),
                usage: StreamUsage::default(),
                at_end: Some(at_end),
            };
            Response::from_parts(parts, watched.boxed_unsync())
        }
    }
}

/// An answer body read from the connection it holds: each poll drives the connection, then
/// takes every frame already decoded; the connection goes back at the end.
struct Driven {
    body: Incoming,
    conn: Option<Idle>,
    idle: IdleConns,
    gathered: BytesMut,
    /// hyper's body said it has ended.
    finished: bool,
}

impl Driven {
    fn give_back(&mut self) {
        if let (Some(conn), Ok(mut list)) = (self.conn.take(), self.idle.lock()) {
            list.push(conn);
        }
    }
}

impl Body for Driven {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let mut unwoken = Context::from_waker(std::task::Waker::noop());
        if let Some(conn) = &mut this.conn {
            if conn.driver.as_mut().poll(cx).is_ready() {
                this.conn = None;
            }
        }
        loop {
            match Pin::new(&mut this.body).poll_frame(&mut unwoken) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.gathered.extend_from_slice(&data);
                    }
                    if this.gathered.len() >= COALESCE_BYTES {
                        break;
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Ready(None) => {
                    this.finished = true;
                    break;
                }
                Poll::Pending => {
                    // More may need another read of the socket: drive once more.
                    let progressed = match &mut this.conn {
                        Some(conn) => conn.driver.as_mut().poll(cx).is_ready(),
                        None => false,
                    };
                    if progressed {
                        this.conn = None;
                    }
                    match Pin::new(&mut this.body).poll_frame(&mut unwoken) {
                        Poll::Ready(Some(Ok(frame))) => {
                            if let Ok(data) = frame.into_data() {
                                this.gathered.extend_from_slice(&data);
                            }
                            continue;
                        }
                        Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                        Poll::Ready(None) => {
                            this.finished = true;
                            break;
                        }
                        Poll::Pending => break,
                    }
                }
            }
        }
        let finished = this.finished || this.body.is_end_stream();
        if finished {
            this.finished = true;
            this.give_back();
        }
        if this.gathered.is_empty() {
            return if finished {
                Poll::Ready(None)
            } else {
                Poll::Pending
            };
        }
        Poll::Ready(Some(Ok(Frame::data(this.gathered.split().freeze()))))
    }

    fn is_end_stream(&self) -> bool {
        self.gathered.is_empty() && (self.finished || self.body.is_end_stream())
    }
}

/// A stream read as the design must read it: each event cut from the relayed bytes, the ones
/// that may carry usage, an error or the end read (`wire::stream_watch`); at its end, the outcome goes to the
/// key's connection actor.
struct Watched {
    inner: Driven,
    parser: SseParser,
    events: Vec<SseEvent>,
    usage: StreamUsage,
    at_end: Option<(Arc<design::Design>, design::Served)>,
}

impl Body for Watched {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                // A stream the parser refuses is relayed as it is: the floor only reads.
                let _ = this.parser.feed_bytes(data.clone(), &mut this.events);
                // Content passes on a byte scan; usage, errors and the end are read.
                for event in this.events.drain(..) {
                    if matters_after_commit(StreamFormat::OpenAiChat, &event) {
                        this.usage.observe(StreamFormat::OpenAiChat, &event);
                    }
                }
            }
        }
        if matches!(polled, Poll::Ready(None)) || this.inner.is_end_stream() {
            if let Some((design, mut served)) = this.at_end.take() {
                (served.tokens_in, served.tokens_out) =
                    (this.usage.tokens_in, this.usage.tokens_out);
                design.served(served);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}
