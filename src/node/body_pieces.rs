//! A body read piece by piece, joined once at its end: a body that came in one piece (most
//! do) is that piece, with no list and no copy; more pieces are copied into one buffer.

use bytes::{Bytes, BytesMut};

/// The pieces read so far.
#[derive(Debug, Default)]
pub struct BodyPieces {
    first: Option<Bytes>,
    /// The pieces after the first, in order; empty (never allocated) for a one-piece body.
    rest: Vec<Bytes>,
}

impl BodyPieces {
    /// Adds the next piece.
    pub fn push(&mut self, piece: Bytes) {
        match self.first {
            None => self.first = Some(piece),
            Some(_) => self.rest.push(piece),
        }
    }

    /// The whole body: the pieces in order.
    pub fn join(self) -> Bytes {
        let Some(first) = self.first else {
            return Bytes::new();
        };
        if self.rest.is_empty() {
            return first;
        }
        let total = first.len() + self.rest.iter().map(Bytes::len).sum::<usize>();
        let mut whole = BytesMut::with_capacity(total);
        whole.extend_from_slice(&first);
        for piece in &self.rest {
            whole.extend_from_slice(piece);
        }
        whole.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(pieces: &[&'static [u8]]) -> Bytes {
        let mut body = BodyPieces::default();
        for piece in pieces {
            body.push(Bytes::from_static(piece));
        }
        body.join()
    }

    #[test]
    fn the_pieces_join_in_order() {
        assert_eq!(joined(&[]), Bytes::new());
        assert_eq!(joined(&[b"{}"]), Bytes::from_static(b"{}"));
        assert_eq!(
            joined(&[b"{\"a\"", b":1", b"}"]),
            Bytes::from_static(b"{\"a\":1}")
        );
        assert_eq!(joined(&[b"", b"ab", b"", b"c"]), Bytes::from_static(b"abc"));
        assert_eq!(joined(&[b"ab", b""]), Bytes::from_static(b"ab"));
    }

    #[test]
    fn one_piece_is_that_piece_not_a_copy() {
        let piece = Bytes::from(vec![b'x'; 64]);
        let mut body = BodyPieces::default();
        body.push(piece.clone());
        assert_eq!(body.join().as_ptr(), piece.as_ptr());
    }
}
