//! `Sidekiq::FairTenant::Native::Client`: the extension's connection to Redis (see
//! `src/handle.rs`), and the objects that use it: `client.router` and `client.stats` (and, with
//! the cargo feature `bench`, `client.slots`: `bench/slots.rs`), each made on first use and kept
//! for the client's life.
//! Binding only: converts the settings Hash, releases the GVL, maps errors.

use std::sync::Arc;

use magnus::gc::Marker;
use magnus::typed_data::Obj;
use magnus::{
    prelude::*, DataTypeFunctions, Error, RHash, RModule, Ruby, TryConvert, TypedData, Value,
};

use crate::handle::Handle;
use crate::redis::pool::PoolConfig;
use crate::redis::sentinel::SentinelConfig;
use crate::redis::server::{ServerFields, ServerSettings};
use crate::redis::tls::TlsOptions;
use crate::routing::keys::KeyFormat;
use crate::ruby_api::helpers::convert::seconds;
use crate::ruby_api::helpers::errors::{argument_error, to_ruby};
use crate::ruby_api::helpers::gvl::without_gvl;
use crate::ruby_api::helpers::memo::Memo;
use crate::ruby_api::router::RbRouter;
#[cfg(feature = "bench")]
use crate::ruby_api::slots::RbSlots;
use crate::ruby_api::stats::RbStats;

#[derive(TypedData)]
#[magnus(
    class = "Sidekiq::FairTenant::Native::Client",
    free_immediately,
    size,
    mark
)]
pub struct RbClient {
    handle: Arc<Handle>,
    router: Memo<RbRouter>,
    #[cfg(feature = "bench")]
    slots: Memo<RbSlots>,
    stats: Memo<RbStats>,
}

impl DataTypeFunctions for RbClient {
    fn mark(&self, marker: &Marker) {
        self.router.mark(marker);
        #[cfg(feature = "bench")]
        self.slots.mark(marker);
        self.stats.mark(marker);
    }
}

impl RbClient {
    /// The pool handle the per-concern objects share.
    pub fn handle(&self) -> Arc<Handle> {
        Arc::clone(&self.handle)
    }

    /// `settings`: the Hash `Sidekiq::FairTenant::Config#connection_settings` builds.
    fn new(ruby: &Ruby, settings: RHash) -> Result<Self, Error> {
        let get = |key: &str| settings.lookup::<_, Option<Value>>(ruby.to_symbol(key));
        let given =
            |key: &str| -> Result<Option<Value>, Error> { Ok(get(key)?.filter(|v| !v.is_nil())) };
        let required = |key: &str| -> Result<Value, Error> {
            get(key)?
                .ok_or_else(|| argument_error(ruby, format!("connection setting {key} missing")))
        };
        let duration = |key: &str| seconds(ruby, key, f64::try_convert(required(key)?)?);
        let text = |key: &str| -> Result<Option<String>, Error> {
            get(key)?.map(String::try_convert).transpose()
        };
        let flag = |key: &str, default: bool| -> Result<bool, Error> {
            Ok(get(key)?.map(|v| v.to_bool()).unwrap_or(default))
        };
        let tls = TlsOptions {
            force: flag("ssl", false)?,
            ca_file: text("ssl_ca_file")?,
            cert_file: text("ssl_cert_file")?,
            key_file: text("ssl_key_file")?,
            cert_pem: text("ssl_cert_pem")?,
            key_pem: text("ssl_key_pem")?,
            verify_peer: flag("ssl_verify_peer", true)?,
            verify_hostname: flag("ssl_verify_hostname", true)?,
        };
        let sentinel = match given("sentinels")? {
            Some(list) => Some(SentinelConfig {
                sentinels: Vec::<(String, u16)>::try_convert(list)?,
                master_name: text("sentinel_master")?.unwrap_or_default(),
                username: text("sentinel_username")?,
                password: text("sentinel_password")?,
                tls: flag("sentinel_ssl", false)?,
            }),
            None => None,
        };
        // A configured URL wins: the fields are not even read then.
        let url = text("redis_url")?;
        let fields = match url {
            Some(_) => ServerFields::default(),
            None => ServerFields {
                path: text("path")?,
                host: text("host")?,
                port: given("port")?.map(u16::try_convert).transpose()?,
                db: given("db")?.map(i64::try_convert).transpose()?,
                username: text("username")?,
                password: text("password")?,
            },
        };
        let server = ServerSettings::resolve(url.as_deref(), fields).map_err(to_ruby)?;
        let config = PoolConfig {
            server,
            size: usize::try_convert(required("pool_size")?)?,
            connect_timeout: duration("connect_timeout")?,
            read_timeout: duration("read_timeout")?,
            write_timeout: duration("write_timeout")?,
            backoff: duration("reconnect_backoff")?,
            tls,
            sentinel,
        };
        let enqueues_key = String::try_convert(required("enqueues_key")?)?;
        let handle = Handle::open(config, &enqueues_key).map_err(to_ruby)?;
        Ok(RbClient {
            handle: Arc::new(handle),
            router: Memo::default(),
            #[cfg(feature = "bench")]
            slots: Memo::default(),
            stats: Memo::default(),
        })
    }

