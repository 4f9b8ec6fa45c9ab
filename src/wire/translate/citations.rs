//! Web search results and citations between the APIs (behaviour §14, "web search carried …
//! with results and citations in the client's shape"): Anthropic's `server_tool_use` +
//! `web_search_tool_result` blocks and text `citations` ↔ OpenAI's `web_search_call` items
//! and `url_citation` annotations (Responses `output_text.annotations`, Chat
//! `message.annotations`). Readers fill the form's `searches` and `citations` (spans in
//! characters of one text part); writers place them where each API wants them.

use serde_json::{json, Value};

use super::hub::form::{Answer, Citation, Part, SearchCall};
use super::hub::{array_at, str_at};

/// Anthropic's answer `content` blocks that are web search: the searches with their results.
pub fn read_anthropic_searches(content: &[Value]) -> Vec<SearchCall> {
    let mut searches: Vec<SearchCall> = content
        .iter()
        .filter(|block| str_at(block, "type") == "server_tool_use")
        .map(|block| SearchCall {
            id: str_at(block, "id").to_owned(),
            query: block
                .pointer("/input/query")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            results: Vec::new(),
        })
        .collect();
    for block in content {
        if str_at(block, "type") != "web_search_tool_result" {
            continue;
        }
        let results = array_at(block, "content")
            .iter()
            .filter(|result| str_at(result, "type") == "web_search_result")
            .map(|result| {
                (
                    str_at(result, "url").to_owned(),
                    str_at(result, "title").to_owned(),
                )
            });
        let id = str_at(block, "tool_use_id");
        if let Some(search) = searches.iter_mut().find(|search| search.id == id) {
            search.results.extend(results);
        }
    }
    searches
}

