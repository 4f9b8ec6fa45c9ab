//! The open upstream connections of one provider's client, by scheme and authority: HTTP/1.1
//! keep-alive connections (`h1_conn`), put back once the last response on them was read to the
//! end, idle ones polled when the host is next asked for one (a close is noticed then) and
//! dropped after [`IDLE_TIMEOUT`]; one multiplexed HTTP/2 connection (`hyper::client::conn`)
//! when ALPN chose h2, driven by a spawned task.
//!
//! A request costs a short lock, a scan of that host's few connections and two clock reads,
//! with no task or timer of its own.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::HeaderValue;
use http::uri::{Authority, Scheme};
use http::Uri;
use http_body_util::Full;
use hyper::client::conn::http2;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::Connection as _;
use hyper_util::rt::TokioExecutor;
use tower::ServiceExt as _;

use crate::upstream::egress::EgressConnector;
use crate::upstream::error::UpstreamError;
use crate::upstream::h1_conn::H1Conn;

/// How long a connection may sit unused before it is dropped instead of reused.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How many HTTP/1.1 connections one host keeps; one more is closed after its response.
pub const MAX_IDLE_PER_HOST: usize = 256;
/// How often a host's whole list is swept for closed and expired connections (at most; only
/// when the host is asked for a connection).
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// The request body every upstream request carries.
pub type Body = Full<Bytes>;
/// The connector under the pool: TCP (or a proxy's tunnel), then TLS for `https`.
pub type Connector = HttpsConnector<EgressConnector>;

/// A connection one request is about to be sent on.
pub enum Conn {
    /// An HTTP/1.1 connection, with the `Host` header its requests carry.
    Http1 {
        conn: H1Conn,
        host_header: HeaderValue,
    },
    /// A handle on the host's shared HTTP/2 connection.
    Http2(http2::SendRequest<Body>),
}

/// A connection handed out for one request, and where an HTTP/1.1 one goes back.
pub struct Lease {
    pub conn: Conn,
    /// Taken from the pool rather than opened for this request: a request it hands back unsent
    /// may be retried once on a fresh connection.
    pub reused: bool,
    pub host: HostId,
}

/// A host's place in the pool (hosts are never removed, so it stays valid).
#[derive(Debug, Clone, Copy)]
pub struct HostId(usize);

/// The pool of one provider's client.
pub struct Pool {
    connector: Connector,
    http2: http2::Builder<TokioExecutor>,
    idle_timeout: Duration,
    /// A provider talks to a handful of hosts (its base URL, a token endpoint): a list scanned
    /// by comparison is cheaper than hashing the authority.
    hosts: Mutex<Vec<Host>>,
}

/// The connections to one `scheme://authority`.
struct Host {
    scheme: Scheme,
    authority: Authority,
    /// `Host` for HTTP/1.1 requests: the authority without user info, its port only when not
    /// the scheme's default (as hyper-util's client wrote it).
    host_header: HeaderValue,
    http1: IdleList<H1Conn>,
    http2: Option<Shared>,
}

/// The host's HTTP/2 connection and when a request last went over it.
struct Shared {
    sender: http2::SendRequest<Body>,
    last_used: Instant,
}

impl Pool {
    pub fn new(connector: Connector) -> Self {
        Pool {
            connector,
            http2: http2::Builder::new(TokioExecutor::new()),
            idle_timeout: IDLE_TIMEOUT,
            hosts: Mutex::new(Vec::new()),
        }
    }

    /// An open connection to `scheme://authority` that can take a request now.
    pub fn checkout(&self, scheme: &Scheme, authority: &Authority) -> Option<Lease> {
        let now = Instant::now();
        let mut hosts = self.hosts();
        let index = hosts
            .iter()
            .position(|host| host.authority == *authority && host.scheme == *scheme)?;
        let host = &mut hosts[index];
        if let Some(shared) = &mut host.http2 {
            if !shared.sender.is_closed()
                && now.duration_since(shared.last_used) < self.idle_timeout
            {
                shared.last_used = now;
                return Some(Lease {
                    conn: Conn::Http2(shared.sender.clone()),
                    reused: true,
                    host: HostId(index),
                });
            }
            host.http2 = None;
        }
        let conn = host.http1.take(now, self.idle_timeout)?;
        Some(Lease {
            conn: Conn::Http1 {
                conn,
                host_header: host.host_header.clone(),
            },
            reused: true,
            host: HostId(index),
        })
    }

