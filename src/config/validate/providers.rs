//! `[[providers]]`: names, formats, base URLs, the egress (roots, proxy), auth and breaker
//! overrides.

use std::collections::HashMap;
use std::path::PathBuf;

use axum::http::{HeaderName, HeaderValue};
use url::Url;

use crate::config::error::ErrorSink;
use crate::config::model::{ApiFormat, ProviderConfig};
use crate::config::raw::RawProvider;
use crate::config::secret::Secret;
use crate::tls_files;
use crate::wire::translate::Api;
use crate::wire::upstream_mask::mask_url;

use super::checks::{check_unique, one_of, required_name};
use super::defaults::check_breaker;
use super::server::DEFAULT_UPSTREAM_ACCEPT_ENCODING;

pub(super) fn build_providers(
    raw: Vec<Option<RawProvider>>,
    sink: &mut ErrorSink,
) -> Vec<Option<ProviderConfig>> {
    let mut seen = HashMap::new();
    raw.into_iter()
        .enumerate()
        .map(|(index, provider)| {
            let provider = provider?;
            let prefix = format!("providers[{index}]");
            let name_key = format!("{prefix}.name");
            let name = required_name(provider.name, &name_key, sink);
            let unique = name.as_deref().is_some_and(|name| {
                check_unique(name, &name_key, "provider name", &mut seen, sink)
            });
            let format = match provider.format {
                Some(format) => one_of(
                    &format,
                    &[
                        ("openai", ApiFormat::OpenAi),
                        ("anthropic", ApiFormat::Anthropic),
                        ("gemini", ApiFormat::Gemini),
                    ],
                    &format!("{prefix}.format"),
                    sink,
                ),
                None => {
                    sink.push(
                        format!("{prefix}.format"),
                        "missing: `openai`, `anthropic` or `gemini`",
                    );
                    None
                }
            };
            let apis = provider
                .apis
                .map(|apis| parse_apis(&apis, &format!("{prefix}.apis"), sink));
            let base_url = parse_base_url(provider.base_url, &format!("{prefix}.base_url"), sink);
            if let Some(header) = &provider.auth_header {
                if HeaderName::from_bytes(header.as_bytes()).is_err() {
                    sink.push(
                        format!("{prefix}.auth_header"),
                        format!("`{header}` is not a valid HTTP header name"),
                    );
                }
            }
            let headers = provider.headers.unwrap_or_default();
            for (header, value) in &headers {
                let key = format!("{prefix}.headers.{header}");
                if HeaderName::from_bytes(header.as_bytes()).is_err() {
                    sink.push(key, "not a valid HTTP header name");
                } else if HeaderValue::from_str(value).is_err() {
                    sink.push(key, "value is not a valid HTTP header value");
                }
            }
            let accept_encoding = provider
                .accept_encoding
                .unwrap_or_else(|| DEFAULT_UPSTREAM_ACCEPT_ENCODING.to_owned());
            if accept_encoding.is_empty() || HeaderValue::from_str(&accept_encoding).is_err() {
                sink.push(
                    format!("{prefix}.accept_encoding"),
                    "must be an Accept-Encoding value such as \"identity\" or \"gzip, br\"",
                );
            }
            let ca_file = provider.ca_file.map(PathBuf::from);
            let ca_certs = match &ca_file {
                Some(path) => tls_files::read_certificates(path).unwrap_or_else(|reason| {
                    sink.push(format!("{prefix}.ca_file"), reason);
                    Vec::new()
                }),
                None => Vec::new(),
            };
            let proxy = provider
                .proxy
                .filter(|url| check_proxy(url, &format!("{prefix}.proxy"), sink))
                .map(Secret::new);
            let breaker = provider.breaker.unwrap_or_default();
            check_breaker(&breaker, &prefix, sink);
            let (name, format, base_url) = (name?, format?, base_url?);
            let apis = apis.unwrap_or_else(|| format.default_apis());
            unique.then_some(ProviderConfig {
                name,
                format,
                apis,
                base_url,
                auth_header: provider.auth_header,
                headers,
                accept_encoding,
                ca_file,
                ca_certs,
                proxy,
                breaker,
                cooldown: provider.cooldown.unwrap_or_default(),
                lockout: provider.lockout.unwrap_or_default(),
                buckets: provider.buckets.unwrap_or_default(),
            })
        })
        .collect()
}

/// `apis`: a non-empty list of the generation API names, each once.
fn parse_apis(names: &[String], key: &str, sink: &mut ErrorSink) -> Vec<Api> {
    let mut apis = Vec::with_capacity(names.len());
    for name in names {
        match Api::from_name(name) {
            Some(api) if !apis.contains(&api) => apis.push(api),
            Some(_) => sink.push(key, format!("`{name}` is listed twice")),
            None => sink.push(
                key,
                format!("`{name}` is not a generation API: `chat`, `responses` or `messages`"),
            ),
        }
    }
    if names.is_empty() {
        sink.push(
            key,
            "must name at least one API: `chat`, `responses` or `messages`",
        );
    }
    apis
}

fn parse_base_url(value: Option<String>, key: &str, sink: &mut ErrorSink) -> Option<Url> {
    let Some(text) = value else {
        sink.push(key, "missing (required), e.g. `https://api.openai.com/v1`");
        return None;
    };
    // Printed only with its credentials cut: a URL may carry a key where it should not.
    let shown = mask_url(&text);
    match Url::parse(&text) {
        Ok(url) if !url.username().is_empty() || url.password().is_some() => {
            sink.push(
                key,
                "must not carry credentials (user:password@): give the key to the connection, or send it with the provider's `headers` or `auth_header`",
            );
            None
        }
        Ok(url) if url.query().is_some() || url.fragment().is_some() => {
            sink.push(
                key,
                "must not carry a query string or fragment (a `?key=` would be sent and logged with every path): use the provider's `headers` or `auth_header`",
            );
            None
        }
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Some(url),
        Ok(url) => {
            sink.push(
                key,
                format!(
                    "`{shown}` must be an http or https URL with a host (scheme is `{}`)",
                    url.scheme()
                ),
            );
            None
        }
        Err(error) => {
            sink.push(key, format!("`{shown}` is not a valid URL: {error}"));
            None
        }
    }
}

/// A proxy URL as operators write it (`http://user:pass@proxy:3128`), with its credentials
/// hidden for error messages.
fn check_proxy(value: &str, key: &str, sink: &mut ErrorSink) -> bool {
    let shown = |url: &Url| {
        let mut url = url.clone();
        if url.password().is_some() {
            let _ = url.set_password(Some("***"));
        }
        url.to_string()
    };
    match Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => true,
        Ok(url) => {
            sink.push(
                key,
                format!(
                    "`{}` is not an http(s) proxy URL (scheme `{}`); use e.g. http://proxy.corp:3128",
                    shown(&url),
                    url.scheme()
                ),
            );
            false
        }
        Err(error) => {
            sink.push(key, format!("not a valid proxy URL: {error}"));
            false
        }
    }
}
