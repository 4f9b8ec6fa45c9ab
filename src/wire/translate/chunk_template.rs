//! A stream's text chunks read at the cost of a byte comparison: most chunks of a stream are
//! the last text chunk's bytes with other values (its text, a count, a sequence number, an
//! id). The first text chunk a shape accepts (`text_delta`, walked by `json_scan`) is kept as
//! a template: its bytes, with its strings and numbers as holes. A later chunk whose bytes
//! outside the holes are the template's, and whose holes each hold one value of the same kind,
//! is the same JSON but for those values, so the shape reads it the same way but for them:
//! they are read, the rest is compared. Keys, literals and every string the shape compares
//! (a `type`) stay in the compared bytes. Any other chunk is walked as before, and may become
//! the template. A chunk read through it also gives the bytes of generated text the relay
//! counts of it (`content_bytes`), when the template's counted member is its text.

use std::borrow::Cow;

use crate::wire::content_bytes::{content_member_at, string_bytes};
use crate::wire::json_scan::{plain, Hole, HoleKind, Scan};
use crate::wire::stream_format::StreamFormat;

/// How many times one stream learns a template (a stream whose chunks never repeat stops
/// paying for the learning).
const MAX_LEARNT: u8 = 8;

/// A text chunk as the shape read it: its bytes, their open values, and `base`, what the
/// shape read from the bytes outside them.
#[derive(Debug)]
pub struct Template<B> {
    bytes: Box<[u8]>,
    holes: Box<[Hole]>,
    /// For each hole, the first hole from it a fill stops at (the number of holes: none), so
    /// a fill finds its next stop without looking. Until the template is [tuned], the stops
    /// are the values the shape reads (texts and counts); after, its texts and the values
    /// that differed in the chunk it was tuned on.
    ///
    /// [tuned]: Template::tune
    next_read: Box<[usize]>,
    /// The counts by slot the template's bytes hold where a fill no longer stops (steady
    /// holes): a chunk with the same bytes there holds the same count.
    steady: [Option<u64>; 4],
    /// Whether the stops were chosen from a chunk that filled the template.
    tuned: bool,
    /// The one hole a tuned template stops at, when that is a text and it stops at nothing
    /// else but [`Template::number_after`]: a chunk that is the template's bytes around
    /// another string there (most) is read without walking the holes
    /// ([`Template::fill_text_alone`]).
    text_alone: Option<usize>,
    /// The one other hole a template of [`Template::text_alone`] stops at, when there is one:
    /// a number after the text that differs chunk by chunk (a Responses stream's
    /// `sequence_number`), passed over as the walk passes it over.
    number_after: Option<usize>,
    base: B,
    counted: Counted,
}

/// The most holes a template is tuned with (one bit each of a `u64`).
const MAX_TUNED_HOLES: usize = 64;

/// For each hole, the first hole from it that `stops` (the number of holes: none).
fn next_stops(holes: &[Hole], stops: impl Fn(usize, &Hole) -> bool) -> Box<[usize]> {
    let mut next_read = vec![holes.len(); holes.len()];
    let mut read = holes.len();
    for (at, hole) in holes.iter().enumerate().rev() {
        if stops(at, hole) {
            read = at;
        }
        if let Some(slot) = next_read.get_mut(at) {
            *slot = read;
        }
    }
    next_read.into()
}

/// Which string of the template `content_bytes` counts (the first member of its protocol's
/// content names with a string value). A chunk that fills the template has the same members,
/// with values of the same kinds, so that search finds the same member in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// None: 0 bytes.
    Nothing,
    /// The first text the shape reads.
    FirstText,
    /// Another (the relay searches the chunk itself).
    Elsewhere,
}