    /// Opens a new connection to `scheme://authority`: HTTP/2 when TLS's ALPN chose h2 (it
    /// becomes the host's shared one unless another opened meanwhile is still open, which is
    /// then used instead), HTTP/1.1 otherwise.
    pub async fn connect(
        &self,
        scheme: &Scheme,
        authority: &Authority,
    ) -> Result<Lease, UpstreamError> {
        let destination = Uri::builder()
            .scheme(scheme.clone())
            .authority(authority.clone())
            .path_and_query("/")
            .build()
            .map_err(|_| UpstreamError::NotAbsolute)?;
        let io = self
            .connector
            .clone()
            .oneshot(destination)
            .await
            .map_err(UpstreamError::Connect)?;
        if io.connected().is_negotiated_h2() {
            let (sender, connection) = self
                .http2
                .handshake(io)
                .await
                .map_err(UpstreamError::Handshake)?;
            tokio::spawn(drive_http2(connection));
            let now = Instant::now();
            let mut hosts = self.hosts();
            let index = host_index(&mut hosts, scheme, authority);
            let host = &mut hosts[index];
            let sender = match &mut host.http2 {
                Some(shared) if !shared.sender.is_closed() => {
                    shared.last_used = now;
                    shared.sender.clone()
                }
                _ => {
                    host.http2 = Some(Shared {
                        sender: sender.clone(),
                        last_used: now,
                    });
                    sender
                }
            };
            return Ok(Lease {
                conn: Conn::Http2(sender),
                reused: false,
                host: HostId(index),
            });
        }
        let conn = H1Conn::new(io);
        let mut hosts = self.hosts();
        let index = host_index(&mut hosts, scheme, authority);
        Ok(Lease {
            conn: Conn::Http1 {
                conn,
                host_header: hosts[index].host_header.clone(),
            },
            reused: false,
            host: HostId(index),
        })
    }

    /// Puts an HTTP/1.1 connection back once its response's body was read to the end.
    pub fn checkin(&self, host: HostId, conn: H1Conn) {
        let now = Instant::now();
        if let Some(host) = self.hosts().get_mut(host.0) {
            host.http1.put(conn, now);
        }
    }

    fn hosts(&self) -> MutexGuard<'_, Vec<Host>> {
        // A panic while holding the lock cannot leave the list half-changed: every change is
        // one push or one remove.
        self.hosts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs the host's HTTP/2 connection (its own task) until it ends: closed by either side, or
/// every handle on it dropped.
async fn drive_http2(connection: impl Future<Output = hyper::Result<()>>) {
    if let Err(error) = connection.await {
        tracing::debug!(%error, protocol = "HTTP/2", "upstream connection ended");
    }
}

/// Where `scheme://authority` is in `hosts`, added when new.
fn host_index(hosts: &mut Vec<Host>, scheme: &Scheme, authority: &Authority) -> usize {
    if let Some(index) = hosts
        .iter()
        .position(|host| host.authority == *authority && host.scheme == *scheme)
    {
        return index;
    }
    hosts.push(Host {
        scheme: scheme.clone(),
        authority: authority.clone(),
        host_header: host_header(scheme, authority),
        http1: IdleList::new(Instant::now()),
        http2: None,
    });
    hosts.len() - 1
}

/// The `Host` header for `authority`: its host, and its port when not `scheme`'s default.
fn host_header(scheme: &Scheme, authority: &Authority) -> HeaderValue {
    let default_port = if *scheme == Scheme::HTTPS { 443 } else { 80 };
    let value = match authority.port_u16() {
        Some(port) if port != default_port => format!("{}:{port}", authority.host()),
        _ => authority.host().to_string(),
    };
    // An authority is already a valid header value; the fallback is never reached.
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("localhost"))
}

