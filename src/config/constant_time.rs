//! Byte strings compared in time that does not depend on where they first differ (client keys,
//! secrets): eight bytes a step, each step's difference folded into one word behind a barrier,
//! and the word compared with `subtle`. Only the lengths show. `subtle`'s own byte-slice
//! comparison pays its barrier per byte, which is most of a request's key check.

use std::hint::black_box;

use subtle::ConstantTimeEq;

/// Bytes a step.
const WORD: usize = std::mem::size_of::<u64>();

/// Whether `a` and `b` are the same bytes, in time that depends only on their lengths.
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a_words, b_words) = (a.chunks_exact(WORD), b.chunks_exact(WORD));
    let (a_tail, b_tail) = (a_words.remainder(), b_words.remainder());
    let mut differ = 0u64;
    for (x, y) in a_words.zip(b_words) {
        let (x, y) = (word(x), word(y));
        // The barrier keeps the fold a fold: no step may be skipped once a difference is seen.
        differ = black_box(differ | (x ^ y));
    }
    for (x, y) in a_tail.iter().zip(b_tail) {
        differ = black_box(differ | u64::from(x ^ y));
    }
    differ.ct_eq(&0).into()
}

/// Eight bytes as one word (`chunks_exact` gives exactly eight).
fn word(bytes: &[u8]) -> u64 {
    let mut eight = [0u8; WORD];
    eight.copy_from_slice(bytes);
    u64::from_ne_bytes(eight)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `subtle`'s byte-slice comparison, the reference.
    fn reference(a: &[u8], b: &[u8]) -> bool {
        a.ct_eq(b).into()
    }

    #[test]
    fn agrees_with_subtle_on_every_length_and_every_differing_byte() {
        let key = b"sk-bench-c8d7427854b11a80aeb8552c991c023f4e33702e3de9935b0ca203e9ac307100";
        for len in 0..=key.len() {
            let a = &key[..len];
            assert!(bytes_eq(a, a), "{len}");
            assert_eq!(bytes_eq(a, a), reference(a, a));
            // Every byte changed in turn, by every bit: the first, a middle and the last word's
            // and the tail's bytes all count.
            for at in 0..len {
                for bit in 0..8 {
                    let mut b = a.to_vec();
                    b[at] ^= 1 << bit;
                    assert!(!bytes_eq(a, &b), "{len} at {at} bit {bit}");
                    assert_eq!(bytes_eq(a, &b), reference(a, &b));
                }
            }
            // Other lengths never match, a prefix included.
            for other in [0, len.saturating_sub(1), len + 1] {
                if other != len {
                    let b = &key[..other.min(key.len())];
                    if b.len() != a.len() {
                        assert!(!bytes_eq(a, b), "{len} against {other}");
                        assert_eq!(bytes_eq(a, b), reference(a, b));
                    }
                }
            }
        }
        assert!(!bytes_eq(b"", b"x"));
        assert!(bytes_eq(b"", b""));
    }
}
