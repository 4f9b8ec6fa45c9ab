//! The hub's form as Gemini: an upstream `generateContent` request, a client's whole answer,
//! its `usageMetadata` and Google's error shape. Tool results go back by the name of the call
//! they answer (Gemini has no call ids); schemas are cleaned to Gemini's subset; a
//! `thoughtSignature` goes back on the part it signed only when it came sealed from this
//! connection (`signed`), and thought text never goes back (Gemini does not take it).

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::schema;
use crate::wire::translate::hub::form::{
    Answer, Finish, FormatKind, Image, Part, Request, Role, ToolChoice, ToolOutput, Usage,
};
use crate::wire::translate::object::object;
use crate::wire::translate::params::{self, drop_named};
use crate::wire::translate::thinking_carry::carried;
use crate::wire::translate::TranslateError;

/// The request for a Gemini host (the model and the method are in its path). `signed`: the
/// form's thinking signatures are this connection's own (opened from sealed items).
pub fn request(
    form: &Request,
    signed: bool,
    dropped: &mut Vec<String>,
) -> Result<Value, TranslateError> {
    let mut out = Map::new();
    let names: HashMap<&str, &str> = form
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|part| match part {
            Part::ToolCall(call) => Some((call.id.as_str(), call.name.as_str())),
            _ => None,
        })
        .collect();
    let mut contents = Vec::with_capacity(form.messages.len());
    for message in &form.messages {
        let parts = parts(&message.parts, &names, signed)?;
        if parts.is_empty() {
            continue;
        }
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "model",
        };
        contents.push(object([
            ("role", role.into()),
            ("parts", Value::Array(parts)),
        ]));
    }
    out.insert("contents".into(), Value::Array(contents));
    let system = form.system.join("\n");
    if !system.is_empty() {
        out.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system}]}),
        );
    }
    tools(form, &mut out, dropped);
    let config = generation_config(form, dropped);
    if !config.is_empty() {
        out.insert("generationConfig".into(), Value::Object(config));
    }
    Ok(Value::Object(out))
}

/// Where each signature goes: the part it signed, which is the next call when one follows
/// (Gemini checks signatures on calls; a Responses client's items may come reordered, text
/// before calls), else the next part that is not thinking.
fn signature_places(parts: &[Part], signed: bool) -> HashMap<usize, &str> {
    let mut places = HashMap::new();
    if !signed {
        return places;
    }
    for (at, part) in parts.iter().enumerate() {
        let Part::Thinking { signature, .. } = part else {
            continue;
        };
        if signature.is_empty() {
            continue;
        }
        let after = &parts[at + 1..];
        let call = after.iter().position(|p| matches!(p, Part::ToolCall(_)));
        let next = || {
            after
                .iter()
                .position(|p| !matches!(p, Part::Thinking { .. } | Part::RedactedThinking { .. }))
        };
        if let Some(offset) = call.or_else(next) {
            places.entry(at + 1 + offset).or_insert(signature.as_str());
        }
    }
    places
}

/// A message's parts, each with the signature placed on it.
fn parts(
    parts: &[Part],
    names: &HashMap<&str, &str>,
    signed: bool,
) -> Result<Vec<Value>, TranslateError> {
    let places = signature_places(parts, signed);
    let mut out: Vec<Value> = Vec::with_capacity(parts.len());
    // Images a tool answered with: after the turn's results (a `functionResponse` holds JSON).
    let mut result_images = Vec::new();
    for (at, part) in parts.iter().enumerate() {
        let mut written = match part {
            Part::Text(text) if text.is_empty() => continue,
            Part::Text(text) => object([("text", text.as_str().into())]),
            Part::Image(image) => image_part(image),
            Part::ToolCall(call) => object([(
                "functionCall",
                object([
                    ("name", call.name.as_str().into()),
                    ("args", call_args(&call.arguments)?),
                ]),
            )]),
            Part::ToolResult {
                call_id,
                content,
                is_error,
            } => {
                let name = names.get(call_id.as_str()).copied().unwrap_or(call_id);
                let text = match content {
                    ToolOutput::Text(text) => text.clone(),
                    ToolOutput::Parts(inner) => {
                        result_images.extend(inner.iter().filter_map(|p| match p {
                            Part::Image(image) => Some(image_part(image)),
                            _ => None,
                        }));
                        content.text("\n")
                    }
                };
                let key = if *is_error { "error" } else { "output" };
                json!({"functionResponse": {"name": name, "response": {key: text}}})
            }
            Part::Thinking { .. } | Part::RedactedThinking { .. } => continue,
        };
        if let Some(signature) = places.get(&at) {
            written["thoughtSignature"] = json!(signature);
        }
        out.push(written);
    }
    out.extend(result_images);
    Ok(out)
}