/// The values of a chunk that matched a template, read as the shape reads them there.
#[derive(Debug, Default)]
pub struct Filled<'a> {
    /// The first [`HoleKind::Text`] string (most shapes have one: no list to allocate).
    pub first: Option<Cow<'a, str>>,
    /// The others, in order.
    pub more: Vec<Cow<'a, str>>,
    /// The [`HoleKind::Count`] numbers by slot (`None`: no hole there).
    pub counts: [Option<u64>; 4],
    /// The bytes of generated text `content_bytes::content_text_bytes` counts of the chunk
    /// (with the protocol the template was learnt for); `None`: not known here.
    pub content_bytes: Option<usize>,
}

impl<'a> Filled<'a> {
    fn text(&mut self, text: Cow<'a, str>) {
        match self.first {
            None => self.first = Some(text),
            Some(_) => self.more.push(text),
        }
    }

    /// Every text, in order (moved, not copied into a new list).
    pub fn into_texts(self) -> Texts<'a> {
        Texts {
            first: self.first,
            more: self.more,
        }
    }
}

/// A chunk's texts in order: the first apart from the others, so a chunk of one text (most)
/// needs no list.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Texts<'a> {
    first: Option<Cow<'a, str>>,
    more: Vec<Cow<'a, str>>,
}

impl<'a> Texts<'a> {
    /// `text` after the others.
    pub fn push(&mut self, text: Cow<'a, str>) {
        match self.first {
            None => self.first = Some(text),
            Some(_) => self.more.push(text),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Every text, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Cow<'a, str>> {
        self.first.iter().chain(&self.more)
    }
}

impl<'a> IntoIterator for Texts<'a> {
    type Item = Cow<'a, str>;
    type IntoIter =
        std::iter::Chain<std::option::IntoIter<Cow<'a, str>>, std::vec::IntoIter<Cow<'a, str>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.more)
    }
}

impl<'a> FromIterator<Cow<'a, str>> for Texts<'a> {
    fn from_iter<I: IntoIterator<Item = Cow<'a, str>>>(texts: I) -> Self {
        let mut all = Texts::default();
        for text in texts {
            all.push(text);
        }
        all
    }
}