/// What the idle list needs to know of a connection (a trait so its bookkeeping is tested
/// without sockets).
trait KeepAlive {
    /// Catches up with what happened on the socket while nobody held the connection (an
    /// upstream's close, the end of the last exchange), without waiting.
    fn refresh(&mut self) {}
    /// It can take a request now (HTTP/1.1: the previous response was read to the end).
    fn is_ready(&self) -> bool;
    /// Its connection has ended.
    fn is_closed(&self) -> bool;
}

impl KeepAlive for H1Conn {
    fn refresh(&mut self) {
        H1Conn::refresh(self);
    }
    // An HTTP/1.1 connection is put back only once its response was read to the end.
    fn is_ready(&self) -> bool {
        !H1Conn::is_closed(self)
    }
    fn is_closed(&self) -> bool {
        H1Conn::is_closed(self)
    }
}

/// One host's HTTP/1.1 connections that no request holds; most recently put back last.
struct IdleList<C> {
    parked: Vec<Parked<C>>,
    next_sweep: Instant,
}

struct Parked<C> {
    conn: C,
    /// When it was put back.
    since: Instant,
}

impl<C: KeepAlive> IdleList<C> {
    fn new(now: Instant) -> Self {
        IdleList {
            parked: Vec::new(),
            next_sweep: now + SWEEP_EVERY,
        }
    }

