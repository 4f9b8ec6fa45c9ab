//! An upstream response body as the router reads it: the bytes hyper delivers, or — when the
//! upstream answered with a `Content-Encoding` — those bytes decoded as they arrive, so a
//! compressed stream stays a stream (contract "Compression").
//!
//! Owns telling a broken connection (`Transport`) from a body that does not decode (`Decode`):
//! the first is a network failure, the second a `server_error` (behaviour §3).

use std::pin::Pin;

use bytes::Bytes;
use futures_util::{FutureExt, Stream, StreamExt, TryStreamExt};
use http_body_util::{BodyDataStream, BodyExt};
use tokio::io::BufReader;
use tokio_util::io::{ReaderStream, StreamReader};

use crate::upstream::driven::UpstreamIncoming;
use crate::wire::content_coding::{corrupt, stream_decoder, Coding, CodingError};

/// Why the next bytes of a body did not come.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("{0}")]
    Transport(String),
    #[error("{0}")]
    Decode(CodingError),
}

type DecodedStream = Pin<Box<dyn Stream<Item = Result<Bytes, BodyError>> + Send>>;

/// One upstream body, plain or decoded on the fly.
pub enum UpstreamBody {
    Plain(UpstreamIncoming),
    Decoded(DecodedStream),
}

/// Marks an I/O error that came from the connection, not from a decoder.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct TransportBroke(String);

impl UpstreamBody {
    /// `body`, decoded from `codings` (in the order they were applied) when there are any.
    pub fn new(body: UpstreamIncoming, codings: &[Coding]) -> Self {
        let Some(&outer) = codings.last() else {
            return UpstreamBody::Plain(body);
        };
        let data = BodyDataStream::new(body)
            .map_err(|error| std::io::Error::other(TransportBroke(error.to_string())));
        let mut reader: Box<dyn tokio::io::AsyncRead + Send + Unpin> =
            Box::new(StreamReader::new(data));
        for &coding in codings.iter().rev() {
            reader = stream_decoder(BufReader::new(reader), coding);
        }
        let decoded = ReaderStream::new(reader).map(move |item| {
            item.map_err(|error| {
                match error
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<TransportBroke>())
                {
                    Some(broke) => BodyError::Transport(broke.0.clone()),
                    None => BodyError::Decode(corrupt(outer, &error)),
                }
            })
        });
        UpstreamBody::Decoded(Box::pin(decoded))
    }

    /// The next bytes; `None` at the end. Trailers are skipped.
    pub async fn next_data(&mut self) -> Option<Result<Bytes, BodyError>> {
        match self {
            UpstreamBody::Plain(body) => loop {
                match body.frame().await? {
                    Ok(frame) => {
                        if let Ok(data) = frame.into_data() {
                            return Some(Ok(data));
                        }
                    }
                    Err(error) => return Some(Err(BodyError::Transport(error.to_string()))),
                }
            },
            UpstreamBody::Decoded(stream) => stream.next().await,
        }
    }

    /// The next bytes if they are already there (`None`: not yet).
    pub fn ready_data(&mut self) -> Option<Option<Result<Bytes, BodyError>>> {
        self.next_data().now_or_never()
    }
}
