//! Where the gem's Redis is and whom it logs in as, field by field.
//!
//! Ruby hands these over as fields (derived from Sidekiq's own settings: host, port or unix socket
//! path, db, username, password), or as the one URL a user configured, parsed here once. Either way
//! the connection is built from the fields, so a password with any characters (space, `@`, `:`, `/`)
//! reaches `AUTH` unchanged and never needs to survive a URL on its way.
//!
//! [`ServerSettings::describe`] is the form used in messages: it never shows a password.

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::error::{Error, Result};

pub const DEFAULT_HOST: &str = "localhost";
pub const DEFAULT_PORT: u16 = 6379;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// A host name or IP address (IPv6 without brackets), and a port. Under Sentinel the host is the
    /// master's name.
    Tcp {
        host: String,
        port: u16,
    },
    Unix {
        path: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    pub address: Address,
    /// TLS (a `rediss://` URL, or `ssl: true`).
    pub tls: bool,
    pub db: i64,
    /// An ACL user; `None` (or "default") logs in as the default user.
    pub username: Option<String>,
    pub password: Option<String>,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            address: Address::Tcp {
                host: DEFAULT_HOST.into(),
                port: DEFAULT_PORT,
            },
            tls: false,
            db: 0,
            username: None,
            password: None,
        }
    }
}

/// The server as Ruby hands it over when no URL was configured: fields derived from Sidekiq's
/// settings, each possibly missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFields {
    pub path: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub db: Option<i64>,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl ServerSettings {
    /// A URL as users write it: `redis://`, `rediss://`, `unix://` (db, user and password as
    /// `?db=&user=&pass=`); percent-encoded user and password.
    pub fn from_url(url: &str) -> Result<ServerSettings> {
        let invalid = |why: String| {
            Error::Configuration(format!("invalid redis_url {}: {why}", redact_url(url)))
        };
        let info = url
            .into_connection_info()
            .map_err(|e| invalid(e.to_string()))?;
        let (address, tls) = match info.addr() {
            ConnectionAddr::Tcp(host, port) => (
                Address::Tcp {
                    host: host.clone(),
                    port: *port,
                },
                false,
            ),
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                ..
            } => {
                if *insecure {
                    return Err(invalid(
                        "#insecure is not read here: set ssl_verify_mode \"none\"".into(),
                    ));
                }
                (
                    Address::Tcp {
                        host: host.clone(),
                        port: *port,
                    },
                    true,
                )
            }
            ConnectionAddr::Unix(path) => (
                Address::Unix {
                    path: path.to_string_lossy().into_owned(),
                },
                false,
            ),
            other => return Err(invalid(format!("unsupported address {other:?}"))),
        };
        let redis = info.redis_settings();
        Ok(ServerSettings {
            address,
            tls,
            db: redis.db(),
            username: redis.username().map(str::to_string),
            password: redis.password().map(str::to_string),
        }
        .normalized())
    }

    /// The server to use: a URL the user configured wins and is parsed here, once; otherwise the
    /// fields, a unix socket `path` before `host`/`port`, with Redis's defaults for what is missing.
    /// TLS is off here: `ssl: true` ([`crate::redis::tls::TlsOptions::force`]) turns it on.
    pub fn resolve(url: Option<&str>, fields: ServerFields) -> Result<ServerSettings> {
        if let Some(url) = url {
            return ServerSettings::from_url(url);
        }
        let address = match fields.path {
            Some(path) => Address::Unix { path },
            None => Address::Tcp {
                host: fields.host.unwrap_or_else(|| DEFAULT_HOST.into()),
                port: fields.port.unwrap_or(DEFAULT_PORT),
            },
        };
        Ok(ServerSettings {
            address,
            tls: false,
            db: fields.db.unwrap_or(0),
            username: fields.username,
            password: fields.password,
        }
        .normalized())
    }

    /// "default" is the user a password alone logs in as; empty strings mean nothing given.
    pub fn normalized(mut self) -> ServerSettings {
        let blank = |v: &Option<String>| v.as_deref().is_some_and(str::is_empty);
        if blank(&self.username) || self.username.as_deref() == Some("default") {
            self.username = None;
        }
        if blank(&self.password) {
            self.password = None;
        }
        self
    }

    /// Checks what a URL could not have carried: a port, a path, a db.
    pub fn validate(&self) -> Result<()> {
        let shown = self.describe();
        match &self.address {
            Address::Tcp { host, port } if host.is_empty() || *port == 0 => {
                return Err(Error::Configuration(format!(
                    "a Redis server needs a host and a port 1-65535, got {shown}"
                )))
            }
            Address::Unix { path } if path.is_empty() => {
                return Err(Error::Configuration(format!(
                    "a unix socket path must not be empty, got {shown}"
                )))
            }
            Address::Unix { .. } if self.tls => {
                return Err(Error::Configuration(format!(
                    "TLS over a unix socket is not supported ({shown})"
                )))
            }
            _ => {}
        }
        if self.db < 0 {
            return Err(Error::Configuration(format!(
                "db must be 0 or more, got {} ({shown})",
                self.db
            )));
        }
        Ok(())
    }

    /// The redis-rs connection settings (TLS details are added by [`crate::redis::tls::client`]).
    pub fn connection_info(&self) -> Result<ConnectionInfo> {
        self.connection_info_at(self.address.clone())
    }

    /// The same credentials and db on another address (the master the sentinels named).
    pub fn connection_info_at(&self, address: Address) -> Result<ConnectionInfo> {
        let addr = match address {
            Address::Tcp { host, port } if self.tls => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            },
            Address::Tcp { host, port } => ConnectionAddr::Tcp(host, port),
            Address::Unix { path } => ConnectionAddr::Unix(path.into()),
        };
        let mut redis = RedisConnectionInfo::default().set_db(self.db);
        if let Some(user) = &self.username {
            redis = redis.set_username(user);
        }
        if let Some(password) = &self.password {
            redis = redis.set_password(password);
        }
        addr.into_connection_info()
            .map(|info| info.set_redis_settings(redis))
            .map_err(|e| {
                Error::Configuration(format!("invalid Redis settings {}: {e}", self.describe()))
            })
    }

    /// `redis://user@host:6379/0`, `rediss://[::1]:6380/2`, `unix:///run/redis.sock?db=1`: no password.
    pub fn describe(&self) -> String {
        let user = match (&self.username, &self.password) {
            (Some(u), Some(_)) => format!("{u}:***@"),
            (Some(u), None) => format!("{u}@"),
            (None, Some(_)) => ":***@".to_string(),
            (None, None) => String::new(),
        };
        match &self.address {
            Address::Tcp { host, port } => format!(
                "{}://{user}{}/{}",
                if self.tls { "rediss" } else { "redis" },
                format_addr(host, *port),
                self.db
            ),
            Address::Unix { path } => format!("unix://{user}{path}?db={}", self.db),
        }
    }

    /// The host of a TCP address (under Sentinel, the master's name).
    pub fn host(&self) -> Option<&str> {
        match &self.address {
            Address::Tcp { host, .. } => Some(host),
            Address::Unix { .. } => None,
        }
    }
}

