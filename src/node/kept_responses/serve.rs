//! The stored-response endpoints for responses the router kept (behaviour §14): `GET
//! /v1/responses/{id}` (the Responses object), `DELETE /v1/responses/{id}` (OpenAI's deletion
//! shape), `GET /v1/responses/{id}/input_items` (OpenAI's list: `limit`, `order`, `after`).
//! Answered by the router alone; nothing goes upstream. Another client's kept response is
//! answered exactly as one that does not exist (behaviour §11).

use axum::response::Response;
use http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::api_error::{ApiError, ApiErrorKind};
use crate::node::app::AppState;
use crate::node::reply::{self, RouteHeaders};
use crate::node::response_store::{KeptResponse, ResponseStore};

use super::journal_removed;

/// Most items one `input_items` page holds (OpenAI's bound), and its default.
const MAX_LIMIT: usize = 100;
const DEFAULT_LIMIT: usize = 20;

/// One call on the kept response `id` for `client`.
pub fn serve(
    app: &AppState,
    store: &ResponseStore,
    (method, uri): (&Method, &http::Uri),
    id: &str,
    client: &str,
    route: &RouteHeaders,
) -> Result<Response, ApiError> {
    let router = app
        .router()
        .ok_or_else(|| ApiError::new(ApiErrorKind::NoAvailableTarget, "the router is starting"))?;
    let now_ms = router.clock().now_ms();
    let unreadable = |error: crate::node::response_store::StoreError| {
        tracing::warn!(%error, "the response store could not be read");
        ApiError::new(
            ApiErrorKind::UpstreamError,
            "the response store could not be read",
        )
    };
    // What expired goes now, so it is journaled when it goes.
    journal_removed(router, store.expire(now_ms).map_err(unreadable)?);
    let not_found = || {
        ApiError::new(
            ApiErrorKind::NotFound,
            format!("Response with id '{id}' not found."),
        )
    };
    let path = uri.path();
    if *method == Method::DELETE {
        if !store.delete(id, client, now_ms).map_err(unreadable)? {
            return Err(not_found());
        }
        journal_removed(
            router,
            vec![crate::node::response_store::Removed {
                id: id.to_owned(),
                client: client.to_owned(),
                reason: crate::node::response_store::Removal::Client,
            }],
        );
        let deleted = json!({"id": id, "object": "response.deleted", "deleted": true});
        return Ok(reply::json(StatusCode::OK, deleted.to_string(), route));
    }
    let kept = store
        .get(id, client, now_ms)
        .map_err(unreadable)?
        .ok_or_else(not_found)?;
    if path.ends_with("/cancel") {
        return Err(ApiError::new(
            ApiErrorKind::InvalidRequest,
            "Only responses created with background=true can be cancelled.",
        ));
    }
    let body = if path.ends_with("/input_items") {
        input_items_page(kept, uri.query().unwrap_or(""))?
    } else {
        kept.response
    };
    Ok(reply::json(StatusCode::OK, body.to_string(), route))
}

/// One page of a kept response's input items, as OpenAI lists them.
fn input_items_page(kept: KeptResponse, query: &str) -> Result<Value, ApiError> {
    let mut limit = DEFAULT_LIMIT;
    let mut ascending = false;
    let mut after: Option<String> = None;
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*name {
            "limit" => {
                limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|limit| (1..=MAX_LIMIT).contains(limit))
                    .ok_or_else(|| {
                        ApiError::new(
                            ApiErrorKind::InvalidRequest,
                            format!("limit must be an integer from 1 to {MAX_LIMIT}"),
                        )
                    })?;
            }
            "order" => {
                ascending = match &*value {
                    "asc" => true,
                    "desc" => false,
                    _ => {
                        return Err(ApiError::new(
                            ApiErrorKind::InvalidRequest,
                            "order must be `asc` or `desc`",
                        ))
                    }
                }
            }
            "after" => after = Some(value.into_owned()),
            _ => {}
        }
    }
    let mut items = kept.input_items;
    if !ascending {
        items.reverse();
    }
    let start = match after {
        Some(after) => items
            .iter()
            .position(|item| item.get("id").and_then(Value::as_str) == Some(&after))
            .map(|at| at + 1)
            .ok_or_else(|| {
                ApiError::new(
                    ApiErrorKind::InvalidRequest,
                    format!("after: no input item `{after}` in this response"),
                )
            })?,
        None => 0,
    };
    let rest = items.get(start..).unwrap_or_default();
    let page: Vec<Value> = rest.iter().take(limit).cloned().collect();
    let id_of = |item: Option<&Value>| {
        item.and_then(|item| item.get("id"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    Ok(json!({
        "object": "list",
        "first_id": id_of(page.first()),
        "last_id": id_of(page.last()),
        "has_more": rest.len() > page.len(),
        "data": page,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(items: usize) -> KeptResponse {
        KeptResponse {
            client: "alice".into(),
            connection: "an-1".into(),
            created_ms: 0,
            expires_ms: 1,
            response: json!({}),
            input_items: (0..items).map(|n| json!({"id": format!("i{n}")})).collect(),
            chain: String::new(),
        }
    }

    fn ids(page: &Value) -> Vec<&str> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["id"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn input_items_page_by_limit_order_and_after() {
        let page = input_items_page(kept(5), "").unwrap();
        assert_eq!(ids(&page), ["i4", "i3", "i2", "i1", "i0"]);
        assert_eq!(
            (&page["first_id"], &page["last_id"], &page["has_more"]),
            (&json!("i4"), &json!("i0"), &json!(false))
        );
        let page = input_items_page(kept(5), "order=asc&limit=2").unwrap();
        assert_eq!(ids(&page), ["i0", "i1"]);
        assert_eq!(page["has_more"], json!(true));
        let page = input_items_page(kept(5), "order=asc&limit=2&after=i1").unwrap();
        assert_eq!(ids(&page), ["i2", "i3"]);
        let page = input_items_page(kept(5), "order=asc&after=i4").unwrap();
        assert!(ids(&page).is_empty());
        assert_eq!(page["first_id"], Value::Null);
        for bad in ["limit=0", "limit=101", "limit=x", "order=up", "after=nope"] {
            let error = input_items_page(kept(5), bad).unwrap_err();
            assert_eq!(error.status(), StatusCode::BAD_REQUEST, "{bad}");
        }
    }
}
