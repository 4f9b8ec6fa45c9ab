//! Google's `google.rpc` error details (behaviour §15 "Google's answers, classified"): the
//! `ErrorInfo` reasons and `QuotaFailure` violations of a Gemini (or Vertex AI, or Google's
//! OpenAI-compatible endpoint) error body, what they say — a bad or suspended key, a quota spent
//! for the day or for the minute — and when a day's quota comes back: the next midnight in
//! America/Los_Angeles, where Google's daily quotas reset.
//!
//! Pure: reads a parsed body and takes `now_ms`; the time zone comes from the tz database
//! bundled into the binary (jiff's `tzdb-bundle-always`), so the answer never depends on the
//! host's `/usr/share/zoneinfo`. `classify` decides what the findings do.

use jiff::tz::TimeZoneDatabase;
use jiff::Timestamp;
use serde_json::Value;

/// The zone whose midnight resets Google's per-day quotas.
const QUOTA_DAY_ZONE: &str = "America/Los_Angeles";
/// `ErrorInfo.reason`s of a key that does not work (400 `INVALID_ARGUMENT`).
const BAD_KEY_REASONS: [&str; 2] = ["API_KEY_INVALID", "API_KEY_EXPIRED"];
/// `ErrorInfo.reason`s of a key that is blocked or whose project is suspended (403).
const BLOCKED_KEY_REASONS: [&str; 2] = ["API_KEY_SERVICE_BLOCKED", "CONSUMER_SUSPENDED"];

/// Which Google quota a 429 says ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoogleQuota {
    /// A `…PerDay…` quota: back at the next Pacific midnight. `quota_id` is the violation's,
    /// `model` its `quotaDimensions.model` when it names one.
    PerDay {
        quota_id: String,
        model: Option<String>,
    },
    /// Only shorter quotas (per minute): back after `RetryInfo.retryDelay`.
    Shorter { quota_id: String },
}

impl GoogleQuota {
    pub fn quota_id(&self) -> &str {
        match self {
            Self::PerDay { quota_id, .. } | Self::Shorter { quota_id } => quota_id,
        }
    }
}

/// What a Google error body's details say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoogleDetails {
    /// Every `ErrorInfo.reason`, in order.
    pub reasons: Vec<String>,
    /// The `QuotaFailure`, if any: a day's quota wins over shorter ones.
    pub quota: Option<GoogleQuota>,
}

impl GoogleDetails {
    /// Reads `error.details` of `{"error": {...}}` (or of its first element, the list Google's
    /// OpenAI-compatible endpoint and Vertex AI send); anything else yields nothing.
    pub fn from_body(body: &Value) -> Self {
        let body = match body {
            Value::Array(items) => items.first().unwrap_or(&Value::Null),
            other => other,
        };
        let details = body
            .get("error")
            .and_then(|error| error.get("details"))
            .and_then(Value::as_array);
        let mut found = Self::default();
        for detail in details.into_iter().flatten() {
            let kind = detail.get("@type").and_then(Value::as_str).unwrap_or("");
            if kind.ends_with("google.rpc.ErrorInfo") {
                if let Some(reason) = detail.get("reason").and_then(Value::as_str) {
                    found.reasons.push(reason.to_owned());
                }
            } else if kind.ends_with("google.rpc.QuotaFailure") {
                found.quota = quota_of(detail).or(found.quota);
            }
        }
        found
    }

    fn has_reason(&self, wanted: &[&str]) -> bool {
        self.reasons
            .iter()
            .any(|reason| wanted.iter().any(|w| reason.eq_ignore_ascii_case(w)))
    }

    /// 400 `API_KEY_INVALID` / `API_KEY_EXPIRED`: the key is bad, not the request.
    pub fn bad_key(&self) -> bool {
        self.has_reason(&BAD_KEY_REASONS)
    }

    /// 403 `API_KEY_SERVICE_BLOCKED` / `CONSUMER_SUSPENDED`.
    pub fn blocked_key(&self) -> bool {
        self.has_reason(&BLOCKED_KEY_REASONS)
    }

    /// The most specific identifier for the journal's `error_code`: the `ErrorInfo` reason,
    /// else the deciding quota id.
    pub fn error_code(&self) -> Option<String> {
        self.reasons
            .first()
            .cloned()
            .or_else(|| self.quota.as_ref().map(|quota| quota.quota_id().to_owned()))
    }
}

