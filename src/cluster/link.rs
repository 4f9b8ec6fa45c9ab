//! One Redis connection, opened on demand and dropped on any error so the next use reconnects
//! (each cluster task owns its own, so a blocking stream read never delays a publish).
//! Connecting and every reply are bounded in time: a slow Redis is a down Redis.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisResult};

/// A lazily (re)connected Redis connection.
pub struct Link {
    client: Client,
    config: AsyncConnectionConfig,
    connection: Option<MultiplexedConnection>,
    /// Set when a new connection was made since the last [`Link::take_reconnected`].
    reconnected: bool,
}

impl Link {
    /// A link to `client` whose replies must come within `reply_timeout`.
    pub fn new(client: Client, reply_timeout: Duration) -> Self {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(500)))
            .set_response_timeout(Some(reply_timeout));
        Link {
            client,
            config,
            connection: None,
            reconnected: false,
        }
    }

    /// The connection, connecting first if there is none.
    pub async fn connection(&mut self) -> RedisResult<&mut MultiplexedConnection> {
        if self.connection.is_none() {
            let connection = self
                .client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await?;
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

/// The server's `run_id`: it changes when Redis restarts (and, without persistence, forgets
/// everything), which the publisher and the tail use to resync.
pub async fn run_id(connection: &mut MultiplexedConnection) -> RedisResult<String> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(connection)
        .await?;
    Ok(info
        .lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .unwrap_or_default()
        .trim()
        .to_owned())
}
