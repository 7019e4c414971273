//! A small blocking Redis connection pool with no background threads.
//!
//! - size cap: at most `size` connections exist; a caller past the cap waits up to
//!   `connect_timeout` for one to come back, then gets [`Error::Timeout`];
//! - lazy: nothing connects until the first call;
//! - every connection has read and write timeouts, and is dropped (never reused) after an
//!   I/O, protocol or timeout error, so a half-read reply never reaches the next caller;
//! - fork safe: the pool remembers the pid that filled it. In a forked child the inherited
//!   connections are closed (plain `close(2)`, which leaves the parent's socket working)
//!   and never read or written;
//! - fail fast: once a call finds the server unreachable (refused, unresolvable, timed out, dropped),
//!   the idle connections are closed and every call fails at once for `backoff`, then one call
//!   probes ([`Outage`]): a dead Redis costs one wait, not one per push;
//! - Sentinel ([`Master`]): the master is asked of the sentinels on the first connect, each new
//!   connection checks `ROLE`, and after a failover (`READONLY`/`MASTERDOWN`, a lost connection, a
//!   failed connect) the master and every connection to it are forgotten, so the next call asks again.
//!   Only a failed connect (or no sentinel answering) is an outage.
//!
//! The lock only guards pushing and popping idle connections; no I/O happens under it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::{Client, Connection, RedisResult};

use crate::error::{Error, Result};
use crate::outage::{marks_down, Outage};
use crate::sentinel::{self, Master, Reaction, SentinelConfig};
use crate::server::ServerSettings;
use crate::tls::{self, TlsOptions};

#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfig {
    /// The server, or under Sentinel the master's name (as its host), credentials, db and TLS.
    pub server: ServerSettings,
    pub size: usize,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub write_timeout: Duration,
    /// How long calls fail fast after the server was found unreachable.
    pub backoff: Duration,
    pub tls: TlsOptions,
    /// Find the master through these sentinels; `server` then gives its credentials and db.
    pub sentinel: Option<SentinelConfig>,
}

/// Where connections go: one server, or the master the sentinels name.
enum Target {
    Direct(Box<Client>),
    Sentinel(Box<Master>),
}

struct State {
    idle: Vec<Connection>,
    /// Idle plus checked out.
    open: usize,
    pid: u32,
    outage: Outage,
    /// Connection attempts so far, failed ones included.
    connects: u64,
    /// Bumped when the master changes: connections of an older generation are dropped on return.
    generation: u64,
}

pub struct Pool {
    target: Target,
    config: PoolConfig,
    server: String,
    state: Mutex<State>,
    returned: Condvar,
    /// Mirrors `state.outage.is_down()`, so a successful call need not take the lock.
    down: AtomicBool,
}

/// Counters for tests and stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    pub open: usize,
    pub idle: usize,
    pub size: usize,
    pub connects: u64,
    /// Failing fast after the server was found unreachable.
    pub down: bool,
}

impl Pool {
    pub fn new(mut config: PoolConfig) -> Result<Pool> {
        config.server.tls |= config.tls.force; // `ssl: true` on a redis:// server
        let server = config.server.describe();
        if config.size == 0 {
            return Err(Error::Configuration("pool_size must be at least 1".into()));
        }
        for (name, d) in [
            ("connect_timeout", config.connect_timeout),
            ("read_timeout", config.read_timeout),
            ("write_timeout", config.write_timeout),
        ] {
            if d.is_zero() {
                return Err(Error::Configuration(format!("{name} must be positive")));
            }
        }
        config.server.validate()?;
        let target = match &config.sentinel {
            Some(s) => Target::Sentinel(Box::new(Master::new(
                s.clone(),
                config.server.clone(),
                config.tls.clone(),
            )?)),
            None => Target::Direct(Box::new(tls::client(
                config.server.connection_info()?,
                &config.tls,
                &server,
            )?)),
        };
        Ok(Pool {
            target,
            server,
            state: Mutex::new(State {
                idle: Vec::with_capacity(config.size),
                open: 0,
                pid: std::process::id(),
                outage: Outage::default(),
                connects: 0,
                generation: 0,
            }),
            returned: Condvar::new(),
            down: AtomicBool::new(false),
            config,
        })
    }

    /// The server URL without its password, or the sentinels and the master last found, for messages.
    pub fn server(&self) -> String {
        match &self.target {
            Target::Direct(_) => self.server.clone(),
            Target::Sentinel(m) => m.describe(),
        }
    }

