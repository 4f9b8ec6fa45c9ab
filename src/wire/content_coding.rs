//! HTTP content codings (RFC 9110 §8.4): what a `Content-Encoding` header says, which of them
//! the router reads, and decoding a whole body in them (contract "Compression"). The codecs
//! are `async-compression`'s; this file only picks them and bounds what they may produce.
//! Streaming bodies are decoded by `upstream::body`, with the same [`Coding`] list.

use std::fmt;

use bytes::Bytes;
use http::header::{HeaderMap, CONTENT_ENCODING};
use tokio::io::{AsyncBufRead, AsyncRead, AsyncReadExt};

/// One content coding the router can decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    /// The zlib format (RFC 1950), which is what `deflate` means in HTTP; a raw deflate
    /// stream (some servers send one) is accepted too when a whole body is decoded.
    Deflate,
    Brotli,
    Zstd,
}

impl Coding {
    pub fn as_str(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
        }
    }

    fn from_token(token: &str) -> Option<Option<Coding>> {
        match token.to_ascii_lowercase().as_str() {
            "identity" | "" => Some(None),
            "gzip" | "x-gzip" => Some(Some(Coding::Gzip)),
            "deflate" => Some(Some(Coding::Deflate)),
            "br" => Some(Some(Coding::Brotli)),
            "zstd" => Some(Some(Coding::Zstd)),
            _ => None,
        }
    }
}

impl fmt::Display for Coding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodingError {
    #[error("unsupported Content-Encoding `{0}` (the router reads gzip, deflate, br and zstd)")]
    Unsupported(String),
    #[error("the body is not valid {coding} (Content-Encoding: {coding}): {detail}")]
    Corrupt { coding: Coding, detail: String },
    #[error("the body decodes to more than {limit} bytes")]
    TooLarge { limit: usize },
}

/// The codings applied to a body, in the order they were applied (RFC 9110: listed in that
/// order). Empty for identity or no header.
pub fn content_codings(headers: &HeaderMap) -> Result<Vec<Coding>, CodingError> {
    let mut codings = Vec::new();
    for value in headers.get_all(CONTENT_ENCODING) {
        let Ok(text) = value.to_str() else {
            return Err(CodingError::Unsupported(
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            ));
        };
        for token in text.split(',').map(str::trim) {
            match Coding::from_token(token) {
                Some(Some(coding)) => codings.push(coding),
                Some(None) => {}
                None => return Err(CodingError::Unsupported(token.to_string())),
            }
        }
    }
    Ok(codings)
}

/// `body` with `codings` undone (the last applied first), at most `limit` bytes of output.
pub async fn decode_body(
    body: Bytes,
    codings: &[Coding],
    limit: usize,
) -> Result<Bytes, CodingError> {
    let mut current = body;
    for &coding in codings.iter().rev() {
        current = decode_one(&current, coding, limit).await?;
    }
    Ok(current)
}

async fn decode_one(input: &[u8], coding: Coding, limit: usize) -> Result<Bytes, CodingError> {
    use async_compression::tokio::bufread as de;
    match coding {
        Coding::Gzip => read_bounded(de::GzipDecoder::new(input), coding, limit).await,
        Coding::Brotli => read_bounded(de::BrotliDecoder::new(input), coding, limit).await,
        Coding::Zstd => read_bounded(de::ZstdDecoder::new(input), coding, limit).await,
        Coding::Deflate if looks_like_zlib(input) => {
            read_bounded(de::ZlibDecoder::new(input), coding, limit).await
        }
        Coding::Deflate => read_bounded(de::DeflateDecoder::new(input), coding, limit).await,
    }
}

/// A zlib stream starts with a CMF/FLG pair: method 8, and the pair a multiple of 31.
pub fn looks_like_zlib(input: &[u8]) -> bool {
    match input {
        [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
        _ => false,
    }
}

async fn read_bounded<R: AsyncRead + Unpin>(
    decoder: R,
    coding: Coding,
    limit: usize,
) -> Result<Bytes, CodingError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    decoder
        .take(cap)
        .read_to_end(&mut out)
        .await
        .map_err(|error| corrupt(coding, &error))?;
    if out.len() > limit {
        return Err(CodingError::TooLarge { limit });
    }
    Ok(Bytes::from(out))
}

/// A decoder's error as a person reads it.
pub fn corrupt(coding: Coding, error: &std::io::Error) -> CodingError {
    let detail = match error.kind() {
        std::io::ErrorKind::UnexpectedEof => "it ends before the compressed data does".to_string(),
        _ => error.to_string(),
    };
    CodingError::Corrupt { coding, detail }
}

