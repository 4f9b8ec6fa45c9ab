//! The mock's HTTP server: its own accept loop so every socket gets `TCP_NODELAY` and a fault
//! can reset a connection (RST) before any response byte.
//!
//! Owns sockets and connections only; what a request gets is `handler`'s business.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tower::ServiceExt;

use super::verdict::ResetConnection;

/// Accepts connections forever (abort the task to stop it).
pub(crate) async fn accept_loop(listener: TcpListener, app: Router) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve_connection(stream, app.clone()));
            }
            // Out of file descriptors and the like: back off instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

async fn serve_connection(stream: TcpStream, app: Router) {
    // Without it every small SSE write waits ~40 ms for a delayed ACK on loopback.
    let _ = stream.set_nodelay(true);
    // A second handle on the same socket, kept outside hyper, to reset it when a fault asks.
    let Ok(std_stream) = stream.into_std() else {
        return;
    };
    let Ok(reset_handle) = std_stream.try_clone() else {
        return;
    };
    let Ok(stream) = TcpStream::from_std(std_stream) else {
        return;
    };
    let reset = Arc::new(Notify::new());
    let reset_signal = reset.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let app = app.clone();
        let reset = reset_signal.clone();
        async move {
            let response = match app.oneshot(request.map(Body::new)).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            if response.extensions().get::<ResetConnection>().is_some() {
                reset.notify_one();
                std::future::pending::<()>().await;
            }
            Ok::<_, Infallible>(response)
        }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = connection => {}
        () = reset.notified() => {
            // SO_LINGER 0: closing the last handle sends RST instead of FIN.
            let _ = socket2::SockRef::from(&reset_handle).set_linger(Some(Duration::ZERO));
        }
    }
}
