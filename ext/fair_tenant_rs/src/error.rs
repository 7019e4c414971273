//! The extension's error kinds, mapped one to one onto `Sidekiq::FairTenant::Error` subclasses.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Could not connect, or the connection broke.
    Connection(String),
    /// Connect, read, write or pool checkout took longer than configured.
    Timeout(String),
    /// Redis answered with an error (script error, wrong type, OOM, ...).
    Command(String),
    /// Invalid settings (URL, pool size, key format).
    Configuration(String),
}

impl Error {
    pub fn message(&self) -> &str {
        match self {
            Error::Connection(m)
            | Error::Timeout(m)
            | Error::Command(m)
            | Error::Configuration(m) => m,
        }
    }

    /// Classifies a redis-rs error; `server` names the Redis server (no password).
    pub fn from_redis(err: &redis::RedisError, server: &str) -> Error {
        let msg = format!("{err} ({server})");
        if err.is_timeout() {
            Error::Timeout(msg)
        } else if err.is_io_error()
            || err.is_connection_refusal()
            || err.is_connection_dropped()
            || err.is_unrecoverable_error()
        {
            Error::Connection(msg)
        } else {
            Error::Command(msg)
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