fn image_part(image: &Image) -> Value {
    match image {
        Image::Base64 { media_type, data } => {
            json!({"inlineData": {"mimeType": media_type, "data": data}})
        }
        Image::Url(url) => json!({"fileData": {"mimeType": image_mime(url), "fileUri": url}}),
    }
}

/// An image URL's media type from its extension (Gemini wants one with `fileData`).
fn image_mime(url: &str) -> &'static str {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    match path.rsplit('.').next() {
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        Some("heic") => "image/heic",
        Some("heif") => "image/heif",
        _ => "image/jpeg",
    }
}

/// A call's arguments (JSON text) as Gemini's `args` object.
fn call_args(arguments: &str) -> Result<Value, TranslateError> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => Ok(object),
        _ => Err(TranslateError::unsupported(
            "tool_calls",
            "a tool call's arguments are not a JSON object (a call cut short by max_tokens?)",
        )),
    }
}

/// `tools` (function declarations with cleaned schemas, Google Search) and `toolConfig`.
fn tools(form: &Request, out: &mut Map<String, Value>, dropped: &mut Vec<String>) {
    let mut tools = Vec::new();
    if !form.tools.is_empty() {
        let declarations: Vec<Value> = form
            .tools
            .iter()
            .map(|tool| {
                let mut declaration = object([
                    ("name", tool.name.as_str().into()),
                    ("parameters", schema::clean(&tool.parameters, dropped)),
                ]);
                if let Some(description) = &tool.description {
                    declaration["description"] = description.clone();
                }
                declaration
            })
            .collect();
        tools.push(object([(
            "functionDeclarations",
            Value::Array(declarations),
        )]));
    }
    if let Some(search) = &form.web_search {
        tools.push(json!({"googleSearch": {}}));
        if search.allowed_domains.is_some() || search.user_location.is_some() {
            drop_named(dropped, &search.parameter);
        }
    }
    if tools.is_empty() {
        return;
    }
    out.insert("tools".into(), Value::Array(tools));
    if form.tools.is_empty() {
        return;
    }
    let config = match &form.tool_choice {
        None => return,
        Some(ToolChoice::Auto) => json!({"mode": "AUTO"}),
        Some(ToolChoice::None) => json!({"mode": "NONE"}),
        Some(ToolChoice::Required) => json!({"mode": "ANY"}),
        Some(ToolChoice::Named(name)) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    };
    out.insert(
        "toolConfig".into(),
        object([("functionCallingConfig", config)]),
    );
}

/// `generationConfig`: limits, sampling, structured output, thinking.
fn generation_config(form: &Request, dropped: &mut Vec<String>) -> Map<String, Value> {
    let mut config = Map::new();
    if let Some(max) = form.max_tokens {
        config.insert("maxOutputTokens".into(), json!(max));
    }
    if !form.stop.is_empty() {
        config.insert("stopSequences".into(), Value::Array(form.stop.clone()));
    }
    if let Some(t) = &form.temperature {
        config.insert("temperature".into(), t.clone());
    }
    if let Some(p) = &form.top_p {
        config.insert("topP".into(), p.clone());
    }
    if let Some(format) = &form.format {
        config.insert("responseMimeType".into(), json!("application/json"));
        if let FormatKind::JsonSchema { schema, .. } = &format.kind {
            config.insert("responseSchema".into(), schema::clean(schema, dropped));
        }
    }
    if let Some(budget) = form
        .effort
        .as_ref()
        .and_then(|effort| params::budget_for_effort(&effort.level))
    {
        config.insert(
            "thinkingConfig".into(),
            json!({"thinkingBudget": budget, "includeThoughts": true}),
        );
    }
    config
}

/// A `finishReason`.
pub fn finish_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop | Finish::ToolCalls => "STOP",
        Finish::Length => "MAX_TOKENS",
        Finish::ContentFilter => "SAFETY",
    }
}

