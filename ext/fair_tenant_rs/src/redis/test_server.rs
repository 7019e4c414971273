//! A redis-server of a test's own (lockstep tests, script formats, recovery).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::Connection;

/// A redis-server of the test's own on a free loopback port, stopped (by its pid) when dropped.
pub(crate) struct Server {
    child: Child,
    port: u16,
}

impl Server {
    pub(crate) fn start() -> Server {
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
        Server { child, port }
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