    pub fn stats(&self) -> PoolStats {
        let mut st = self.state.lock();
        self.adopt_after_fork(&mut st);
        PoolStats {
            open: st.open,
            idle: st.idle.len(),
            size: self.config.size,
            connects: st.connects,
            down: st.outage.is_down(),
        }
    }

    /// Runs `f` on a pooled connection. The connection goes back to the pool unless `f`
    /// failed in a way that leaves it unusable.
    pub fn with<T>(&self, f: impl FnOnce(&mut Connection) -> RedisResult<T>) -> Result<T> {
        let mut conn = self.checkout()?;
        let result = f(conn.get());
        match result {
            Ok(v) => {
                if self.down.load(Ordering::Relaxed) {
                    self.recovered();
                }
                Ok(v)
            }
            Err(e) => {
                let reaction = match self.target {
                    Target::Sentinel(_) => sentinel::reaction(&e),
                    Target::Direct(_) => Reaction::Other,
                };
                if breaks_connection(&e) || reaction != Reaction::Other {
                    conn.discard();
                }
                let err = Error::from_redis(&e, &self.server());
                drop(conn);
                if reaction != Reaction::Other {
                    self.master_changed();
                } else if marks_down(&err) {
                    self.mark_down(&err);
                }
                Err(err)
            }
        }
    }

    /// The server is unreachable: close the idle connections (they are as dead as the one that
    /// failed) and fail fast for the backoff.
    fn mark_down(&self, cause: &Error) {
        if let Target::Sentinel(_) = self.target {
            self.master_changed(); // the probe asks the sentinels again
        }
        let mut st = self.state.lock();
        let closed = st.idle.len();
        st.idle.clear();
        st.open -= closed;
        st.outage.failed(Instant::now(), self.config.backoff, cause);
        self.down.store(true, Ordering::Relaxed);
        drop(st);
        self.returned.notify_all();
    }

    /// After a failover: forget the master, close the idle connections (they all point at it) and
    /// drop the checked-out ones when they come back. No outage: the next call asks the sentinels.
    fn master_changed(&self) {
        if let Target::Sentinel(m) = &self.target {
            m.forget();
        }
        let mut st = self.state.lock();
        let closed = st.idle.len();
        st.idle.clear();
        st.open -= closed;
        st.generation += 1;
        drop(st);
        self.returned.notify_all();
    }

    fn recovered(&self) {
        let mut st = self.state.lock();
        st.outage.succeeded();
        self.down.store(false, Ordering::Relaxed);
    }

    fn checkout(&self) -> Result<Checkout<'_>> {
        let deadline = Instant::now() + self.config.connect_timeout;
        let mut st = self.state.lock();
        self.adopt_after_fork(&mut st);
        st.outage.admit(Instant::now(), self.config.backoff)?;
        loop {
            if let Some(c) = st.idle.pop() {
                return Ok(Checkout::new(self, c, st.pid, st.generation));
            }
            if st.open < self.config.size {
                st.open += 1;
                st.connects += 1;
                let (pid, generation) = (st.pid, st.generation);
                drop(st);
                return match self.connect() {
                    Ok(c) => Ok(Checkout::new(self, c, pid, generation)),
                    Err((e, outage)) => {
                        self.forget_one(pid, generation);
                        if outage {
                            self.mark_down(&e);
                        } else {
                            self.master_changed();
                        }
                        Err(e)
                    }
                };
            }
            if self.returned.wait_until(&mut st, deadline).timed_out() {
                return Err(Error::Timeout(format!(
                    "no Redis connection free within {:?}: all {} pooled connections are busy ({})",
                    self.config.connect_timeout, self.config.size, self.server
                )));
            }
        }
    }

    /// A new connection, or the error and whether it makes an outage (a sentinel-named server that is
    /// no master is not one: the next call asks the sentinels again).
    fn connect(&self) -> std::result::Result<Connection, (Error, bool)> {
        let client = match &self.target {
            Target::Direct(client) => Client::clone(client),
            Target::Sentinel(master) => {
                let io = self.config.read_timeout.max(self.config.write_timeout);
                master
                    .client(self.config.connect_timeout, io)
                    .map_err(|e| (e, true))?
                    .0
            }
        };
        let map = |e: redis::RedisError| (Error::from_redis(&e, &self.server()), true);
        let mut conn = client
            .get_connection_with_timeout(self.config.connect_timeout)
            .map_err(map)?;
        conn.set_read_timeout(Some(self.config.read_timeout))
            .map_err(map)?;
        conn.set_write_timeout(Some(self.config.write_timeout))
            .map_err(map)?;
        if let Target::Sentinel(master) = &self.target {
            let role: redis::Value = redis::cmd("ROLE").query(&mut conn).map_err(map)?;
            if !sentinel::is_master_role(&role) {
                let err = Error::Connection(format!(
                    "the server the sentinels named is no master (ROLE {}); asking them again ({})",
                    sentinel::role_name(&role),
                    master.describe()
                ));
                return Err((err, false));
            }
        }
        Ok(conn)
    }

    /// In a forked child: close what the parent opened, start counting afresh.
    fn adopt_after_fork(&self, st: &mut State) {
        let pid = std::process::id();
        if st.pid != pid {
            st.idle.clear();
            st.open = 0;
            st.pid = pid;
        }
    }

    fn checkin(&self, conn: Option<Connection>, pid: u32, generation: u64) {
        let mut st = self.state.lock();
        if st.pid != pid {
            // Checked out before a fork, returned in the child: not ours to count.
            return;
        }
        if generation != st.generation {
            // Checked out before a failover: it points at the old master.
            st.open -= 1;
            drop(st);
            self.returned.notify_one();
            return;
        }
        match conn {
            Some(c) => st.idle.push(c),
            None => st.open -= 1,
        }
        drop(st);
        self.returned.notify_one();
    }

    fn forget_one(&self, pid: u32, generation: u64) {
        self.checkin(None, pid, generation);
    }
}

