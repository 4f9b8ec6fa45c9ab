//! Turning plain bytes into `Content-Encoding` bytes with async-compression's codecs: whole
//! bodies, and event streams compressed and flushed event by event so each event reaches the
//! client when it is sent (as a CDN streams gzip).
//!
//! Owns the byte transformation only; which encoding to use is `compression`'s, the headers are
//! `handler`'s.

use std::io;

use async_compression::tokio::write::{BrotliEncoder, GzipEncoder, ZlibEncoder, ZstdEncoder};
use async_compression::Level;
use axum::body::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::compression::Encoding;

/// Brotli's default (11) is for static assets; CDNs use a low quality for dynamic answers.
const BROTLI_QUALITY: i32 = 4;

/// One encoder writing into a buffer that is drained after every flush.
pub(crate) enum StreamEncoder {
    Gzip(GzipEncoder<Vec<u8>>),
    Deflate(ZlibEncoder<Vec<u8>>),
    /// Boxed: brotli's state is kilobytes, the others' a few hundred bytes.
    Br(Box<BrotliEncoder<Vec<u8>>>),
    Zstd(ZstdEncoder<Vec<u8>>),
}

impl StreamEncoder {
    pub(crate) fn new(encoding: Encoding) -> Self {
        match encoding {
            Encoding::Gzip => Self::Gzip(GzipEncoder::new(Vec::new())),
            Encoding::Deflate => Self::Deflate(ZlibEncoder::new(Vec::new())),
            Encoding::Br => Self::Br(Box::new(BrotliEncoder::with_quality(
                Vec::new(),
                Level::Precise(BROTLI_QUALITY),
            ))),
            Encoding::Zstd => Self::Zstd(ZstdEncoder::new(Vec::new())),
        }
    }

    fn writer(&mut self) -> &mut (dyn AsyncWrite + Unpin + Send) {
        match self {
            Self::Gzip(encoder) => encoder,
            Self::Deflate(encoder) => encoder,
            Self::Br(encoder) => encoder.as_mut(),
            Self::Zstd(encoder) => encoder,
        }
    }

    fn take_output(&mut self) -> Bytes {
        let buffer = match self {
            Self::Gzip(encoder) => encoder.get_mut(),
            Self::Deflate(encoder) => encoder.get_mut(),
            Self::Br(encoder) => encoder.get_mut(),
            Self::Zstd(encoder) => encoder.get_mut(),
        };
        Bytes::from(std::mem::take(buffer))
    }

    /// Compresses `data` and flushes the codec: the returned bytes decode to all of the input
    /// so far.
    pub(crate) async fn push(&mut self, data: &[u8]) -> io::Result<Bytes> {
        let writer = self.writer();
        writer.write_all(data).await?;
        writer.flush().await?;
        Ok(self.take_output())
    }

    /// Ends the compressed stream (trailer, checksum).
    pub(crate) async fn finish(&mut self) -> io::Result<Bytes> {
        self.writer().shutdown().await?;
        Ok(self.take_output())
    }
}

/// A whole body, compressed.
pub(crate) async fn compress(encoding: Encoding, body: &[u8]) -> io::Result<Bytes> {
    let mut encoder = StreamEncoder::new(encoding);
    let mut output = Vec::from(encoder.push(body).await?);
    output.extend_from_slice(&encoder.finish().await?);
    Ok(Bytes::from(output))
}

/// `frames`, compressed one by one with a flush after each; an error from `frames` is passed
/// on (after what was sent before it) and ends the stream.
pub(crate) fn compress_stream<S>(
    encoding: Encoding,
    frames: S,
) -> impl Stream<Item = io::Result<Bytes>> + Send
where
    S: Stream<Item = io::Result<Bytes>> + Send + Unpin,
{
    let start = Some((frames, StreamEncoder::new(encoding)));
    futures_util::stream::unfold(start, |state| async move {
        let (mut frames, mut encoder) = state?;
        match frames.next().await {
            Some(Ok(frame)) => match encoder.push(&frame).await {
                Ok(bytes) => Some((Ok(bytes), Some((frames, encoder)))),
                Err(error) => Some((Err(error), None)),
            },
            Some(Err(error)) => Some((Err(error), None)),
            None => Some((encoder.finish().await, None)),
        }
    })
}

