//! `Sidekiq::FairTenant::Native::Router`: routing pushes (`client.router`, or
//! `Native::Router.new(client)`). Binding only: the decision is `routing/router.rs` and
//! `lua/routing/route.lua`, the rules `routing/rules.rs`.

use std::sync::Arc;

use magnus::{prelude::*, scan_args::scan_args, Error, RModule, RString, Ruby, TryConvert, Value};

use crate::handle::Handle;
use crate::routing::router::{self, Push};
use crate::ruby_api::helpers::convert::bytes;
use crate::ruby_api::helpers::errors::to_ruby;
use crate::ruby_api::helpers::gvl::without_gvl;
use crate::ruby_api::rule_set::RbRuleSet;

#[magnus::wrap(class = "Sidekiq::FairTenant::Native::Router", free_immediately, size)]
pub struct RbRouter(Arc<Handle>);

impl RbRouter {
    pub fn over(handle: Arc<Handle>) -> Self {
        RbRouter(handle)
    }

    pub fn push(&self, job_class: RString, queue: RString, tenant: RString) -> Push {
        Push::new(
            &self.0.keys,
            &bytes(queue),
            &bytes(job_class),
            &bytes(tenant),
        )
    }

    /// `route(rules, job_class, queue, tenant, now, fair_queue = false)`: registers one enqueue;
    /// returns the index of the rule that fires, or nil. With `fair_queue` only the rules with
    /// `from_fair_queue: true` may fire.
    fn route(&self, args: &[Value]) -> Result<Option<usize>, Error> {
        type Required = (Value, RString, RString, RString, f64);
        let args = scan_args::<Required, (Option<bool>,), (), (), (), ()>(args)?;
        let (rules, job_class, queue, tenant, now) = args.required;
        let rules = <&RbRuleSet>::try_convert(rules)?;
        let fair_queue = args.optional.0.unwrap_or(false);
        let push = self.push(job_class, queue, tenant);
        let (rules, job) = (&rules.0, push.at(now, fair_queue));
        without_gvl(|| router::route(&self.0.pool, rules, &job))?.map_err(to_ruby)
    }

    /// The tenant's key: where its enqueue times are kept.
    fn key_for(
        ruby: &Ruby,
        rb_self: &Self,
        job_class: RString,
        queue: RString,
        tenant: RString,
    ) -> RString {
        let key = rb_self
            .0
            .keys
            .render(&bytes(queue), &bytes(job_class), &bytes(tenant));
        ruby.str_from_slice(&key)
    }

    /// A tenant key's enqueue times, oldest first (for stats and tests).
    fn decode_times(value: RString) -> Vec<f64> {
        router::decode_times(&bytes(value))
    }

    fn route_script_sha() -> String {
        router::script_sha()
    }
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Router", ruby.class_object())?;
    class.define_singleton_method("decode_times", magnus::function!(RbRouter::decode_times, 1))?;
    class.define_singleton_method(
        "route_script_sha",
        magnus::function!(RbRouter::route_script_sha, 0),
    )?;
    class.define_method("route", magnus::method!(RbRouter::route, -1))?;
    class.define_method("key_for", magnus::method!(RbRouter::key_for, 3))?;
    Ok(())
}
