//! Responses: read into the hub's form (requests, answers, stream events) and written from it.
//! Stateless when translated: a request must hold the whole conversation.

pub mod echo;
pub mod read;
pub mod read_stream;
pub mod request_bytes;
pub mod write;
pub mod write_stream;