    fn router(ruby: &Ruby, rb_self: &Self) -> Obj<RbRouter> {
        rb_self
            .router
            .get_or_wrap(ruby, || RbRouter::over(rb_self.handle()))
    }

    /// `client.slots`, defined with the cargo feature `bench` (`bench/slots.rs`).
    #[cfg(feature = "bench")]
    pub fn slots(ruby: &Ruby, rb_self: &Self) -> Obj<RbSlots> {
        rb_self
            .slots
            .get_or_wrap(ruby, || RbSlots(rb_self.handle()))
    }

    fn stats(ruby: &Ruby, rb_self: &Self) -> Obj<RbStats> {
        rb_self
            .stats
            .get_or_wrap(ruby, || RbStats::over(rb_self.handle()))
    }

    fn ping(&self) -> Result<bool, Error> {
        without_gvl(|| self.handle.ping())?.map_err(to_ruby)
    }

    /// The server (no password), or the sentinels and the master last found, for messages.
    fn server(&self) -> String {
        self.handle.pool.server()
    }

    fn pool_stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let s = rb_self.handle.pool.stats();
        let h = ruby.hash_new();
        h.aset(ruby.to_symbol("size"), s.size)?;
        h.aset(ruby.to_symbol("open"), s.open)?;
        h.aset(ruby.to_symbol("idle"), s.idle)?;
        h.aset(ruby.to_symbol("connects"), s.connects)?;
        h.aset(ruby.to_symbol("down"), s.down)?;
        h.aset(ruby.to_symbol("probing"), s.probing)?;
        Ok(h)
    }

    /// Whether the enqueue script's keys share a Redis Cluster slot with this `enqueues_key`.
    fn cluster_safe(&self) -> bool {
        self.handle.keys.cluster_safe()
    }

    /// Raises ConfigurationError unless `format` is a usable `enqueues_key`.
    fn check_key_format(format: String) -> Result<bool, Error> {
        KeyFormat::parse(&format)
            .map(|_| true)
            .map_err(|e| to_ruby(e.into()))
    }
}

/// Defines `Client`, and `Router.new(client)` and `Stats.new(client)`: one more object over the
/// client's pool (`client.router` and `client.stats` keep one each). Here, so that the two bindings
/// know the pool handle, not the client; their classes are defined before. (`Slots.new(client)`:
/// `bench/slots.rs`.)
pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    RbRouter::class(ruby).define_singleton_method(
        "new",
        magnus::function!(|c: &RbClient| RbRouter::over(c.handle()), 1),
    )?;
    RbStats::class(ruby).define_singleton_method(
        "new",
        magnus::function!(|c: &RbClient| RbStats::over(c.handle()), 1),
    )?;
    let class = namespace.define_class("Client", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(RbClient::new, 1))?;
    class.define_singleton_method(
        "check_key_format",
        magnus::function!(RbClient::check_key_format, 1),
    )?;
    class.define_method("router", magnus::method!(RbClient::router, 0))?;
    class.define_method("stats", magnus::method!(RbClient::stats, 0))?;
    class.define_method("ping", magnus::method!(RbClient::ping, 0))?;
    class.define_method("server", magnus::method!(RbClient::server, 0))?;
    class.define_method("pool_stats", magnus::method!(RbClient::pool_stats, 0))?;
    class.define_method("cluster_safe?", magnus::method!(RbClient::cluster_safe, 0))?;
    Ok(())
}
