//! The node's accept loop: hyper-util's HTTP/1.1 + HTTP/2 server with `TCP_NODELAY` on every
//! socket, bounded the way a gateway's edge must be (contract "Hostile input and bounds"): at
//! most `server.max_connections` open client connections (past it a new one is closed at once,
//! but for [`ADMIN_RESERVED_CONNECTIONS`] more kept for the operator: on those only the admin
//! API, `/healthz`, `/metrics` and `/ui` are served, any other request is answered 503 and the
//! connection closed — so `/admin` stays reachable when clients fill the limit),
//! `server.header_timeout_ms` from accept until the request head is read (a connection that
//! sends nothing, or stops inside its head, is closed; idle keep-alive connections close after
//! the same time), and graceful shutdown (stop accepting, let open connections finish their
//! requests), over TLS when the node serves HTTPS.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::node::app::AppState;
use crate::node::direct;
use crate::node::edge_counters::EdgeCounters;
use crate::node::known_key::KnownKey;
use crate::node::self_wake;
use crate::node::stop_watch::{Entry, StopWatch};

/// Largest request head (line + headers) a client may send: past it, 431.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// The first bytes of an HTTP/2 connection with prior knowledge (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Connections accepted past `max_connections` for the admin API alone (behaviour §11, #34:
/// at the limit the operator could not reach `/admin` or `/healthz` either).
pub const ADMIN_RESERVED_CONNECTIONS: usize = 16;

/// Whether `path` may be served on a connection of the admin reserve.
fn is_admin_path(path: &str) -> bool {
    path.starts_with("/admin/")
        || path == "/admin"
        || path == "/healthz"
        || path == "/metrics"
        || path == "/ui"
        || path.starts_with("/ui/")
}

/// The answer on an admin-reserve connection to anything but the admin API: 503, then closed.
fn reserve_refusal() -> axum::response::Response {
    let mut response = crate::node::reply::error_only(
        &crate::api_error::ApiError::new(
            crate::api_error::ApiErrorKind::NoAvailableTarget,
            "the node is at server.max_connections: this connection is kept for the admin API",
        ),
        false,
    );
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// The edge's bounds, from `[server]`.
#[derive(Debug, Clone, Copy)]
pub struct EdgeLimits {
    /// From accept until the request head is read; also the keep-alive idle time.
    pub header_timeout: Duration,
    /// Open client connections at most.
    pub max_connections: usize,
}

impl Default for EdgeLimits {
    fn default() -> Self {
        EdgeLimits {
            header_timeout: Duration::from_secs(10),
            max_connections: 4_096,
        }
    }
}

/// Serves `table` on `listener` until `stop` turns true, then waits for open connections to
/// finish (the caller bounds that wait); a routed POST is answered by `node::direct` with
/// `state` ahead of the table. With `tls`, every connection is HTTPS (HTTP/2 or HTTP/1.1 as
/// ALPN chose); its handshake must finish within the header timeout.
pub async fn serve(
    listener: TcpListener,
    table: axum::Router,
    state: AppState,
    mut stop: watch::Receiver<bool>,
    tls: Option<TlsAcceptor>,
    limits: EdgeLimits,
    counters: Arc<EdgeCounters>,
) {
    let shared = Shared {
        table,
        state,
        builder: connection_builder(limits),
        tls,
        counters,
        header_timeout: limits.header_timeout,
    };
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let admin_slots = Arc::new(Semaphore::new(ADMIN_RESERVED_CONNECTIONS));
    let stop_watch = StopWatch::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Past max_connections the newcomer is closed at once (unless the admin
                    // reserve has room: then only the admin API is served on it); the others
                    // go on.
                    let (slot, admin_only) = match slots.clone().try_acquire_owned() {
                        Ok(slot) => (slot, false),
                        Err(_) => match admin_slots.clone().try_acquire_owned() {
                            Ok(slot) => (slot, true),
                            Err(_) => {
                                shared.counters.refused.fetch_add(1, Ordering::Relaxed);
                                drop(stream);
                                continue;
                            }
                        },
                    };
                    // Without it every small SSE write waits ~40 ms for a delayed ACK.
                    let _ = stream.set_nodelay(true);
                    let connection = shared.clone();
                    let watched = stop_watch.enter();
                    // Its own wake-ups (hyper, the handler and the driven upstream connection
                    // wake each other) are repolled in place, not queued for a sibling worker.
                    tokio::spawn(self_wake::absorbing(async move {
                        let _slot = slot;
                        connection.serve_one(stream, admin_only, watched).await;
                    }));
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
            () = async { let _ = stop.wait_for(|stop| *stop).await; } => break,
        }
    }
    drop(listener);
    stop_watch.stop().await;
}

/// hyper-util's server for one accept loop: the header timeout and head bound on HTTP/1.1,
/// pings on HTTP/2.
fn connection_builder(limits: EdgeLimits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEADER_BYTES);
    // A peer that stops answering pings is gone: its connection closes.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(limits.header_timeout))
        .keep_alive_timeout(limits.header_timeout);
    builder
}

