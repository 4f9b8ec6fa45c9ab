//! What the two OpenAI APIs (Chat Completions and Responses) share on the way into the hub:
//! content parts, function tools (a Responses `namespace` flattened) and `tool_choice`; and
//! on the way out, what their byte writers write alike.

use bytes::BytesMut;
use serde_json::Value;

use super::hub::form::{
    FormatKind, Image, OutputFormat, Part, Request, Tool, ToolChoice, WebSearch,
};
use super::hub::str_at;
use super::json_write::{write_str, ObjectWriter};
use super::params::refuse_built_in_tool;
use super::TranslateError;

/// The text of OpenAI content: a string, or the text of its text parts joined.
pub fn text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str).or(part.as_str()))
            .collect(),
        _ => String::new(),
    }
}

/// An image part's URL as the form's image.
fn image(url: &str) -> Result<Part, TranslateError> {
    Image::from_url(url)
        .map(Part::Image)
        .map_err(TranslateError::Invalid)
}

/// OpenAI message content (a string or parts: `text`/`input_text`/`output_text`, `refusal`,
/// `image_url`/`input_image`) as the form's parts.
pub fn parts(content: &Value) -> Result<Vec<Part>, TranslateError> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(text) if text.is_empty() => Ok(Vec::new()),
        Value::String(text) => Ok(vec![Part::Text(text.clone())]),
        Value::Array(items) => {
            let mut parts = Vec::with_capacity(items.len());
            for part in items {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
                match kind {
                    "text" | "input_text" | "output_text" => {
                        let text = str_at(part, "text");
                        if !text.is_empty() {
                            parts.push(Part::Text(text.to_string()));
                        }
                    }
                    "refusal" => parts.push(Part::Text(str_at(part, "refusal").to_string())),
                    "image_url" => {
                        let url = part
                            .get("image_url")
                            .and_then(|u| u.get("url").or(Some(u)))
                            .and_then(Value::as_str)
                            .ok_or_else(|| {
                                TranslateError::Invalid("an image_url part has no url".into())
                            })?;
                        parts.push(image(url)?);
                    }
                    "input_image" => {
                        let Some(url) = part.get("image_url").and_then(Value::as_str) else {
                            return Err(TranslateError::unsupported(
                                "file_id",
                                "uploaded files live on OpenAI accounts only",
                            ));
                        };
                        parts.push(image(url)?);
                    }
                    other => {
                        return Err(TranslateError::unsupported(
                            other,
                            "this content part has no equivalent on the target's API",
                        ))
                    }
                }
            }
            Ok(parts)
        }
        _ => Err(TranslateError::Invalid(
            "message content must be a string or an array of parts".into(),
        )),
    }
}

/// OpenAI tools as the form's: function tools one for one, and a Responses `namespace` (a
/// named group of function tools, as Codex sends its sub-agent tools) flattened into its
/// function tools under their own names (a name already taken is kept once).
pub fn tools(tools: &[Value]) -> Result<Vec<Tool>, TranslateError> {
    tools_with(tools, false)
}

/// A freeform (`custom`) tool — Codex's `apply_patch` for models it does not know — as a
/// function taking one string, `input` (its answer goes back as a `custom_tool_call`).
fn custom_tool(tool: &Value) -> Result<Tool, TranslateError> {
    let name = text_of(tool, "name")
        .ok_or_else(|| TranslateError::Invalid("a custom tool has no name".into()))?;
    Ok(Tool {
        name: name.to_string(),
        description: tool.get("description").filter(|d| !d.is_null()).cloned(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The tool's freeform input."}},
            "required": ["input"],
        }),
    })
}

fn text_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The names of the freeform (`custom`) tools among Responses `tools`.
pub fn custom_tool_names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .filter(|tool| text_of(tool, "type") == Some("custom"))
        .filter_map(|tool| text_of(tool, "name").map(str::to_owned))
        .collect()
}

