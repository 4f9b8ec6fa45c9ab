//! `[telemetry]` → [`TelemetryConfig`]: the OTLP/HTTP endpoint (an http or https URL, printed
//! only masked), the service name and the sample ratio. Checks values only; the exporter is
//! `crate::telemetry`'s.

use url::Url;

use crate::wire::upstream_mask::mask_url;

use super::error::ErrorSink;
use super::model::TelemetryConfig;
use super::raw::RawTelemetry;

pub const DEFAULT_SERVICE_NAME: &str = "quotaroute";
pub const DEFAULT_SAMPLE_RATIO: f64 = 1.0;

/// The OTLP/HTTP path of the traces signal, appended to an endpoint that does not end with it.
const TRACES_PATH: &str = "v1/traces";

/// The validated section, or `None` (with the reasons in `sink`).
pub(crate) fn build(raw: RawTelemetry, sink: &mut ErrorSink) -> Option<TelemetryConfig> {
    let traces_url = traces_url(raw.otlp_endpoint, sink);
    let service_name = raw
        .service_name
        .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());
    if service_name.trim().is_empty() {
        sink.push("telemetry.service_name", "must not be empty");
    }
    let sample_ratio = raw.sample_ratio.unwrap_or(DEFAULT_SAMPLE_RATIO);
    if !(0.0..=1.0).contains(&sample_ratio) {
        sink.push(
            "telemetry.sample_ratio",
            format!("must be between 0.0 and 1.0 (got {sample_ratio})"),
        );
        return None;
    }
    Some(TelemetryConfig {
        traces_url: traces_url?,
        service_name,
        sample_ratio,
    })
}

fn traces_url(value: Option<String>, sink: &mut ErrorSink) -> Option<Url> {
    const KEY: &str = "telemetry.otlp_endpoint";
    let Some(text) = value else {
        sink.push(
            KEY,
            "missing (required in [telemetry]), e.g. `http://127.0.0.1:4318`",
        );
        return None;
    };
    // Printed only masked: a URL may carry a token where it should not.
    let shown = mask_url(&text);
    let mut url = match Url::parse(&text) {
        Ok(url) => url,
        Err(error) => {
            sink.push(KEY, format!("`{shown}` is not a valid URL: {error}"));
            return None;
        }
    };
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        sink.push(
            KEY,
            format!(
                "`{shown}` must be an http or https URL with a host (OTLP/HTTP, usually port 4318; scheme is `{}`)",
                url.scheme()
            ),
        );
        return None;
    }
    if !url.username().is_empty() || url.password().is_some() {
        sink.push(
            KEY,
            format!(
                "`{shown}` must not carry credentials (user:password@): they would not be sent"
            ),
        );
        return None;
    }
    if url.query().is_some() || url.fragment().is_some() {
        sink.push(
            KEY,
            format!("`{shown}` must not carry a query string or fragment"),
        );
        return None;
    }
    if !url.path().trim_end_matches('/').ends_with(TRACES_PATH) {
        let path = format!("{}/{TRACES_PATH}", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Some(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(endpoint: &str, ratio: Option<f64>) -> Result<TelemetryConfig, String> {
        let mut sink = ErrorSink::new("t.toml");
        let raw = RawTelemetry {
            otlp_endpoint: Some(endpoint.to_owned()),
            service_name: None,
            sample_ratio: ratio,
        };
        let built = build(raw, &mut sink);
        sink.finish().map_err(|errors| errors.to_string())?;
        built.ok_or_else(|| "no config".to_owned())
    }

    #[test]
    fn the_traces_path_is_appended_once() {
        for (given, expected) in [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
            ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
            ("https://otel.test/otlp", "https://otel.test/otlp/v1/traces"),
            (
                "http://c.test:4318/v1/traces",
                "http://c.test:4318/v1/traces",
            ),
        ] {
            let config = built(given, None).unwrap();
            assert_eq!(config.traces_url.as_str(), expected);
            assert_eq!(config.service_name, "quotaroute");
            assert_eq!(config.sample_ratio, 1.0);
        }
    }

    #[test]
    fn bad_endpoints_and_ratios_are_named_and_never_print_a_secret() {
        for (given, ratio, says) in [
            ("grpc://127.0.0.1:4317", None, "http or https"),
            ("not a url", None, "not a valid URL"),
            ("http://user:s3cret@c.test:4318", None, "credentials"),
            ("http://c.test:4318?token=s3cret", None, "query"),
            ("http://c.test:4318", Some(1.5), "between 0.0 and 1.0"),
            ("http://c.test:4318", Some(-0.1), "between 0.0 and 1.0"),
        ] {
            let error = built(given, ratio).unwrap_err();
            assert!(error.contains(says), "{given}: {error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
    }
}