/// `frames` gzipped with a flush after each, then cut: the first half of the events go out
/// whole, then part of the next compressed chunk, and the body ends without the gzip trailer.
pub(crate) async fn truncated_gzip_frames(frames: &[Bytes]) -> io::Result<Vec<Bytes>> {
    let mut encoder = StreamEncoder::new(Encoding::Gzip);
    let keep = frames.len().div_ceil(2).max(1);
    let mut chunks = Vec::new();
    for frame in frames.iter().take(keep) {
        chunks.push(encoder.push(frame).await?);
    }
    let next = match frames.get(keep) {
        Some(frame) => encoder.push(frame).await?,
        None => encoder.finish().await?,
    };
    // Always cut strictly inside the compressed data: never a complete member.
    let cut = next.len().saturating_sub(1) / 2;
    chunks.push(next.slice(..cut));
    Ok(chunks)
}

/// A whole body gzipped, then cut in the middle of its compressed data (the 10-byte gzip header
/// always survives).
pub(crate) async fn truncated_gzip(body: &[u8]) -> io::Result<Bytes> {
    let whole = compress(Encoding::Gzip, body).await?;
    const HEADER: usize = 10;
    let cut = HEADER + whole.len().saturating_sub(HEADER) / 2;
    Ok(whole.slice(..cut.min(whole.len().saturating_sub(1))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_compression::tokio::bufread::{BrotliDecoder, GzipDecoder, ZlibDecoder, ZstdDecoder};
    use tokio::io::AsyncReadExt;

    async fn decode(encoding: Encoding, bytes: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        match encoding {
            Encoding::Gzip => GzipDecoder::new(bytes).read_to_end(&mut out).await?,
            Encoding::Deflate => ZlibDecoder::new(bytes).read_to_end(&mut out).await?,
            Encoding::Br => BrotliDecoder::new(bytes).read_to_end(&mut out).await?,
            Encoding::Zstd => ZstdDecoder::new(bytes).read_to_end(&mut out).await?,
        };
        Ok(out)
    }

    #[tokio::test]
    async fn every_encoding_round_trips_whole_and_streamed() {
        let frames: Vec<Bytes> = (0..5)
            .map(|index| Bytes::from(format!("data: {{\"n\":{index}}}\n\n")))
            .collect();
        let plain: Vec<u8> = frames.concat();
        for encoding in Encoding::PREFERENCE {
            let whole = compress(encoding, &plain).await.unwrap();
            assert_eq!(decode(encoding, &whole).await.unwrap(), plain, "{encoding}");

            let source = futures_util::stream::iter(frames.clone().into_iter().map(Ok));
            let chunks: Vec<Bytes> = compress_stream(encoding, source)
                .map(|chunk| chunk.unwrap())
                .collect()
                .await;
            assert_eq!(chunks.len(), frames.len() + 1, "{encoding}");
            let joined = chunks.concat();
            assert_eq!(
                decode(encoding, &joined).await.unwrap(),
                plain,
                "{encoding}"
            );
        }
    }

    #[tokio::test]
    async fn truncated_gzip_has_a_header_and_does_not_decode() {
        let body = br#"{"id":"chatcmpl-mock-1","object":"chat.completion"}"#;
        let cut = truncated_gzip(body).await.unwrap();
        assert_eq!(&cut[..3], &[0x1f, 0x8b, 0x08]);
        assert!(decode(Encoding::Gzip, &cut).await.is_err());

        let frames: Vec<Bytes> = (0..4)
            .map(|index| Bytes::from(format!("data: {index}\n\n")))
            .collect();
        let cut = truncated_gzip_frames(&frames).await.unwrap().concat();
        assert_eq!(&cut[..2], &[0x1f, 0x8b]);
        assert!(decode(Encoding::Gzip, &cut).await.is_err());
    }
}
