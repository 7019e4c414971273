//! `Sidekiq::FairTenant::Native::Limits`: runtime concurrency limits for
//! `Sidekiq::FairTenant::Limits` (`client.limits`, or `Native::Limits.new(client)`). Binding only:
//! which entry a limit is, and the script that applies it, live in `slots/mod.rs` and `lua/slots/`.

use std::sync::Arc;

use magnus::{prelude::*, Error, RArray, RModule, RString, Ruby};

use crate::handle::Handle;
use crate::ruby_api::helpers::convert::{bytes, pair, put_target};
use crate::ruby_api::helpers::errors::{argument_error, to_ruby};
use crate::ruby_api::helpers::gvl::without_gvl;
use crate::slots;

#[magnus::wrap(class = "Sidekiq::FairTenant::Native::Limits", free_immediately, size)]
pub struct RbLimits(Arc<Handle>);

impl RbLimits {
    pub fn over(handle: Arc<Handle>) -> Self {
        RbLimits(handle)
    }

    /// `[tag, field]` of the limits entry for a tenant (optionally one queue) or a key.
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

    /// Sets a limit (`nil` deletes it); returns how many parked jobs were handed a slot.
    fn set_limit(&self, tag: RString, field: RString, value: Option<u64>) -> Result<u64, Error> {
        let (tag, field) = (bytes(tag), bytes(field));
        without_gvl(|| slots::set_limit(&self.0.pool, &tag, &field, value))?.map_err(to_ruby)
    }

    fn get_limit(&self, tag: RString, field: RString) -> Result<Option<u64>, Error> {
        let (tag, field) = (bytes(tag), bytes(field));
        without_gvl(|| slots::get_limit(&self.0.pool, &tag, &field))?.map_err(to_ruby)
    }

    /// `[{tenant:, queue:, limit:} | {key:, limit:}, ...]`
    fn list_limits(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let limits = without_gvl(|| slots::list_limits(&rb_self.0.pool))?.map_err(to_ruby)?;
        let out = ruby.ary_new_capa(limits.len());
        for (target, limit) in limits {
            let h = ruby.hash_new();
            put_target(ruby, h, target)?;
            h.aset(ruby.to_symbol("limit"), limit)?;
            out.push(h)?;
        }
        Ok(out)
    }
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Limits", ruby.class_object())?;
    class.define_singleton_method("limit_target", magnus::function!(RbLimits::limit_target, 3))?;
    class.define_method("set_limit", magnus::method!(RbLimits::set_limit, 3))?;
    class.define_method("get_limit", magnus::method!(RbLimits::get_limit, 2))?;
    class.define_method("list_limits", magnus::method!(RbLimits::list_limits, 0))?;
    Ok(())
}
