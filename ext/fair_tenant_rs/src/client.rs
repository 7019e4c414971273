//! `Sidekiq::FairTenant::Native::Client`: the extension's Redis pool and the calls made on it.
//! Binding only: converts arguments, releases the GVL, maps errors.

use std::time::Duration;

use magnus::{prelude::*, Error, RArray, RHash, RModule, RString, Ruby, Symbol, TryConvert, Value};

use crate::connection::Connection;
use crate::helpers::errors::{argument_error, to_ruby};
use crate::helpers::gvl::without_gvl;
use crate::keys::KeyFormat;
use crate::pool::PoolConfig;
use crate::router::{self, Push};
use crate::rule_set::RbRuleSet;
use crate::sentinel::SentinelConfig;
use crate::server::{ServerFields, ServerSettings};
use crate::slots::{self, LimitTarget, Scope, Slot};
use crate::stats::{self, Order, Query, TenantRow};
use crate::tls::TlsOptions;

#[magnus::wrap(class = "Sidekiq::FairTenant::Native::Client", free_immediately, size)]
pub struct RbClient {
    conn: Connection,
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

fn pair(ruby: &Ruby, a: &[u8], b: &[u8]) -> Result<RArray, Error> {
    let out = ruby.ary_new_capa(2);
    out.push(ruby.str_from_slice(a))?;
    out.push(ruby.str_from_slice(b))?;
    Ok(out)
}

impl RbClient {
    /// `settings`: the Hash `Sidekiq::FairTenant::Config#connection_settings` builds.
    fn new(ruby: &Ruby, settings: RHash) -> Result<Self, Error> {
        let get = |key: &str| settings.lookup::<_, Option<Value>>(ruby.to_symbol(key));
        let given =
            |key: &str| -> Result<Option<Value>, Error> { Ok(get(key)?.filter(|v| !v.is_nil())) };
        let required = |key: &str| -> Result<Value, Error> {
            get(key)?
                .ok_or_else(|| argument_error(ruby, format!("connection setting {key} missing")))
        };
        let duration = |key: &str| -> Result<Duration, Error> {
            seconds(ruby, key, f64::try_convert(required(key)?)?)
        };
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
        let conn = Connection::open(config, &enqueues_key).map_err(to_ruby)?;
        Ok(RbClient { conn })
    }

    fn key_for(
        ruby: &Ruby,
        rb_self: &Self,
        job_class: RString,
        queue: RString,
        tenant: RString,
    ) -> RString {
        let key = rb_self
            .conn
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
        let push = self.push(job_class, queue, tenant);
        let (rules, job) = (&rules.0, push.at(now));
        without_gvl(|| router::route(&self.conn.pool, rules, &job))?.map_err(to_ruby)
    }

    fn push(&self, job_class: RString, queue: RString, tenant: RString) -> Push {
        Push::new(
            &self.conn.keys,
            &bytes(queue),
            &bytes(job_class),
            &bytes(tenant),
        )
    }

    /// `[keys, argv]` of the route script for one push, without running it (for `bin/bench`).
    fn route_args(
        ruby: &Ruby,
        rb_self: &Self,
        rules: &RbRuleSet,
        job_class: RString,
        queue: RString,
        tenant: RString,
        now: f64,
    ) -> Result<RArray, Error> {
        let push = rb_self.push(job_class, queue, tenant);
        let keys = ruby.ary_from_iter([&push.key, &push.index].map(|k| ruby.str_from_slice(k)));
        let args = router::script_args(&rules.0, &push.at(now)).map(|a| ruby.str_from_slice(&a));
        Ok(ruby.ary_from_iter([keys, ruby.ary_from_iter(args)]))
    }

    fn noop_eval(&self, key: RString) -> Result<(), Error> {
        let key = bytes(key);
        without_gvl(|| router::noop(&self.conn.pool, &key))?.map_err(to_ruby)
    }

    fn ping(&self) -> Result<bool, Error> {
        without_gvl(|| self.conn.ping())?.map_err(to_ruby)
    }

    /// A tenant key's enqueue times, oldest first (for stats and tests).
    fn decode_times(value: RString) -> Vec<f64> {
        router::decode_times(&bytes(value))
    }

    /// `[tag, sub]` of the default scope: a tenant's jobs from one queue.
    fn tenant_scope(ruby: &Ruby, tenant: RString, queue: RString) -> Result<RArray, Error> {
        let scope = Scope::tenant_queue(&bytes(tenant), &bytes(queue));
        pair(ruby, scope.tag(), scope.sub())
    }

    /// `[tag, sub]` of a custom-key scope.
    fn key_scope(ruby: &Ruby, key: RString) -> Result<RArray, Error> {
        let scope = Scope::custom(&bytes(key));
        pair(ruby, scope.tag(), scope.sub())
    }

