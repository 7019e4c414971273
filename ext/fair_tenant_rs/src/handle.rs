//! The pool handle every binding shares: one Redis pool, and the `enqueues_key` format that names
//! the router's and the stats' keys. `Native::Client` opens it; `Native::Router`, `Native::Slots`
//! and `Native::Stats` hold it through an `Arc`, so they all talk to Redis over the same pool, and
//! whichever of them Ruby collects last closes it (`Native::Limits` and `Native::Rate` hold none).

use crate::error::Result;
use crate::redis::pool::{Pool, PoolConfig};
use crate::routing::keys::KeyFormat;

pub struct Handle {
    pub pool: Pool,
    pub keys: KeyFormat,
}

impl Handle {
    /// Checks `enqueues_key` before the pool settings, then builds the pool. No I/O: the first
    /// call connects.
    pub fn open(config: PoolConfig, enqueues_key: &str) -> Result<Handle> {
        let keys = KeyFormat::parse(enqueues_key)?;
        let pool = Pool::new(config)?;
        Ok(Handle { pool, keys })
    }

    /// Whether Redis answers `PING` with `PONG`.
    pub fn ping(&self) -> Result<bool> {
        self.pool
            .with(|c| redis::cmd("PING").query::<String>(c))
            .map(|pong| pong == "PONG")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::Error;
    use crate::redis::server::ServerSettings;
    use crate::redis::tls::TlsOptions;
    use crate::routing::keys::DEFAULT_ENQUEUES_KEY;

    fn config(size: usize) -> PoolConfig {
        let second = Duration::from_secs(1);
        PoolConfig {
            server: ServerSettings::default(),
            size,
            connect_timeout: second,
            read_timeout: second,
            write_timeout: second,
            backoff: second,
            tls: TlsOptions::verified(),
            sentinel: None,
        }
    }

    #[test]
    fn opens_without_connecting() {
        let handle = Handle::open(config(3), DEFAULT_ENQUEUES_KEY).unwrap();
        let stats = handle.pool.stats();
        assert_eq!((stats.size, stats.open, stats.connects), (3, 0, 0));
        assert!(handle.keys.uses(crate::routing::keys::Field::FairTenant));
    }

    #[test]
    fn a_bad_key_format_is_reported_before_bad_pool_settings() {
        let err = Handle::open(config(0), "no-tenant").err().unwrap();
        assert!(matches!(&err, Error::Configuration(m) if m.contains("enqueues_key")));
        let err = Handle::open(config(0), DEFAULT_ENQUEUES_KEY).err().unwrap();
        assert_eq!(
            err,
            Error::Configuration("pool_size must be at least 1".into())
        );
    }
}
