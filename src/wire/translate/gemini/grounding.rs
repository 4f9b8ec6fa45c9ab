//! Google Search grounding (behaviour §14, web search carried): a candidate's
//! `groundingMetadata` — `webSearchQueries`, `groundingChunks[].web {uri, title}` and
//! `groundingSupports[] {segment {startIndex, endIndex, text}, groundingChunkIndices}` — read
//! into the hub's searches and citations, and written from them. Google's segment indices are
//! UTF-8 bytes of the candidate's text (its text parts joined, as a client's `response.text`
//! joins them); the hub's are characters of one text part.

use serde_json::{json, Value};

use super::{array_of, at, str_of};
use crate::wire::translate::held_text::{byte_at_char, char_at_byte};
use crate::wire::translate::hub::form::{Answer, Citation, Part, SearchCall};

/// A span a support names (bytes of the joined text), its passage and one source of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Support {
    pub start: usize,
    pub end: usize,
    pub text: String,
    pub url: String,
    pub title: String,
}

/// `groundingChunks` as (url, title), by index (a chunk that is not a web page is `("", "")`,
/// so the supports' indices still point at theirs).
fn chunks(grounding: &Value) -> Vec<(String, String)> {
    array_of(grounding, "groundingChunks")
        .iter()
        .map(|chunk| {
            let web = at(chunk, "web").unwrap_or(&Value::Null);
            (
                str_of(web, "uri").to_owned(),
                str_of(web, "title").to_owned(),
            )
        })
        .collect()
}

/// The searches `grounding` says Google ran: one per query, the pages found with the first
/// (Google does not say which query found which page).
pub fn searches(grounding: &Value) -> Vec<SearchCall> {
    let results: Vec<(String, String)> = chunks(grounding)
        .into_iter()
        .filter(|(url, _)| !url.is_empty())
        .collect();
    let mut queries: Vec<&str> = array_of(grounding, "webSearchQueries")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if queries.is_empty() {
        if results.is_empty() {
            return Vec::new();
        }
        queries.push("");
    }
    queries
        .into_iter()
        .enumerate()
        .map(|(index, query)| SearchCall {
            id: format!("gs_{index}"),
            query: query.to_owned(),
            results: if index == 0 {
                results.clone()
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// The supports of `grounding`, one per (span, web source).
pub fn supports(grounding: &Value) -> Vec<Support> {
    let chunks = chunks(grounding);
    let index = |value: &Value, name: &str| {
        at(value, name)
            .and_then(Value::as_u64)
            .and_then(|at| usize::try_from(at).ok())
    };
    let mut supports = Vec::new();
    for support in array_of(grounding, "groundingSupports") {
        let segment = at(support, "segment").unwrap_or(&Value::Null);
        let Some(end) = index(segment, "endIndex") else {
            continue;
        };
        let start = index(segment, "startIndex").unwrap_or(0).min(end);
        for chunk in array_of(support, "groundingChunkIndices") {
            let Some((url, title)) = chunk
                .as_u64()
                .and_then(|at| usize::try_from(at).ok())
                .and_then(|at| chunks.get(at))
                .filter(|(url, _)| !url.is_empty())
            else {
                continue;
            };
            supports.push(Support {
                start,
                end,
                text: str_of(segment, "text").to_owned(),
                url: url.clone(),
                title: title.clone(),
            });
        }
    }
    supports
}

/// `supports` as the form's citations of the text parts `texts` ((index in the answer's
/// parts, text), in order): each lands in the part its span starts in, cut at that part's end.
pub fn citations(supports: &[Support], texts: &[(usize, &str)]) -> Vec<Citation> {
    let mut citations = Vec::new();
    for support in supports {
        let mut base = 0;
        for (part, text) in texts {
            let next = base + text.len();
            if support.start < next || (support.start == next && next == base) {
                citations.push(Citation {
                    part: *part,
                    start: char_at_byte(text, support.start - base),
                    end: char_at_byte(text, support.end.min(next) - base),
                    url: support.url.clone(),
                    title: support.title.clone(),
                    cited_text: Some(support.text.clone()).filter(|text| !text.is_empty()),
                });
                break;
            }
            base = next;
        }
    }
    citations
}

/// The answer's citations as supports: byte spans of its text parts joined.
pub fn answer_supports(answer: &Answer) -> Vec<Support> {
    let mut bases = Vec::with_capacity(answer.parts.len());
    let mut at = 0;
    for part in &answer.parts {
        bases.push(at);
        if let Part::Text(text) = part {
            at += text.len();
        }
    }
    answer
        .citations
        .iter()
        .filter_map(|citation| {
            let Some(Part::Text(text)) = answer.parts.get(citation.part) else {
                return None;
            };
            let base = *bases.get(citation.part)?;
            let start = byte_at_char(text, citation.start)?;
            let end = byte_at_char(text, citation.end.min(text.chars().count()))?.max(start);
            Some(Support {
                start: base + start,
                end: base + end,
                text: text.get(start..end).unwrap_or_default().to_owned(),
                url: citation.url.clone(),
                title: citation.title.clone(),
            })
        })
        .collect()
}

/// The index of `url` in `chunks`, added when new (its title filled in when first known:
/// OpenAI's sources have none, its citations do).
fn chunk_of<'a>(chunks: &mut Vec<(&'a str, &'a str)>, url: &'a str, title: &'a str) -> usize {
    match chunks.iter().position(|(known, _)| *known == url) {
        Some(index) => {
            if chunks[index].1.is_empty() {
                chunks[index].1 = title;
            }
            index
        }
        None => {
            chunks.push((url, title));
            chunks.len() - 1
        }
    }
}

/// A candidate's `groundingMetadata` for `searches` and `supports` (`None` when neither).
pub fn metadata(searches: &[SearchCall], supports: &[Support]) -> Option<Value> {
    if searches.is_empty() && supports.is_empty() {
        return None;
    }
    let mut chunks: Vec<(&str, &str)> = Vec::new();
    for search in searches {
        for (url, title) in &search.results {
            chunk_of(&mut chunks, url, title);
        }
    }
    // One support per span, with every source of it.
    let mut grouped: Vec<(&Support, Vec<usize>)> = Vec::new();
    for support in supports {
        let index = chunk_of(&mut chunks, &support.url, &support.title);
        match grouped
            .iter_mut()
            .find(|(s, _)| (s.start, s.end) == (support.start, support.end))
        {
            Some((_, indices)) => indices.push(index),
            None => grouped.push((support, vec![index])),
        }
    }
    let queries: Vec<&str> = searches
        .iter()
        .map(|search| search.query.as_str())
        .filter(|query| !query.is_empty())
        .collect();
    let chunks: Vec<Value> = chunks
        .iter()
        .map(|(uri, title)| json!({"web": {"uri": uri, "title": title}}))
        .collect();
    let supports: Vec<Value> = grouped
        .iter()
        .map(|(support, indices)| {
            json!({"segment": {"startIndex": support.start, "endIndex": support.end,
                               "text": support.text},
                   "groundingChunkIndices": indices})
        })
        .collect();
    Some(json!({
        "webSearchQueries": queries,
        "groundingChunks": chunks,
        "groundingSupports": supports,
    }))
}
