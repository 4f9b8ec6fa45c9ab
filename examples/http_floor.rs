//! The floor of the HTTP stack quotaroute is built on, for `bench/floor.sh`: the same hyper
//! server (hyper-util auto, HTTP/1 and h2), the same hyper-util pooled client and tokio
//! runtime, and nothing else — no auth, no routing, no body inspection, no journal. It reads
//! the client's body whole (as the router does), sends it to one upstream and relays the
//! answer's body as it arrives.
//!
//! `cargo run --release --example http_floor -- 127.0.0.1:18183 http://127.0.0.1:18180`

use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

type Upstream = Client<HttpConnector, Full<Bytes>>;
type Reply = Response<http_body_util::combinators::BoxBody<Bytes, hyper::Error>>;

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
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve(listen, upstream))
}

async fn serve(listen: SocketAddr, upstream: Uri) -> Result<(), Box<dyn Error>> {
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
                async move { Ok::<_, Infallible>(forward(&client, &upstream, request).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn forward(client: &Upstream, upstream: &Uri, request: Request<Incoming>) -> Reply {
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
        Ok(response) => response.map(|body| body.boxed()),
        Err(_) => status(StatusCode::BAD_GATEWAY),
    }
}

fn status(code: StatusCode) -> Reply {
    let mut response = Response::new(
        Full::new(Bytes::new())
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *response.status_mut() = code;
    response
}
