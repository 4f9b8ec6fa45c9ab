//! An HTTP/1.1 upstream connection of the router's own, driven by the request that holds it
//! (no task, no channel, no timer): one request written with one vectored write, its response
//! head read (`h1_head`), then its body decoded straight from the connection's read buffer
//! (`h1_framing`) as the body (`driven`) is polled.
//!
//! hyper's client connection does the same exchange through a dispatcher, a body channel and
//! its own buffers: 7 % more instructions per request and 17 % more per stream
//! (`bench/profile.sh`, docs/measurements.md). This is what a request and its answer need of
//! HTTP/1.1 and no more. HTTP/2 stays on hyper (`pool`).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use http::Method;
use hyper_rustls::MaybeHttpsStream;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::io::poll_read_buf;

use crate::upstream::error::ExchangeError;
use crate::upstream::h1_framing::{Decoded, Framing, FramingError};
use crate::upstream::h1_head::{parse_response, ResponseHead};

/// What the connector hands over: TCP (or a proxy's tunnel), with TLS for `https`.
pub type ConnectorIo = MaybeHttpsStream<TokioIo<TcpStream>>;

/// The least free room in the read buffer before a read; it grows by [`READ_CHUNK`] below it.
const READ_ROOM: usize = 1024;
const READ_CHUNK: usize = 8 * 1024;

/// The connection's byte stream: plain TCP read directly, anything else (TLS, a proxy's
/// tunnel under TLS) through hyper's adapters (boxed: TLS state is a kilobyte).
enum Socket {
    Plain(TcpStream),
    Wrapped(Box<TokioIo<ConnectorIo>>),
}

/// One HTTP/1.1 connection to an upstream and what has been read from it but not yet used.
pub struct H1Conn {
    socket: Socket,
    read: BytesMut,
    /// The upstream closed it, it failed, or it sent what no request asked for.
    closed: bool,
}

/// An exchange that got no response head, and whether none of the request left (then it may
/// be sent again on another connection).
#[derive(Debug)]
pub struct Unanswered {
    pub error: ExchangeError,
    pub unsent: bool,
}