/// Usage as `usageMetadata`: thoughts apart from the candidates' tokens, cached input inside
/// the prompt's.
pub fn usage(usage: &Usage) -> Value {
    let mut out = json!({
        "promptTokenCount": usage.input,
        "candidatesTokenCount": usage.output.saturating_sub(usage.reasoning),
        "totalTokenCount": usage.input + usage.output,
    });
    if usage.cached > 0 {
        out["cachedContentTokenCount"] = json!(usage.cached);
    }
    if usage.reasoning > 0 {
        out["thoughtsTokenCount"] = json!(usage.reasoning);
    }
    out
}

/// A call's arguments as `args` in an answer: the object they hold, `{}` otherwise (a call cut
/// short; `finishReason` says `MAX_TOKENS` beside it).
pub fn answer_args(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({}),
    }
}

/// A part of an answer (`None` for what a Gemini client is not given).
pub fn answer_part(part: &Part) -> Option<Value> {
    match part {
        Part::Text(text) if !text.is_empty() => Some(json!({"text": text})),
        Part::Thinking { text, .. } if !text.is_empty() => {
            Some(json!({"text": text, "thought": true}))
        }
        Part::ToolCall(call) => Some(json!({"functionCall": {
            "id": call.id,
            "name": call.name,
            "args": answer_args(&call.arguments),
        }})),
        _ => None,
    }
}

/// A `GenerateContentResponse` holding `parts`.
pub fn response(id: &str, model: &Value, parts: Vec<Value>) -> Value {
    json!({
        "candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}],
        "modelVersion": model,
        "responseId": id,
    })
}

/// The thinking block a part is, when it can be carried to a Gemini client and back (an
/// Anthropic account's: signed, or redacted).
pub fn carried_block(part: &Part) -> Option<Value> {
    match part {
        Part::Thinking { text, signature } if !signature.is_empty() => {
            Some(json!({"type": "thinking", "thinking": text, "signature": signature}))
        }
        Part::RedactedThinking { data } => Some(json!({"type": "redacted_thinking", "data": data})),
        _ => None,
    }
}

/// A part that holds only a carried block's signature (no part followed the block).
pub fn signature_part(signature: String) -> Value {
    json!({"text": "", "thought": true, "thoughtSignature": signature})
}

/// A whole answer. A thinking block of an Anthropic account rides in the `thoughtSignature`
/// of the part after it (where Google signs), in its plain carried form: the node encrypts it
/// for the connection before it leaves, and it comes back as the block only there (§14).
pub fn answer(answer: &Answer) -> Value {
    let mut parts = Vec::with_capacity(answer.parts.len());
    let mut pending: Option<String> = None;
    for part in &answer.parts {
        if let Some(block) = carried_block(part) {
            if let Some(earlier) = pending.replace(carried(&block)) {
                parts.push(signature_part(earlier));
            }
        }
        let Some(mut written) = answer_part(part) else {
            continue;
        };
        if !matches!(part, Part::Thinking { .. }) {
            if let Some(signature) = pending.take() {
                written["thoughtSignature"] = json!(signature);
            }
        }
        parts.push(written);
    }
    parts.extend(pending.map(signature_part));
    let mut out = response(&answer.id, &answer.model, parts);
    out["candidates"][0]["finishReason"] = json!(finish_reason(answer.finish));
    out["usageMetadata"] = usage(&answer.usage);
    let supports = super::grounding::answer_supports(answer);
    if let Some(grounding) = super::grounding::metadata(&answer.searches, &supports) {
        out["candidates"][0]["groundingMetadata"] = grounding;
    }
    out
}

/// Google's canonical status name for an HTTP status.
pub fn google_status(status: u16) -> &'static str {
    match status {
        400 | 413 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        402 | 403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 | 529 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// An error in Google's shape; `reason` (the upstream's or the router's code) as an
/// `ErrorInfo` detail.
pub fn error(status: u16, message: &str, reason: Option<&str>) -> Value {
    let details: Vec<Value> = reason
        .filter(|r| !r.is_empty())
        .map(|reason| {
            json!({
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "quotaroute",
            })
        })
        .into_iter()
        .collect();
    json!({"error": {
        "code": status,
        "message": message,
        "status": google_status(status),
        "details": details,
    }})
}