    /// The most recently used connection that is ready and not idle past `idle_timeout`;
    /// closed and expired ones met on the way are dropped.
    fn take(&mut self, now: Instant, idle_timeout: Duration) -> Option<C> {
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY;
            self.parked.retain_mut(|parked| {
                parked.conn.refresh();
                let expired =
                    parked.conn.is_ready() && now.duration_since(parked.since) >= idle_timeout;
                !parked.conn.is_closed() && !expired
            });
        }
        let mut index = self.parked.len();
        while index > 0 {
            index -= 1;
            let parked = &mut self.parked[index];
            parked.conn.refresh();
            if parked.conn.is_closed() {
                self.parked.remove(index);
            } else if parked.conn.is_ready() {
                let parked = self.parked.remove(index);
                if now.duration_since(parked.since) < idle_timeout {
                    return Some(parked.conn);
                }
            }
        }
        None
    }

    /// Keeps `conn` for reuse, unless the host already keeps [`MAX_IDLE_PER_HOST`] open ones
    /// (then it is dropped, which closes it).
    fn put(&mut self, conn: C, now: Instant) {
        if self.parked.len() >= MAX_IDLE_PER_HOST {
            self.parked.retain(|parked| !parked.conn.is_closed());
            if self.parked.len() >= MAX_IDLE_PER_HOST {
                return;
            }
        }
        self.parked.push(Parked { conn, since: now });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A connection whose state the test sets.
    #[derive(Clone)]
    struct Fake {
        id: u32,
        ready: Rc<Cell<bool>>,
        closed: Rc<Cell<bool>>,
    }

    impl Fake {
        fn new(id: u32) -> Self {
            Fake {
                id,
                ready: Rc::new(Cell::new(true)),
                closed: Rc::new(Cell::new(false)),
            }
        }
    }

    impl KeepAlive for Fake {
        fn is_ready(&self) -> bool {
            self.ready.get()
        }
        fn is_closed(&self) -> bool {
            self.closed.get()
        }
    }

    const IDLE: Duration = Duration::from_secs(90);

    fn at(start: Instant, seconds: u64) -> Instant {
        start + Duration::from_secs(seconds)
    }

    #[test]
    fn the_most_recent_ready_connection_is_reused_and_busy_ones_are_kept() {
        let start = Instant::now();
        let mut list = IdleList::new(start);
        let (a, b, c) = (Fake::new(1), Fake::new(2), Fake::new(3));
        list.put(a.clone(), start);
        list.put(b.clone(), at(start, 1));
        list.put(c.clone(), at(start, 2));
        c.ready.set(false); // still delivering its response body
        assert_eq!(list.take(at(start, 3), IDLE).map(|f| f.id), Some(2));
        assert_eq!(list.take(at(start, 3), IDLE).map(|f| f.id), Some(1));
        assert!(list.take(at(start, 3), IDLE).is_none(), "c is busy");
        c.ready.set(true);
        assert_eq!(list.take(at(start, 3), IDLE).map(|f| f.id), Some(3));
        assert!(list.take(at(start, 3), IDLE).is_none());
    }

    #[test]
    fn closed_connections_are_pruned_not_handed_out() {
        let start = Instant::now();
        let mut list = IdleList::new(start);
        let (a, b) = (Fake::new(1), Fake::new(2));
        list.put(a.clone(), start);
        list.put(b.clone(), start);
        b.closed.set(true);
        assert_eq!(list.take(start, IDLE).map(|f| f.id), Some(1));
        assert!(list.parked.is_empty(), "b was dropped on the way");
    }

    #[test]
    fn a_connection_idle_for_the_timeout_is_dropped_and_a_younger_one_kept() {
        let start = Instant::now();
        let mut list = IdleList::new(start);
        list.put(Fake::new(1), start);
        list.put(Fake::new(2), at(start, 50));
        // At 100 s: the first has been idle 100 s (dropped by the sweep), the second 50 s.
        assert_eq!(list.take(at(start, 100), IDLE).map(|f| f.id), Some(2));
        assert!(list.parked.is_empty());
        list.put(Fake::new(3), at(start, 100));
        assert_eq!(list.take(at(start, 189), IDLE).map(|f| f.id), Some(3));
        list.put(Fake::new(4), at(start, 189));
        assert!(
            list.take(at(start, 279), IDLE).is_none(),
            "idle exactly 90 s"
        );
        assert!(list.parked.is_empty());
    }

    #[test]
    fn a_busy_connection_is_not_expired_while_its_response_streams() {
        let start = Instant::now();
        let mut list = IdleList::new(start);
        let streaming = Fake::new(1);
        streaming.ready.set(false);
        list.put(streaming.clone(), start);
        assert!(list.take(at(start, 200), IDLE).is_none());
        assert_eq!(list.parked.len(), 1, "kept while its body is read");
    }

    #[test]
    fn a_host_keeps_at_most_max_idle_connections() {
        let start = Instant::now();
        let mut list = IdleList::new(start);
        for id in 0..MAX_IDLE_PER_HOST as u32 + 3 {
            list.put(Fake::new(id), start);
        }
        assert_eq!(list.parked.len(), MAX_IDLE_PER_HOST);
        // Once one has closed there is room again.
        list.parked[0].conn.closed.set(true);
        list.put(Fake::new(999), start);
        assert_eq!(list.parked.len(), MAX_IDLE_PER_HOST);
        assert_eq!(list.take(start, IDLE).map(|f| f.id), Some(999));
    }

    #[test]
    fn the_host_header_carries_only_a_port_that_is_not_the_default() {
        let header = |scheme: Scheme, authority: &str| {
            host_header(&scheme, &authority.parse().unwrap())
                .to_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(
            header(Scheme::HTTPS, "api.openai.com:443"),
            "api.openai.com"
        );
        assert_eq!(header(Scheme::HTTPS, "api.openai.com"), "api.openai.com");
        assert_eq!(header(Scheme::HTTP, "127.0.0.1:80"), "127.0.0.1");
        assert_eq!(header(Scheme::HTTP, "127.0.0.1:8080"), "127.0.0.1:8080");
        assert_eq!(header(Scheme::HTTPS, "vllm.corp:80"), "vllm.corp:80");
        assert_eq!(header(Scheme::HTTP, "user:secret@h.test:81"), "h.test:81");
        assert_eq!(header(Scheme::HTTP, "[::1]:8080"), "[::1]:8080");
    }
}