/// `redis://user:secret@host:6379/0` -> `redis://user@host:6379/0`, and any `pass=` in a unix URL's
/// query hidden: for URLs that did not parse (a parsed one is shown by [`ServerSettings::describe`]).
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let shown = match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{}@{}", &url[..scheme_end + 3], user, &rest[at + 1..])
        }
        None => url.to_string(),
    };
    match shown.find('?') {
        Some(q) => {
            let (base, query) = shown.split_at(q + 1);
            let parts: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some(("pass" | "password", _)) => {
                        format!("{}=***", p.split('=').next().unwrap_or(""))
                    }
                    _ => p.to_string(),
                })
                .collect();
            format!("{base}{}", parts.join("&"))
        }
        None => shown,
    }
}

/// host:port, an IPv6 address in brackets.
pub fn format_addr(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16) -> Address {
        Address::Tcp {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn parses_urls_into_fields_with_percent_decoding() {
        let s =
            ServerSettings::from_url("redis://app%20user:p%20w%40d%3A%2F@10.0.0.1:6380/3").unwrap();
        assert_eq!(s.address, tcp("10.0.0.1", 6380));
        assert!(!s.tls);
        assert_eq!(s.db, 3);
        assert_eq!(s.username.as_deref(), Some("app user"));
        assert_eq!(s.password.as_deref(), Some("p w@d:/"));

        let s = ServerSettings::from_url("rediss://:secret@cache/0").unwrap();
        assert!(s.tls);
        assert_eq!(s.address, tcp("cache", 6379));
        assert_eq!(s.username, None);

        let s = ServerSettings::from_url("redis://[::1]:7000").unwrap();
        assert_eq!(s.address, tcp("::1", 7000));
    }

    #[test]
    fn unix_urls_take_db_user_and_password_from_the_query() {
        let s =
            ServerSettings::from_url("unix:///run/redis.sock?db=2&user=app&pass=a%20b").unwrap();
        assert_eq!(
            s.address,
            Address::Unix {
                path: "/run/redis.sock".into()
            }
        );
        assert_eq!(
            (s.db, s.username.as_deref(), s.password.as_deref()),
            (2, Some("app"), Some("a b"))
        );
        assert_eq!(s.describe(), "unix://app:***@/run/redis.sock?db=2");
    }

    #[test]
    fn the_default_user_is_no_user() {
        let s = ServerSettings {
            username: Some("default".into()),
            password: Some(String::new()),
            ..ServerSettings::default()
        }
        .normalized();
        assert_eq!((s.username, s.password), (None, None));
    }

    #[test]
    fn descriptions_never_show_a_password() {
        let mut s = ServerSettings {
            address: tcp("::1", 6380),
            tls: true,
            db: 2,
            username: Some("app".into()),
            password: Some("s3cret".into()),
        };
        assert_eq!(s.describe(), "rediss://app:***@[::1]:6380/2");
        s.username = None;
        assert_eq!(s.describe(), "rediss://:***@[::1]:6380/2");
        s.password = None;
        assert_eq!(s.describe(), "rediss://[::1]:6380/2");
        assert!(!ServerSettings::from_url("redis://u:hunter2@h:1/0")
            .unwrap()
            .describe()
            .contains("hunter2"));
    }

    #[test]
    fn a_configured_url_wins_over_fields_and_missing_fields_take_redis_defaults() {
        let fields = ServerFields {
            host: Some("ignored".into()),
            db: Some(5),
            ..ServerFields::default()
        };
        let s = ServerSettings::resolve(Some("redis://cache:6380/2"), fields).unwrap();
        assert_eq!((s.address, s.db), (tcp("cache", 6380), 2));
        assert!(ServerSettings::resolve(Some("nonsense://x"), ServerFields::default()).is_err());

        let s = ServerSettings::resolve(None, ServerFields::default()).unwrap();
        assert_eq!(s, ServerSettings::default());

        let s = ServerSettings::resolve(
            None,
            ServerFields {
                host: Some("::1".into()),
                port: Some(6390),
                db: Some(3),
                username: Some("default".into()),
                password: Some(String::new()),
                ..ServerFields::default()
            },
        )
        .unwrap();
        assert_eq!((s.address, s.db, s.tls), (tcp("::1", 6390), 3, false));
        assert_eq!((s.username, s.password), (None, None)); // normalized

        let s = ServerSettings::resolve(
            None,
            ServerFields {
                path: Some("/run/redis.sock".into()),
                host: Some("ignored".into()),
                port: Some(1),
                ..ServerFields::default()
            },
        )
        .unwrap();
        assert_eq!(
            s.address,
            Address::Unix {
                path: "/run/redis.sock".into()
            }
        );
    }

    #[test]
    fn fields_become_connection_settings_unchanged() {
        let s = ServerSettings {
            address: tcp("cache", 6380),
            tls: true,
            db: 4,
            username: Some("u@x".into()),
            password: Some("a b:c/d@e".into()),
        };
        let info = s.connection_info().unwrap();
        assert!(
            matches!(info.addr(), ConnectionAddr::TcpTls { host, port: 6380, .. } if host == "cache")
        );
        assert_eq!(info.redis_settings().db(), 4);
        assert_eq!(info.redis_settings().username(), Some("u@x"));
        assert_eq!(info.redis_settings().password(), Some("a b:c/d@e"));

        let moved = s.connection_info_at(tcp("10.0.0.9", 7001)).unwrap();
        assert!(
            matches!(moved.addr(), ConnectionAddr::TcpTls { host, port: 7001, .. } if host == "10.0.0.9")
        );
        assert_eq!(moved.redis_settings().password(), Some("a b:c/d@e"));

        let unix = ServerSettings {
            address: Address::Unix {
                path: "/tmp/r.sock".into(),
            },
            ..ServerSettings::default()
        };
        assert!(
            matches!(unix.connection_info().unwrap().addr(), ConnectionAddr::Unix(p) if p.to_str() == Some("/tmp/r.sock"))
        );
    }

    #[test]
    fn rejects_what_no_server_could_be() {
        for bad in [
            ServerSettings {
                address: tcp("", 6379),
                ..ServerSettings::default()
            },
            ServerSettings {
                address: tcp("h", 0),
                ..ServerSettings::default()
            },
            ServerSettings {
                address: Address::Unix {
                    path: String::new(),
                },
                ..ServerSettings::default()
            },
            ServerSettings {
                address: Address::Unix { path: "/s".into() },
                tls: true,
                ..ServerSettings::default()
            },
            ServerSettings {
                db: -1,
                ..ServerSettings::default()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(Error::Configuration(_))),
                "{bad:?}"
            );
        }
        assert!(ServerSettings::default().validate().is_ok());
        let err = ServerSettings::from_url("http://nope:secret@h/0").unwrap_err();
        assert!(!err.message().contains("secret"), "{err}");
        assert!(ServerSettings::from_url("rediss://h:1/0#insecure").is_err());
    }

    #[test]
    fn redacts_urls_that_did_not_parse() {
        assert_eq!(
            redact_url("redis://:s3cret@10.0.0.1:6380/2"),
            "redis://@10.0.0.1:6380/2"
        );
        assert_eq!(
            redact_url("rediss://app:s3cret@cache/0"),
            "rediss://app@cache/0"
        );
        assert_eq!(
            redact_url("redis://localhost:6379"),
            "redis://localhost:6379"
        );
        assert_eq!(
            redact_url("unix:///tmp/redis.sock?db=1&pass=s3cret"),
            "unix:///tmp/redis.sock?db=1&pass=***"
        );
    }
}
