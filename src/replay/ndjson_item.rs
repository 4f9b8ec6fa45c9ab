//! What replay reads, one item at a time: a readable envelope or a damaged record with where
//! it was; and the one parser of an NDJSON line into an item (files and `--from URL` alike).

use quotaroute_journal::{envelope_from_json, Envelope};

/// A record that could not be read, and where it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damaged {
    /// `seq 41` for a journal record, `line 12` for an NDJSON line.
    pub location: String,
    pub reason: String,
}

/// One readable envelope or one damaged record, in journal order.
pub type Item = Result<Envelope, Damaged>;

/// One NDJSON line as an item (`None` for a blank line).
pub fn parse_ndjson_line(line: &str, line_number: usize) -> Option<Item> {
    if line.trim().is_empty() {
        return None;
    }
    Some(envelope_from_json(line).map_err(|error| Damaged {
        location: format!("line {line_number}"),
        reason: error.to_string(),
    }))
}
