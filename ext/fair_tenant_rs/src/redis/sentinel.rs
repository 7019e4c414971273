//! Redis Sentinel: finding the master the gem's pool connects to.
//!
//! - The sentinels are asked in turn, `SENTINEL get-master-addr-by-name NAME`, each on a plain
//!   connection with the connect (DNS lookup included) and read/write timeouts (redis-rs' own
//!   sentinel client has none), starting with the one that answered last.
//! - The master is connected to with the credentials, db and TLS of the gem's server settings (whose
//!   host is the master *name*); the pool checks `ROLE` on every new connection ([`is_master_role`]).
//! - The sentinels are reached over TLS when `tls` says so, with the same CA, client certificate and
//!   verification settings as the master.
//! - After a failover (`READONLY`/`MASTERDOWN`, also inside a script error, or a lost connection;
//!   [`reaction`]) the pool forgets the master and its connections, and the next call asks again.
//!
//! The sentinels' own credentials never appear in messages; neither do the master's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::{Client, ErrorKind, RedisError, ServerErrorKind, Value};

use crate::error::{Error, Result};
use crate::redis::server::{format_addr, Address, ServerSettings};
use crate::redis::tls::{self, TlsOptions};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelConfig {
    /// host, port of each sentinel.
    pub sentinels: Vec<(String, u16)>,
    /// The master's name, as the sentinels know it.
    pub master_name: String,
    /// Credentials of the sentinels themselves.
    pub username: Option<String>,
    pub password: Option<String>,
    /// Speak TLS to the sentinels too (with the TLS settings of the master's connections).
    pub tls: bool,
}

impl SentinelConfig {
    /// "name via sentinels 127.0.0.1:26379, 127.0.0.1:26380", for messages.
    pub fn describe(&self) -> String {
        format!(
            "sentinel master {} via sentinels {}",
            self.master_name,
            describe_addrs(&self.sentinels)
        )
    }
}

pub fn describe_addrs(addrs: &[(String, u16)]) -> String {
    let list: Vec<String> = addrs.iter().map(|(h, p)| format_addr(h, *p)).collect();
    list.join(", ")
}

/// The reply to `SENTINEL get-master-addr-by-name`: `Ok(None)` when the sentinel knows no such master.
pub fn parse_master_addr(reply: &Value) -> std::result::Result<Option<(String, u16)>, String> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    };
    match reply {
        Value::Nil => Ok(None),
        Value::Array(items) if items.is_empty() => Ok(None),
        Value::Array(items) if items.len() == 2 => {
            let host = text(&items[0]).ok_or_else(|| format!("unexpected host in {reply:?}"))?;
            let port = text(&items[1])
                .and_then(|p| p.parse::<u16>().ok())
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("unexpected port in {reply:?}"))?;
            Ok(Some((host, port)))
        }
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// Whether a `ROLE` reply says master.
pub fn is_master_role(reply: &Value) -> bool {
    match reply {
        Value::Array(items) => {
            matches!(
                items.first(),
                Some(Value::BulkString(b)) if b == b"master"
            ) || matches!(items.first(), Some(Value::SimpleString(s)) if s == "master")
        }
        _ => false,
    }
}

/// The role a `ROLE` reply names, for messages.
pub fn role_name(reply: &Value) -> String {
    match reply {
        Value::Array(items) => match items.first() {
            Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(Value::SimpleString(s)) => s.clone(),
            other => format!("{other:?}"),
        },
        other => format!("{other:?}"),
    }
}

/// The order to ask `n` sentinels in: the one that answered last first, then the others in turn.
pub fn ask_order(n: usize, preferred: usize) -> impl Iterator<Item = usize> {
    let start = if n == 0 { 0 } else { preferred % n };
    (0..n).map(move |i| (start + i) % n)
}

/// What a failed call on a master connection means for the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// The server is no master any more (`READONLY`, `MASTERDOWN`, also wrapped in a script error):
    /// forget the master and its connections, ask the sentinels on the next call; no outage.
    Failover,
    /// The connection was lost (closed, reset): also ask the sentinels again.
    Lost,
    /// Anything else: the pool's usual handling.
    Other,
}

pub fn reaction(err: &RedisError) -> Reaction {
    if matches!(
        err.kind(),
        ErrorKind::Server(ServerErrorKind::ReadOnly)
            | ErrorKind::Server(ServerErrorKind::MasterDown)
    ) || mentions_failover(&err.to_string())
    {
        Reaction::Failover
    } else if err.is_timeout() {
        Reaction::Other
    } else if err.is_connection_dropped() || err.is_io_error() {
        Reaction::Lost
    } else {
        Reaction::Other
    }
}

/// A script error's text carries the inner error's code: "... READONLY You can't write ...".
pub fn mentions_failover(message: &str) -> bool {
    message
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| word == "READONLY" || word == "MASTERDOWN")
}

