//! Gemini into the hub's form: a client's `generateContent` request, an upstream's whole
//! answer and its `usageMetadata`. Thought parts a Gemini client sends back and their
//! `thoughtSignature`s are left out (no other account checks them), but for a thinking block
//! the router carried in one (behaviour §14), restored before the part that carries it when it
//! opens for the target's connection; an upstream's signatures are read only for a client that
//! carries them sealed (a Responses client's reasoning items).

use serde_json::{Map, Value};

use super::call_ids::{self, Pending};
use super::grounding;
use super::schema;
use super::{array_of, at, member, str_of};
use crate::wire::item_seal::carried_in_signature;
use crate::wire::translate::hub::count_at;
use crate::wire::translate::hub::form::{
    Answer, Effort, Finish, FormatKind, Image, OutputFormat, Part, Request, Role, Tool, ToolCall,
    ToolChoice, ToolOutput, Usage, WebSearch,
};
use crate::wire::translate::params::{self, drop_named};
use crate::wire::translate::text_delta::GeminiUsage;
use crate::wire::translate::thinking_carry::{block_part, ReasoningCounts, ReasoningKey};
use crate::wire::translate::TranslateError;

/// Top-level keys read here (camel case; snake case is the same key).
const HANDLED: [&str; 8] = [
    "model",
    "contents",
    "systemInstruction",
    "tools",
    "toolConfig",
    "generationConfig",
    "safetySettings",
    "labels",
];

/// `generationConfig` keys read here.
const CONFIG_HANDLED: [&str; 10] = [
    "temperature",
    "topP",
    "maxOutputTokens",
    "stopSequences",
    "candidateCount",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "thinkingConfig",
    "responseModalities",
];

/// `generationConfig` keys that change what the answer means and cannot be carried.
const CONFIG_REFUSED: [&str; 5] = [
    "responseLogprobs",
    "logprobs",
    "speechConfig",
    "audioTimestamp",
    "imageConfig",
];

fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether [`camel`] of `key` is `name`, without spelling it: byte by byte (a byte of a
/// character beyond ASCII is never `_` and is its own capital, as the character is).
fn camel_is(key: &str, name: &str) -> bool {
    let mut name = name.bytes();
    let mut upper = false;
    for b in key.bytes() {
        if b == b'_' {
            upper = true;
            continue;
        }
        let spelled = if upper { b.to_ascii_uppercase() } else { b };
        upper = false;
        if name.next() != Some(spelled) {
            return false;
        }
    }
    name.next().is_none()
}

pub fn request(
    request: &Map<String, Value>,
    key: Option<ReasoningKey<'_>>,
    dropped: &mut Vec<String>,
    counts: &mut ReasoningCounts,
) -> Result<Request, TranslateError> {
    let object = request;
    let mut form = Request::default();
    if member(object, "cachedContent").is_some_and(|c| !c.is_null()) {
        return Err(TranslateError::unsupported(
            "cachedContent",
            "a Gemini context cache lives on Google's side",
        ));
    }
    if let Some(system) = member(object, "systemInstruction") {
        let text = texts(system);
        if !text.is_empty() {
            form.system.push(text);
        }
    }
    let Some(Value::Array(contents)) = member(object, "contents") else {
        return Err(TranslateError::Invalid(
            "`contents` must be an array".into(),
        ));
    };
    let mut pending = Pending::default();
    for (turn, content) in contents.iter().enumerate() {
        let role = match str_of(content, "role") {
            "model" => Role::Assistant,
            _ => Role::User,
        };
        if role == Role::Assistant {
            pending.new_turn();
        }
        let mut parts = parts_of(content, turn, role, &mut pending)?;
        if role == Role::Assistant {
            carried_blocks(content, &mut parts, key, counts);
        }
        form.push(role, parts);
    }
    tools(member(object, "tools"), &mut form)?;
    tool_config(member(object, "toolConfig"), &mut form);
    if let Some(config) = member(object, "generationConfig") {
        generation_config(config, &mut form, dropped)?;
    }
    if member(object, "safetySettings").is_some_and(|s| !s.is_null()) {
        drop_named(dropped, "safetySettings");
    }
    for key in request.keys() {
        if !HANDLED.iter().any(|name| camel_is(key, name)) {
            drop_named(dropped, key);
        }
    }
    Ok(form)
}

/// The text of a `Content` (its text parts joined); a bare string is taken as it is.
fn texts(content: &Value) -> String {
    if let Some(text) = content.as_str() {
        return text.to_string();
    }
    array_of(content, "parts")
        .iter()
        .filter_map(|part| at(part, "text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The thinking blocks a model turn carries in `thoughtSignature`s (behaviour §14), each put
/// before the part that carried it when it opens for this connection and client; the rest
/// counted as left out. `parts` are the turn's, as [`parts_of`] read them.
fn carried_blocks(
    content: &Value,
    parts: &mut Vec<Part>,
    key: Option<ReasoningKey<'_>>,
    counts: &mut ReasoningCounts,
) {
    let mut restored = Vec::new();
    // Which of `parts` each client part became (thoughts and empty texts became none).
    let mut read = 0;
    for part in array_of(content, "parts") {
        let thought = at(part, "thought").and_then(Value::as_bool) == Some(true);
        let text = at(part, "text")
            .and_then(Value::as_str)
            .is_some_and(|text| !text.is_empty());
        let other = ["inlineData", "fileData", "functionCall", "functionResponse"]
            .iter()
            .any(|kind| at(part, kind).is_some());
        if let Some(encrypted) = carried_in_signature(str_of(part, "thoughtSignature")) {
            match key.and_then(|key| key.open(&encrypted)) {
                Some(block) => {
                    counts.restored += 1;
                    restored.push((read, block_part(&block)));
                }
                None => counts.left_out += 1,
            }
        }
        if !thought && (text || other) {
            read += 1;
        }
    }
    for (at, part) in restored.into_iter().rev() {
        parts.insert(at.min(parts.len()), part);
    }
}

/// A `Content`'s parts.
fn parts_of(
    content: &Value,
    turn: usize,
    role: Role,
    pending: &mut Pending,
) -> Result<Vec<Part>, TranslateError> {
    let mut parts = Vec::new();
    let mut calls = 0;
    for part in array_of(content, "parts") {
        // Thoughts and their signatures were made for a Gemini account: left out.
        if at(part, "thought").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(text) = at(part, "text").and_then(Value::as_str) {
            if !text.is_empty() {
                parts.push(Part::Text(text.to_string()));
            }
        } else if let Some(data) = at(part, "inlineData") {
            parts.push(Part::Image(inline_image(data)?));
        } else if let Some(file) = at(part, "fileData") {
            let mime = str_of(file, "mimeType");
            if !mime.is_empty() && !mime.starts_with("image/") {
                return Err(TranslateError::unsupported(
                    "fileData",
                    format!("a `{mime}` file is not carried to the target's API (images are)"),
                ));
            }
            parts.push(Part::Image(Image::Url(str_of(file, "fileUri").to_string())));
        } else if let Some(call) = at(part, "functionCall") {
            let call = FunctionCall {
                name: str_of(call, "name"),
                id: str_of(call, "id"),
                args: at(call, "args"),
            };
            if let Some(call) = call.read((turn, &mut calls), role, pending) {
                parts.push(call);
            }
        } else if let Some(response) = at(part, "functionResponse") {
            let name = str_of(response, "name");
            let id = str_of(response, "id");
            parts.push(function_result(name, id, at(response, "response"), pending));
        } else if let Some(kind) = part
            .as_object()
            .and_then(|p| p.keys().find(|k| !k.starts_with("thought")))
        {
            return Err(TranslateError::unsupported(
                kind.as_str(),
                "this part has no equivalent on the target's API",
            ));
        }
    }
    Ok(parts)
}

/// A `functionCall` part's members as given (`""` for one absent).
pub(super) struct FunctionCall<'a> {
    pub name: &'a str,
    pub id: &'a str,
    pub args: Option<&'a Value>,
}

impl FunctionCall<'_> {
    /// The call the `calls`-th `functionCall` of the `turn`-th content is (counted, and the
    /// id it has or is given waits for its result); only the model's are carried.
    pub(super) fn read(
        &self,
        (turn, calls): (usize, &mut usize),
        role: Role,
        pending: &mut Pending,
    ) -> Option<Part> {
        let id = match self.id {
            "" => call_ids::history_call(turn, *calls),
            given => given.to_string(),
        };
        *calls += 1;
        // Only the model calls tools.
        if role != Role::Assistant {
            return None;
        }
        let arguments = self
            .args
            .filter(|a| !a.is_null())
            .map_or_else(|| "{}".to_string(), Value::to_string);
        pending.call(self.name, &id);
        Some(Part::ToolCall(ToolCall {
            id,
            name: self.name.to_string(),
            arguments,
        }))
    }
}

/// A `functionResponse` part (its `name`, `id` and `response` as given) as a tool result: for
/// the call its id names, else the earliest waiting call of its name.
pub(super) fn function_result(
    name: &str,
    id: &str,
    response: Option<&Value>,
    pending: &mut Pending,
) -> Part {
    let call_id = match id {
        "" => pending.answer(name, format!("call_gemini_{name}")),
        given => given.to_string(),
    };
    let (content, is_error) = tool_output(response);
    Part::ToolResult {
        call_id,
        content,
        is_error,
    }
}

/// An `inlineData` blob: images are carried, nothing else is.
fn inline_image(data: &Value) -> Result<Image, TranslateError> {
    let mime = str_of(data, "mimeType");
    if !mime.starts_with("image/") {
        return Err(TranslateError::unsupported(
            "inlineData",
            format!("`{mime}` data is not carried to the target's API (images are)"),
        ));
    }
    Ok(Image::Base64 {
        media_type: mime.to_string(),
        data: str_of(data, "data").to_string(),
    })
}

/// A `functionResponse.response` as a tool's output: Google's `output` (or `result`, or
/// `content`) text as it is, an `error` as an error, anything else as its JSON.
fn tool_output(response: Option<&Value>) -> (ToolOutput, bool) {
    let Some(response) = response.filter(|r| !r.is_null()) else {
        return (ToolOutput::Text(String::new()), false);
    };
    if let Some(Value::Object(object)) = Some(response) {
        if object.len() == 1 {
            for key in ["output", "result", "content"] {
                if let Some(Value::String(text)) = object.get(key) {
                    return (ToolOutput::Text(text.clone()), false);
                }
            }
            if let Some(error) = object.get("error") {
                let text = error
                    .as_str()
                    .map_or_else(|| error.to_string(), str::to_owned);
                return (ToolOutput::Text(text), true);
            }
        }
    }
    (ToolOutput::Text(response.to_string()), false)
}

/// `tools`: function declarations, Google Search as web search; other tools run only on
/// Google's side.
pub(super) fn tools(tools: Option<&Value>, form: &mut Request) -> Result<(), TranslateError> {
    let tools = tools
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for tool in tools {
        let Some(object) = tool.as_object() else {
            continue;
        };
        for key in object.keys() {
            match camel(key).as_str() {
                "functionDeclarations" => {
                    for declaration in array_of(tool, "functionDeclarations") {
                        let parameters = match (
                            at(declaration, "parameters").filter(|p| p.is_object()),
                            at(declaration, "parametersJsonSchema").filter(|p| p.is_object()),
                        ) {
                            (Some(openapi), _) => schema::to_json_schema(openapi),
                            (None, Some(json_schema)) => json_schema.clone(),
                            (None, None) => {
                                serde_json::json!({"type": "object", "properties": {}})
                            }
                        };
                        form.tools.push(Tool {
                            name: str_of(declaration, "name").to_string(),
                            description: at(declaration, "description")
                                .filter(|d| !d.is_null())
                                .cloned(),
                            parameters,
                        });
                    }
                }
                search @ ("googleSearch" | "googleSearchRetrieval") => {
                    form.web_search = Some(WebSearch {
                        parameter: search.to_string(),
                        ..WebSearch::default()
                    });
                }
                other => {
                    return Err(TranslateError::unsupported(
                        other,
                        "Google's built-in tools do not run on the target's API",
                    ))
                }
            }
        }
    }
    Ok(())
}

/// `toolConfig.functionCallingConfig` as the tool choice: `ANY` with one allowed name is that
/// tool.
pub(super) fn tool_config(tool_config: Option<&Value>, form: &mut Request) {
    let Some(config) = tool_config.and_then(|c| at(c, "functionCallingConfig")) else {
        return;
    };
    let allowed = array_of(config, "allowedFunctionNames");
    form.tool_choice = match str_of(config, "mode") {
        "NONE" => Some(ToolChoice::None),
        "ANY" => match allowed {
            [only] => only
                .as_str()
                .map(|name| ToolChoice::Named(name.to_string())),
            _ => Some(ToolChoice::Required),
        },
        "AUTO" | "VALIDATED" => Some(ToolChoice::Auto),
        _ => None,
    };
}

/// `generationConfig`: limits, sampling, structured output and thinking.
fn generation_config(
    config: &Value,
    form: &mut Request,
    dropped: &mut Vec<String>,
) -> Result<(), TranslateError> {
    if at(config, "candidateCount")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 1)
    {
        return Err(TranslateError::unsupported(
            "candidateCount",
            "a translated request gives one candidate",
        ));
    }
    let modalities = array_of(config, "responseModalities");
    if modalities.iter().any(|m| m.as_str() != Some("TEXT")) {
        return Err(TranslateError::unsupported(
            "responseModalities",
            "a translated answer is text",
        ));
    }
    form.max_tokens = at(config, "maxOutputTokens").and_then(Value::as_u64);
    form.stop = array_of(config, "stopSequences").to_vec();
    form.temperature = at(config, "temperature").filter(|t| t.is_number()).cloned();
    form.top_p = at(config, "topP").filter(|p| p.is_number()).cloned();
    form.format = output_format(config)?;
    if let Some(thinking) = at(config, "thinkingConfig") {
        form.effort = effort(thinking);
    }
    for (key, value) in config.as_object().into_iter().flatten() {
        if value.is_null() || CONFIG_HANDLED.iter().any(|name| camel_is(key, name)) {
            continue;
        }
        let key = camel(key);
        if CONFIG_REFUSED.contains(&key.as_str()) && value != &Value::Bool(false) {
            return Err(TranslateError::unsupported(
                key,
                "it has no equivalent on the target's API",
            ));
        }
        drop_named(dropped, &key);
    }
    Ok(())
}

/// `responseMimeType` (+ `responseSchema`) as a structured output format; another type than
/// text or JSON (`text/x.enum`) cannot be carried.
fn output_format(config: &Value) -> Result<Option<OutputFormat>, TranslateError> {
    match str_of(config, "responseMimeType") {
        "application/json" => {}
        "" | "text/plain" => return Ok(None),
        other => {
            return Err(TranslateError::unsupported(
                "responseMimeType",
                format!("`{other}` answers are not carried to the target's API"),
            ))
        }
    }
    let schema = match (
        at(config, "responseSchema").filter(|s| s.is_object()),
        at(config, "responseJsonSchema").filter(|s| s.is_object()),
    ) {
        (Some(openapi), _) => Some(schema::to_json_schema(openapi)),
        (None, json_schema) => json_schema.cloned(),
    };
    let kind = match schema {
        Some(schema) => FormatKind::JsonSchema {
            name: "response".to_string(),
            schema,
            strict: None,
        },
        None => FormatKind::JsonObject,
    };
    Ok(Some(OutputFormat {
        kind,
        parameter: "responseSchema",
    }))
}

/// `thinkingConfig`: a budget (0: none, -1: the model decides) or a level as an effort.
pub(super) fn effort(thinking: &Value) -> Option<Effort> {
    let level = match at(thinking, "thinkingBudget").and_then(Value::as_i64) {
        Some(0) => return None,
        Some(budget) if budget > 0 => params::effort_for_budget(budget.unsigned_abs()).to_string(),
        Some(_) => "medium".to_string(),
        None => match str_of(thinking, "thinkingLevel")
            .to_ascii_lowercase()
            .as_str()
        {
            "" => return None,
            "minimal" | "low" => "low".to_string(),
            "high" => "high".to_string(),
            _ => "medium".to_string(),
        },
    };
    Some(Effort {
        level,
        parameter: "thinkingConfig",
    })
}

/// `usageMetadata`: `promptTokenCount` counts cached input in; output is the candidates' and
/// the thoughts' tokens.
pub fn usage(usage: &Value) -> Usage {
    usage_of_counts(GeminiUsage {
        prompt: Some(count_at(usage, "promptTokenCount")),
        cached: Some(count_at(usage, "cachedContentTokenCount")),
        candidates: Some(count_at(usage, "candidatesTokenCount")),
        thoughts: Some(count_at(usage, "thoughtsTokenCount")),
    })
}

/// [`usage`] of the counts a stream chunk's `usageMetadata` was read into.
pub fn usage_of_counts(counts: GeminiUsage) -> Usage {
    let thoughts = counts.thoughts.unwrap_or(0);
    Usage {
        input: counts.prompt.unwrap_or(0),
        cached: counts.cached.unwrap_or(0),
        cache_write: 0,
        output: counts.candidates.unwrap_or(0) + thoughts,
        reasoning: thoughts,
    }
}

/// A `finishReason` (safety finishes are a content filter; a stop after calls is the calls).
pub fn finish(reason: &str, called: bool) -> Finish {
    match reason {
        "MAX_TOKENS" => Finish::Length,
        "SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII" | "IMAGE_SAFETY"
        | "LANGUAGE" => Finish::ContentFilter,
        _ if called => Finish::ToolCalls,
        _ => Finish::Stop,
    }
}

/// Whether a prompt was blocked (`promptFeedback.blockReason`): an answer that finishes as a
/// content filter.
pub fn prompt_blocked(response: &Value) -> bool {
    at(response, "promptFeedback").is_some_and(|f| !str_of(f, "blockReason").is_empty())
}

/// An answer part's thinking in the hub's form: a thought part is a thinking block (its
/// signature kept only when the client carries `signatures`); another part's signature, when
/// carried, is an empty thinking block just before it. Whether the part was a thought: then
/// nothing else of it is read.
pub fn push_thinking(
    parts: &mut Vec<Part>,
    thought: bool,
    text: impl FnOnce() -> String,
    signature: &str,
    signatures: bool,
) -> bool {
    if thought {
        parts.push(Part::Thinking {
            text: text(),
            signature: if signatures {
                signature.to_string()
            } else {
                String::new()
            },
        });
        return true;
    }
    if signatures && !signature.is_empty() {
        parts.push(Part::Thinking {
            text: String::new(),
            signature: signature.to_string(),
        });
    }
    false
}

/// A whole answer: total — one without candidates is an empty answer. `signatures`: the
/// client carries thought signatures sealed, each as a thinking part (empty when the signed
/// part was not a thought) just before the part it signed. `created` tells calls apart when
/// the answer has no `responseId`.
pub fn answer(response: &Value, signatures: bool, created: u64) -> Answer {
    let response_id = str_of(response, "responseId");
    let candidate = array_of(response, "candidates")
        .first()
        .unwrap_or(&Value::Null);
    let content = at(candidate, "content").unwrap_or(&Value::Null);
    let mut parts = Vec::new();
    let mut calls = 0;
    for part in array_of(content, "parts") {
        let signature = str_of(part, "thoughtSignature");
        let thought = at(part, "thought").and_then(Value::as_bool) == Some(true);
        let text = || str_of(part, "text").to_string();
        if push_thinking(&mut parts, thought, text, signature, signatures) {
            continue;
        }
        if let Some(call) = at(part, "functionCall") {
            let id = match str_of(call, "id") {
                "" => call_ids::answer_call(response_id, created, calls),
                given => given.to_string(),
            };
            calls += 1;
            parts.push(Part::ToolCall(ToolCall {
                id,
                name: str_of(call, "name").to_string(),
                arguments: at(call, "args")
                    .filter(|a| !a.is_null())
                    .map_or_else(|| "{}".to_string(), Value::to_string),
            }));
        } else if let Some(text) = at(part, "text").and_then(Value::as_str) {
            if !text.is_empty() {
                parts.push(Part::Text(text.to_string()));
            }
        }
    }
    let finish = if prompt_blocked(response) {
        Finish::ContentFilter
    } else {
        self::finish(str_of(candidate, "finishReason"), calls > 0)
    };
    let grounding = at(candidate, "groundingMetadata").unwrap_or(&Value::Null);
    let texts: Vec<(usize, &str)> = parts
        .iter()
        .enumerate()
        .filter_map(|(index, part)| match part {
            Part::Text(text) => Some((index, text.as_str())),
            _ => None,
        })
        .collect();
    let citations = grounding::citations(&grounding::supports(grounding), &texts);
    Answer {
        id: response_id.to_string(),
        model: at(response, "modelVersion").cloned().unwrap_or(Value::Null),
        finish,
        usage: usage(at(response, "usageMetadata").unwrap_or(&Value::Null)),
        searches: grounding::searches(grounding),
        citations,
        parts,
    }
}

#[cfg(test)]
mod camel_tests {
    use super::{camel, camel_is};

    #[test]
    fn camel_is_says_what_camel_spells() {
        let keys = [
            "system_instruction",
            "systemInstruction",
            "system__instruction",
            "_model",
            "tools_",
            "tool_Config",
            "generation_config",
            "max_output_tokens",
            "maxOutputTokens",
            "top_p",
            "topP",
            "",
            "_",
            "émoji_ünit",
        ];
        let names = HANDLED_AND_CONFIG;
        for key in keys {
            for name in names {
                assert_eq!(
                    camel_is(key, name),
                    camel(key) == name,
                    "{key} against {name}"
                );
            }
        }
    }

    const HANDLED_AND_CONFIG: [&str; 9] = [
        "systemInstruction",
        "model",
        "Model",
        "tools",
        "toolConfig",
        "maxOutputTokens",
        "topP",
        "",
        "émojiÜnit",
    ];
}
