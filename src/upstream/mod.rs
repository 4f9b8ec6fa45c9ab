//! The floor under the node, the credential loaders and the replay client: reaching an
//! upstream over HTTP. Knows nothing of routing.
//!
//! - [`client`] — a provider's HTTP client: sending one request (HTTP/1.1 and h2, rustls,
//!   `TCP_NODELAY`), one retry when a reused connection had closed.
//! - [`pool`] — its open connections: keep-alive reuse, one shared h2 connection, idle expiry.
//! - [`h1_conn`] — an HTTP/1.1 connection of the router's own, driven by the request holding
//!   it, its body handing it back to the pool at the end; [`h1_head`] its heads, [`h1_framing`]
//!   its body's framing.
//! - [`driven`] — an upstream body: an HTTP/1.1 connection's, or hyper's HTTP/2 one.
//! - [`send_batch`] — sends under way, and a send that finds others letting the worker's
//!   ready tasks go first, so a round's sends leave together.
//! - [`error`] — why a request got no response head, before it is named for a person.
//! - [`egress`] — trusted roots, egress proxies, and naming a transport failure by its type.
//! - [`body`] — an upstream body, decoded as it arrives when it is compressed.

pub mod body;
pub mod client;
pub mod driven;
pub mod egress;
pub mod error;
pub mod h1_conn;
pub mod h1_framing;
pub mod h1_head;
pub mod pool;
pub mod send_batch;