/// How many bytes `a` and `b` begin with alike (eight compared a step).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let mut at = 0;
    while let (Some(x), Some(y)) = (a.get(at..at + 8), b.get(at..at + 8)) {
        let (Ok(x), Ok(y)) = (<[u8; 8]>::try_from(x), <[u8; 8]>::try_from(y)) else {
            break;
        };
        let differ = u64::from_le_bytes(x) ^ u64::from_le_bytes(y);
        if differ != 0 {
            return at + (differ.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + a
        .get(at..)
        .unwrap_or_default()
        .iter()
        .zip(b.get(at..).unwrap_or_default())
        .take_while(|(x, y)| x == y)
        .count()
}

impl<B: Copy> Template<B> {
    /// `data`'s open values, and the template's `base`, when `data` is the template's bytes
    /// with other values of the same kinds in its holes; `None` otherwise (nothing read).
    pub fn fill<'a>(&self, data: &'a str, filled: &mut Filled<'a>) -> Option<B> {
        self.fill_noting::<false>(data, filled, &mut 0)
    }

    /// [`Template::fill`] of a chunk that is the template's bytes before and after its one
    /// stop ([`Template::text_alone`]) with one string between them (and another plain number
    /// in [`Template::number_after`]): read as the walk of the holes reads it (it compares the
    /// same bytes and reads the same string), without the walk. `None` (nothing read) for any
    /// other chunk, which the walk reads.
    fn fill_text_alone<'a>(&self, data: &'a str, filled: &mut Filled<'a>) -> Option<B> {
        let (text, content_bytes) = self.text_alone_of(data)?;
        filled.counts = self.steady;
        filled.content_bytes = content_bytes;
        filled.text(text);
        Some(self.base)
    }

    /// The text of a chunk [`Template::fill_text_alone`] takes, and the content bytes it
    /// gives for it.
    fn text_alone_of<'a>(&self, data: &'a str) -> Option<(Cow<'a, str>, Option<usize>)> {
        let hole = self.holes.get(self.text_alone?)?;
        let before = self.bytes.get(..hole.start)?;
        let bytes = data.as_bytes();
        let text_end = match self.number_after {
            None => {
                let after = self.bytes.get(hole.end..)?;
                if !bytes.ends_with(after) {
                    return None;
                }
                bytes.len().checked_sub(after.len())?
            }
            Some(number) => self.before_number(bytes, hole.end, number)?,
        };
        if text_end <= before.len() || !bytes.starts_with(before) {
            return None;
        }
        // Between the quotes, a string with no escape (most) is its own bytes; one with
        // escapes is read as the walk reads it.
        let inside = before.len() + 1..text_end - 1;
        let text = match (
            bytes.get(before.len()),
            bytes.get(text_end - 1),
            data.get(inside),
        ) {
            (Some(b'"'), Some(b'"'), Some(inside)) if plain(inside.as_bytes()) => {
                Cow::Borrowed(inside)
            }
            _ => {
                let mut scan = Scan::new(data);
                scan.at = before.len();
                let text = scan.string()?;
                if scan.at != text_end {
                    return None;
                }
                text
            }
        };
        let content_bytes = match self.counted {
            Counted::Nothing => Some(0),
            Counted::FirstText => Some(match &text {
                // No escape: the bytes counted are the text's own.
                Cow::Borrowed(text) => text.len(),
                Cow::Owned(_) => string_bytes(bytes.get(before.len() + 1..)?),
            }),
            Counted::Elsewhere => None,
        };
        Some((text, content_bytes))
    }

    /// Where the text of a chunk ends that ends as the template does from the end of its text
    /// (`text_end`, in the template), with another number in hole `number`: the template's
    /// bytes between the text and the number, a number the walk reads there (1 to 18 digits,
    /// no leading zero: `Scan::plain_count`), the template's bytes after it. `None`: any other
    /// chunk (the walk reads it).
    fn before_number(&self, bytes: &[u8], text_end: usize, number: usize) -> Option<usize> {
        let number = self.holes.get(number)?;
        let between = self.bytes.get(text_end..number.start)?;
        let after = self.bytes.get(number.end..)?;
        let number_end = bytes.len().checked_sub(after.len())?;
        if !bytes.ends_with(after) {
            return None;
        }
        let head = bytes.get(..number_end)?;
        let digits = head.iter().rev().take_while(|b| b.is_ascii_digit()).count();
        let number_start = number_end - digits;
        if digits == 0 || digits > 18 || (digits > 1 && head.get(number_start) == Some(&b'0')) {
            return None;
        }
        let head = head.get(..number_start)?;
        if !head.ends_with(between) {
            return None;
        }
        head.len().checked_sub(between.len())
    }

    /// [`Template::fill`]; with `NOTE`, each hole whose bytes differ from the template's
    /// (below [`MAX_TUNED_HOLES`]) gets its bit set in `differed`.
    fn fill_noting<'a, const NOTE: bool>(
        &self,
        data: &'a str,
        filled: &mut Filled<'a>,
        differed: &mut u64,
    ) -> Option<B> {
        let bytes = data.as_bytes();
        let mut scan = Scan::new(data);
        let mut from = 0;
        let mut next = 0;
        if self.tuned {
            // (An untuned template has no steady counts: nothing to copy.)
            filled.counts = self.steady;
        }
        filled.content_bytes = (self.counted == Counted::Nothing).then_some(0);
        loop {
            // Up to the next value the shape reads (or the end), the values passed over are
            // mostly the template's own (ids, a model, indices): one comparison when they are,
            // else one from each value that differs on.
            let read = match self.next_read.get(next) {
                Some(&read) if read < self.holes.len() => Some(read),
                _ => None,
            };
            let stop = match read {
                Some(read) => self.holes.get(read)?.start,
                None => self.bytes.len(),
            };
            let stretch_end = read.unwrap_or(self.holes.len());
            loop {
                let run = self.bytes.get(from..stop)?;
                let rest = bytes.get(scan.at..)?;
                if rest.starts_with(run) {
                    scan.at += run.len();
                    break;
                }
                // The first byte that differs is in a value passed over (another value of
                // its kind, read and passed over), else the chunk is another.
                let differs = from + common_prefix(run, rest);
                let offset = self
                    .holes
                    .get(next..stretch_end)?
                    .iter()
                    .position(|hole| hole.end >= differs)?;
                let hole = *self.holes.get(next + offset)?;
                if hole.start > differs {
                    return None;
                }
                scan.at += hole.start - from;
                match hole.kind {
                    HoleKind::String | HoleKind::Text => scan.string().map(drop)?,
                    // A steady count that differs here: this chunk's is read.
                    HoleKind::Count(slot) => {
                        let count = match scan.plain_count() {
                            Some(count) => count,
                            None => scan.number()??,
                        };
                        *filled.counts.get_mut(usize::from(slot))? = Some(count)
                    }
                    HoleKind::Number => match scan.plain_count() {
                        Some(_) => {}
                        None => scan.number().map(drop)?,
                    },
                }
                if NOTE {
                    *differed |= 1u64.checked_shl((next + offset) as u32).unwrap_or(0);
                }
                from = hole.end;
                next += offset + 1;
            }
            let Some(read) = read else {
                return (scan.at == bytes.len()).then_some(self.base);
            };
            let hole = *self.holes.get(read)?;
            let value_start = scan.at;
            match hole.kind {
                HoleKind::Count(slot) => {
                    let count = match scan.plain_count() {
                        Some(count) => count,
                        None => scan.number()??,
                    };
                    *filled.counts.get_mut(usize::from(slot))? = Some(count)
                }
                // A value passed over that a tuned template stops at (it differs chunk by
                // chunk): read and passed over where it is, as when it differs below.
                HoleKind::String => scan.string().map(drop)?,
                HoleKind::Number => match scan.plain_count() {
                    Some(_) => {}
                    None => scan.number().map(drop)?,
                },
                HoleKind::Text => {
                    let quote = scan.at;
                    let text = scan.string()?;
                    if filled.first.is_none() && self.counted == Counted::FirstText {
                        filled.content_bytes = Some(match &text {
                            // No escape: the bytes counted are the text's own.
                            Cow::Borrowed(text) => text.len(),
                            Cow::Owned(_) => string_bytes(bytes.get(quote + 1..)?),
                        });
                    }
                    filled.text(text)
                }
            }
            if NOTE && bytes.get(value_start..scan.at) != self.bytes.get(hole.start..hole.end) {
                *differed |= 1u64.checked_shl(read as u32).unwrap_or(0);
            }
            from = hole.end;
            next = read + 1;
        }
    }
}

