//! One Redis connection, opened on demand and dropped on any error so the next use reconnects
//! (each cluster task owns its own, so a blocking stream read never delays a publish).
//! Connecting and every reply are bounded in time: a slow Redis is a down Redis. The same
//! commands go to one server or to a Redis Cluster ([`Connection`] routes by key there).

use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};

use crate::cluster::target::Target;

/// A connection to one server or to a cluster: commands and pipelines either way (a
/// cluster's pipeline must stay within one hash slot, see `keys`). A cluster's replies are
/// bounded here as a whole: its client retries a shard that is down, redirections included,
/// and must not hold a task beyond `reply_timeout`.
pub enum Connection {
    Single(MultiplexedConnection),
    Cluster {
        connection: ClusterConnection,
        reply_timeout: Duration,
    },
}

fn timed_out() -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, "Redis Cluster did not answer in time"))
}

/// `future`, or a timeout error after `limit`.
async fn bounded<T>(
    limit: Duration,
    future: impl std::future::Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| Err(timed_out()))
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(connection) => connection.req_packed_command(cmd),
            Connection::Cluster {
                connection,
                reply_timeout,
            } => Box::pin(bounded(*reply_timeout, connection.req_packed_command(cmd))),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
            Connection::Cluster {
                connection,
                reply_timeout,
            } => Box::pin(bounded(
                *reply_timeout,
                connection.req_packed_commands(pipeline, offset, count),
            )),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(connection) => connection.get_db(),
            Connection::Cluster { connection, .. } => connection.get_db(),
        }
    }
}

/// A lazily (re)connected Redis connection.
pub struct Link {
    target: Target,
    reply_timeout: Duration,
    connection: Option<Connection>,
    /// Set when a new connection was made since the last [`Link::take_reconnected`].
    reconnected: bool,
}

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

impl Link {
    /// A link to `target` whose replies must come within `reply_timeout`.
    pub fn new(target: Target, reply_timeout: Duration) -> Self {
        Link {
            target,
            reply_timeout,
            connection: None,
            reconnected: false,
        }
    }

    async fn connect(&self) -> RedisResult<Connection> {
        match &self.target {
            Target::Single(client) => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(self.reply_timeout));
                let connection = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                Ok(Connection::Single(connection))
            }
            Target::Cluster(client) => {
                let config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(CONNECT_TIMEOUT)
                    .set_response_timeout(self.reply_timeout);
                // Discovering the slots may ask several seeds: bounded as a whole too.
                let connecting = client.get_async_connection_with_config(config);
                let connection = bounded(CONNECT_TIMEOUT * 4, connecting).await?;
                Ok(Connection::Cluster {
                    connection,
                    reply_timeout: self.reply_timeout,
                })
            }
        }
    }

    /// The connection, connecting first if there is none.
    pub async fn connection(&mut self) -> RedisResult<&mut Connection> {
        if self.connection.is_none() {
            let connection = self.connect().await?;
            self.connection = Some(connection);
            self.reconnected = true;
        }
        match self.connection.as_mut() {
            Some(connection) => Ok(connection),
            None => Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "no connection",
            ))),
        }
    }

    /// Forgets the connection after an error.
    pub fn reset(&mut self) {
        self.connection = None;
    }

    /// Whether a new connection was made since the last call.
    pub fn take_reconnected(&mut self) -> bool {
        std::mem::take(&mut self.reconnected)
    }
}

/// Whether `error` is Redis answering one command with an error (a script that failed, a
/// reply of another shape, a slot or permission problem): the link works and only that
/// command failed, so a task goes on with its other commands and Redis stays `up` (issue
/// #34: one lease's error marked Redis down for every other lease). Anything else (I/O, a
/// timeout, a refused or dropped connection, a shard that is down) means Redis is unreachable.
pub fn answered_with_error(error: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        error.kind(),
        ErrorKind::UnexpectedReturnType
            | ErrorKind::Extension
            | ErrorKind::Server(
                ServerErrorKind::ResponseError
                    | ServerErrorKind::ExecAbort
                    | ServerErrorKind::NoScript
                    | ServerErrorKind::CrossSlot
                    | ServerErrorKind::NoPerm
            )
    )
}

/// The `run_id` of the server that holds `key`: it changes when that server restarts (and,
/// without persistence, forgets everything), which the publisher, the tail and the lease task
/// use to resync. In a cluster it is the run id of the primary serving `key`'s slot, so a
/// restart of another shard changes nothing here.
pub async fn run_id(connection: &mut Connection, key: &str) -> RedisResult<String> {
    let mut command = redis::cmd("INFO");
    command.arg("server");
    let info: String = match connection {
        Connection::Single(connection) => command.query_async(connection).await?,
        Connection::Cluster {
            connection,
            reply_timeout,
        } => {
            let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
            let reply = bounded(*reply_timeout, connection.route_command(command, routing)).await?;
            redis::from_redis_value(reply)?
        }
    };
    Ok(info
        .lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .unwrap_or_default()
        .trim()
        .to_owned())
}

#[cfg(test)]
mod tests {
    use redis::{ErrorKind, RedisError, ServerErrorKind};

    use super::*;

    #[test]
    fn a_command_redis_refused_is_not_a_redis_that_is_down() {
        let script = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "ERR value is not an integer or out of range",
        ));
        assert!(answered_with_error(&script));
        let shape = RedisError::from((ErrorKind::UnexpectedReturnType, "not (u64, u64)"));
        assert!(answered_with_error(&shape));
        for down in [
            RedisError::from((ErrorKind::Io, "timed out")),
            RedisError::from((ErrorKind::Server(ServerErrorKind::ClusterDown), "down")),
            RedisError::from((ErrorKind::Server(ServerErrorKind::BusyLoading), "loading")),
        ] {
            assert!(!answered_with_error(&down), "{down}");
        }
    }
}
