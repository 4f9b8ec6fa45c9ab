//! The Responses API's endpoints on stored responses, as OpenAI answers them: `GET`/`DELETE
//! …/responses/{id}`, `GET …/responses/{id}/input_items`, `POST …/responses/{id}/cancel`. A
//! response is only found by the key that made it; any other key gets OpenAI's 404.
//!
//! Owns these four answers and their record in [`MockStats::stored_lookups`]; faults, budgets
//! and the encoding go through the same machinery as every other endpoint.
//!
//! [`MockStats::stored_lookups`]: super::MockStats::stored_lookups

use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::error_bodies;
use super::rate_headers::{budget_headers, insert, Dialect};
use super::state::{MockUpstream, StoredLookup};
use super::verdict::{
    error_response, exhausted_budget, fault_verdict, method_not_allowed, with_forced, Verdict,
};

/// `input_items` pages: OpenAI's default and largest `limit`.
const DEFAULT_PAGE: usize = 20;
const MAX_PAGE: usize = 100;

/// Which stored-response endpoint a path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredRoute {
    /// `…/responses/{id}`: `GET` or `DELETE`.
    Response(String),
    /// `…/responses/{id}/input_items`: `GET`.
    InputItems(String),
    /// `…/responses/{id}/cancel`: `POST`.
    Cancel(String),
}

impl StoredRoute {
    /// Matches `…/responses/{id}[/input_items|/cancel]` with any prefix.
    pub(crate) fn from_path(path: &str) -> Option<Self> {
        let path = path.trim_end_matches('/');
        let (_, rest) = path.rsplit_once("/responses/")?;
        let mut parts = rest.split('/');
        // `…/responses/compact` is the compaction endpoint, not a stored response.
        let id = parts
            .next()
            .filter(|id| !id.is_empty() && *id != "compact")?
            .to_owned();
        let route = match (parts.next(), parts.next()) {
            (None, _) => Self::Response(id),
            (Some("input_items"), None) => Self::InputItems(id),
            (Some("cancel"), None) => Self::Cancel(id),
            _ => return None,
        };
        Some(route)
    }

    fn id(&self) -> &str {
        match self {
            Self::Response(id) | Self::InputItems(id) | Self::Cancel(id) => id,
        }
    }
}

/// What a request on a stored response asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Get,
    Delete,
    InputItems,
    Cancel,
}

impl Action {
    fn of(route: &StoredRoute, method: &Method) -> Option<Self> {
        match (route, method) {
            (StoredRoute::Response(_), &Method::GET) => Some(Self::Get),
            (StoredRoute::Response(_), &Method::DELETE) => Some(Self::Delete),
            (StoredRoute::InputItems(_), &Method::GET) => Some(Self::InputItems),
            (StoredRoute::Cancel(_), &Method::POST) => Some(Self::Cancel),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Delete => "delete",
            Self::InputItems => "input_items",
            Self::Cancel => "cancel",
        }
    }
}

