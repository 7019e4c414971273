//! A small blocking Redis connection pool; its only thread is the outage probe's.
//!
//! - size cap: at most `size` connections are pooled; a caller past the cap waits up to
//!   `connect_timeout` for one to come back, then gets [`Error::Timeout`];
//! - lazy: nothing connects until the first call; a connect, DNS lookup included, takes at most
//!   `connect_timeout` ([`connect::open`]);
//! - every connection has read and write timeouts, and is dropped (never reused) after an
//!   I/O, protocol or timeout error, so a half-read reply never reaches the next caller;
//! - fork safe: the pool remembers the pid that filled it. In a forked child the inherited
//!   connections are closed (plain `close(2)`, which leaves the parent's socket working)
//!   and never read or written, and a probe the parent had in flight is forgotten;
//! - fail fast ([`Outage`]): once a call finds the server unreachable (refused, unresolvable, timed out,
//!   dropped), the idle connections are closed and every call fails at once for `backoff`. Then the
//!   next call starts a probe on a short-lived thread of its own (plain Rust: no Ruby object, no GVL)
//!   and fails fast like the others until the probe answers: it connects and writes [`PROBE_KEY`] (a
//!   write, as a server paused with `CLIENT PAUSE WRITE` still answers `PING`) with the usual
//!   timeouts. Success ends the outage and the probe's connection joins the pool; failure starts the
//!   next backoff. So a dead or stalled Redis costs one wait, the call that found it gone, and no call
//!   after it waits, however long each probe takes. Without a thread to be had, the caller probes
//!   itself, as every probe did before;
//! - Sentinel ([`Master`]): the master is asked of the sentinels on the first connect, each new
//!   connection checks `ROLE`, and after a failover (`READONLY`/`MASTERDOWN`, a lost connection, a
//!   failed connect) the master and every connection to it are forgotten, so the next call (or the
//!   probe) asks again. Only a failed connect (or no sentinel answering) is an outage.
//!
//! The lock only guards the idle connections, the counters and the outage state; no I/O happens under
//! it, the probe thread's included (it holds it as briefly as any caller, so a `fork` finds it free as
//! often as before). The pool's state lives behind an `Arc` shared with a running probe: dropping the
//! pool while one runs leaves the probe to finish (within the connect and read timeouts) and free it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::{Client, Connection, RedisResult};

use crate::error::{Error, Result};
use crate::redis::connect;
use crate::redis::outage::{marks_down, Admission, Outage};
use crate::redis::sentinel::{self, Master, Reaction, SentinelConfig};
use crate::redis::server::ServerSettings;
use crate::redis::tls::{self, TlsOptions};

/// The key the outage probe writes, under the gem's prefix (which a Redis user of the gem may write
/// anyway: every key of the gem has it).
pub const PROBE_KEY: &str = "sidekiq-fair_tenant:probe";
/// How long the probe's key lives.
const PROBE_TTL_MS: u64 = 5_000;

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
    /// Idle plus checked out (the probe's connection is counted once it joins the pool).
    open: usize,
    pid: u32,
    outage: Outage,
    /// Connection attempts so far, failed ones and probes included.
    connects: u64,
    /// Bumped when the master changes: connections of an older generation are dropped on return.
    generation: u64,
}

pub struct Pool {
    shared: Arc<Shared>,
}

/// The pool itself, shared with the probe thread while one runs.
struct Shared {
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
    /// A probe is checking whether the server is back.
    pub probing: bool,
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
        let shared = Shared {
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
        };
        Ok(Pool {
            shared: Arc::new(shared),
        })
    }

    /// The server URL without its password, or the sentinels and the master last found, for messages.
    pub fn server(&self) -> String {
        self.shared.server()
    }

    pub fn stats(&self) -> PoolStats {
        let shared = &self.shared;
        let mut st = shared.state.lock();
        shared.adopt_after_fork(&mut st);
        PoolStats {
            open: st.open,
            idle: st.idle.len(),
            size: shared.config.size,
            connects: st.connects,
            down: st.outage.is_down(),
            probing: st.outage.is_probing(),
        }
    }

    /// Runs `f` on a pooled connection. The connection goes back to the pool unless `f`
    /// failed in a way that leaves it unusable.
    pub fn with<T>(&self, f: impl FnOnce(&mut Connection) -> RedisResult<T>) -> Result<T> {
        let shared = &self.shared;
        let mut conn = shared.checkout()?;
        let result = f(conn.get());
        match result {
            Ok(v) => {
                if shared.down.load(Ordering::Relaxed) {
                    shared.recovered();
                }
                Ok(v)
            }
            Err(e) => {
                let reaction = match shared.target {
                    Target::Sentinel(_) => sentinel::reaction(&e),
                    Target::Direct(_) => Reaction::Other,
                };
                if breaks_connection(&e) || reaction != Reaction::Other {
                    conn.discard();
                }
                let err = Error::from_redis(&e, &shared.server());
                drop(conn);
                if reaction != Reaction::Other {
                    shared.master_changed();
                } else if marks_down(&err) {
                    shared.mark_down(&err);
                }
                Err(err)
            }
        }
    }
}

