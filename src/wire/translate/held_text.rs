//! The open text block's text, held so a citation's span can be told in characters (the hub's
//! and OpenAI's indices) or in UTF-8 bytes (Gemini's `segment`), and the passage it cites read.
//! Bounded: past [`MAX_HELD_TEXT_BYTES`] the rest is counted, not held, and a span beyond what
//! is held cannot be converted (its citation is left out).

/// Most bytes of one text block held for its citations.
pub const MAX_HELD_TEXT_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Default)]
pub struct HeldText {
    text: String,
    /// Characters of the pieces not held (past the bound); the held ones are counted when a
    /// citation asks, not with every piece.
    unheld_chars: usize,
    /// Bytes in the block, held or not.
    bytes: usize,
    full: bool,
}

/// Room taken for a block's text at its first piece: a few growths, not one per doubling
/// from a piece's size.
const FIRST_ROOM: usize = 1024;

impl HeldText {
    /// A new block begins.
    pub fn clear(&mut self) {
        *self = HeldText::default();
    }

    pub fn push(&mut self, piece: &str) {
        self.bytes += piece.len();
        if !self.full && self.text.len() + piece.len() <= MAX_HELD_TEXT_BYTES {
            if self.text.capacity() == 0 {
                self.text.reserve(FIRST_ROOM.max(piece.len()));
            }
            self.text.push_str(piece);
        } else {
            self.full = true;
            self.unheld_chars += piece.chars().count();
        }
    }

    /// Characters in the block so far.
    pub fn chars(&self) -> usize {
        self.text.chars().count() + self.unheld_chars
    }

    /// Bytes in the block so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The character at byte `at` (a byte inside a character counts as that character).
    pub fn char_at_byte(&self, at: usize) -> Option<usize> {
        (at <= self.text.len()).then(|| char_at_byte(&self.text, at))
    }

    /// The byte where character `at` starts.
    pub fn byte_at_char(&self, at: usize) -> Option<usize> {
        byte_at_char(&self.text, at)
    }

    /// Characters `start..end` of the block, when held.
    pub fn slice(&self, start: usize, end: usize) -> Option<String> {
        let from = self.byte_at_char(start)?;
        let to = self.byte_at_char(end)?;
        self.text.get(from..to).map(str::to_owned)
    }
}

/// The character of `text` at byte `at` (clamped to its end).
pub fn char_at_byte(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text[..at].chars().count()
}

/// The byte of `text` where character `at` starts (its length for the end); `None` past it.
pub fn byte_at_char(text: &str, at: usize) -> Option<usize> {
    if at == 0 {
        return Some(0);
    }
    match text.char_indices().nth(at) {
        Some((byte, _)) => Some(byte),
        None => (text.chars().count() == at).then_some(text.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_convert_between_characters_and_bytes() {
        let mut held = HeldText::default();
        held.push("Zoë is ");
        held.push("🙂 here");
        assert_eq!((held.chars(), held.bytes()), (13, 17));
        assert_eq!(held.byte_at_char(3), Some(4));
        assert_eq!(held.char_at_byte(4), Some(3));
        assert_eq!(held.char_at_byte(9), Some(7), "inside 🙂 is 🙂");
        assert_eq!(held.slice(7, 13).as_deref(), Some("🙂 here"));
        assert_eq!(held.byte_at_char(14), None);
        assert_eq!(byte_at_char("ab", 2), Some(2));
        assert_eq!(char_at_byte("ab", 9), 2);
    }

    #[test]
    fn pieces_past_the_bound_are_counted_not_held() {
        let mut held = HeldText::default();
        let whole = "é".repeat(MAX_HELD_TEXT_BYTES / 2);
        held.push(&whole);
        held.push("ab🙂");
        assert_eq!(held.chars(), MAX_HELD_TEXT_BYTES / 2 + 3);
        assert_eq!(held.bytes(), MAX_HELD_TEXT_BYTES + 6);
        assert_eq!(held.slice(0, 2).as_deref(), Some("éé"));
        assert_eq!(
            held.byte_at_char(MAX_HELD_TEXT_BYTES / 2 + 1),
            None,
            "not held"
        );
    }
}