/// Responses' `web_search` / `web_search_preview` tool.
fn web_search(tool: &Value, kind: &str) -> WebSearch {
    WebSearch {
        parameter: kind.to_string(),
        max_uses: None,
        allowed_domains: tool
            .get("filters")
            .and_then(|f| f.get("allowed_domains"))
            .filter(|d| !d.is_null())
            .cloned(),
        user_location: tool.get("user_location").filter(|l| !l.is_null()).cloned(),
    }
}

/// `tools`, with Responses' freeform (`custom`) tools carried when `custom` says so.
pub fn tools_with(tools: &[Value], custom: bool) -> Result<Vec<Tool>, TranslateError> {
    tools_and_search(tools, custom).map(|(tools, _)| tools)
}

/// Responses `tools`: function and freeform tools, and its web search tool apart.
pub fn responses_tools(tools: &[Value]) -> Result<(Vec<Tool>, Option<WebSearch>), TranslateError> {
    tools_and_search(tools, true)
}

fn tools_and_search(
    tools: &[Value],
    responses: bool,
) -> Result<(Vec<Tool>, Option<WebSearch>), TranslateError> {
    let custom = responses;
    let mut search = None;
    let mut out: Vec<Tool> = Vec::with_capacity(tools.len());
    let push = |tool: Tool, out: &mut Vec<Tool>| {
        if !out.iter().any(|t| t.name == tool.name) {
            out.push(tool);
        }
    };
    for tool in tools {
        if tool.get("type").and_then(Value::as_str) == Some("namespace") {
            for member in super::hub::array_at(tool, "tools") {
                push(function_tool(member)?, &mut out);
            }
            continue;
        }
        if custom && text_of(tool, "type") == Some("custom") {
            push(custom_tool(tool)?, &mut out);
            continue;
        }
        if let Some(kind @ ("web_search" | "web_search_preview")) = text_of(tool, "type") {
            if responses {
                search = Some(web_search(tool, kind));
                continue;
            }
        }
        push(function_tool(tool)?, &mut out);
    }
    Ok((out, search))
}

/// A function tool (`{"type":"function","function":{…}}` in Chat Completions, the function's
/// fields at the top in Responses).
fn function_tool(tool: &Value) -> Result<Tool, TranslateError> {
    refuse_built_in_tool(
        tool.get("type")
            .and_then(Value::as_str)
            .unwrap_or("function"),
    )?;
    let function = tool.get("function").unwrap_or(tool);
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| TranslateError::Invalid("a tool has no name".into()))?;
    Ok(Tool {
        name: name.to_string(),
        description: function
            .get("description")
            .filter(|d| !d.is_null())
            .cloned(),
        parameters: function
            .get("parameters")
            .filter(|p| p.is_object())
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
    })
}

/// OpenAI's `tool_choice` (a word, or a named function in either API's shape).
pub fn tool_choice(choice: Option<&Value>) -> Option<ToolChoice> {
    match choice? {
        Value::String(word) => Some(match word.as_str() {
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            _ => ToolChoice::Auto,
        }),
        Value::Object(named) => Some(
            match named
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| named.get("name"))
                .and_then(Value::as_str)
            {
                Some(name) => ToolChoice::Named(name.to_string()),
                None => ToolChoice::Auto,
            },
        ),
        _ => None,
    }
}