/// The violation that decides: the first per-day one, else the first one.
fn quota_of(detail: &Value) -> Option<GoogleQuota> {
    let violations = detail.get("violations").and_then(Value::as_array)?;
    let quota_id = |violation: &Value| {
        violation
            .get("quotaId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    if let Some(day) = violations
        .iter()
        .find(|violation| quota_id(violation).contains("PerDay"))
    {
        return Some(GoogleQuota::PerDay {
            quota_id: quota_id(day),
            model: day
                .pointer("/quotaDimensions/model")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    violations.first().map(|violation| GoogleQuota::Shorter {
        quota_id: quota_id(violation),
    })
}

/// Milliseconds from `now_ms` to the next midnight in America/Los_Angeles (with its daylight
/// saving time), when Google's per-day quotas reset; `None` only if the bundled zone is missing
/// or `now_ms` is out of range.
pub fn ms_to_next_pacific_midnight(now_ms: u64) -> Option<u64> {
    let zone = TimeZoneDatabase::bundled().get(QUOTA_DAY_ZONE).ok()?;
    let now = Timestamp::from_millisecond(i64::try_from(now_ms).ok()?).ok()?;
    let midnight = now
        .to_zoned_datetime(zone)
        .tomorrow()
        .ok()?
        .start_of_day()
        .ok()?;
    let at_ms = u64::try_from(midnight.timestamp().as_millisecond()).ok()?;
    Some(at_ms.saturating_sub(now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Unix ms of an RFC 3339 instant.
    fn at(text: &str) -> u64 {
        u64::try_from(text.parse::<Timestamp>().unwrap().as_millisecond()).unwrap()
    }

    #[test]
    fn midnight_pacific_follows_daylight_saving_time() {
        const HOUR: u64 = 3_600_000;
        // Summer (PDT, UTC-7): 10:00 UTC is 03:00 in Los Angeles; midnight is 07:00 UTC next day.
        assert_eq!(
            ms_to_next_pacific_midnight(at("2026-07-01T10:00:00Z")),
            Some(21 * HOUR)
        );
        // Winter (PST, UTC-8): midnight is 08:00 UTC.
        assert_eq!(
            ms_to_next_pacific_midnight(at("2026-12-05T18:00:00Z")),
            Some(14 * HOUR)
        );
        // One millisecond before midnight PST: one millisecond left.
        assert_eq!(
            ms_to_next_pacific_midnight(at("2026-12-06T07:59:59.999Z")),
            Some(1)
        );
        // The day DST starts (8 March 2026) has 23 hours: from its midnight (08:00 UTC) the next
        // is at 07:00 UTC on the 9th.
        assert_eq!(
            ms_to_next_pacific_midnight(at("2026-03-08T08:00:00Z")),
            Some(23 * HOUR)
        );
        // The day it ends (1 November 2026) has 25.
        assert_eq!(
            ms_to_next_pacific_midnight(at("2026-11-01T07:00:00Z")),
            Some(25 * HOUR)
        );
    }

    #[test]
    fn a_day_violation_wins_and_names_its_model() {
        let body = json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"},
                {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                 "quotaDimensions": {"location": "global", "model": "gemini-2.5-pro"}}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}]}});
        let details = GoogleDetails::from_body(&body);
        assert_eq!(
            details.quota,
            Some(GoogleQuota::PerDay {
                quota_id: "GenerateRequestsPerDayPerProjectPerModel-FreeTier".into(),
                model: Some("gemini-2.5-pro".into()),
            })
        );
        let minute = json!([{"error": {"details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]}]}}]);
        assert!(matches!(
            GoogleDetails::from_body(&minute).quota,
            Some(GoogleQuota::Shorter { .. })
        ));
    }

    #[test]
    fn key_reasons_are_read_from_error_info() {
        let bad = json!({"error": {"code": 400, "details": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
             "domain": "googleapis.com"}]}});
        assert!(GoogleDetails::from_body(&bad).bad_key());
        let suspended = json!({"error": {"code": 403, "details": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "CONSUMER_SUSPENDED"}]}});
        assert!(GoogleDetails::from_body(&suspended).blocked_key());
        for odd in [
            json!(null),
            json!({"error": "text"}),
            json!({"error": {"details": "x"}}),
        ] {
            assert_eq!(GoogleDetails::from_body(&odd), GoogleDetails::default());
        }
    }
}