impl<B> Template<B> {
    /// The stops chosen from a chunk that filled the template, `differed` its holes whose
    /// bytes differed and `counts` its counts: a fill stops at the texts and at the values
    /// that differed (read where they are, not found from a comparison that fails on them),
    /// and passes over the counts that did not, which read as the template's own unless a
    /// chunk's bytes differ there. Counts that share a slot stay stops (the last one read
    /// fills it).
    fn tune(&mut self, differed: u64, counts: [Option<u64>; 4]) {
        self.tuned = true;
        if self.holes.len() > MAX_TUNED_HOLES {
            return;
        }
        let mut slots_seen = 0u8;
        let mut shared_slot = false;
        for hole in self.holes.iter() {
            if let HoleKind::Count(slot) = hole.kind {
                let bit = 1u8.checked_shl(u32::from(slot)).unwrap_or(0);
                shared_slot |= bit == 0 || slots_seen & bit != 0;
                slots_seen |= bit;
            }
        }
        let differs = |at: usize| differed & (1u64 << at) != 0;
        let stops = |at: usize, hole: &Hole| match hole.kind {
            HoleKind::Text => true,
            HoleKind::Count(_) => shared_slot || differs(at),
            HoleKind::String | HoleKind::Number => differs(at),
        };
        let mut steady = [None; 4];
        for (at, hole) in self.holes.iter().enumerate() {
            if let HoleKind::Count(slot) = hole.kind {
                if !stops(at, hole) {
                    *steady.get_mut(usize::from(slot)).unwrap_or(&mut None) =
                        counts.get(usize::from(slot)).copied().flatten();
                }
            }
        }
        self.next_read = next_stops(&self.holes, stops);
        self.steady = steady;
        // The first stop, when it is a text and the last, or the last but a number after it.
        let stop_after = |at: usize| {
            let next = self.next_read.get(at + 1).copied();
            next.filter(|&next| next < self.holes.len())
        };
        let kind = |at: usize| self.holes.get(at).map(|hole| hole.kind);
        let text = self.next_read.first().copied();
        let text = text.filter(|&at| kind(at) == Some(HoleKind::Text));
        (self.text_alone, self.number_after) = match text.map(|at| (at, stop_after(at))) {
            Some((at, None)) => (Some(at), None),
            Some((at, Some(number)))
                if kind(number) == Some(HoleKind::Number) && stop_after(number).is_none() =>
            {
                (Some(at), Some(number))
            }
            _ => (None, None),
        };
    }
}

