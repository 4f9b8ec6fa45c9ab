//! The node's accept loop: hyper-util's HTTP/1.1 + HTTP/2 server with `TCP_NODELAY` on every
//! socket, a header-read timeout (a client that never finishes its headers is disconnected
//! instead of holding a connection forever) and graceful shutdown (stop accepting, let open
//! connections finish their requests), over TLS when the node serves HTTPS.

use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head (line + headers) a client may send: past it, 431.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Serves `app` on `listener` until `stop` turns true, then waits for open connections to
/// finish (the caller bounds that wait). With `tls`, every connection is HTTPS (HTTP/2 or
/// HTTP/1.1 as ALPN chose); its handshake must finish within [`HEADER_READ_TIMEOUT`].
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    mut stop: watch::Receiver<bool>,
    tls: Option<TlsAcceptor>,
) {
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES);
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Without it every small SSE write waits ~40 ms for a delayed ACK.
                    let _ = stream.set_nodelay(true);
                    let app = app.clone();
                    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                        app.clone().oneshot(request.map(Body::new))
                    });
                    let watcher = graceful.watcher();
                    let builder = builder.clone();
                    match &tls {
                        None => {
                            let connection = builder
                                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                                .into_owned();
                            tokio::spawn(watcher.watch(connection));
                        }
                        Some(acceptor) => {
                            let acceptor = acceptor.clone();
                            tokio::spawn(async move {
                                let handshake = tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream));
                                let Ok(Ok(stream)) = handshake.await else {
                                    return;
                                };
                                let connection = builder
                                    .serve_connection_with_upgrades(TokioIo::new(stream), service)
                                    .into_owned();
                                let _ = watcher.watch(connection).await;
                            });
                        }
                    }
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
            () = async { let _ = stop.wait_for(|stop| *stop).await; } => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
}
