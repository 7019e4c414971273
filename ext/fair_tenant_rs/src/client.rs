//! `Sidekiq::FairTenant::Native::Client`: the extension's Redis pool and the calls made on it.
//! Binding only: converts arguments, releases the GVL, maps errors.

use std::time::Duration;

use magnus::{prelude::*, Error, RHash, RModule, RString, Ruby};

use crate::helpers::errors::{argument_error, to_ruby};
use crate::helpers::gvl::without_gvl;
use crate::keys::KeyFormat;
use crate::pool::{Pool, PoolConfig};
use crate::router::{self, Enqueue};
use crate::rule_set::RbRuleSet;

#[magnus::wrap(class = "Sidekiq::FairTenant::Native::Client", free_immediately, size)]
pub struct RbClient {
    pool: Pool,
    keys: KeyFormat,
}

fn seconds(ruby: &Ruby, name: &str, s: f64) -> Result<Duration, Error> {
    Duration::try_from_secs_f64(s)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            argument_error(
                ruby,
                format!("{name} must be a positive number of seconds, got {s}"),
            )
        })
}

/// Copies a Ruby string's bytes (binary safe: invalid UTF-8 stays as it is).
fn bytes(s: RString) -> Vec<u8> {
    // SAFETY: copied at once, with the GVL held.
    unsafe { s.as_slice() }.to_vec()
}

impl RbClient {
    #[allow(clippy::too_many_arguments)]
    fn new(
        ruby: &Ruby,
        url: String,
        size: usize,
        connect_timeout: f64,
        read_timeout: f64,
        write_timeout: f64,
        enqueues_key: String,
    ) -> Result<Self, Error> {
        let config = PoolConfig {
            url,
            size,
            connect_timeout: seconds(ruby, "connect_timeout", connect_timeout)?,
            read_timeout: seconds(ruby, "read_timeout", read_timeout)?,
            write_timeout: seconds(ruby, "write_timeout", write_timeout)?,
        };
        let keys = KeyFormat::parse(&enqueues_key)
            .map_err(|e| to_ruby(crate::error::Error::Configuration(e.to_string())))?;
        let pool = Pool::new(config).map_err(to_ruby)?;
        Ok(RbClient { pool, keys })
    }

    fn key_for(
        ruby: &Ruby,
        rb_self: &Self,
        job_class: RString,
        queue: RString,
        tenant: RString,
    ) -> RString {
        let key = rb_self
            .keys
            .render(&bytes(queue), &bytes(job_class), &bytes(tenant));
        ruby.str_from_slice(&key)
    }

    /// Registers one enqueue; returns the index of the rule that fires, or nil.
    fn route(
        &self,
        rules: &RbRuleSet,
        job_class: RString,
        queue: RString,
        tenant: RString,
        now: f64,
    ) -> Result<Option<usize>, Error> {
        let key = self
            .keys
            .render(&bytes(queue), &bytes(job_class), &bytes(tenant));
        let rules = &rules.0;
        let job = Enqueue { key: &key, now };
        without_gvl(|| router::route(&self.pool, rules, &job))?.map_err(to_ruby)
    }

    fn noop_eval(&self, key: RString) -> Result<(), Error> {
        let key = bytes(key);
        without_gvl(|| router::noop(&self.pool, &key))?.map_err(to_ruby)
    }

    fn ping(&self) -> Result<bool, Error> {
        without_gvl(|| self.pool.with(|c| redis::cmd("PING").query::<String>(c)))?
            .map(|pong| pong == "PONG")
            .map_err(to_ruby)
    }

    /// A tenant key's enqueue times, oldest first (for stats and tests).
    fn decode_times(value: RString) -> Vec<f64> {
        router::decode_times(&bytes(value))
    }

    fn server(&self) -> String {
        self.pool.server().to_string()
    }

    fn pool_stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let s = rb_self.pool.stats();
        let h = ruby.hash_new();
        h.aset(ruby.to_symbol("size"), s.size)?;
        h.aset(ruby.to_symbol("open"), s.open)?;
        h.aset(ruby.to_symbol("idle"), s.idle)?;
        Ok(h)
    }

    /// Raises ConfigurationError unless `format` is a usable `enqueues_key`.
    fn check_key_format(format: String) -> Result<bool, Error> {
        KeyFormat::parse(&format)
            .map(|_| true)
            .map_err(|e| to_ruby(crate::error::Error::Configuration(e.to_string())))
    }

    fn route_script_sha() -> String {
        router::script_sha()
    }
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Client", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(RbClient::new, 6))?;
    class.define_singleton_method(
        "route_script_sha",
        magnus::function!(RbClient::route_script_sha, 0),
    )?;
    class.define_singleton_method(
        "check_key_format",
        magnus::function!(RbClient::check_key_format, 1),
    )?;
    class.define_singleton_method("decode_times", magnus::function!(RbClient::decode_times, 1))?;
    class.define_method("key_for", magnus::method!(RbClient::key_for, 3))?;
    class.define_method("route", magnus::method!(RbClient::route, 5))?;
    class.define_method("noop_eval", magnus::method!(RbClient::noop_eval, 1))?;
    class.define_method("ping", magnus::method!(RbClient::ping, 0))?;
    class.define_method("server", magnus::method!(RbClient::server, 0))?;
    class.define_method("pool_stats", magnus::method!(RbClient::pool_stats, 0))?;
    Ok(())
}
