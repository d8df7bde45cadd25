//! HTTP/2 PINGs per `idle_timeout` / `health_check_timeout`: a connection whose peer does not
//! answer within the timeout is closed, as gRPC-go's keepalive closes it.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use h2::{Ping, PingPong};

/// gRPC-go's wait for a PING's answer when `health_check_timeout` is not set.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// gRPC-go's server pings an idle client after two hours when `idle_timeout` is not set.
const SERVER_DEFAULT_INTERVAL: Duration = Duration::from_secs(2 * 60 * 60);
/// gRPC-go raises a client's ping interval to at least 10 s.
const CLIENT_MIN_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    pub interval: Duration,
    pub timeout: Duration,
}

impl Keepalive {
    /// Xray's server: keepalive parameters only when either key is set (seconds, 0 = unset).
    pub fn server(idle_timeout: u32, health_check_timeout: u32) -> Option<Self> {
        if idle_timeout == 0 && health_check_timeout == 0 {
            return None;
        }
        Some(Keepalive {
            interval: secs_or(idle_timeout, SERVER_DEFAULT_INTERVAL),
            timeout: secs_or(health_check_timeout, DEFAULT_TIMEOUT),
        })
    }

    /// Xray's client: pings only with an `idle_timeout`, at least 10 s apart.
    pub fn client(idle_timeout: u32, health_check_timeout: u32) -> Option<Self> {
        if idle_timeout == 0 {
            return None;
        }
        Some(Keepalive {
            interval: Duration::from_secs(idle_timeout.into()).max(CLIENT_MIN_INTERVAL),
            timeout: secs_or(health_check_timeout, DEFAULT_TIMEOUT),
        })
    }
}

fn secs_or(secs: u32, default: Duration) -> Duration {
    if secs == 0 {
        default
    } else {
        Duration::from_secs(secs.into())
    }
}

/// Pings every interval; returns the reason when a ping fails or goes unanswered, and never
/// without keepalive. With `open_calls`, a ping is skipped while no call holds a clone of
/// the token (gRPC-go's `PermitWithoutStream: false`).
pub async fn run_pings(
    ping_pong: Option<PingPong>,
    keepalive: Option<Keepalive>,
    open_calls: Option<Arc<()>>,
) -> io::Error {
    let (Some(mut ping_pong), Some(keepalive)) = (ping_pong, keepalive) else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(keepalive.interval).await;
        if open_calls
            .as_ref()
            .is_some_and(|token| Arc::strong_count(token) == 1)
        {
            continue;
        }
        match tokio::time::timeout(keepalive.timeout, ping_pong.ping(Ping::opaque())).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return io::Error::new(io::ErrorKind::ConnectionReset, e),
            Err(_) => {
                return io::Error::new(
                    io::ErrorKind::TimedOut,
                    "HTTP/2 keepalive PING went unanswered",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xray_parameters() {
        assert_eq!(Keepalive::server(0, 0), None);
        assert_eq!(Keepalive::client(0, 30), None);
        let s = Keepalive::server(0, 5).unwrap();
        assert_eq!(
            (s.interval, s.timeout),
            (SERVER_DEFAULT_INTERVAL, Duration::from_secs(5))
        );
        let c = Keepalive::client(3, 0).unwrap();
        assert_eq!(
            (c.interval, c.timeout),
            (CLIENT_MIN_INTERVAL, DEFAULT_TIMEOUT)
        );
        let c = Keepalive::client(60, 7).unwrap();
        assert_eq!(
            (c.interval, c.timeout),
            (Duration::from_secs(60), Duration::from_secs(7))
        );
    }
}