/// What every connection of one accept loop shares.
#[derive(Clone)]
struct Shared {
    table: axum::Router,
    state: AppState,
    builder: Builder<TokioExecutor>,
    tls: Option<TlsAcceptor>,
    counters: Arc<EdgeCounters>,
    header_timeout: Duration,
}

impl Shared {
    /// Serves one accepted connection until it closes (`admin_only`: a connection of the admin
    /// reserve); one that sends no first bytes, or finishes no TLS handshake, within the header
    /// timeout is closed and counted.
    async fn serve_one(self, stream: TcpStream, admin_only: bool, mut watched: Entry) {
        let Shared {
            table,
            state,
            builder,
            tls,
            counters,
            header_timeout,
        } = self;
        let reserve_counters = counters.clone();
        // The key this connection presented last: its next requests with it skip the hash.
        let known = Arc::new(KnownKey::default());
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let refused = admin_only && !is_admin_path(request.uri().path());
            if refused {
                reserve_counters.refused.fetch_add(1, Ordering::Relaxed);
            }
            let table = table.clone();
            let state = state.clone();
            let known = known.clone();
            async move {
                if refused {
                    return Ok(reserve_refusal());
                }
                let request = request.map(Body::new);
                match direct::route_of(&request) {
                    // Boxed: hyper moves the service's future twice, and the handler's is large
                    // (~10 KB); built in its box rather than moved into it.
                    Some(route) => {
                        let answer = built_in_box(|| direct::answer(state, route, request, known));
                        Ok(answer.await)
                    }
                    None => table.oneshot(request).await,
                }
            }
        });
        counters.open.fetch_add(1, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + header_timeout;
        match tls {
            None => {
                // hyper-util reads the first bytes to tell HTTP/2 from HTTP/1.1 with no
                // deadline of its own: wait for them here.
                match watched.unless_stopped(first_bytes(&stream, deadline)).await {
                    Some(true) => {
                        let connection =
                            builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                        let _ = watched
                            .watch(connection.into_owned(), |connection| {
                                connection.graceful_shutdown();
                            })
                            .await;
                    }
                    Some(false) => {
                        counters.timed_out.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {}
                }
            }
            Some(acceptor) => {
                let handshake = tokio::time::timeout_at(deadline, acceptor.accept(stream));
                match watched.unless_stopped(handshake).await {
                    Some(Ok(Ok(stream))) => {
                        // ALPN already chose the protocol: no sniffing.
                        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                        let builder = if h2 {
                            builder.http2_only()
                        } else {
                            builder.http1_only()
                        };
                        let connection =
                            builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                        let _ = watched
                            .watch(connection.into_owned(), |connection| {
                                connection.graceful_shutdown();
                            })
                            .await;
                    }
                    Some(_) => {
                        counters.timed_out.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {}
                }
            }
        }
        counters.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The future `make` builds, in a box allocated before it is built. `Box::pin(make())` builds
/// it on the stack and copies all of its bytes into the box (the allocation can unwind between
/// the two, so the stack copy must stay whole); built after the allocation, only the bytes its
/// first state holds (the arguments) are written.
#[inline(always)]
fn built_in_box<F: std::future::Future>(make: impl FnOnce() -> F) -> std::pin::Pin<Box<F>> {
    let slot = Box::<F>::new_uninit();
    Box::into_pin(Box::write(slot, make()))
}

/// Whether enough of the connection's first bytes arrived by `deadline` to tell its protocol:
/// anything that is not a prefix of the HTTP/2 preface, or the whole preface. A peer that
/// closes first, or sends nothing, is `false`.
async fn first_bytes(stream: &TcpStream, deadline: tokio::time::Instant) -> bool {
    let mut seen = [0u8; H2_PREFACE.len()];
    loop {
        let peeked = match tokio::time::timeout_at(deadline, stream.peek(&mut seen)).await {
            Ok(Ok(peeked)) => peeked,
            Ok(Err(_)) | Err(_) => return false,
        };
        if peeked == 0 {
            return false;
        }
        if peeked == H2_PREFACE.len() || !H2_PREFACE.starts_with(&seen[..peeked]) {
            return true;
        }
        // Part of the preface: peek returns the same bytes until more come, so wait a little.
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Pending connections the kernel queues before the node accepts them (capped by
/// `net.core.somaxconn`): a burst past it costs each dropped client a 1 s SYN retry.
const LISTEN_BACKLOG: u32 = 4_096;

/// The node's listening socket (`SO_REUSEADDR`, a deep backlog).
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Raises the open-files soft limit to the hard limit, so `max_connections` sockets plus the
/// journal, key files and upstream connections fit; logs both.
pub fn raise_open_files_limit() {
    match rlimit::Resource::NOFILE.get() {
        Ok((soft, hard)) => {
            let raised = if soft < hard {
                rlimit::Resource::NOFILE.set(hard, hard).is_ok()
            } else {
                false
            };
            let now = if raised { hard } else { soft };
            tracing::info!(soft = now, hard, was = soft, "open-files limit");
        }
        Err(error) => tracing::warn!(%error, "cannot read the open-files limit"),
    }
}
