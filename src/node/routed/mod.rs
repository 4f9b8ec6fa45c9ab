//! The routing endpoints (behaviour §3, §4, §7, §10), one concept per file:
//! - `guarded_body` — the one reader of a client's body, with its bounds (every endpoint);
//! - `intake` — the client's key, request id, Content-Type and body, read once and parsed;
//! - `route_request` — what the router is asked (continuation, encrypted items, group);
//! - [`handler`] — the handler: intake, the client's limits, the decision, the tries;
//! - `tries` — the try loop the decision's plan drives;
//! - `delivery` — a committed stream relayed, a whole answer delivered;
//! - `response_binding` — where a stored response lives, bound before the client sees it;
//! - `error_answers` — unroutable requests and the answer when the tries ran out.

mod carry;
mod delivery;
mod error_answers;
mod guarded_body;
pub mod handler;
mod intake;
mod kept_turn;
mod response_binding;
mod route_request;
mod search_pass;
mod tries;

pub(crate) use error_answers::route_error;
pub use guarded_body::read_client_body;
pub(crate) use guarded_body::read_guarded;
pub use handler::{handle, handle_named, handle_on};
pub use intake::client_authorized;
pub(crate) use intake::{admitted_router, upstream_path};
pub(crate) use tries::serve_tries;
