//! Chat Completions: read into the hub's form (requests, answers, stream chunks) and written
//! from it.

pub mod read;
pub mod read_stream;
pub mod request_bytes;
pub mod typed_request;
pub mod write;
pub mod write_stream;