/// The citations of an Anthropic text block that became the form's part `part`: each cites
/// the whole block.
pub fn read_anthropic_citations(block: &Value, part: usize, text: &str) -> Vec<Citation> {
    let end = text.chars().count();
    array_at(block, "citations")
        .iter()
        .filter(|citation| !str_at(citation, "url").is_empty())
        .map(|citation| Citation {
            part,
            start: 0,
            end,
            url: str_at(citation, "url").to_owned(),
            title: str_at(citation, "title").to_owned(),
            cited_text: citation
                .get("cited_text")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
        .collect()
}

/// A Responses `web_search_call` output item.
pub fn read_responses_search(item: &Value) -> SearchCall {
    SearchCall {
        id: str_at(item, "id").to_owned(),
        query: item
            .pointer("/action/query")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        results: item
            .pointer("/action/sources")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|source| {
                (
                    str_at(source, "url").to_owned(),
                    str_at(source, "title").to_owned(),
                )
            })
            .collect(),
    }
}

/// The `url_citation` annotations of a Responses message item whose `output_text` parts,
/// joined, became the form's part `part`.
pub fn read_responses_citations(item: &Value, part: usize) -> Vec<Citation> {
    let mut citations = Vec::new();
    let mut offset = 0;
    for content in array_at(item, "content") {
        // Counted as `responses::read::message_text` joins them.
        let text = match str_at(content, "type") {
            "refusal" => str_at(content, "refusal"),
            _ => str_at(content, "text"),
        };
        for annotation in array_at(content, "annotations") {
            if let Some(citation) = url_citation(annotation, part, offset) {
                citations.push(citation);
            }
        }
        offset += text.chars().count();
    }
    citations
}

/// A Chat Completions message's `annotations`, for its text, the form's part `part`.
pub fn read_chat_citations(message: &Value, part: usize) -> Vec<Citation> {
    array_at(message, "annotations")
        .iter()
        .filter_map(|annotation| {
            let inner = annotation.get("url_citation").unwrap_or(annotation);
            url_citation(inner, part, 0)
        })
        .collect()
}

/// One `url_citation` (Responses' flat shape, or Chat's inner object), shifted by `offset`.
fn url_citation(annotation: &Value, part: usize, offset: usize) -> Option<Citation> {
    let index = |name: &str| {
        annotation
            .get(name)
            .and_then(Value::as_u64)
            .and_then(|at| usize::try_from(at).ok())
    };
    let url = str_at(annotation, "url");
    if url.is_empty() {
        return None;
    }
    let (start, end) = (index("start_index")?, index("end_index")?);
    Some(Citation {
        part,
        start: offset + start,
        end: offset + end.max(start),
        url: url.to_owned(),
        title: str_at(annotation, "title").to_owned(),
        cited_text: None,
    })
}

/// Where each of `answer`'s parts starts in its text parts joined (in characters), as the
/// OpenAI writers join them into one message.
fn joined_offsets(answer: &Answer) -> Vec<usize> {
    let mut offsets = Vec::with_capacity(answer.parts.len());
    let mut at = 0;
    for part in &answer.parts {
        offsets.push(at);
        if let Part::Text(text) = part {
            at += text.chars().count();
        }
    }
    offsets
}

/// The answer's citations as Responses `url_citation` annotations on its joined text.
pub fn responses_annotations(answer: &Answer) -> Vec<Value> {
    let offsets = joined_offsets(answer);
    answer
        .citations
        .iter()
        .filter_map(|citation| {
            let at = *offsets.get(citation.part)?;
            Some(json!({
                "type": "url_citation",
                "start_index": at + citation.start,
                "end_index": at + citation.end,
                "url": citation.url,
                "title": citation.title,
            }))
        })
        .collect()
}

/// The answer's citations as Chat Completions `message.annotations` on its joined text.
pub fn chat_annotations(answer: &Answer) -> Vec<Value> {
    responses_annotations(answer)
        .into_iter()
        .map(|annotation| {
            json!({
                "type": "url_citation",
                "url_citation": {
                    "start_index": annotation["start_index"],
                    "end_index": annotation["end_index"],
                    "url": annotation["url"],
                    "title": annotation["title"],
                },
            })
        })
        .collect()
}

/// The answer's searches as Responses `web_search_call` output items.
pub fn responses_search_items(answer: &Answer) -> Vec<Value> {
    answer
        .searches
        .iter()
        .enumerate()
        .map(|(index, search)| {
            let mut action = json!({"type": "search", "query": search.query});
            if !search.results.is_empty() {
                action["sources"] = search
                    .results
                    .iter()
                    .map(|(url, _)| json!({"type": "url", "url": url}))
                    .collect();
            }
            json!({
                "id": openai_search_id(&search.id, index),
                "type": "web_search_call",
                "status": "completed",
                "action": action,
            })
        })
        .collect()
}

/// A search's id in OpenAI's shape (`ws_…`).
fn openai_search_id(id: &str, index: usize) -> String {
    match id.strip_prefix("ws_") {
        Some(_) => id.to_owned(),
        None if id.is_empty() => format!("ws_{index}"),
        None => format!("ws_{id}"),
    }
}

/// The answer's searches as Anthropic `server_tool_use` and `web_search_tool_result` blocks.
pub fn anthropic_search_blocks(answer: &Answer) -> Vec<Value> {
    let mut blocks = Vec::with_capacity(answer.searches.len() * 2);
    for (index, search) in answer.searches.iter().enumerate() {
        let id = match search.id.strip_prefix("srvtoolu_") {
            Some(_) => search.id.clone(),
            None => format!("srvtoolu_{index}_{}", search.id),
        };
        blocks.push(json!({
            "type": "server_tool_use",
            "id": id,
            "name": "web_search",
            "input": {"query": search.query},
        }));
        let results: Vec<Value> = search
            .results
            .iter()
            .map(|(url, title)| {
                json!({"type": "web_search_result", "url": url, "title": title,
                       "encrypted_content": "", "page_age": null})
            })
            .collect();
        blocks.push(json!({
            "type": "web_search_tool_result",
            "tool_use_id": id,
            "content": results,
        }));
    }
    blocks
}

/// The text part `part` of `answer` as Anthropic text blocks: the spans its citations cite
/// become blocks of their own carrying them, the rest plain text blocks.
pub fn anthropic_text_blocks(answer: &Answer, part: usize, text: &str) -> Vec<Value> {
    let mut cited: Vec<&Citation> = answer
        .citations
        .iter()
        .filter(|citation| citation.part == part)
        .collect();
    if cited.is_empty() {
        return vec![json!({"type": "text", "text": text})];
    }
    cited.sort_by_key(|citation| (citation.start, citation.end));
    let chars: Vec<char> = text.chars().collect();
    let slice = |from: usize, to: usize| -> String {
        chars[from.min(chars.len())..to.min(chars.len())]
            .iter()
            .collect()
    };
    let mut blocks = Vec::new();
    let mut at = 0;
    let mut index = 0;
    while index < cited.len() {
        let (start, end) = (cited[index].start.max(at), cited[index].end);
        // Every citation of the same span goes on one block.
        let same: Vec<&Citation> = cited[index..]
            .iter()
            .take_while(|other| other.start == cited[index].start && other.end == end)
            .copied()
            .collect();
        index += same.len();
        if end <= start {
            continue;
        }
        if start > at {
            blocks.push(json!({"type": "text", "text": slice(at, start)}));
        }
        let span = slice(start, end);
        let citations: Vec<Value> = same
            .iter()
            .map(|citation| {
                json!({"type": "web_search_result_location", "url": citation.url,
                       "title": citation.title,
                       "cited_text": citation.cited_text.clone().unwrap_or_else(|| span.clone()),
                       "encrypted_index": ""})
            })
            .collect();
        blocks.push(json!({"type": "text", "text": span, "citations": citations}));
        at = end;
    }
    if at < chars.len() {
        blocks.push(json!({"type": "text", "text": slice(at, chars.len())}));
    }
    blocks
}