/// Wraps `reader` (compressed in `coding`) in its decoder, for streaming bodies.
pub fn stream_decoder<R>(reader: R, coding: Coding) -> Box<dyn AsyncRead + Send + Unpin>
where
    R: AsyncBufRead + Send + Unpin + 'static,
{
    use async_compression::tokio::bufread as de;
    match coding {
        Coding::Gzip => Box::new(de::GzipDecoder::new(reader)),
        Coding::Deflate => Box::new(de::ZlibDecoder::new(reader)),
        Coding::Brotli => Box::new(de::BrotliDecoder::new(reader)),
        Coding::Zstd => Box::new(de::ZstdDecoder::new(reader)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_compression::tokio::write as enc;
    use http::HeaderValue;
    use tokio::io::AsyncWriteExt;

    async fn encode(coding: Coding, plain: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match coding {
            Coding::Gzip => {
                let mut e = enc::GzipEncoder::new(&mut out);
                e.write_all(plain).await.unwrap();
                e.shutdown().await.unwrap();
            }
            Coding::Deflate => {
                let mut e = enc::ZlibEncoder::new(&mut out);
                e.write_all(plain).await.unwrap();
                e.shutdown().await.unwrap();
            }
            Coding::Brotli => {
                let mut e = enc::BrotliEncoder::new(&mut out);
                e.write_all(plain).await.unwrap();
                e.shutdown().await.unwrap();
            }
            Coding::Zstd => {
                let mut e = enc::ZstdEncoder::new(&mut out);
                e.write_all(plain).await.unwrap();
                e.shutdown().await.unwrap();
            }
        }
        out
    }

    fn headers(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static(value));
        headers
    }

    #[tokio::test]
    async fn every_coding_round_trips() {
        let plain = br#"{"id":"chatcmpl-1","usage":{"prompt_tokens":3}}"#.repeat(20);
        for coding in [Coding::Gzip, Coding::Deflate, Coding::Brotli, Coding::Zstd] {
            let packed = encode(coding, &plain).await;
            let out = decode_body(Bytes::from(packed), &[coding], 1 << 20)
                .await
                .unwrap();
            assert_eq!(&out[..], &plain[..], "{coding}");
        }
    }

    #[tokio::test]
    async fn raw_deflate_is_read_too() {
        let plain = b"{\"ok\":true}";
        let mut out = Vec::new();
        let mut e = enc::DeflateEncoder::new(&mut out);
        e.write_all(plain).await.unwrap();
        e.shutdown().await.unwrap();
        assert!(!looks_like_zlib(&out));
        let decoded = decode_body(Bytes::from(out), &[Coding::Deflate], 100)
            .await
            .unwrap();
        assert_eq!(&decoded[..], plain);
    }

    #[tokio::test]
    async fn stacked_codings_are_undone_last_first() {
        let plain = b"{\"a\":1}";
        let once = encode(Coding::Gzip, plain).await;
        let twice = encode(Coding::Brotli, &once).await;
        let codings = content_codings(&headers("gzip, br")).unwrap();
        assert_eq!(codings, vec![Coding::Gzip, Coding::Brotli]);
        let decoded = decode_body(Bytes::from(twice), &codings, 100)
            .await
            .unwrap();
        assert_eq!(&decoded[..], plain);
    }

    #[test]
    fn header_parsing_names_what_it_cannot_read() {
        assert_eq!(content_codings(&HeaderMap::new()).unwrap(), vec![]);
        assert_eq!(content_codings(&headers("identity")).unwrap(), vec![]);
        assert_eq!(
            content_codings(&headers("X-GZIP")).unwrap(),
            vec![Coding::Gzip]
        );
        let error = content_codings(&headers("gzip, compress")).unwrap_err();
        assert_eq!(error, CodingError::Unsupported("compress".into()));
        assert!(error.to_string().contains("`compress`"));
    }

    #[tokio::test]
    async fn truncated_and_mislabelled_bodies_are_clear_errors() {
        let packed = encode(Coding::Gzip, &b"{\"x\":\"hello hello hello\"}".repeat(50)).await;
        let truncated = Bytes::copy_from_slice(&packed[..packed.len() / 2]);
        let error = decode_body(truncated, &[Coding::Gzip], 1 << 20)
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "the body is not valid gzip (Content-Encoding: gzip): it ends before the compressed data does"
        );
        let plain = Bytes::from_static(b"{\"not\":\"compressed\"}");
        for coding in [Coding::Gzip, Coding::Deflate, Coding::Brotli, Coding::Zstd] {
            let error = decode_body(plain.clone(), &[coding], 1 << 20)
                .await
                .unwrap_err();
            assert!(
                matches!(error, CodingError::Corrupt { coding: c, .. } if c == coding),
                "{coding}: {error}"
            );
        }
    }

    #[tokio::test]
    async fn a_bomb_stops_at_the_limit() {
        let packed = encode(Coding::Gzip, &vec![b'a'; 1 << 20]).await;
        assert!(packed.len() < 4096);
        let error = decode_body(Bytes::from(packed), &[Coding::Gzip], 1000)
            .await
            .unwrap_err();
        assert_eq!(error, CodingError::TooLarge { limit: 1000 });
    }
}
