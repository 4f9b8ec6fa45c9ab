//! A Gemini client's plain text request read by one `json_scan` walk over its bytes, without
//! serde's visitors: text parts in `contents` and `systemInstruction`, and the sampling
//! numbers of `generationConfig` (`maxOutputTokens`, `temperature`, `topP`,
//! `stopSequences` of strings), `model`, `labels` and `safetySettings` passed over. It gives
//! exactly the form and the dropped names the typed shape (`typed_request`) gives, or declines
//! (`None`) and the typed shape reads the body: on any other member or part (tools, calls,
//! images, thinking, snake-case spellings), a `null` where it reads a value, a duplicated
//! member, and what `json_scan` does not read exactly as `serde_json` does.

use std::borrow::Cow;

use serde_json::{Number, Value};

use crate::wire::json_scan::{Scan, Seen, DEPTH};
use crate::wire::translate::hub::form::{Part, Request, Role};
use crate::wire::translate::params::drop_named;

/// What `generationConfig` sets on the form, as the typed shape sets it.
#[derive(Default)]
struct Config {
    max_tokens: Option<u64>,
    temperature: Option<Value>,
    top_p: Option<Value>,
    stop: Vec<Value>,
}

/// The Gemini request `body` in the hub's form (names it drops added to `dropped`), or `None`
/// when the scan declines it.
pub fn request(body: &[u8], dropped: &mut Vec<String>) -> Option<Request> {
    let text = std::str::from_utf8(body).ok()?;
    let mut scan = Scan::new(text);
    let mut form = Request::default();
    let mut system: Option<String> = None;
    let mut config: Option<Config> = None;
    let mut safety_settings = false;
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "contents" => {
            seen.first(0)?;
            scan.array(|scan| {
                // Its texts as parts straight away, empty ones left out (room for one: nearly
                // every content is one text).
                let mut parts = Vec::with_capacity(1);
                let role = content(scan, |text| {
                    if !text.is_empty() {
                        parts.push(Part::Text(text.into_owned()));
                    }
                })?;
                let role = match role.as_deref() {
                    Some("model") => Role::Assistant,
                    _ => Role::User,
                };
                form.push(role, parts);
                Some(())
            })
        }
        "systemInstruction" => {
            seen.first(1)?;
            // The system instruction's role is read by no one; its texts are joined by
            // newlines (empty ones too), as they come.
            let mut joined: Option<String> = None;
            content(scan, |text| match &mut joined {
                None => joined = Some(text.into_owned()),
                Some(joined) => {
                    joined.push('\n');
                    joined.push_str(&text);
                }
            })?;
            system = Some(joined.unwrap_or_default());
            Some(())
        }
        "generationConfig" => {
            seen.first(2)?;
            config = Some(generation_config(scan)?);
            Some(())
        }
        "safetySettings" => {
            seen.first(3)?;
            // A `null` is no setting: the typed shape reads it as absent.
            if scan.null() {
                return None;
            }
            safety_settings = true;
            scan.skip(DEPTH)
        }
        "model" => {
            seen.first(4)?;
            scan.skip(DEPTH)
        }
        "labels" => {
            seen.first(5)?;
            scan.skip(DEPTH)
        }
        _ => None,
    })?;
    scan.end()?;
    // `contents` is the one member a request must have.
    seen.all(1)?;
    if let Some(system) = system.filter(|text| !text.is_empty()) {
        form.system.push(system);
    }
    if let Some(config) = config {
        form.max_tokens = config.max_tokens;
        form.stop = config.stop;
        form.temperature = config.temperature;
        form.top_p = config.top_p;
    }
    if safety_settings {
        drop_named(dropped, "safetySettings");
    }
    Some(form)
}

/// A content of text parts (`None` for any other part or member): its `role` (when given),
/// each of its texts (empty ones too) handed to `text` in order.
fn content<'a>(
    scan: &mut Scan<'a>,
    mut text: impl FnMut(Cow<'a, str>),
) -> Option<Option<Cow<'a, str>>> {
    let mut role = None;
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "role" => {
            seen.first(0)?;
            role = Some(scan.string()?);
            Some(())
        }
        "parts" => {
            seen.first(1)?;
            scan.array(|scan| {
                let mut read = None;
                scan.object(|scan, key| match &*key {
                    "text" if read.is_none() => {
                        read = Some(scan.string()?);
                        Some(())
                    }
                    _ => None,
                })?;
                text(read?);
                Some(())
            })
        }
        _ => None,
    })?;
    Some(role)
}

/// `generationConfig`'s sampling numbers and stop sequences (`None` for any other member).
fn generation_config(scan: &mut Scan<'_>) -> Option<Config> {
    let mut config = Config::default();
    let mut seen = Seen::default();
    scan.object(|scan, key| match &*key {
        "maxOutputTokens" => {
            seen.first(0)?;
            config.max_tokens = Some(scan.count(0)?);
            Some(())
        }
        "temperature" => {
            seen.first(1)?;
            config.temperature = Some(number(scan)?);
            Some(())
        }
        "topP" => {
            seen.first(2)?;
            config.top_p = Some(number(scan)?);
            Some(())
        }
        "stopSequences" => {
            seen.first(3)?;
            scan.array(|scan| {
                config.stop.push(Value::String(scan.string()?.into_owned()));
                Some(())
            })
        }
        _ => None,
    })?;
    Some(config)
}

/// A number as `serde_json` reads it into a `Number`: a whole one of at most 18 digits as
/// that count, any other its own text parsed (`None` for what is no number `json_scan` reads).
fn number(scan: &mut Scan<'_>) -> Option<Value> {
    if scan.null() {
        return None;
    }
    let start = scan.at;
    let number = match scan.number()? {
        Some(whole) => Number::from(whole),
        None => serde_json::from_str(scan.read_since(start)?).ok()?,
    };
    Some(Value::Number(number))
}