    /// `[tag, field]` of the limits hash entry for a tenant (optionally one queue) or a key.
    fn limit_target(
        ruby: &Ruby,
        tenant: Option<RString>,
        queue: Option<RString>,
        key: Option<RString>,
    ) -> Result<RArray, Error> {
        let [tenant, queue, key] = [tenant, queue, key].map(|s| s.map(bytes));
        let Some((tag, field)) =
            slots::limit_entry(tenant.as_deref(), queue.as_deref(), key.as_deref())
        else {
            return Err(argument_error(
                ruby,
                "give tenant: (optionally with queue:) or key:, not both",
            ));
        };
        pair(ruby, &tag, &field)
    }

    #[allow(clippy::too_many_arguments)]
    fn acquire(
        ruby: &Ruby,
        rb_self: &Self,
        tag: RString,
        sub: RString,
        jid: RString,
        lease_ms: u64,
        default_limit: u64,
        payload: RString,
        enqueued_at: f64,
    ) -> Result<Symbol, Error> {
        let slot = slot(tag, sub, jid, lease_ms, default_limit);
        let (req, payload) = (slot.request(), bytes(payload));
        let pool = &rb_self.conn.pool;
        let outcome =
            without_gvl(|| slots::acquire(pool, &req, &payload, enqueued_at))?.map_err(to_ruby)?;
        Ok(ruby.to_symbol(outcome.name()))
    }

    fn release(
        &self,
        tag: RString,
        sub: RString,
        jid: RString,
        lease_ms: u64,
        default_limit: u64,
    ) -> Result<u64, Error> {
        let slot = slot(tag, sub, jid, lease_ms, default_limit);
        let req = slot.request();
        without_gvl(|| slots::release(&self.conn.pool, &req))?.map_err(to_ruby)
    }

    /// `running`: an Array of `[tag, sub, jid, lease_ms]`.
    fn renew(&self, running: RArray) -> Result<u64, Error> {
        let mut entries = Vec::with_capacity(running.len());
        for item in running.into_iter() {
            let (tag, sub, jid, lease_ms): (RString, RString, RString, u64) =
                magnus::TryConvert::try_convert(item)?;
            entries.push((
                Scope::from_parts(bytes(tag), bytes(sub)),
                bytes(jid),
                lease_ms,
            ));
        }
        without_gvl(|| slots::renew(&self.conn.pool, &entries))?.map_err(to_ruby)
    }

    fn sweep(&self, max_tags: usize) -> Result<u64, Error> {
        Ok(self.sweep_details(max_tags)?.0)
    }

    /// `[jobs handed a slot, expired leases reclaimed]`
    fn sweep_details(&self, max_tags: usize) -> Result<(u64, u64), Error> {
        let swept = without_gvl(|| slots::sweep(&self.conn.pool, max_tags))?.map_err(to_ruby)?;
        Ok((swept.handed, swept.reclaimed))
    }

    /// `[total, [row, ...]]` for a class's active tenants; `order` is `:recent` or `:greedy`.
    #[allow(clippy::too_many_arguments)]
    fn tenant_stats(
        ruby: &Ruby,
        rb_self: &Self,
        rules: &RbRuleSet,
        job_class: RString,
        queue: RString,
        now: f64,
        order: Symbol,
        offset: usize,
        limit: usize,
    ) -> Result<RArray, Error> {
        let name = order.name()?;
        let Some(order) = Order::named(&name) else {
            return Err(argument_error(
                ruby,
                format!("order must be :recent or :greedy, got :{name}"),
            ));
        };
        let (job_class, queue) = (bytes(job_class), bytes(queue));
        let q = Query {
            keys: &rb_self.conn.keys,
            rules: &rules.0,
            job_class: &job_class,
            queue: &queue,
            now,
        };
        let pool = &rb_self.conn.pool;
        let page =
            without_gvl(|| stats::tenants(pool, &q, order, offset, limit))?.map_err(to_ruby)?;
        let rows = ruby.ary_new_capa(page.rows.len());
        for r in &page.rows {
            rows.push(tenant_row(ruby, r)?)?;
        }
        let out = ruby.ary_new_capa(2);
        out.push(page.total)?;
        out.push(rows)?;
        Ok(out)
    }

    /// One tenant's row, whether or not it is in the index.
    fn tenant_stat(
        ruby: &Ruby,
        rb_self: &Self,
        rules: &RbRuleSet,
        job_class: RString,
        queue: RString,
        tenant: RString,
        now: f64,
    ) -> Result<RHash, Error> {
        let (job_class, queue, tenant) = (bytes(job_class), bytes(queue), bytes(tenant));
        let q = Query {
            keys: &rb_self.conn.keys,
            rules: &rules.0,
            job_class: &job_class,
            queue: &queue,
            now,
        };
        let row =
            without_gvl(|| stats::tenant(&rb_self.conn.pool, &q, &tenant))?.map_err(to_ruby)?;
        tenant_row(ruby, &row)
    }

