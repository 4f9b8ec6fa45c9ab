//! How an HTTP/1.1 response body is framed (RFC 9112 §6.3, §7.1): no body, a known length,
//! chunked, or everything until the connection closes; and decoding what has arrived into the
//! body's data, sliced from the read buffer without a copy.

use bytes::{Buf, Bytes, BytesMut};

/// Longest chunk-size line (with its extensions) read before the body is called broken.
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Most trailer bytes read (and skipped) after the last chunk.
const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// One response body's framing, and how far its decoding has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    /// No body (`HEAD`, 1xx, 204, 304), or a body read to its end.
    Done,
    /// `content-length`: this many bytes are still to come.
    Length(u64),
    /// `transfer-encoding: chunked`.
    Chunked(Chunk),
    /// Neither: the body ends when the upstream closes the connection.
    UntilClose,
}

/// Where a chunked body's decoding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk's data: this many bytes are still to come.
    Data(u64),
    /// After a chunk's data, before its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one; this many trailer bytes so far.
    Trailers(usize),
}

/// What the buffered bytes gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// The body's next bytes.
    Data(Bytes),
    /// The body has ended.
    End,
    /// More bytes must be read first.
    NeedMore,
}

/// Why a body's framing could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("invalid chunk size line")]
    ChunkSize,
    #[error("chunk data not followed by CRLF")]
    ChunkEnd,
    #[error("chunk trailers over {MAX_TRAILER_BYTES} bytes")]
    Trailers,
    #[error("the connection closed before the body's end")]
    Incomplete,
}

impl Framing {
    /// The body starts with no more bytes expected.
    pub fn is_done(&self) -> bool {
        matches!(self, Framing::Done | Framing::Length(0))
    }

    /// The body's next piece from `buffer` (what it takes is removed from it).
    pub fn decode(&mut self, buffer: &mut BytesMut) -> Result<Decoded, FramingError> {
        match self {
            Framing::Done | Framing::Length(0) => {
                *self = Framing::Done;
                Ok(Decoded::End)
            }
            Framing::Length(left) => {
                if buffer.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                let take =
                    usize::try_from(*left).map_or(buffer.len(), |left| left.min(buffer.len()));
                *left -= take as u64;
                Ok(Decoded::Data(buffer.split_to(take).freeze()))
            }
            Framing::UntilClose => {
                if buffer.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                Ok(Decoded::Data(buffer.split().freeze()))
            }
            Framing::Chunked(chunk) => {
                let decoded = decode_chunked(chunk, buffer)?;
                if decoded == Decoded::End {
                    *self = Framing::Done;
                }
                Ok(decoded)
            }
        }
    }

    /// Ends a chunked body whose data has all been taken when `buffer` holds exactly its last
    /// chunk (no trailers): the end is then known with the last data, not one poll later, and
    /// the connection can go back at once. Anything else is left to [`Framing::decode`].
    pub fn end_if_buffered(&mut self, buffer: &mut BytesMut) {
        // After its last data a chunk stands before its CRLF (a read that ended inside a
        // chunk's data leaves no more bytes of the body buffered).
        if *self == Framing::Chunked(Chunk::DataEnd) && buffer[..] == *b"\r\n0\r\n\r\n" {
            buffer.clear();
            *self = Framing::Done;
        }
    }

    /// What the connection's close means for this body: its end when it was read until the
    /// close (or had already ended), else a body cut short.
    pub fn at_close(&mut self) -> Result<Decoded, FramingError> {
        match self {
            Framing::UntilClose | Framing::Done | Framing::Length(0) => {
                *self = Framing::Done;
                Ok(Decoded::End)
            }
            _ => Err(FramingError::Incomplete),
        }
    }
}