/// Why a body stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("reading the body failed: {0}")]
    Read(#[source] io::Error),
    #[error("{0}")]
    Framing(#[from] FramingError),
}

impl H1Conn {
    pub fn new(io: ConnectorIo) -> Self {
        let socket = match io {
            MaybeHttpsStream::Http(tcp) => Socket::Plain(tcp.into_inner()),
            other => Socket::Wrapped(Box::new(TokioIo::new(other))),
        };
        H1Conn {
            socket,
            read: BytesMut::new(),
            closed: false,
        }
    }

    /// Whether it has ended; false until `refresh` or an exchange saw it end.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Catches up, without waiting, with what happened while it sat idle: an upstream's close
    /// (or anything it sent unasked) ends it.
    pub fn refresh(&mut self) {
        if self.closed {
            return;
        }
        let mut unwoken = Context::from_waker(Waker::noop());
        match self.poll_fill(&mut unwoken) {
            Poll::Pending => {}
            Poll::Ready(_) => self.closed = true,
        }
    }

    /// The next bytes of the body framed by `framing` that is being read on this connection;
    /// `None` at its end (`framing` is then done). A body that cannot be read ends the
    /// connection.
    pub fn poll_body(
        &mut self,
        framing: &mut Framing,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, BodyError>>> {
        loop {
            match framing.decode(&mut self.read) {
                Ok(Decoded::Data(data)) => {
                    framing.end_if_buffered(&mut self.read);
                    return Poll::Ready(Some(Ok(data)));
                }
                Ok(Decoded::End) => return Poll::Ready(None),
                Ok(Decoded::NeedMore) => {}
                Err(error) => {
                    self.closed = true;
                    return Poll::Ready(Some(Err(error.into())));
                }
            }
            match std::task::ready!(self.poll_fill(cx)) {
                Ok(0) => {
                    self.closed = true;
                    return Poll::Ready(match framing.at_close() {
                        Ok(_) => None,
                        Err(error) => Some(Err(error.into())),
                    });
                }
                Ok(_) => {}
                Err(error) => {
                    self.closed = true;
                    return Poll::Ready(Some(Err(BodyError::Read(error))));
                }
            }
        }
    }

    /// Whether it can carry another request now: open, with nothing unasked-for buffered.
    pub fn is_reusable(&self) -> bool {
        !self.closed && self.read.is_empty()
    }

    /// Writes `head` and `body`, then reads the answer's head: the response to a `method`
    /// request. The connection comes back with the head, its body still to be read from it.
    /// An upstream may answer before it has read the whole request (a 413 or 401 to a large
    /// body) and stop reading, or close: that answer is read and returned, and the connection
    /// is not reused (the request did not all leave).
    pub async fn exchange(
        mut self,
        method: &Method,
        head: &[u8],
        body: &[u8],
    ) -> Result<(ResponseHead, H1Conn), Unanswered> {
        let mut written = 0;
        let sent =
            std::future::poll_fn(|cx| self.poll_send(cx, method, head, body, &mut written)).await;
        match sent {
            Ok(None) => {}
            Ok(Some(early)) => {
                self.closed = true;
                return Ok((early, self));
            }
            Err(error) => {
                let mut unwoken = Context::from_waker(Waker::noop());
                if let Some(early) = self.early_head(&mut unwoken, method) {
                    self.closed = true;
                    return Ok((early, self));
                }
                return Err(Unanswered {
                    error: ExchangeError::Write(error),
                    unsent: written == 0,
                });
            }
        }
        let head = std::future::poll_fn(|cx| self.poll_head(cx, method))
            .await
            .map_err(|error| Unanswered {
                error,
                unsent: false,
            })?;
        Ok((head, self))
    }

    /// [`Self::poll_write_all`]; while the write waits, a head the upstream already sent
    /// (`Some`) ends it.
    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        method: &Method,
        head: &[u8],
        body: &[u8],
        written: &mut usize,
    ) -> Poll<io::Result<Option<ResponseHead>>> {
        match self.poll_write_all(cx, head, body, written) {
            Poll::Ready(done) => Poll::Ready(done.map(|()| None)),
            Poll::Pending => match self.early_head(cx, method) {
                Some(early) => Poll::Ready(Ok(Some(early))),
                None => Poll::Pending,
            },
        }
    }

    /// A whole response head among what has arrived so far, read without waiting (a read
    /// that would wait registers `cx`); `None` when there is none yet, or only a broken one
    /// (then nothing more is read, so what an upstream sends cannot grow the buffer past a
    /// head's bound; the head's read names it once the request has gone).
    fn early_head(&mut self, cx: &mut Context<'_>, method: &Method) -> Option<ResponseHead> {
        loop {
            match parse_response(&mut self.read, method) {
                Ok(Some(head)) => return Some(head),
                Ok(None) => {}
                Err(_) => return None,
            }
            match self.poll_fill(cx) {
                Poll::Ready(Ok(read)) if read > 0 => {}
                _ => return None,
            }
        }
    }

    /// Writes what is left of `head` then `body` (`written` bytes of both have gone), and
    /// flushes.
    fn poll_write_all(
        &mut self,
        cx: &mut Context<'_>,
        head: &[u8],
        body: &[u8],
        written: &mut usize,
    ) -> Poll<io::Result<()>> {
        let total = head.len() + body.len();
        while *written < total {
            let slices = if *written < head.len() {
                [io::IoSlice::new(&head[*written..]), io::IoSlice::new(body)]
            } else {
                [
                    io::IoSlice::new(&body[*written - head.len()..]),
                    io::IoSlice::new(&[]),
                ]
            };
            let wrote =
                std::task::ready!(Pin::new(&mut self.socket).poll_write_vectored(cx, &slices))?;
            if wrote == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += wrote;
        }
        Pin::new(&mut self.socket).poll_flush(cx)
    }

    /// Reads until a whole response head is in the buffer.
    fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
        method: &Method,
    ) -> Poll<Result<ResponseHead, ExchangeError>> {
        loop {
            if let Some(head) = parse_response(&mut self.read, method)? {
                return Poll::Ready(Ok(head));
            }
            match std::task::ready!(self.poll_fill(cx)) {
                Ok(0) => {
                    self.closed = true;
                    return Poll::Ready(Err(ExchangeError::Closed));
                }
                Ok(_) => {}
                Err(error) => {
                    self.closed = true;
                    return Poll::Ready(Err(ExchangeError::Read(error)));
                }
            }
        }
    }

    /// Reads what the socket has into the buffer; `Ok(0)` when the upstream closed.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.read.capacity() - self.read.len() < READ_ROOM {
            self.read.reserve(READ_CHUNK);
        }
        poll_read_buf(Pin::new(&mut self.socket), cx, &mut self.read)
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Socket::Wrapped(io) => Pin::new(io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Socket::Wrapped(io) => Pin::new(io).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Socket::Wrapped(io) => Pin::new(io).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Socket::Plain(tcp) => tcp.is_write_vectored(),
            Socket::Wrapped(io) => io.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Socket::Wrapped(io) => Pin::new(io).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Socket::Wrapped(io) => Pin::new(io).poll_shutdown(cx),
        }
    }
}
