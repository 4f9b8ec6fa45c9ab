//! The actors: thin shells that own policy state and exchange messages.
//!
//! Only the router facade (HTTP and admin handlers) `call`s; actors `cast` to each other, except
//! the supervisor, which calls the recorder for the folded state.

pub mod breaker;
pub mod combo;
pub mod combo_queue;
pub mod connection;
pub mod messages;
pub mod recorder;
pub mod supervisor;