/// What both OpenAI requests carry the same way: the output limit (the first of `keys`),
/// `stop`, `temperature`, `top_p`, `user`, `stream`; tuning parameters with no equivalent are
/// named in `dropped`. One walk over the request's members (a request has a few) instead of a
/// lookup of each name read here.
pub fn common(
    request: &serde_json::Map<String, Value>,
    keys: &[&str],
    form: &mut super::hub::form::Request,
    dropped: &mut Vec<String>,
) {
    use super::params::DROPPED_TUNING;
    form.stop = Vec::new();
    form.temperature = None;
    form.top_p = None;
    form.user = None;
    form.stream = false;
    form.parallel_tool_calls = None;
    form.tool_choice = None;
    // The output limit: the member of the earliest of `keys` that is a whole number.
    let mut limit: Option<(usize, u64)> = None;
    let mut tuning = [false; DROPPED_TUNING.len()];
    for (key, value) in request {
        let key = key.as_str();
        if let (Some(at), Some(max)) = (keys.iter().position(|k| *k == key), value.as_u64()) {
            if limit.is_none_or(|(first, _)| at < first) {
                limit = Some((at, max));
            }
        }
        if let Some(at) = DROPPED_TUNING.iter().position(|k| *k == key) {
            tuning[at] = !value.is_null();
        }
        match key {
            "stop" => {
                form.stop = match value {
                    Value::String(stop) => vec![Value::String(stop.clone())],
                    Value::Array(stops) => stops.clone(),
                    _ => Vec::new(),
                }
            }
            "temperature" => form.temperature = value.is_number().then(|| value.clone()),
            "top_p" => form.top_p = value.is_number().then(|| value.clone()),
            "user" => form.user = value.as_str().map(str::to_owned),
            "stream" => form.stream = value.as_bool() == Some(true),
            "parallel_tool_calls" => form.parallel_tool_calls = value.as_bool(),
            "tool_choice" => form.tool_choice = tool_choice(Some(value)),
            _ => {}
        }
    }
    form.max_tokens = limit.map(|(_, max)| max);
    for (key, set) in DROPPED_TUNING.iter().zip(tuning) {
        if set {
            super::params::drop_named(dropped, key);
        }
    }
}

/// Names in `dropped` every key of `request` not in `handled`.
pub fn drop_unknown(
    request: &serde_json::Map<String, Value>,
    handled: &[&str],
    dropped: &mut Vec<String>,
) {
    for key in request.keys() {
        if !handled.contains(&key.as_str()) {
            super::params::drop_named(dropped, key);
        }
    }
}

/// An OpenAI structured output format (`format` holds its `type`; `schema` its `name`,
/// `schema` and `strict`: nested in Chat Completions, beside the type in Responses); `None` for
/// plain text.
pub fn output_format(
    format: &Value,
    schema: &Value,
    parameter: &'static str,
) -> Result<Option<OutputFormat>, TranslateError> {
    let kind = match format.get("type").and_then(Value::as_str).unwrap_or("text") {
        "text" => return Ok(None),
        "json_object" => FormatKind::JsonObject,
        "json_schema" => FormatKind::JsonSchema {
            name: str_at(schema, "name").to_string(),
            schema: schema
                .get("schema")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            strict: schema.get("strict").and_then(Value::as_bool),
        },
        other => {
            return Err(TranslateError::unsupported(
                parameter,
                format!("the `{other}` format is not carried to the target's API"),
            ))
        }
    };
    Ok(Some(OutputFormat { kind, parameter }))
}

/// A function tool's `description` (when it has one), `name` and `parameters`, as both OpenAI
/// writers write them (Chat Completions in its `function`, Responses beside its `type`).
pub fn write_function_members(function: &mut ObjectWriter<'_>, tool: &Tool) {
    if let Some(description) = &tool.description {
        function.value("description", description);
    }
    function.str("name", &tool.name);
    function.value("parameters", &tool.parameters);
}

/// The members both OpenAI byte writers end a request with, `top_p` and `user`, and its end.
pub fn write_last_members(mut out: ObjectWriter<'_>, form: &Request) {
    if let Some(top_p) = &form.top_p {
        out.value("top_p", top_p);
    }
    if let Some(user) = &form.user {
        out.str("user", &super::openai_user::openai_user(user));
    }
    out.close();
}

