//! `Sidekiq::FairTenant::Native::Stats`: read-only views of routing and concurrency state for
//! `Sidekiq::FairTenant::Stats`, the Web tab and the CLI (`client.stats`, or
//! `Native::Stats.new(client)`). Binding only: the evaluation lives in `routing/stats.rs`, the slot
//! keys in `slots/mod.rs`.

use std::sync::Arc;

use magnus::{prelude::*, Error, RArray, RHash, RModule, RString, Ruby, Symbol};

use crate::handle::Handle;
use crate::routing::stats::{self, Order, Query, TenantRow};
use crate::ruby_api::helpers::convert::{bytes, pair, put_target};
use crate::ruby_api::helpers::errors::{argument_error, to_ruby};
use crate::ruby_api::helpers::gvl::without_gvl;
use crate::ruby_api::rule_set::RbRuleSet;
use crate::ruby_api::slots::call;
use crate::slots::{self, Scope};

#[magnus::wrap(class = "Sidekiq::FairTenant::Native::Stats", free_immediately, size)]
pub struct RbStats(Arc<Handle>);

/// `[[jid, lease_expiry_ms], ...]`
fn holders(ruby: &Ruby, holders: &[(Vec<u8>, u64)]) -> Result<RArray, Error> {
    let list = ruby.ary_new_capa(holders.len());
    for (jid, expiry) in holders {
        let row = ruby.ary_new_capa(2);
        row.push(ruby.str_from_slice(jid))?;
        row.push(*expiry)?;
        list.push(row)?;
    }
    Ok(list)
}

fn tenant_row(ruby: &Ruby, r: &TenantRow) -> Result<RHash, Error> {
    let h = ruby.hash_new();
    // UTF-8 when the bytes are (the row may go into JSON: Ruby 3.3 refuses binary strings with high bytes).
    let tenant = match std::str::from_utf8(&r.tenant) {
        Ok(s) => ruby.str_new(s),
        Err(_) => ruby.str_from_slice(&r.tenant),
    };
    h.aset(ruby.to_symbol("tenant"), tenant)?;
    h.aset(ruby.to_symbol("last_enqueued_at"), r.last_enqueue)?;
    h.aset(ruby.to_symbol("counts"), r.eval.counts.clone())?;
    h.aset(ruby.to_symbol("next_rule"), r.eval.next_rule)?;
    h.aset(ruby.to_symbol("last_rerouted_at"), r.eval.last_reroute)?;
    Ok(h)
}

impl RbStats {
    pub fn over(handle: Arc<Handle>) -> Self {
        RbStats(handle)
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
        fair_queue: bool,
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
            keys: &rb_self.0.keys,
            rules: &rules.0,
            job_class: &job_class,
            queue: &queue,
            now,
            fair_queue,
        };
        let pool = &rb_self.0.pool;
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
    #[allow(clippy::too_many_arguments)]
    fn tenant_stat(
        ruby: &Ruby,
        rb_self: &Self,
        rules: &RbRuleSet,
        job_class: RString,
        queue: RString,
        tenant: RString,
        now: f64,
        fair_queue: bool,
    ) -> Result<RHash, Error> {
        let (job_class, queue, tenant) = (bytes(job_class), bytes(queue), bytes(tenant));
        let q = Query {
            keys: &rb_self.0.keys,
            rules: &rules.0,
            job_class: &job_class,
            queue: &queue,
            now,
            fair_queue,
        };
        let row = without_gvl(|| stats::tenant(&rb_self.0.pool, &q, &tenant))?.map_err(to_ruby)?;
        tenant_row(ruby, &row)
    }

    /// The class's tenant index key.
    fn index_key(ruby: &Ruby, rb_self: &Self, job_class: RString, queue: RString) -> RString {
        ruby.str_from_slice(&rb_self.0.keys.index_key(&bytes(queue), &bytes(job_class)))
    }

    /// `[[[jid, lease_expiry_ms], ...], parked_count]`
    fn inspect_scope(
        ruby: &Ruby,
        rb_self: &Self,
        tag: RString,
        sub: RString,
    ) -> Result<RArray, Error> {
        let scope = Scope::from_parts(bytes(tag), bytes(sub));
        let state = without_gvl(|| slots::inspect(&rb_self.0.pool, &scope))?.map_err(to_ruby)?;
        let out = ruby.ary_new_capa(2);
        out.push(holders(ruby, &state.holders)?)?;
        out.push(state.parked)?;
        Ok(out)
    }
}

/// `[pattern, count, rounds]` of the SCAN for scopes with running jobs.
fn holders_scan() -> (String, u64, usize) {
    slots::holders_scan()
}

