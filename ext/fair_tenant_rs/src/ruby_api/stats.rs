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
    h.aset(ruby.to_symbol("tenant"), ruby.str_from_slice(&r.tenant))?;
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

    /// `[[tag, sub], ...]`: scopes with parked or running jobs, at most `max`.
    fn scopes(ruby: &Ruby, rb_self: &Self, max: usize) -> Result<RArray, Error> {
        let scopes = without_gvl(|| slots::scopes(&rb_self.0.pool, max))?.map_err(to_ruby)?;
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
        let d = without_gvl(|| slots::details(&rb_self.0.pool, &scope))?.map_err(to_ruby)?;
        let h = ruby.hash_new();
        if let Some(target) = slots::limit_target(scope.tag(), scope.sub()) {
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

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Stats", ruby.class_object())?;
    class.define_method("tenant_stats", magnus::method!(RbStats::tenant_stats, 8))?;
    class.define_method("tenant_stat", magnus::method!(RbStats::tenant_stat, 6))?;
    class.define_method("index_key", magnus::method!(RbStats::index_key, 2))?;
    class.define_method("scopes", magnus::method!(RbStats::scopes, 1))?;
    class.define_method("scope_details", magnus::method!(RbStats::scope_details, 2))?;
    class.define_method("inspect_scope", magnus::method!(RbStats::inspect_scope, 2))?;
    Ok(())
}
