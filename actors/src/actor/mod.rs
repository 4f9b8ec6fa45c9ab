//! The actors: thin shells that own policy state and exchange messages.
//!
//! Only the router facade (HTTP and admin handlers) `call`s; actors `cast` to each other and
//! record their events straight to the shared `crate::recorder::Recorder`.

pub mod breaker;
pub mod combo;
pub mod combo_queue;
pub mod connection;
pub mod messages;
pub mod supervisor;