/// A checked-out connection; returns itself to the pool when dropped.
struct Checkout<'a> {
    pool: &'a Pool,
    conn: Option<Connection>,
    pid: u32,
    generation: u64,
}

impl<'a> Checkout<'a> {
    fn new(pool: &'a Pool, conn: Connection, pid: u32, generation: u64) -> Self {
        Checkout {
            pool,
            conn: Some(conn),
            pid,
            generation,
        }
    }

    fn get(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("connection present until drop")
    }

    fn discard(&mut self) {
        self.conn = None;
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        let conn = self.conn.take();
        self.pool.checkin(conn, self.pid, self.generation);
    }
}

fn breaks_connection(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || matches!(
            e.kind(),
            redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> PoolConfig {
        PoolConfig {
            server: ServerSettings::from_url(url).unwrap(),
            size: 2,
            connect_timeout: Duration::from_millis(200),
            read_timeout: Duration::from_millis(200),
            write_timeout: Duration::from_millis(200),
            backoff: Duration::from_millis(300),
            tls: TlsOptions::verified(),
            sentinel: None,
        }
    }

    #[test]
    fn rejects_bad_settings() {
        let mut c = config("redis://127.0.0.1:1");
        c.size = 0;
        assert!(matches!(Pool::new(c), Err(Error::Configuration(_))));
        let mut c = config("redis://127.0.0.1:1");
        c.read_timeout = Duration::ZERO;
        assert!(matches!(Pool::new(c), Err(Error::Configuration(_))));
    }

    #[test]
    fn is_lazy_and_gives_back_the_slot_after_a_failed_connect() {
        // Port 1 on loopback refuses at once.
        let pool = Pool::new(config("redis://127.0.0.1:1/0")).unwrap();
        assert_eq!(pool.stats().open, 0);
        for _ in 0..5 {
            let err = pool
                .with(|c| redis::cmd("PING").query::<String>(c))
                .unwrap_err();
            assert!(
                matches!(err, Error::Connection(_) | Error::Timeout(_)),
                "{err:?}"
            );
            assert!(err.message().contains("127.0.0.1:1"), "{err}");
        }
        assert_eq!(pool.stats().open, 0);
    }

    #[test]
    fn fails_fast_after_a_refusal_and_probes_once_the_backoff_is_over() {
        let pool = Pool::new(config("redis://127.0.0.1:1/0")).unwrap();
        let ping = || pool.with(|c| redis::cmd("PING").query::<String>(c));
        let first = ping().unwrap_err();
        for _ in 0..1000 {
            let err = ping().unwrap_err();
            assert!(err.message().contains("failing fast"), "{err}");
            assert!(err.message().contains(first.message()), "{err}");
        }
        assert_eq!(pool.stats().connects, 1);
        assert!(pool.stats().down);
        std::thread::sleep(Duration::from_millis(300));
        let probe = ping().unwrap_err();
        assert!(!probe.message().contains("failing fast"), "{probe}");
        assert!(ping().unwrap_err().message().contains("failing fast"));
        assert_eq!(pool.stats().connects, 2);
    }
}
