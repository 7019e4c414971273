//! Opening one connection, the whole of it (DNS lookup, TCP connect, TLS handshake, AUTH/SELECT) bounded
//! by the connect timeout.
//!
//! redis-rs bounds the TCP connect and the setup, but resolves the host with a plain `getaddrinfo`, which
//! has no timeout (glibc: 5 s per attempt and name server). So for a host that is a name, the connect runs
//! on a short-lived helper thread and the caller waits at most the timeout; a helper still blocked in the
//! lookup then closes the connection it gets, if any, and ends. IP addresses and Unix sockets connect on
//! the caller's thread, as before. The name is not replaced by the address it resolves to: TLS needs it
//! (SNI and the certificate check).
//!
//! The helper touches no Ruby object and no lock the pool uses; it does not exist in a forked child, and
//! neither does the caller waiting for it.

use std::net::IpAddr;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use redis::{Client, Connection, ConnectionAddr, RedisError, RedisResult};

/// A new connection of `client` within `timeout`.
pub fn open(client: &Client, timeout: Duration) -> RedisResult<Connection> {
    let addr = client.get_connection_info().addr();
    let Some(host) = name_to_resolve(addr) else {
        return client.get_connection_with_timeout(timeout);
    };
    let what = format!("connecting to {host} (its DNS lookup included)");
    let client = client.clone();
    within(timeout, &what, move || {
        client.get_connection_with_timeout(timeout)
    })
}

/// The host name a connect to `addr` resolves first, if any.
pub fn name_to_resolve(addr: &ConnectionAddr) -> Option<&str> {
    match addr {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            bare.parse::<IpAddr>().is_err().then_some(host.as_str())
        }
        _ => None,
    }
}

/// Runs `work` on a helper thread and waits for it at most `timeout`; past that, a timeout error
/// naming `what`, and whatever `work` returns later is dropped on the helper thread. Without a thread
/// to be had (a process limit), `work` runs on this one.
pub fn within<T, F>(timeout: Duration, what: &str, work: F) -> RedisResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> RedisResult<T> + Send + 'static,
{
    let (tx, rx) = mpsc::sync_channel(1);
    let work = std::sync::Arc::new(parking_lot::Mutex::new(Some(work)));
    let theirs = std::sync::Arc::clone(&work);
    let spawned = std::thread::Builder::new()
        .name("fair_tenant-connect".into())
        .spawn(move || {
            if let Some(work) = theirs.lock().take() {
                // The receiver may be gone (timed out): the result is then dropped here.
                let _ = tx.send(work());
            }
        });
    if spawned.is_err() {
        let work = work.lock().take();
        return match work {
            Some(work) => work(),
            None => Err(gone(what)),
        };
    }
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(RecvTimeoutError::Timeout) => Err(RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("{what} took longer than the connect timeout of {timeout:?}"),
        ))),
        Err(RecvTimeoutError::Disconnected) => Err(gone(what)),
    }
}

fn gone(what: &str) -> RedisError {
    RedisError::from(std::io::Error::other(format!(
        "{what}: the helper thread ended without an answer"
    )))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn tcp(host: &str) -> ConnectionAddr {
        ConnectionAddr::Tcp(host.into(), 6379)
    }

    #[test]
    fn resolves_names_only() {
        assert_eq!(
            name_to_resolve(&tcp("redis.internal")),
            Some("redis.internal")
        );
        assert_eq!(name_to_resolve(&tcp("localhost")), Some("localhost"));
        assert_eq!(name_to_resolve(&tcp("127.0.0.1")), None);
        assert_eq!(name_to_resolve(&tcp("::1")), None);
        assert_eq!(name_to_resolve(&tcp("[::1]")), None);
        let tls = ConnectionAddr::TcpTls {
            host: "cache.example".into(),
            port: 6380,
            insecure: false,
            tls_params: None,
        };
        assert_eq!(name_to_resolve(&tls), Some("cache.example"));
        assert_eq!(
            name_to_resolve(&ConnectionAddr::Unix("/tmp/redis.sock".into())),
            None
        );
    }

    #[test]
    fn gives_up_after_the_timeout_while_the_work_goes_on_elsewhere() {
        let started = Instant::now();
        let err = within(Duration::from_millis(50), "connecting to slow.dns", || {
            std::thread::sleep(Duration::from_secs(10));
            Ok(1)
        })
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(8)); // it did not wait for the work
        assert!(err.is_timeout(), "{err:?}");
        assert!(err.to_string().contains("connecting to slow.dns"), "{err}");
        assert!(err.to_string().contains("connect timeout of 50ms"), "{err}");
    }

    #[test]
    fn returns_what_the_work_returns_in_time() {
        assert_eq!(within(Duration::from_secs(5), "x", || Ok(7)).unwrap(), 7);
        let refused = within(Duration::from_secs(5), "x", || {
            Err::<(), _>(RedisError::from(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            )))
        })
        .unwrap_err();
        assert!(refused.is_connection_refusal(), "{refused:?}");
    }

    #[test]
    fn a_name_that_does_not_resolve_fails_within_the_timeout() {
        let client = Client::open("redis://no-such-host.invalid:6379/0").unwrap();
        let started = Instant::now();
        assert!(open(&client, Duration::from_millis(300)).is_err());
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
