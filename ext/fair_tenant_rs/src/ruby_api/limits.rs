//! `Sidekiq::FairTenant::Native::Limits`: runtime concurrency limits for
//! `Sidekiq::FairTenant::Limits`, which sends them on Sidekiq's own connection. Binding only:
//! which entry a limit is, its keys, the script that applies it and what a stored entry means live
//! in `slots/mod.rs` and `lua/slots/`.

use magnus::{prelude::*, Error, RArray, RModule, RString, Ruby};

use crate::ruby_api::helpers::convert::{bytes, pair, put_target};
use crate::ruby_api::helpers::errors::argument_error;
use crate::ruby_api::slots::call;
use crate::slots;

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

/// `[keys, argv]` of the `set_limit` script (`Native::Slots.script("set_limit")`): sets a limit,
/// or deletes it when `value` is nil; the reply is how many parked jobs were handed a slot.
fn set_call(
    ruby: &Ruby,
    tag: RString,
    field: RString,
    value: Option<u64>,
) -> Result<RArray, Error> {
    call(
        ruby,
        slots::set_limit_call(&bytes(tag), &bytes(field), value),
    )
}

/// The hash of a tag's limits (field -> limit).
fn key(ruby: &Ruby, tag: RString) -> RString {
    ruby.str_from_slice(&slots::limits_key(&bytes(tag)))
}

/// A stored limit (an HGET reply) as an Integer; nil when absent or not one this gem wrote.
fn value(stored: Option<RString>) -> Option<u64> {
    slots::stored_limit(&bytes(stored?))
}

/// `[{tenant:, queue:, limit:} | {key:, limit:}, ...]` of stored entries `[[tag, field, limit], ...]`
/// (the index's tags with their hashes), sorted; entries this gem could not have written left out.
fn targets(ruby: &Ruby, entries: RArray) -> Result<RArray, Error> {
    let mut stored = Vec::with_capacity(entries.len());
    for item in entries.into_iter() {
        let (tag, field, limit): (RString, RString, RString) =
            magnus::TryConvert::try_convert(item)?;
        if let Some(limit) = slots::stored_limit(&bytes(limit)) {
            stored.push((bytes(tag), bytes(field), limit));
        }
    }
    let limits = slots::limit_targets(stored);
    let out = ruby.ary_new_capa(limits.len());
    for (target, limit) in limits {
        let h = ruby.hash_new();
        put_target(ruby, h, target)?;
        h.aset(ruby.to_symbol("limit"), limit)?;
        out.push(h)?;
    }
    Ok(out)
}

pub fn init(_ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let module = namespace.define_module("Limits")?;
    module.define_singleton_method("limit_target", magnus::function!(limit_target, 3))?;
    module.define_singleton_method("set_call", magnus::function!(set_call, 3))?;
    module.define_singleton_method("key", magnus::function!(key, 1))?;
    module.define_singleton_method("value", magnus::function!(value, 1))?;
    module.define_singleton_method("targets", magnus::function!(targets, 1))?;
    module.define_singleton_method("index_key", magnus::function!(slots::limits_index_key, 0))?;
    Ok(())
}