/// The next piece of a chunked body.
fn decode_chunked(chunk: &mut Chunk, buffer: &mut BytesMut) -> Result<Decoded, FramingError> {
    loop {
        match chunk {
            Chunk::Size => {
                let Some((text, line)) =
                    next_line(buffer, MAX_CHUNK_LINE, FramingError::ChunkSize)?
                else {
                    return Ok(Decoded::NeedMore);
                };
                let size = chunk_size(&buffer[..text])?;
                buffer.advance(line);
                *chunk = if size == 0 {
                    Chunk::Trailers(0)
                } else {
                    Chunk::Data(size)
                };
            }
            Chunk::Data(left) => {
                if buffer.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                let take =
                    usize::try_from(*left).map_or(buffer.len(), |left| left.min(buffer.len()));
                *left -= take as u64;
                if *left == 0 {
                    *chunk = Chunk::DataEnd;
                }
                return Ok(Decoded::Data(buffer.split_to(take).freeze()));
            }
            Chunk::DataEnd => match buffer.first() {
                None => return Ok(Decoded::NeedMore),
                Some(b'\n') => {
                    buffer.advance(1);
                    *chunk = Chunk::Size;
                }
                Some(b'\r') => match buffer.get(1) {
                    None => return Ok(Decoded::NeedMore),
                    Some(b'\n') => {
                        buffer.advance(2);
                        *chunk = Chunk::Size;
                    }
                    Some(_) => return Err(FramingError::ChunkEnd),
                },
                Some(_) => return Err(FramingError::ChunkEnd),
            },
            Chunk::Trailers(read) => {
                // The empty line that ends them is always allowed.
                let room = MAX_TRAILER_BYTES.saturating_sub(*read) + 2;
                let Some((text, line)) = next_line(buffer, room, FramingError::Trailers)? else {
                    return Ok(Decoded::NeedMore);
                };
                buffer.advance(line);
                if text == 0 {
                    return Ok(Decoded::End);
                }
                *read += line;
            }
        }
    }
}

/// The next line of `buffer`: the length of its text (without its line end: CRLF, or a bare LF
/// as RFC 9112 §2.2 allows) and of the whole line; `None` while it has not all arrived;
/// `too_long` when it is longer than `limit`. The caller reads the text in place, then
/// advances past the line.
fn next_line(
    buffer: &[u8],
    limit: usize,
    too_long: FramingError,
) -> Result<Option<(usize, usize)>, FramingError> {
    let Some(end) = memchr::memchr(b'\n', buffer) else {
        return if buffer.len() > limit {
            Err(too_long)
        } else {
            Ok(None)
        };
    };
    if end > limit {
        return Err(too_long);
    }
    let text = if end > 0 && buffer[end - 1] == b'\r' {
        end - 1
    } else {
        end
    };
    Ok(Some((text, end + 1)))
}

