//! Rust core of the `sidekiq-fair_tenant-rs` gem.
//!
//! Plain modules (no Ruby types, unit-tested with `cargo test`): [`rules`] (the re-routing rule:
//! which queue a tenant's next job goes to), [`router`] (one script call per push, with
//! `lua/route.lua`), [`fair`] (fair queues: the serving rule and its scripts), [`fair_caps`] (the
//! same rule with concurrency caps, as a model), [`ideal`] (the simulated SFQ schedule `bin/demo`
//! measures against), [`concurrency`],
//! [`slots`], [`stats`], [`queues`], [`keys`], [`handle`] (the pool and key format the
//! bindings share), [`pool`], [`connect`] (opening one connection), [`outage`], [`server`],
//! [`server_check`] (what the scripts need from the server),
//! [`sentinel`], [`tls`], [`error`], [`build_info`].
//!
//! Binding layer, one file per Ruby class under `Sidekiq::FairTenant::Native`, converting and
//! nothing else: `client` (`Client`: the connection, and `client.router`/`slots`/`stats`/`limits`),
//! `router_binding` (`Router`), `slots_binding` (`Slots`), `stats_binding` (`Stats`),
//! `limits_binding` (`Limits`), `fair_binding` (`Fair`), `rule_set` (`RuleSet`),
//! `concurrency_rule` (`Concurrency`), `queue_plan` (`QueuePlan`),
//! `server_check_binding` (`ServerCheck`); `Native` itself (`build_info`)
//! below; shared glue (conversions, errors, GVL release, memoized objects) in `helpers`.

pub mod build_info;
pub mod demo;
pub mod error;
pub mod fair;
pub mod handle;
pub mod redis;
pub mod routing;
pub mod slots;

mod ruby_api;

use magnus::{prelude::*, Error, RHash, Ruby};

#[magnus::init(name = "fair_tenant_rs")]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let fair_tenant = ruby.define_module("Sidekiq")?.define_module("FairTenant")?;
    ruby_api::helpers::errors::init(ruby, fair_tenant)?;
    let native = fair_tenant.define_module("Native")?;
    native.define_singleton_method("build_info", magnus::function!(build_info, 0))?;
    ruby_api::rule_set::init(ruby, native)?;
    ruby_api::concurrency::init(ruby, native)?;
    ruby_api::router::init(ruby, native)?;
    ruby_api::slots::init(ruby, native)?;
    ruby_api::stats::init(ruby, native)?;
    ruby_api::limits::init(ruby, native)?;
    ruby_api::client::init(ruby, native)?;
    ruby_api::fair::init(ruby, native)?;
    ruby_api::queue_plan::init(ruby, native)?;
    ruby_api::server_check::init(ruby, native)?;
    resolve_wrapped_classes(ruby);
    Ok(())
}

/// magnus looks a wrapped class up (`Object.const_get`) when it first wraps an object of it, and
/// panics if that call is interrupted: a `Timeout.timeout`, `Thread#raise` or `Thread#kill` landing in
/// a process's first `client.router` (or `RuleSet.new`, ...) surfaced as `fatal`, not as itself.
/// Looked up here, at load, no call can be interrupted there.
fn resolve_wrapped_classes(ruby: &Ruby) {
    use magnus::TypedData;
    ruby_api::client::RbClient::class(ruby);
    ruby_api::router::RbRouter::class(ruby);
    ruby_api::slots::RbSlots::class(ruby);
    ruby_api::stats::RbStats::class(ruby);
    ruby_api::limits::RbLimits::class(ruby);
    ruby_api::rule_set::RbRuleSet::class(ruby);
    ruby_api::concurrency::RbConcurrency::class(ruby);
}

/// `Native.build_info`: a new Hash of symbol keys to strings on every call.
fn build_info(ruby: &Ruby) -> Result<RHash, Error> {
    let hash = ruby.hash_new();
    for (key, value) in build_info::FACTS {
        hash.aset(ruby.to_symbol(key), value)?;
    }
    Ok(hash)
}