/// The master, found through the sentinels and remembered until a failover.
#[derive(Debug)]
pub struct Master {
    config: SentinelConfig,
    /// The master's credentials, db and TLS (the host and port are not used).
    settings: ServerSettings,
    tls: TlsOptions,
    /// Index of the sentinel that answered last.
    preferred: AtomicUsize,
    current: Mutex<Option<(Client, String)>>,
    last: Mutex<Option<String>>,
}

impl Master {
    /// `settings`: the master's credentials, db and TLS; its host is the master name when
    /// `master_name` is empty.
    pub fn new(
        mut config: SentinelConfig,
        settings: ServerSettings,
        tls: TlsOptions,
    ) -> Result<Master> {
        if config.sentinels.is_empty() {
            return Err(Error::Configuration("sentinels must not be empty".into()));
        }
        match settings.host() {
            Some(host) => {
                if config.master_name.is_empty() {
                    config.master_name = host.to_string();
                }
            }
            None => {
                return Err(Error::Configuration(format!(
                    "sentinels need a redis:// or rediss:// master, not a unix socket ({})",
                    settings.describe()
                )))
            }
        }
        if config.master_name.is_empty() {
            return Err(Error::Configuration(format!(
                "sentinel_master must not be empty ({})",
                describe_addrs(&config.sentinels)
            )));
        }
        Ok(Master {
            config,
            settings,
            tls,
            preferred: AtomicUsize::new(0),
            current: Mutex::new(None),
            last: Mutex::new(None),
        })
    }

    pub fn config(&self) -> &SentinelConfig {
        &self.config
    }

    /// "sentinel master NAME (last at HOST:PORT) via sentinels ...", for messages.
    pub fn describe(&self) -> String {
        match self.last.lock().as_deref() {
            Some(addr) => format!(
                "sentinel master {} (last at {addr}) via sentinels {}",
                self.config.master_name,
                describe_addrs(&self.config.sentinels)
            ),
            None => self.config.describe(),
        }
    }

    /// The client for the current master, asking the sentinels when there is none; and its address.
    pub fn client(&self, connect: Duration, io: Duration) -> Result<(Client, String)> {
        if let Some(found) = self.current.lock().clone() {
            return Ok(found);
        }
        let (host, port) = self.discover(connect, io)?;
        let addr_text = format_addr(&host, port);
        let info = self
            .settings
            .connection_info_at(Address::Tcp { host, port })?;
        let client = tls::client(info, &self.tls, &self.describe())?;
        *self.last.lock() = Some(addr_text.clone());
        *self.current.lock() = Some((client.clone(), addr_text.clone()));
        Ok((client, addr_text))
    }

    /// After a failover or a lost master: the next [`Master::client`] asks the sentinels again.
    pub fn forget(&self) {
        *self.current.lock() = None;
    }

    /// Asks the sentinels in turn for the master's address.
    pub fn discover(&self, connect: Duration, io: Duration) -> Result<(String, u16)> {
        let n = self.config.sentinels.len();
        let mut causes = Vec::with_capacity(n);
        for i in ask_order(n, self.preferred.load(Ordering::Relaxed)) {
            let (host, port) = &self.config.sentinels[i];
            match self.ask(host, *port, connect, io) {
                Ok(Some(addr)) => {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok(addr);
                }
                Ok(None) => causes.push(format!(
                    "{}: no master named {}",
                    format_addr(host, *port),
                    self.config.master_name
                )),
                Err(e) => causes.push(format!("{}: {e}", format_addr(host, *port))),
            }
        }
        Err(Error::Connection(format!(
            "no sentinel gave the address of master {} (sentinels {}): {}",
            self.config.master_name,
            describe_addrs(&self.config.sentinels),
            causes.join("; ")
        )))
    }