/// An OpenAI `tool_choice`: its word, or an object `named` writes a named tool into (each API
/// shapes it its own way).
pub fn write_tool_choice(
    out: &mut BytesMut,
    choice: &ToolChoice,
    named: fn(&mut ObjectWriter<'_>, &str),
) {
    let word = match choice {
        ToolChoice::Auto => "auto",
        ToolChoice::None => "none",
        ToolChoice::Required => "required",
        ToolChoice::Named(name) => {
            let mut object = ObjectWriter::open(out);
            named(&mut object, name);
            object.close();
            return;
        }
    };
    write_str(out, word);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::translate::hub::form::Request;
    use serde_json::json;

    /// `common` as it read the request before its one walk: a lookup of each name.
    fn common_by_lookups(
        request: &serde_json::Map<String, Value>,
        keys: &[&str],
        form: &mut Request,
        dropped: &mut Vec<String>,
    ) {
        form.max_tokens = keys
            .iter()
            .find_map(|key| request.get(*key).and_then(Value::as_u64));
        form.stop = match request.get("stop") {
            Some(Value::String(stop)) => vec![Value::String(stop.clone())],
            Some(Value::Array(stops)) => stops.clone(),
            _ => Vec::new(),
        };
        form.temperature = request
            .get("temperature")
            .filter(|t| t.is_number())
            .cloned();
        form.top_p = request.get("top_p").filter(|p| p.is_number()).cloned();
        form.user = request
            .get("user")
            .and_then(Value::as_str)
            .map(str::to_owned);
        form.stream = request.get("stream").and_then(Value::as_bool) == Some(true);
        form.parallel_tool_calls = request.get("parallel_tool_calls").and_then(Value::as_bool);
        form.tool_choice = tool_choice(request.get("tool_choice"));
        for key in crate::wire::translate::params::DROPPED_TUNING {
            if request.get(key).is_some_and(|v| !v.is_null()) {
                crate::wire::translate::params::drop_named(dropped, key);
            }
        }
    }

    #[test]
    fn one_walk_reads_what_the_lookups_read() {
        let requests = [
            json!({"model": "m", "messages": []}),
            json!({"model": "m", "messages": [], "max_tokens": 64, "temperature": 0,
                   "stream": false}),
            json!({"max_tokens": 64, "max_completion_tokens": 32, "stop": "END",
                   "temperature": 0.7, "top_p": 1, "user": "u-1", "stream": true,
                   "parallel_tool_calls": false, "tool_choice": "required"}),
            json!({"max_tokens": 64, "max_completion_tokens": -1, "max_output_tokens": 9}),
            json!({"max_tokens": "64", "max_completion_tokens": 1.5, "stop": ["a", 1],
                   "temperature": "hot", "top_p": null, "user": 7, "stream": "yes",
                   "parallel_tool_calls": null, "tool_choice": {"type": "function",
                   "function": {"name": "f"}}}),
            json!({"top_k": 5, "seed": null, "logit_bias": {"1": 2}, "service_tier": "auto",
                   "frequency_penalty": 0.1, "presence_penalty": 0, "store": true,
                   "tool_choice": {"name": "g"}, "stop": {"x": 1}}),
            json!({"tool_choice": 3, "stream": null, "user": null, "unknown": [1]}),
        ];
        let keys: [&[&str]; 3] = [
            &["max_completion_tokens", "max_tokens"],
            &["max_output_tokens"],
            &["max_tokens", "max_completion_tokens"],
        ];
        for request in requests {
            let Value::Object(request) = request else {
                unreachable!()
            };
            for keys in keys {
                // A form that already holds other values: both set every field they read.
                let held = Request {
                    max_tokens: Some(1),
                    stop: vec![json!("old")],
                    temperature: Some(json!(2)),
                    user: Some("old".into()),
                    stream: true,
                    ..Request::default()
                };
                let (mut walked, mut looked) = (held.clone(), held);
                let (mut walked_dropped, mut looked_dropped) =
                    (vec!["seed".to_string()], vec!["seed".to_string()]);
                common(&request, keys, &mut walked, &mut walked_dropped);
                common_by_lookups(&request, keys, &mut looked, &mut looked_dropped);
                assert_eq!(walked, looked, "{request:?} {keys:?}");
                assert_eq!(walked_dropped, looked_dropped, "{request:?} {keys:?}");
            }
        }
    }
}
