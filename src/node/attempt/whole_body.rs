//! An upstream's whole body (errors and non-streaming answers): read within this answer's
//! bound ([`MAX_UPSTREAM_BODY_BYTES`]) and the bound on what all answers hold at once
//! (`server.max_upstream_buffer_bytes`), before the request's deadline, and decoded when
//! compressed. A body that cannot be had is the try's typed failure.

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use quotaroute_actors::policy::classify::{AttemptFailure, BodyFailure, TransportFailure};
use tokio::sync::SemaphorePermit;

use crate::node::body_pieces::BodyPieces;
use crate::wire::content_coding::{decode_body, Coding};

use super::shape::{unanswered_openly, Attempted, TryContext};

/// Largest upstream body the router reads whole (errors and non-streaming answers).
const MAX_UPSTREAM_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The whole decoded body of an answer of `status`, with its bytes held in the router's
/// upstream buffer until the permit is dropped; or the try's end when it cannot be had.
pub(super) async fn read_whole<'a>(
    ctx: &TryContext<'a>,
    status: StatusCode,
    body: crate::upstream::driven::UpstreamIncoming,
    codings: &[Coding],
) -> Result<(Bytes, Option<SemaphorePermit<'a>>), Attempted> {
    let read = tokio::time::timeout_at(
        ctx.deadline,
        read_upstream_body(body, &ctx.app.inner.upstream_buffer),
    )
    .await;
    let (body, held) = match read {
        Ok(Ok(read)) => read,
        failed => {
            let (failure, message) = match failed {
                Ok(Err(BodyRead::TooLarge)) => (
                    AttemptFailure::Body(BodyFailure::TooLarge),
                    format!(
                        "upstream answered {status} with a body over {} MiB",
                        MAX_UPSTREAM_BODY_BYTES >> 20
                    ),
                ),
                Ok(Err(BodyRead::BufferFull)) => (
                    AttemptFailure::Body(BodyFailure::BufferFull),
                    "the router holds too many upstream bodies at once (server.max_upstream_buffer_bytes)".to_string(),
                ),
                Ok(Err(BodyRead::Broke)) | Ok(Ok(_)) => (
                    AttemptFailure::Transport(TransportFailure::Reset),
                    "upstream body did not arrive".to_string(),
                ),
                Err(_) => (
                    AttemptFailure::Transport(TransportFailure::Timeout),
                    "upstream body did not arrive in time".to_string(),
                ),
            };
            return Err(unanswered_openly(failure, Some(status.as_u16()), &message));
        }
    };
    match decode_body(body, codings, MAX_UPSTREAM_BODY_BYTES).await {
        Ok(body) => Ok((body, held)),
        // A body that does not decode is the upstream's fault, whatever its status.
        Err(error) => Err(unanswered_openly(
            AttemptFailure::Body(BodyFailure::Undecodable),
            Some(status.as_u16()),
            &format!("upstream answered {status} with a body that does not decode: {error}"),
        )),
    }
}

/// Why a whole upstream body could not be read.
enum BodyRead {
    TooLarge,
    BufferFull,
    Broke,
}

/// The upstream's whole body, at most [`MAX_UPSTREAM_BODY_BYTES`], with its bytes held in
/// `buffer` (KiB permits) until the returned permit is dropped.
async fn read_upstream_body(
    mut body: crate::upstream::driven::UpstreamIncoming,
    buffer: &tokio::sync::Semaphore,
) -> Result<(Bytes, Option<tokio::sync::SemaphorePermit<'_>>), BodyRead> {
    let mut pieces = BodyPieces::default();
    let mut total = 0usize;
    let mut held: Option<tokio::sync::SemaphorePermit<'_>> = None;
    let mut held_kib = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|_| BodyRead::Broke)?.into_data() else {
            continue;
        };
        total += data.len();
        if total > MAX_UPSTREAM_BODY_BYTES {
            return Err(BodyRead::TooLarge);
        }
        let need_kib = total.div_ceil(1024);
        if need_kib > held_kib {
            let more = u32::try_from(need_kib - held_kib).map_err(|_| BodyRead::TooLarge)?;
            let permit = buffer
                .try_acquire_many(more)
                .map_err(|_| BodyRead::BufferFull)?;
            match held.as_mut() {
                Some(held) => held.merge(permit),
                None => held = Some(permit),
            }
            held_kib = need_kib;
        }
        pieces.push(data);
    }
    Ok((pieces.join(), held))
}