/// One request on a stored response, after the key and `x-mock-key` were read.
pub(crate) async fn answer(
    mock: &MockUpstream,
    method: &Method,
    route: StoredRoute,
    query: Option<&str>,
    key: &str,
    mut headers: HeaderMap,
) -> Response {
    let Some(action) = Action::of(&route, method) else {
        return method_not_allowed(Dialect::OpenAi, headers);
    };
    let id = route.id().to_owned();
    let model = mock
        .stored_response(key, &id)
        .map(|stored| stored.model)
        .unwrap_or_default();
    let admission = mock.admit(key, &model, false, 0);
    if key.is_empty() {
        budget_headers(&mut headers, Dialect::OpenAi, &admission.rate, true);
        let reply = error_bodies::for_status(Dialect::OpenAi, 401, "", &model);
        return error_response(reply, headers);
    }
    if admission.fault.is_none() && admission.budget_exhausted {
        return exhausted_budget(Dialect::OpenAi, &model, &admission.rate, headers);
    }
    let verdict = fault_verdict(
        admission.fault,
        Dialect::OpenAi,
        key,
        &model,
        false,
        &admission.rate,
        &mut headers,
    )
    .await;
    let shape = match verdict {
        Verdict::Answer(response) => return response,
        Verdict::Succeed(shape) => shape,
    };
    budget_headers(&mut headers, Dialect::OpenAi, &admission.rate, true);
    let body = match action {
        Action::Get => mock.stored_response(key, &id).map(|stored| stored.response),
        Action::Delete => mock
            .delete_stored_response(key, &id)
            .then(|| json!({"id": id, "object": "response", "deleted": true})),
        Action::InputItems => mock
            .stored_response(key, &id)
            .map(|stored| input_items_page(stored.input_items, query)),
        Action::Cancel => mock
            .update_stored_response(key, &id, |stored| {
                stored.response["status"] = json!("cancelled");
            })
            .map(|stored| stored.response),
    };
    mock.record_stored_lookup(StoredLookup {
        key: key.to_owned(),
        response_id: id.clone(),
        action: action.name().to_owned(),
        found: body.is_some(),
    });
    let Some(body) = body else {
        return error_response(error_bodies::response_not_found(&id), headers);
    };
    insert(
        &mut headers,
        header::CONTENT_TYPE.as_str(),
        "application/json",
    );
    let response = (StatusCode::OK, headers, body.to_string()).into_response();
    with_forced(response, shape.forced)
}

/// One page of input items: `order` (`desc` by default, as OpenAI), `limit` (20, at most 100)
/// and the `after` cursor.
fn input_items_page(mut items: Vec<Value>, query: Option<&str>) -> Value {
    let parameter = |name: &str| {
        query?
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_owned())
    };
    if parameter("order").as_deref() != Some("asc") {
        items.reverse();
    }
    if let Some(after) = parameter("after") {
        if let Some(position) = items.iter().position(|item| item["id"] == after.as_str()) {
            items.drain(..=position);
        }
    }
    let limit = parameter("limit")
        .and_then(|limit| limit.parse::<usize>().ok())
        .unwrap_or(DEFAULT_PAGE)
        .clamp(1, MAX_PAGE);
    let has_more = items.len() > limit;
    items.truncate(limit);
    let first_id = items.first().map(|item| item["id"].clone());
    let last_id = items.last().map(|item| item["id"].clone());
    json!({
        "object": "list",
        "data": items,
        "first_id": first_id,
        "last_id": last_id,
        "has_more": has_more,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_matched_with_any_prefix() {
        assert_eq!(
            StoredRoute::from_path("/v1/responses/resp_1"),
            Some(StoredRoute::Response("resp_1".into()))
        );
        assert_eq!(
            StoredRoute::from_path("/openai/v1/responses/resp_1/input_items"),
            Some(StoredRoute::InputItems("resp_1".into()))
        );
        assert_eq!(
            StoredRoute::from_path("/v1/responses/resp_1/cancel/"),
            Some(StoredRoute::Cancel("resp_1".into()))
        );
        assert_eq!(StoredRoute::from_path("/v1/responses"), None);
        assert_eq!(StoredRoute::from_path("/v1/responses/"), None);
        assert_eq!(StoredRoute::from_path("/v1/responses/compact"), None);
        assert_eq!(StoredRoute::from_path("/v1/responses/r/other"), None);
    }

    #[test]
    fn input_items_default_to_newest_first_in_pages_of_twenty() {
        let items: Vec<Value> = (0..25)
            .map(|index| json!({"id": format!("i{index}")}))
            .collect();
        let page = input_items_page(items.clone(), None);
        assert_eq!(page["data"].as_array().map(Vec::len), Some(20));
        assert_eq!(page["first_id"], "i24");
        assert_eq!(page["has_more"], true);
        let page = input_items_page(items, Some("order=asc&after=i21"));
        assert_eq!(page["first_id"], "i22");
        assert_eq!(page["last_id"], "i24");
        assert_eq!(page["has_more"], false);
    }
}