    /// `[[tag, sub], ...]`: scopes with parked or running jobs, at most `max`.
    fn scopes(ruby: &Ruby, rb_self: &Self, max: usize) -> Result<RArray, Error> {
        let scopes = without_gvl(|| slots::scopes(&rb_self.conn.pool, max))?.map_err(to_ruby)?;
        let out = ruby.ary_new_capa(scopes.len());
        for s in scopes {
            out.push(pair(ruby, s.tag(), s.sub())?)?;
        }
        Ok(out)
    }

    /// `{tenant:, queue:} | {key:}` plus holders, parked, oldest_parked_ms, limit_override,
    /// default_limit, limit.
    fn scope_details(
        ruby: &Ruby,
        rb_self: &Self,
        tag: RString,
        sub: RString,
    ) -> Result<RHash, Error> {
        let scope = Scope::from_parts(bytes(tag), bytes(sub));
        let d = without_gvl(|| slots::details(&rb_self.conn.pool, &scope))?.map_err(to_ruby)?;
        let h = ruby.hash_new();
        if let Some(target) = slots::limit_target(scope.tag(), scope.sub()) {
            put_target(ruby, h, target)?;
        }
        let holders = ruby.ary_new_capa(d.holders.len());
        for (jid, expiry) in &d.holders {
            let row = ruby.ary_new_capa(2);
            row.push(ruby.str_from_slice(jid))?;
            row.push(*expiry)?;
            holders.push(row)?;
        }
        h.aset(ruby.to_symbol("holders"), holders)?;
        h.aset(ruby.to_symbol("parked"), d.parked)?;
        h.aset(ruby.to_symbol("oldest_parked_ms"), d.oldest_parked_ms)?;
        h.aset(ruby.to_symbol("limit_override"), d.limit_override)?;
        h.aset(ruby.to_symbol("default_limit"), d.default_limit)?;
        h.aset(ruby.to_symbol("limit"), d.effective_limit())?;
        Ok(h)
    }

    /// The class's tenant index key.
    fn index_key(ruby: &Ruby, rb_self: &Self, job_class: RString, queue: RString) -> RString {
        ruby.str_from_slice(
            &rb_self
                .conn
                .keys
                .index_key(&bytes(queue), &bytes(job_class)),
        )
    }

    /// Whether the enqueue script's keys share a Redis Cluster slot with this `enqueues_key`.
    fn cluster_safe(&self) -> bool {
        self.conn.keys.cluster_safe()
    }

    fn set_limit(&self, tag: RString, field: RString, value: Option<u64>) -> Result<u64, Error> {
        let (tag, field) = (bytes(tag), bytes(field));
        without_gvl(|| slots::set_limit(&self.conn.pool, &tag, &field, value))?.map_err(to_ruby)
    }

    fn get_limit(&self, tag: RString, field: RString) -> Result<Option<u64>, Error> {
        let (tag, field) = (bytes(tag), bytes(field));
        without_gvl(|| slots::get_limit(&self.conn.pool, &tag, &field))?.map_err(to_ruby)
    }

    /// `[{tenant:, queue:, limit:} | {key:, limit:}, ...]`
    fn list_limits(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let limits = without_gvl(|| slots::list_limits(&rb_self.conn.pool))?.map_err(to_ruby)?;
        let out = ruby.ary_new_capa(limits.len());
        for (target, limit) in limits {
            let h = ruby.hash_new();
            put_target(ruby, h, target)?;
            h.aset(ruby.to_symbol("limit"), limit)?;
            out.push(h)?;
        }
        Ok(out)
    }

    /// `[[[jid, lease_expiry_ms], ...], parked_count]`
    fn inspect_scope(
        ruby: &Ruby,
        rb_self: &Self,
        tag: RString,
        sub: RString,
    ) -> Result<RArray, Error> {
        let scope = Scope::from_parts(bytes(tag), bytes(sub));
        let state = without_gvl(|| slots::inspect(&rb_self.conn.pool, &scope))?.map_err(to_ruby)?;
        let list = ruby.ary_new_capa(state.holders.len());
        for (jid, expiry) in state.holders {
            let row = ruby.ary_new_capa(2);
            row.push(ruby.str_from_slice(&jid))?;
            row.push(expiry)?;
            list.push(row)?;
        }
        let out = ruby.ary_new_capa(2);
        out.push(list)?;
        out.push(state.parked)?;
        Ok(out)
    }

    fn server(&self) -> String {
        self.conn.pool.server()
    }

