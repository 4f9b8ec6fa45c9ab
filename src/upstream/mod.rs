//! The floor under the node, the credential loaders and the replay client: reaching an
//! upstream over HTTP. Knows nothing of routing.
//!
//! - [`client`] — a provider's pooled HTTP client (HTTP/1.1 and h2, rustls, `TCP_NODELAY`).
//! - [`egress`] — trusted roots, egress proxies, and naming a transport failure by its type.
//! - [`body`] — an upstream body, decoded as it arrives when it is compressed.

pub mod body;
pub mod client;
pub mod egress;