/// A tag's meta hash (sub -> the class's limit and lease, recorded when a job parks).
fn meta_key(ruby: &Ruby, tag: RString) -> RString {
    ruby.str_from_slice(&slots::meta(&bytes(tag)))
}

/// A scope's `waits` hash (jid -> a parked job's own terms): `why` finds a plain-queue job parked there.
fn waits_key(ruby: &Ruby, tag: RString, sub: RString) -> RString {
    ruby.str_from_slice(&Scope::from_parts(bytes(tag), bytes(sub)).waits())
}

/// `[[tag, sub], ...]`: scopes with parked or running jobs, at most `max`, from `parked`
/// (`[[tag, [sub, ...]], ...]`) and `holder_keys` (what the SCAN found).
fn scope_list(
    ruby: &Ruby,
    parked: RArray,
    holder_keys: RArray,
    max: usize,
) -> Result<RArray, Error> {
    let mut tags = Vec::with_capacity(parked.len());
    for item in parked.into_iter() {
        let (tag, subs): (RString, RArray) = magnus::TryConvert::try_convert(item)?;
        tags.push((bytes(tag), strings(subs)?));
    }
    let parked = tags;
    let keys = strings(holder_keys)?;
    let scopes = slots::scope_list(parked, &keys, max);
    let out = ruby.ary_new_capa(scopes.len());
    for s in scopes {
        out.push(pair(ruby, s.tag(), s.sub())?)?;
    }
    Ok(out)
}

/// `[keys, argv]` of the `details` script (`Native::Slots.script("details")`) for one scope.
fn details_call(ruby: &Ruby, tag: RString, sub: RString) -> Result<RArray, Error> {
    call(
        ruby,
        slots::details_call(&Scope::from_parts(bytes(tag), bytes(sub))),
    )
}

/// An Array of Strings as bytes.
fn strings(list: RArray) -> Result<Vec<Vec<u8>>, Error> {
    list.into_iter()
        .map(|item| RString::try_convert(item).map(bytes))
        .collect()
}

/// `[a, 1, b, 2]` as `[(a, 1), (b, 2)]`.
fn pairs(flat: RArray) -> Result<slots::Scored, Error> {
    Ok(strings(flat)?
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect())
}

type RawDetails = (
    RArray,
    u64,
    RArray,
    Option<RString>,
    Option<RString>,
    Option<RString>,
);

/// `{tenant:, queue:} | {key:}` plus holders, parked, oldest_parked_ms, limit_override,
/// default_limit, limit, from the `details` script's reply.
fn details(ruby: &Ruby, tag: RString, sub: RString, reply: RArray) -> Result<RHash, Error> {
    let (holders_flat, parked, oldest, own, all, meta_value): RawDetails =
        magnus::TryConvert::try_convert(reply.as_value())?;
    let d = slots::details_from((
        pairs(holders_flat)?,
        parked,
        pairs(oldest)?,
        own.map(bytes),
        all.map(bytes),
        meta_value.map(bytes),
    ));
    let scope = Scope::from_parts(bytes(tag), bytes(sub));
    let h = ruby.hash_new();
    if let Some(target) = slots::scope_target(scope.tag(), scope.sub()) {
        put_target(ruby, h, target)?;
    }
    h.aset(ruby.to_symbol("holders"), holders(ruby, &d.holders)?)?;
    h.aset(ruby.to_symbol("parked"), d.parked)?;
    h.aset(ruby.to_symbol("oldest_parked_ms"), d.oldest_parked_ms)?;
    h.aset(ruby.to_symbol("limit_override"), d.limit_override)?;
    h.aset(ruby.to_symbol("default_limit"), d.default_limit)?;
    h.aset(ruby.to_symbol("limit"), d.effective_limit())?;
    Ok(h)
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Stats", ruby.class_object())?;
    class.define_method("tenant_stats", magnus::method!(RbStats::tenant_stats, 8))?;
    class.define_method("tenant_stat", magnus::method!(RbStats::tenant_stat, 6))?;
    class.define_method("index_key", magnus::method!(RbStats::index_key, 2))?;
    class.define_singleton_method("holders_scan", magnus::function!(holders_scan, 0))?;
    class.define_singleton_method("meta_key", magnus::function!(meta_key, 1))?;
    class.define_singleton_method("waits_key", magnus::function!(waits_key, 2))?;
    class.define_singleton_method("scope_list", magnus::function!(scope_list, 3))?;
    class.define_singleton_method("details_call", magnus::function!(details_call, 2))?;
    class.define_singleton_method("details", magnus::function!(details, 3))?;
    class.define_method("inspect_scope", magnus::method!(RbStats::inspect_scope, 2))?;
    Ok(())
}