    fn pool_stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let s = rb_self.conn.pool.stats();
        let h = ruby.hash_new();
        h.aset(ruby.to_symbol("size"), s.size)?;
        h.aset(ruby.to_symbol("open"), s.open)?;
        h.aset(ruby.to_symbol("idle"), s.idle)?;
        h.aset(ruby.to_symbol("connects"), s.connects)?;
        h.aset(ruby.to_symbol("down"), s.down)?;
        h.aset(ruby.to_symbol("probing"), s.probing)?;
        Ok(h)
    }

    /// Raises ConfigurationError unless `format` is a usable `enqueues_key`.
    fn check_key_format(format: String) -> Result<bool, Error> {
        KeyFormat::parse(&format)
            .map(|_| true)
            .map_err(|e| to_ruby(e.into()))
    }

    fn route_script_sha() -> String {
        router::script_sha()
    }
}

/// `tenant:` and `queue:` (nil for every queue), or `key:`, of a limit's target.
fn put_target(ruby: &Ruby, h: RHash, target: LimitTarget) -> Result<(), Error> {
    match target {
        LimitTarget::Tenant(tenant, queue) => {
            h.aset(ruby.to_symbol("tenant"), ruby.str_from_slice(&tenant))?;
            h.aset(
                ruby.to_symbol("queue"),
                queue.map(|q| ruby.str_from_slice(&q)),
            )
        }
        LimitTarget::Key(key) => h.aset(ruby.to_symbol("key"), ruby.str_from_slice(&key)),
    }
}

fn slot(tag: RString, sub: RString, jid: RString, lease_ms: u64, default_limit: u64) -> Slot {
    Slot {
        scope: Scope::from_parts(bytes(tag), bytes(sub)),
        jid: bytes(jid),
        lease_ms,
        default_limit,
    }
}

fn tenant_row(ruby: &Ruby, r: &TenantRow) -> Result<RHash, Error> {
    let h = ruby.hash_new();
    h.aset(ruby.to_symbol("tenant"), ruby.str_from_slice(&r.tenant))?;
    h.aset(ruby.to_symbol("last_enqueued_at"), r.last_enqueue)?;
    h.aset(ruby.to_symbol("counts"), r.eval.counts.clone())?;
    h.aset(ruby.to_symbol("next_rule"), r.eval.next_rule)?;
    h.aset(ruby.to_symbol("last_rerouted_at"), r.eval.last_reroute)?;
    Ok(h)
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Client", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(RbClient::new, 1))?;
    class.define_singleton_method(
        "route_script_sha",
        magnus::function!(RbClient::route_script_sha, 0),
    )?;
    class.define_singleton_method(
        "check_key_format",
        magnus::function!(RbClient::check_key_format, 1),
    )?;
    class.define_singleton_method("decode_times", magnus::function!(RbClient::decode_times, 1))?;
    class.define_singleton_method("tenant_scope", magnus::function!(RbClient::tenant_scope, 2))?;
    class.define_singleton_method("key_scope", magnus::function!(RbClient::key_scope, 1))?;
    class.define_singleton_method("limit_target", magnus::function!(RbClient::limit_target, 3))?;
    class.define_method("route_args", magnus::method!(RbClient::route_args, 5))?;
    class.define_method("acquire", magnus::method!(RbClient::acquire, 7))?;
    class.define_method("release", magnus::method!(RbClient::release, 5))?;
    class.define_method("renew", magnus::method!(RbClient::renew, 1))?;
    class.define_method("sweep", magnus::method!(RbClient::sweep, 1))?;
    class.define_method("sweep_details", magnus::method!(RbClient::sweep_details, 1))?;
    class.define_method("tenant_stats", magnus::method!(RbClient::tenant_stats, 7))?;
    class.define_method("tenant_stat", magnus::method!(RbClient::tenant_stat, 5))?;
    class.define_method("scopes", magnus::method!(RbClient::scopes, 1))?;
    class.define_method("scope_details", magnus::method!(RbClient::scope_details, 2))?;
    class.define_method("index_key", magnus::method!(RbClient::index_key, 2))?;
    class.define_method("cluster_safe?", magnus::method!(RbClient::cluster_safe, 0))?;
    class.define_method("set_limit", magnus::method!(RbClient::set_limit, 3))?;
    class.define_method("get_limit", magnus::method!(RbClient::get_limit, 2))?;
    class.define_method("list_limits", magnus::method!(RbClient::list_limits, 0))?;
    class.define_method("inspect_scope", magnus::method!(RbClient::inspect_scope, 2))?;
    class.define_method("key_for", magnus::method!(RbClient::key_for, 3))?;
    class.define_method("route", magnus::method!(RbClient::route, 5))?;
    class.define_method("noop_eval", magnus::method!(RbClient::noop_eval, 1))?;
    class.define_method("ping", magnus::method!(RbClient::ping, 0))?;
    class.define_method("server", magnus::method!(RbClient::server, 0))?;
    class.define_method("pool_stats", magnus::method!(RbClient::pool_stats, 0))?;
    Ok(())
}