impl Shared {
    fn server(&self) -> String {
        match &self.target {
            Target::Direct(_) => self.server.clone(),
            Target::Sentinel(m) => m.describe(),
        }
    }

    /// The server is unreachable: close the idle connections (they are as dead as the one that
    /// failed) and fail fast for the backoff.
    fn mark_down(&self, cause: &Error) {
        if let Target::Sentinel(_) = self.target {
            self.master_changed(); // the probe asks the sentinels again
        }
        let mut st = self.state.lock();
        let closed = std::mem::take(&mut st.idle);
        st.open -= closed.len();
        st.outage.failed(Instant::now(), self.config.backoff, cause);
        self.down.store(true, Ordering::Relaxed);
        drop(st);
        drop(closed);
        self.returned.notify_all();
    }

    /// After a failover: forget the master, close the idle connections (they all point at it) and
    /// drop the checked-out ones when they come back. No outage: the next call asks the sentinels.
    fn master_changed(&self) {
        if let Target::Sentinel(m) = &self.target {
            m.forget();
        }
        let mut st = self.state.lock();
        let closed = std::mem::take(&mut st.idle);
        st.open -= closed.len();
        st.generation += 1;
        drop(st);
        drop(closed);
        self.returned.notify_all();
    }

    fn recovered(&self) {
        let mut st = self.state.lock();
        st.outage.succeeded();
        self.down.store(false, Ordering::Relaxed);
    }

    fn checkout(self: &Arc<Self>) -> Result<Checkout<'_>> {
        let deadline = Instant::now() + self.config.connect_timeout;
        let mut st = self.state.lock();
        self.adopt_after_fork(&mut st);
        loop {
            match st.outage.admit(Instant::now()) {
                Admission::Proceed => break,
                Admission::Refuse(e) => return Err(e),
                Admission::Probe => {
                    drop(st);
                    self.start_probe();
                    st = self.state.lock(); // and ask again: refused while the probe runs
                }
            }
        }
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

    /// Starts the outage probe on a thread of its own; on this one when no thread can be had.
    fn start_probe(self: &Arc<Self>) {
        let shared = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("fair_tenant-probe".into())
            .spawn(move || shared.probe());
        if spawned.is_err() {
            self.probe();
        }
    }

