//! A redis-server of a test's own (lockstep tests, script formats, recovery), and the randomised tests'
//! generator.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use redis::Connection;

/// A redis-server of the test's own on a free loopback port, stopped (by its pid) when dropped.
pub(crate) struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// Tests run in parallel: a port found free may be taken by another test's server before this one binds it
    /// (this server then exits, and a connection would reach the other test's Redis). A server is only taken
    /// once the one answering on its port reports this child's pid; otherwise another port is tried.
    pub(crate) fn start() -> Server {
        for _ in 0..20 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                ])
                .args(["--appendonly", "no", "--daemonize", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server on the PATH");
            let mut server = Server { child, port };
            if server.answers_as_itself() {
                return server;
            }
        }
        panic!("no redis-server of this test's own started on a free port in 20 tries");
    }

    /// Waits (up to 10 s) until this server answers on its port: false when it exited, or another process
    /// answers there.
    fn answers_as_itself(&mut self) -> bool {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false; // it could not bind the port
            }
            if let Ok(mut con) = client.get_connection() {
                let info: String = redis::cmd("INFO")
                    .arg("server")
                    .query(&mut con)
                    .unwrap_or_default();
                let pid = info
                    .lines()
                    .find_map(|l| l.strip_prefix("process_id:"))
                    .and_then(|p| p.trim().parse::<u32>().ok());
                return pid == Some(self.child.id());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub(crate) fn connect(&self) -> Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match client.get_connection() {
                Ok(c) => return c,
                Err(e) if Instant::now() > deadline => panic!("redis-server did not start: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small deterministic generator (SplitMix64) for the randomised tests: a seed replays a sequence.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A randomised test's setting: the environment variable `name` read as a number, else `default`.
pub(crate) fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A randomised test's seed: the environment variable `name` (to replay one), else one from the clock.
pub(crate) fn seed(name: &str) -> u64 {
    let clock = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap();
    env(name, clock.as_nanos() as u64 % 1_000_000_007)
}

/// Wall-clock milliseconds since the epoch: where a lockstep sequence's clock starts.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