/// A stream's template of one shape, learnt from the chunks it reads.
#[derive(Debug)]
pub struct Learned<B> {
    template: Option<Template<B>>,
    learnt: u8,
    /// [`Filled::content_bytes`] of the last chunk [`Learned::read`] took through the
    /// template (`None` after one it did not).
    content_bytes: Option<usize>,
    /// The template's base, when the last chunk [`Learned::read`] took went through it.
    read_base: Option<B>,
}

impl<B> Default for Learned<B> {
    fn default() -> Self {
        Learned {
            template: None,
            learnt: 0,
            content_bytes: None,
            read_base: None,
        }
    }
}

impl<B: Copy> Learned<B> {
    /// `data` read through the template: its values and the template's base, or `None` when it
    /// does not match (or there is none yet).
    pub fn fill<'a>(&self, data: &'a str, filled: &mut Filled<'a>) -> Option<B> {
        self.template.as_ref()?.fill(data, filled)
    }

    /// [`Learned::fill`], its content bytes kept for [`Learned::content_bytes`].
    /// The first chunk it takes through a template tunes the template's stops to that
    /// chunk ([`Template::tune`]).
    pub fn read<'a>(&mut self, data: &'a str, filled: &mut Filled<'a>) -> Option<B> {
        let base = match self.template.as_mut() {
            None => None,
            Some(template) if template.tuned => template
                .fill_text_alone(data, filled)
                .or_else(|| template.fill(data, filled)),
            Some(template) => {
                let mut differed = 0;
                let base = template.fill_noting::<true>(data, filled, &mut differed);
                if base.is_some() {
                    template.tune(differed, filled.counts);
                }
                base
            }
        };
        self.content_bytes = base.and(filled.content_bytes);
        self.read_base = base;
        base
    }

    /// [`Learned::read`] of a chunk its tuned template takes as its one text alone
    /// ([`Template::fill_text_alone`]): that text (the first the `Filled` would hold), with no
    /// `Filled` to gather it. `None` for any other chunk: nothing was read (nor kept), and
    /// [`Learned::read`] reads it.
    pub fn read_text_alone<'a>(&mut self, data: &'a str) -> Option<Cow<'a, str>> {
        let template = self.template.as_ref()?;
        let (text, content_bytes) = template.text_alone_of(data)?;
        self.content_bytes = content_bytes;
        self.read_base = Some(template.base);
        Some(text)
    }

    /// The template's base, when the last chunk [`Learned::read`] was asked for was read
    /// through it (what the shape read outside its holes holds for that chunk too).
    pub fn read_base(&self) -> Option<B> {
        self.read_base
    }

    /// The bytes of generated text `content_bytes::content_text_bytes` counts of the last
    /// chunk [`Learned::read`] was asked for, when it was read through the template and they
    /// are known there.
    pub fn content_bytes(&self) -> Option<usize> {
        self.content_bytes
    }

    /// A scan of `data` that records its holes while this stream may still learn.
    pub fn scan<'a>(&self, data: &'a str) -> Scan<'a> {
        if self.learnt < MAX_LEARNT {
            Scan::recording(data)
        } else {
            Scan::new(data)
        }
    }

    /// `scan` (of `data`, a chunk of `format`) was accepted by the shape, which read `base`
    /// outside its holes: it becomes the template, when it was recorded.
    pub fn learn(&mut self, data: &str, scan: Scan<'_>, base: B, format: StreamFormat) {
        if self.learnt >= MAX_LEARNT {
            return;
        }
        self.learnt += 1;
        let holes: Box<[Hole]> = scan.holes().into();
        let first_text = holes.iter().find(|hole| hole.kind == HoleKind::Text);
        let counted = match content_member_at(format, data.as_bytes()) {
            None => Counted::Nothing,
            Some(at) if first_text.is_some_and(|hole| hole.start + 1 == at) => Counted::FirstText,
            Some(_) => Counted::Elsewhere,
        };
        let next_read = next_stops(&holes, |_, hole| {
            matches!(hole.kind, HoleKind::Text | HoleKind::Count(_))
        });
        self.template = Some(Template {
            bytes: data.as_bytes().into(),
            holes,
            next_read,
            steady: [None; 4],
            tuned: false,
            text_alone: None,
            number_after: None,
            base,
            counted,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::translate::text_delta::{messages_text_in, responses_text_in};

    /// What a fill read: its base and every value of the `Filled`.
    type Read<'a> = (
        Option<()>,
        Option<Cow<'a, str>>,
        Vec<Cow<'a, str>>,
        [Option<u64>; 4],
        Option<usize>,
    );

    fn read<'a>(fill: impl FnOnce(&mut Filled<'a>) -> Option<()>) -> Read<'a> {
        let mut filled = Filled::default();
        let base = fill(&mut filled);
        (
            base,
            filled.first,
            filled.more,
            filled.counts,
            filled.content_bytes,
        )
    }

    /// An Anthropic text delta's template, learnt from one chunk and tuned on another.
    fn anthropic_template() -> Learned<()> {
        let delta = |text: &str| {
            format!(
                r#"{{"type":"content_block_delta","index":1,"delta":{{"type":"text_delta","text":"{text}"}}}}"#
            )
        };
        let mut learned = Learned::default();
        let first = delta("This");
        let mut walk = learned.scan(&first);
        assert_eq!(messages_text_in(&mut walk).as_deref(), Some("This"));
        learned.learn(&first, walk, (), StreamFormat::Anthropic);
        let second = delta(" is");
        assert!(learned.read(&second, &mut Filled::default()).is_some());
        learned
    }

    /// A tuned template whose one stop is a text reads every chunk by its bytes around it as
    /// the walk of its holes reads it (the same values, or the same refusal), and takes the
    /// chunks of that shape with another string there without the walk.
    #[test]
    fn a_text_alone_is_read_as_the_walk_reads_it() {
        let mut learned = anthropic_template();
        assert!(learned.template.as_ref().unwrap().text_alone.is_some());
        let head =
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"#;
        let taken = [
            "\" a\"",
            "\"\"",
            "\"é 🦀 a longer piece of text than a word\"",
            "\"quoted \\\"q\\\" \\\\ and \\n\"",
            "\"\\u00e9\\/\"",
            "\"\\\\\"",
        ];
        let walked = [
            // Another shape, or not JSON: the walk decides.
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_deltx","index":1,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}} "#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text": "x"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}]"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"]}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x" }"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"a"b"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ab\"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\ud83e\udd80"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":1}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"#,
            "",
        ];
        let control = format!("{head}\"a\u{1}b\"}}}}");
        let chunks: Vec<String> = taken
            .iter()
            .map(|text| format!("{head}{text}}}}}"))
            .chain(walked.iter().map(|chunk| chunk.to_string()))
            .chain([control])
            .collect();
        for (at, chunk) in chunks.iter().enumerate() {
            let template = learned.template.as_ref().unwrap();
            let walk = read(|filled| template.fill(chunk, filled));
            let alone = read(|filled| template.fill_text_alone(chunk, filled));
            if alone.0.is_some() {
                assert_eq!(alone, walk, "{chunk}");
            }
            if at < taken.len() {
                assert!(alone.0.is_some(), "{chunk}");
            }
            // Without a `Filled`: the same text, and what `read` keeps of it.
            let (before_bytes, before_base) = (learned.content_bytes(), learned.read_base());
            let text = learned.read_text_alone(chunk);
            assert_eq!(text, alone.1, "{chunk}");
            match text {
                Some(_) => {
                    assert_eq!(learned.content_bytes(), alone.4, "{chunk}");
                    assert_eq!(learned.read_base(), Some(()), "{chunk}");
                }
                None => {
                    assert_eq!(learned.content_bytes(), before_bytes, "{chunk}");
                    assert_eq!(learned.read_base(), before_base, "{chunk}");
                }
            }
        }
    }

    /// A Responses text delta (its text, then a `sequence_number` that differs each chunk).
    fn responses_delta(text: &str, sequence: &str) -> String {
        format!(
            r#"{{"content_index":0,"delta":{text},"item_id":"msg_1","output_index":1,"sequence_number":{sequence},"type":"response.output_text.delta"}}"#
        )
    }

    /// A Responses text delta's template, learnt from one chunk and tuned on the next.
    fn responses_template() -> Learned<()> {
        let mut learned = Learned::default();
        let first = responses_delta("\"This\"", "4");
        let mut walk = learned.scan(&first);
        assert_eq!(responses_text_in(&mut walk).as_deref(), Some("This"));
        learned.learn(&first, walk, (), StreamFormat::OpenAiResponses);
        let second = responses_delta("\" is\"", "5");
        assert!(learned.read(&second, &mut Filled::default()).is_some());
        learned
    }

    /// A tuned template whose stops are a text and a number after it reads every chunk by its
    /// bytes around them as the walk of its holes reads it (the same values, or the same
    /// refusal), and takes the chunks with another string and another plain number there
    /// without the walk.
    #[test]
    fn a_text_then_a_number_is_read_as_the_walk_reads_it() {
        let mut learned = responses_template();
        let template = learned.template.as_ref().unwrap();
        assert!(template.text_alone.is_some() && template.number_after.is_some());
        let texts = [
            "\" a\"",
            "\"\"",
            "\"é 🦀 a longer piece of text than a word\"",
            "\"quoted \\\"q\\\" \\\\ and \\n\"",
            "\"\\u00e9\\/\"",
            "\"\\\\\"",
            // What comes between the text and the number, inside the text.
            "\"x\\\",\\\"item_id\\\":\\\"msg_1\\\"\"",
            "\",\\\"item_id\\\":\"",
        ];
        let numbers = ["0", "6", "69", "123456789012345678"];
        let mut taken: Vec<String> = Vec::new();
        for text in texts {
            for number in numbers {
                taken.push(responses_delta(text, number));
            }
        }
        let mut walked: Vec<String> = [
            "-1",
            "1.5",
            "1e5",
            "1E5",
            "01",
            "00",
            "1234567890123456789",
            " 5",
            "5 ",
            "",
            "\"5\"",
            "null",
            "-0",
        ]
        .iter()
        .map(|number| responses_delta("\"x\"", number))
        .collect();
        walked.extend(
            [
                "\"a\"b\"",
                "\"ab\\\"",
                "\"\\ud83e\\udd80\"",
                "\"",
                "1",
                "",
                "\"a\",\"item_id\":\"msg_1\"",
                "\"a\u{1}b\"",
            ]
            .iter()
            .map(|text| responses_delta(text, "7")),
        );
        walked.extend([
            // Another shape, or not JSON: the walk decides.
            r#"{"content_index":0,"delta":"x","item_id":"msg_2","output_index":1,"sequence_number":7,"type":"response.output_text.delta"}"#.to_string(),
            r#"{"content_index":0,"delta":"x","item_id":"msg_1","output_index":1,"sequence_number":7,"type":"response.output_text.deltx"}"#.to_string(),
            r#"{"content_index":0,"delta":"x","item_id":"msg_1","output_index":1,"sequence_number":7,"type":"response.output_text.delta"} "#.to_string(),
            r#"{"content_index":0,"delta":"x","item_id":"msg_1","output_index":1,"sequence_number":7,"type":"response.output_text.delta"}}"#.to_string(),
            r#"{"content_index":0,"delta":"x","item_id":"msg_1","output_index":1,"sequence_number":7,"type":"response.output_text.delta""#.to_string(),
            r#"{"content_index":0,"delta":"x","item_id":"msg_1","output_index":1,"sequence_number":"#.to_string(),
            r#"{"content_index":0,"delta":"x","item_id":"msg_1","output_index":1,"sequence_number":7,"sequence_number":7,"type":"response.output_text.delta"}"#.to_string(),
            r#"{"content_index":0,"delta":"x","item_id":"msg_1","output_index":1,"sequence_number":,"type":"response.output_text.delta"}"#.to_string(),
            r#"{"content_index":0,"delta":"x","item_id":"msg_1","output_index":17,"type":"response.output_text.delta"}"#.to_string(),
            String::new(),
        ]);
        for (at, chunk) in taken.iter().chain(&walked).enumerate() {
            let template = learned.template.as_ref().unwrap();
            let walk = read(|filled| template.fill(chunk, filled));
            let alone = read(|filled| template.fill_text_alone(chunk, filled));
            if alone.0.is_some() {
                assert_eq!(alone, walk, "{chunk}");
            }
            assert_eq!(alone.0.is_some(), at < taken.len(), "{chunk}");
            // Through `read`: the same as the walk, and what it keeps of it.
            let mut filled = Filled::default();
            let base = learned.read(chunk, &mut filled);
            assert_eq!(base, walk.0, "{chunk}");
            assert_eq!(filled.first, walk.1, "{chunk}");
            assert_eq!(learned.content_bytes(), walk.0.and(walk.4), "{chunk}");
        }
        // The last chunk taken was that shape's: the walked ones between did not retune it.
        let template = learned.template.as_ref().unwrap();
        assert!(template.text_alone.is_some() && template.number_after.is_some());
    }

    /// A template whose stops after its text are two, or one that is no number, has no text
    /// alone: the walk reads its chunks.
    #[test]
    fn a_text_then_more_than_one_number_or_a_string_is_walked() {
        let delta = |text: &str, item: &str, sequence: &str| {
            format!(
                r#"{{"delta":"{text}","item_id":"{item}","sequence_number":{sequence},"type":"response.output_text.delta"}}"#
            )
        };
        // The item id changes with the sequence number, or alone.
        for sequence in ["2", "1"] {
            let mut learned = Learned::default();
            let first = delta("a", "m1", "1");
            let mut walk = learned.scan(&first);
            assert!(responses_text_in(&mut walk).is_some());
            learned.learn(&first, walk, (), StreamFormat::OpenAiResponses);
            assert!(learned
                .read(&delta("b", "m2", sequence), &mut Filled::default())
                .is_some());
            assert_eq!(learned.template.as_ref().unwrap().text_alone, None);
        }
    }

    #[test]
    fn a_common_prefix_is_counted_across_and_within_eight_byte_steps() {
        let text = b"{\"usageMetadata\":{\"totalTokenCount\":33}}";
        for at in 0..text.len() {
            let mut other = text.to_vec();
            other[at] = b'#';
            assert_eq!(common_prefix(text, &other), at);
            assert_eq!(common_prefix(&other, text), at);
        }
        assert_eq!(common_prefix(text, text), text.len());
        assert_eq!(common_prefix(text, &text[..20]), 20);
        assert_eq!(common_prefix(b"", text), 0);
    }
}