    fn ask(
        &self,
        host: &str,
        port: u16,
        connect: Duration,
        io: Duration,
    ) -> std::result::Result<Option<(String, u16)>, String> {
        let sentinel = ServerSettings {
            address: Address::Tcp {
                host: host.to_string(),
                port,
            },
            tls: self.config.tls,
            db: 0,
            username: self.config.username.clone(),
            password: self.config.password.clone(),
        }
        .normalized();
        let shown = format_addr(host, port);
        let info = sentinel.connection_info().map_err(|e| e.to_string())?;
        let client = tls::client(info, &self.tls, &shown).map_err(|e| e.to_string())?;
        let mut conn = crate::redis::connect::open(&client, connect).map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(io)).map_err(|e| e.to_string())?;
        conn.set_write_timeout(Some(io))
            .map_err(|e| e.to_string())?;
        let reply: Value = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.config.master_name)
            .query(&mut conn)
            .map_err(|e| e.to_string())?;
        parse_master_addr(&reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn server_error(reply: &str) -> RedisError {
        redis::parse_redis_value(reply.as_bytes())
            .unwrap()
            .extract_error()
            .unwrap_err()
    }

    fn url(url: &str) -> ServerSettings {
        ServerSettings::from_url(url).unwrap()
    }

    fn config() -> SentinelConfig {
        SentinelConfig {
            sentinels: vec![("127.0.0.1".into(), 1), ("::1".into(), 2)],
            master_name: String::new(),
            username: None,
            password: Some("sentinel-secret".into()),
            tls: false,
        }
    }

    #[test]
    fn parses_master_addresses() {
        let reply = Value::Array(vec![bulk("10.0.0.5"), bulk("6380")]);
        assert_eq!(
            parse_master_addr(&reply),
            Ok(Some(("10.0.0.5".into(), 6380)))
        );
        assert_eq!(parse_master_addr(&Value::Nil), Ok(None));
        assert_eq!(parse_master_addr(&Value::Array(vec![])), Ok(None));
        assert!(parse_master_addr(&Value::Array(vec![bulk("h"), bulk("nope")])).is_err());
        assert!(parse_master_addr(&Value::Array(vec![bulk("h"), bulk("0")])).is_err());
        assert!(parse_master_addr(&bulk("OK")).is_err());
    }

    #[test]
    fn reads_roles() {
        let master = Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(vec![])]);
        let replica = Value::Array(vec![bulk("slave"), bulk("127.0.0.1"), Value::Int(6379)]);
        assert!(is_master_role(&master));
        assert!(!is_master_role(&replica));
        assert!(!is_master_role(&Value::Nil));
        assert_eq!(role_name(&replica), "slave");
    }

    #[test]
    fn asks_the_last_good_sentinel_first_then_the_others_in_turn() {
        assert_eq!(ask_order(3, 0).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(ask_order(3, 1).collect::<Vec<_>>(), vec![1, 2, 0]);
        assert_eq!(ask_order(3, 5).collect::<Vec<_>>(), vec![2, 0, 1]);
        assert_eq!(ask_order(0, 3).count(), 0);
    }

    #[test]
    fn classifies_failover_errors_also_inside_script_errors() {
        let readonly = server_error("-READONLY You can't write against a read only replica.\r\n");
        assert_eq!(reaction(&readonly), Reaction::Failover);
        let down = server_error("-MASTERDOWN Link with MASTER is down\r\n");
        assert_eq!(reaction(&down), Reaction::Failover);
        let script = server_error(
            "-ERR Error running script (call to f_1234): @user_script:1: @user_script: 1: \
             -READONLY You can't write against a read only replica.\r\n",
        );
        assert_eq!(reaction(&script), Reaction::Failover);
        let other = server_error("-WRONGTYPE Operation against a key holding the wrong kind\r\n");
        assert_eq!(reaction(&other), Reaction::Other);
        assert!(!mentions_failover("ERR my READONLYISH tenant"));
    }

    #[test]
    fn classifies_lost_connections_and_timeouts() {
        let reset = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(reaction(&reset), Reaction::Lost);
        let eof = RedisError::from(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        assert_eq!(reaction(&eof), Reaction::Lost);
        let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(reaction(&timeout), Reaction::Other);
    }

    #[test]
    fn takes_the_master_name_from_the_url_and_names_no_password() {
        let m = Master::new(
            config(),
            url("redis://:master-secret@mymaster/2"),
            TlsOptions::verified(),
        )
        .unwrap();
        assert_eq!(m.config().master_name, "mymaster");
        let shown = m.describe();
        assert_eq!(
            shown,
            "sentinel master mymaster via sentinels 127.0.0.1:1, [::1]:2"
        );
        assert!(!shown.contains("secret"));

        let mut named = config();
        named.master_name = "other".into();
        let m = Master::new(named, url("redis://:p@mymaster/2"), TlsOptions::verified()).unwrap();
        assert_eq!(m.config().master_name, "other");
    }

    #[test]
    fn rejects_unix_urls_and_no_sentinels() {
        let err =
            Master::new(config(), url("unix:///tmp/r.sock"), TlsOptions::verified()).unwrap_err();
        assert!(err.message().contains("not a unix socket"), "{err}");
        let mut none = config();
        none.sentinels.clear();
        assert!(Master::new(none, url("redis://m"), TlsOptions::verified()).is_err());
    }

    #[test]
    fn names_every_sentinel_and_its_cause_when_none_answers() {
        let m = Master::new(config(), url("redis://mymaster"), TlsOptions::verified()).unwrap();
        let err = m
            .discover(Duration::from_millis(200), Duration::from_millis(200))
            .unwrap_err();
        assert!(matches!(err, Error::Connection(_)), "{err:?}");
        let msg = err.message();
        assert!(msg.contains("master mymaster"), "{msg}");
        assert!(msg.contains("127.0.0.1:1: "), "{msg}");
        assert!(msg.contains("[::1]:2: "), "{msg}");
        assert!(!msg.contains("sentinel-secret"), "{msg}");
    }
}
