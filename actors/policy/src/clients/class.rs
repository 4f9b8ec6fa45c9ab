//! A request's class (behaviour §13 "Spare quota only"): `normal`, or `spare` — only quota
//! that would otherwise be lost at a reset. A client is spare by its config (`class = "spare"`)
//! or marks single requests spare with the `x-quotaroute-class: spare` header when its config
//! allows it (`allow_spare_header = true`). Pure: the client's config and the header's value in,
//! the class or why the header is refused out.

use serde::{Deserialize, Serialize};

/// The request header that marks a request spare.
pub const CLASS_HEADER: &str = "x-quotaroute-class";

/// What a request may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestClass {
    /// Any quota the pool has (the default).
    #[default]
    Normal,
    /// Only quota forecast to be lost at a reset; waits behind every other class.
    Spare,
}

impl RequestClass {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestClass::Normal => "normal",
            RequestClass::Spare => "spare",
        }
    }

    /// `class = "…"` in a `[[clients]]` entry.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "normal" => Some(RequestClass::Normal),
            "spare" => Some(RequestClass::Spare),
            _ => None,
        }
    }
}

/// Why a request's `x-quotaroute-class` header is refused (a 400: the request is not routed,
/// so a batch job that meant to use only spare quota never spends the working users' quota).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClassHeaderError {
    #[error(
        "header `x-quotaroute-class: spare` is not allowed for this client (its config needs `allow_spare_header = true`)"
    )]
    NotAllowed,
    #[error("header `x-quotaroute-class` must be `spare`")]
    UnknownValue,
}

/// The class of one request of a client of class `configured` that may (or may not) mark
/// requests spare, with the header's value when it sent one. A spare client stays spare
/// whatever the header says; only `spare` is a value (case and surrounding spaces aside).
pub fn request_class(
    configured: RequestClass,
    allow_spare_header: bool,
    header: Option<&[u8]>,
) -> Result<RequestClass, ClassHeaderError> {
    let Some(value) = header else {
        return Ok(configured);
    };
    let is_spare = std::str::from_utf8(value)
        .map(|text| text.trim().eq_ignore_ascii_case("spare"))
        .unwrap_or(false);
    if !is_spare {
        return Err(ClassHeaderError::UnknownValue);
    }
    match (configured, allow_spare_header) {
        (RequestClass::Spare, _) | (_, true) => Ok(RequestClass::Spare),
        (RequestClass::Normal, false) => Err(ClassHeaderError::NotAllowed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_marks_a_request_spare_only_where_allowed() {
        use RequestClass::{Normal, Spare};
        assert_eq!(request_class(Normal, false, None), Ok(Normal));
        assert_eq!(request_class(Spare, false, None), Ok(Spare));
        assert_eq!(request_class(Normal, true, None), Ok(Normal));
        assert_eq!(request_class(Normal, true, Some(b"spare")), Ok(Spare));
        assert_eq!(request_class(Normal, true, Some(b" Spare ")), Ok(Spare));
        assert_eq!(request_class(Spare, false, Some(b"spare")), Ok(Spare));
        assert_eq!(
            request_class(Normal, false, Some(b"spare")),
            Err(ClassHeaderError::NotAllowed)
        );
        // A spare client cannot make itself normal; nonsense is refused, not ignored.
        assert_eq!(
            request_class(Spare, true, Some(b"normal")),
            Err(ClassHeaderError::UnknownValue)
        );
        assert_eq!(
            request_class(Normal, true, Some(b"\xff")),
            Err(ClassHeaderError::UnknownValue)
        );
    }
}