    /// One attempt, as a call would make it after the backoff: connect (asking the sentinels again)
    /// and write. Its answer ends the outage or starts the next backoff.
    fn probe(&self) {
        let generation = {
            let mut st = self.state.lock();
            st.connects += 1;
            st.generation
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| self.try_probe())).unwrap_or_else(|_| {
            Err(Error::Connection(format!(
                "the outage probe panicked ({})",
                self.server()
            )))
        });
        let now = Instant::now();
        match outcome {
            Ok(conn) => {
                let mut st = self.state.lock();
                st.outage.probe_done(now, self.config.backoff, Ok(()));
                self.down.store(st.outage.is_down(), Ordering::Relaxed);
                let spare = if st.generation == generation && st.open < self.config.size {
                    st.idle.push(conn);
                    st.open += 1;
                    None
                } else {
                    Some(conn)
                };
                drop(st);
                drop(spare); // closed outside the lock
                self.returned.notify_one();
            }
            Err(e) => {
                if let Target::Sentinel(_) = self.target {
                    self.master_changed(); // the next probe asks the sentinels again
                }
                let mut st = self.state.lock();
                st.outage.probe_done(now, self.config.backoff, Err(&e));
                self.down.store(st.outage.is_down(), Ordering::Relaxed);
            }
        }
    }

    /// A connection that took a write, or why not. A server that answers the write with an error of
    /// its own (`OOM`, `NOPERM`, `READONLY` on a plain URL) is reachable: the calls will get that error
    /// themselves, as before the outage.
    fn try_probe(&self) -> Result<Connection> {
        let mut conn = self.connect().map_err(|(e, _)| e)?;
        let written: RedisResult<()> = redis::cmd("SET")
            .arg(PROBE_KEY)
            .arg(std::process::id())
            .arg("PX")
            .arg(PROBE_TTL_MS)
            .query(&mut conn);
        match written {
            Ok(()) => Ok(conn),
            Err(e) => {
                let err = Error::from_redis(&e, &self.server());
                let failover = matches!(self.target, Target::Sentinel(_))
                    && sentinel::reaction(&e) != Reaction::Other;
                if failover || breaks_connection(&e) || marks_down(&err) {
                    Err(err)
                } else {
                    Ok(conn)
                }
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
        let mut conn = connect::open(&client, self.config.connect_timeout).map_err(map)?;
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

    /// In a forked child: close what the parent opened, start counting afresh, and stop waiting for
    /// the parent's probe (its thread did not come along).
    fn adopt_after_fork(&self, st: &mut State) {
        let pid = std::process::id();
        if st.pid != pid {
            st.idle.clear();
            st.open = 0;
            st.pid = pid;
            st.outage.forget_probe();
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
    pool: &'a Shared,
    conn: Option<Connection>,
    pid: u32,
    generation: u64,
}

impl<'a> Checkout<'a> {
    fn new(pool: &'a Shared, conn: Connection, pid: u32, generation: u64) -> Self {
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

    /// Waits (a few seconds at most) until no probe is in flight.
    fn settle(pool: &Pool) -> PoolStats {
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.stats().probing {
            assert!(Instant::now() < deadline, "the probe never answered");
            std::thread::sleep(Duration::from_millis(5));
        }
        pool.stats()
    }

    #[test]
    fn fails_fast_after_a_refusal_and_probes_once_the_backoff_is_over() {
        let pool = Pool::new(config("redis://127.0.0.1:1/0")).unwrap();
        let ping = || pool.with(|c| redis::cmd("PING").query::<String>(c));
        let first = ping().unwrap_err();
        assert!(!first.message().contains("failing fast"), "{first}");
        for _ in 0..1000 {
            let err = ping().unwrap_err();
            assert!(err.message().contains("failing fast"), "{err}");
            assert!(err.message().contains(first.message()), "{err}");
        }
        assert_eq!(pool.stats().connects, 1);
        assert!(pool.stats().down);
        std::thread::sleep(Duration::from_millis(300));
        // The call that finds the backoff over starts the probe and fails fast itself.
        let err = ping().unwrap_err();
        assert!(err.message().contains("failing fast"), "{err}");
        let stats = settle(&pool);
        assert_eq!(stats.connects, 2);
        assert!(stats.down, "the probe was refused: the next backoff");
        let err = ping().unwrap_err();
        assert!(err.message().contains("ms more"), "{err}");
        assert_eq!(pool.stats().connects, 2);
    }

    /// A Redis stand-in: `+PONG` to PING, `+OK` to anything else, and while `paused` it holds
    /// every write (SET, EVAL, EVALSHA) unanswered, as `CLIENT PAUSE WRITE` does. Records the commands.
    struct FakeRedis {
        port: u16,
        paused: Arc<AtomicBool>,
        seen: Arc<Mutex<Vec<String>>>,
    }

    impl FakeRedis {
        fn start() -> FakeRedis {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let paused = Arc::new(AtomicBool::new(false));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let (p, s) = (Arc::clone(&paused), Arc::clone(&seen));
            std::thread::spawn(move || {
                for stream in listener.incoming().flatten() {
                    let (p, s) = (Arc::clone(&p), Arc::clone(&s));
                    std::thread::spawn(move || serve(stream, &p, &s));
                }
            });
            FakeRedis { port, paused, seen }
        }

        fn url(&self) -> String {
            format!("redis://127.0.0.1:{}/0", self.port)
        }
    }

    fn serve(stream: std::net::TcpStream, paused: &AtomicBool, seen: &Mutex<Vec<String>>) {
        use std::io::{BufRead, BufReader, Write};
        let mut out = stream.try_clone().unwrap();
        let mut lines = BufReader::new(stream);
        let mut line = String::new();
        let mut read = |line: &mut String| {
            line.clear();
            matches!(lines.read_line(line), Ok(n) if n > 0)
        };
        while read(&mut line) {
            let n: usize = line.trim_start_matches('*').trim().parse().unwrap_or(0);
            let mut words = Vec::with_capacity(n);
            for _ in 0..n {
                if !read(&mut line) || !read(&mut line) {
                    return; // the $len line, then the word itself (no binary here)
                }
                words.push(line.trim_end().to_string());
            }
            let name = words
                .first()
                .map(|w| w.to_ascii_uppercase())
                .unwrap_or_default();
            seen.lock().push(words.join(" "));
            if ["SET", "EVAL", "EVALSHA"].contains(&name.as_str()) {
                while paused.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            let reply: &[u8] = if name == "PING" {
                b"+PONG\r\n"
            } else {
                b"+OK\r\n"
            };
            if out.write_all(reply).is_err() {
                return;
            }
        }
    }

    fn set(c: &mut Connection) -> RedisResult<()> {
        redis::cmd("SET").arg("k").arg("v").query(c)
    }

    #[test]
    fn a_stalled_server_costs_one_wait_and_the_probes_cost_the_callers_nothing() {
        let fake = FakeRedis::start();
        let mut c = config(&fake.url());
        c.backoff = Duration::from_millis(100);
        let pool = Pool::new(c).unwrap();
        pool.with(set).unwrap();

        fake.paused.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let err = pool.with(set).unwrap_err();
        assert!(matches!(err, Error::Timeout(_)), "{err:?}");
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "the one wait"
        );

        // 200 calls (at least 1 s) against the stalled server: every one fails at once ("failing fast",
        // not a timeout: none waited on the socket), while probes, each waiting its read timeout on its own
        // thread, look now and then. No wall-clock bound is asserted: a loaded machine only makes fewer probes.
        let mut saw_probe = false;
        for _ in 0..200 {
            let err = pool.with(set).unwrap_err();
            assert!(err.message().contains("failing fast"), "{err}");
            saw_probe |= pool.stats().probing;
            std::thread::sleep(Duration::from_millis(5));
        }
        let stats = pool.stats();
        assert!(saw_probe && stats.down);
        // One probe per backoff plus read timeout (0.3 s) at most: far fewer connections than calls.
        assert!((2..=20).contains(&stats.connects), "{stats:?}");
        assert!(fake
            .seen
            .lock()
            .iter()
            .any(|c| c.starts_with("SET sidekiq-fair_tenant:probe ") && c.ends_with(" PX 5000")));

        fake.paused.store(false, Ordering::SeqCst);
        let resumed = Instant::now();
        while pool.with(set).is_err() {
            assert!(resumed.elapsed() < Duration::from_secs(30), "no recovery");
            std::thread::sleep(Duration::from_millis(5));
        }
        let stats = settle(&pool);
        assert!(!stats.down && !stats.probing, "{stats:?}");
        assert!(
            stats.open >= 1 && stats.open <= 2 && stats.open == stats.idle,
            "{stats:?}"
        );
    }

    #[test]
    fn the_probes_connection_joins_the_pool() {
        let fake = FakeRedis::start();
        let mut c = config(&fake.url());
        c.backoff = Duration::from_millis(50);
        c.size = 1;
        let pool = Pool::new(c).unwrap();
        pool.shared
            .mark_down(&Error::Connection("refused (test)".into()));
        std::thread::sleep(Duration::from_millis(60));
        assert!(pool.with(set).is_err(), "starts the probe, fails fast");
        let stats = settle(&pool);
        assert!(!stats.down, "{stats:?}");
        assert_eq!((stats.open, stats.idle, stats.connects), (1, 1, 1));
        pool.with(set).unwrap();
        assert_eq!(
            pool.stats().connects,
            1,
            "the call used the probe's connection"
        );
    }

    #[test]
    fn a_forked_child_does_not_wait_for_the_parents_probe() {
        let pool = Pool::new(config("redis://127.0.0.1:1/0")).unwrap();
        let mut st = pool.shared.state.lock();
        st.outage.failed(
            Instant::now() - Duration::from_secs(1),
            Duration::from_millis(300),
            &Error::Connection("refused (test)".into()),
        );
        assert_eq!(st.outage.admit(Instant::now()), Admission::Probe); // a probe "in flight"
        st.pid = st.pid.wrapping_add(1); // as if this were a forked child
        drop(st);
        assert!(pool.stats().down && !pool.stats().probing);
        assert!(pool
            .with(|c| redis::cmd("PING").query::<String>(c))
            .is_err());
        assert_eq!(settle(&pool).connects, 1, "the child's own probe ran");
    }
}