/// A chunk-size line's size: hex digits, then optional whitespace and `;` extensions, which
/// are ignored.
fn chunk_size(line: &[u8]) -> Result<u64, FramingError> {
    let digits = line
        .iter()
        .position(|byte| !byte.is_ascii_hexdigit())
        .unwrap_or(line.len());
    if digits == 0 || digits > 16 {
        return Err(FramingError::ChunkSize);
    }
    let rest = line[digits..].trim_ascii_start();
    if !rest.is_empty() && rest[0] != b';' {
        return Err(FramingError::ChunkSize);
    }
    let text = std::str::from_utf8(&line[..digits]).map_err(|_| FramingError::ChunkSize)?;
    u64::from_str_radix(text, 16).map_err(|_| FramingError::ChunkSize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` to `framing` in pieces of `step` bytes, as reads would deliver it; returns
    /// the body's bytes and whether it ended, and the bytes left after its end.
    fn feed(
        mut framing: Framing,
        wire: &[u8],
        step: usize,
    ) -> Result<(Vec<u8>, bool, Vec<u8>), FramingError> {
        let mut buffer = BytesMut::new();
        let mut body = Vec::new();
        let mut pieces = wire.chunks(step.max(1));
        loop {
            match framing.decode(&mut buffer)? {
                Decoded::Data(data) => {
                    assert!(!data.is_empty(), "no empty data frames");
                    body.extend_from_slice(&data);
                }
                Decoded::End => return Ok((body, true, buffer.to_vec())),
                Decoded::NeedMore => match pieces.next() {
                    Some(piece) => buffer.extend_from_slice(piece),
                    None => return Ok((body, false, buffer.to_vec())),
                },
            }
        }
    }

    const CHUNKED: &[u8] = b"5\r\nhello\r\n7;name=value\r\n, world\r\nA \r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";

    #[test]
    fn a_chunked_body_decodes_the_same_however_it_is_split() {
        for step in 1..CHUNKED.len() + 1 {
            let (body, ended, left) = feed(Framing::Chunked(Chunk::Size), CHUNKED, step).unwrap();
            assert_eq!(body, b"hello, world0123456789", "step {step}");
            assert!(ended, "step {step}");
            // What follows the body stays in the buffer (once it was read with the end).
            assert!(b"NEXT".starts_with(&left), "step {step}: {left:?}");
        }
    }

    #[test]
    fn bare_line_feeds_are_accepted_as_line_ends() {
        let (body, ended, _) = feed(Framing::Chunked(Chunk::Size), b"3\nabc\n0\n\n", 64).unwrap();
        assert_eq!(body, b"abc");
        assert!(ended);
    }

    #[test]
    fn broken_chunk_framing_is_an_error() {
        let bad: [&[u8]; 6] = [
            b"zz\r\n",
            b"\r\n",
            b"5 x\r\nhello\r\n",
            b"5\r\nhelloXX",
            b"11111111111111111\r\n",
            b"-5\r\n",
        ];
        for wire in bad {
            assert!(
                feed(Framing::Chunked(Chunk::Size), wire, 64).is_err(),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn an_endless_size_line_or_trailer_is_refused_not_buffered() {
        let endless = vec![b'1'; MAX_CHUNK_LINE + 10];
        assert_eq!(
            feed(Framing::Chunked(Chunk::Size), &endless, 1024).unwrap_err(),
            FramingError::ChunkSize
        );
        let mut trailers = b"0\r\n".to_vec();
        for _ in 0..2_000 {
            trailers.extend_from_slice(b"x-pad: 0123456789\r\n");
        }
        assert_eq!(
            feed(Framing::Chunked(Chunk::Size), &trailers, 1024).unwrap_err(),
            FramingError::Trailers
        );
    }

    #[test]
    fn a_buffered_last_chunk_ends_the_body_with_its_last_data() {
        let mut framing = Framing::Chunked(Chunk::Size);
        let mut buffer = BytesMut::from(&b"5\r\nhello\r\n0\r\n\r\n"[..]);
        assert_eq!(
            framing.decode(&mut buffer),
            Ok(Decoded::Data(Bytes::from_static(b"hello")))
        );
        framing.end_if_buffered(&mut buffer);
        assert!(framing.is_done() && buffer.is_empty());
        // With trailers, or more than the last chunk, the end is read the usual way.
        for wire in [
            &b"5\r\nhello\r\n0\r\nx: 1\r\n\r\n"[..],
            b"5\r\nhello\r\n0\r\n\r\nHTTP",
            b"5\r\nhello\r\n0\r\n",
        ] {
            let mut framing = Framing::Chunked(Chunk::Size);
            let mut buffer = BytesMut::from(wire);
            framing.decode(&mut buffer).unwrap();
            framing.end_if_buffered(&mut buffer);
            assert!(!framing.is_done(), "{wire:?}");
        }
    }

    #[test]
    fn trailers_up_to_their_bound_end_the_body() {
        // Trailer lines of exactly MAX_TRAILER_BYTES, then the empty line.
        let mut wire = b"1\r\na\r\n0\r\n".to_vec();
        let line = b"x-pad: 0123456789abcdef0123456789abcdef0123456789abcdef0123456\r\n";
        assert_eq!(MAX_TRAILER_BYTES % line.len(), 0);
        for _ in 0..MAX_TRAILER_BYTES / line.len() {
            wire.extend_from_slice(line);
        }
        wire.extend_from_slice(b"\r\n");
        let (body, ended, _) = feed(Framing::Chunked(Chunk::Size), &wire, 4096).unwrap();
        assert_eq!(body, b"a");
        assert!(ended);
    }

    #[test]
    fn a_length_body_takes_exactly_its_length() {
        for step in 1..12 {
            let (body, ended, left) = feed(Framing::Length(5), b"helloHTTP/1.1", step).unwrap();
            assert_eq!(body, b"hello");
            assert!(ended);
            assert!(b"HTTP/1.1".starts_with(&left));
        }
        let (body, ended, _) = feed(Framing::Length(0), b"", 1).unwrap();
        assert!(body.is_empty() && ended);
    }

    #[test]
    fn a_close_ends_only_a_body_read_until_close() {
        let (body, ended, _) = feed(Framing::UntilClose, b"all of it", 4).unwrap();
        assert_eq!(body, b"all of it");
        assert!(!ended, "only the close ends it");
        assert_eq!(Framing::UntilClose.at_close(), Ok(Decoded::End));
        assert_eq!(Framing::Length(3).at_close(), Err(FramingError::Incomplete));
        assert_eq!(
            Framing::Chunked(Chunk::Data(2)).at_close(),
            Err(FramingError::Incomplete)
        );
        assert_eq!(Framing::Length(0).at_close(), Ok(Decoded::End));
    }
}
