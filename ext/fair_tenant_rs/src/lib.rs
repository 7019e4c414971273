//! Rust core of the `sidekiq-fair_tenant-rs` gem.
//!
//! Plain modules (no Ruby types, unit-tested with `cargo test`): [`rules`], [`concurrency`], [`fair`],
//! [`connect`], [`connection`], [`keys`], [`outage`], [`pool`], [`queues`], [`router`], [`sentinel`],
//! [`server`], [`slots`], [`stats`], [`tls`], [`error`], [`build_info`].
//! Binding layer, one file per Ruby class: `client` (`Native::Client`), `rule_set` (`Native::RuleSet`),
//! `concurrency_rule` (`Native::Concurrency`), `fair_binding` (`Native::Fair`), `queue_plan` (`Native::QueuePlan`); `Native` itself
//! (`build_info`) below; shared glue in `helpers`.

pub mod build_info;
pub mod concurrency;
pub mod connect;
pub mod connection;
pub mod error;
pub mod fair;
pub mod keys;
pub mod outage;
pub mod pool;
pub mod queues;
pub mod router;
pub mod rules;
pub mod sentinel;
pub mod server;
pub mod slots;
pub mod stats;
pub mod tls;

mod client;
mod concurrency_rule;
mod fair_binding;
mod helpers;
mod queue_plan;
mod rule_set;

use magnus::{prelude::*, Error, RHash, Ruby};

#[magnus::init(name = "fair_tenant_rs")]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let fair_tenant = ruby.define_module("Sidekiq")?.define_module("FairTenant")?;
    helpers::errors::init(ruby, fair_tenant)?;
    let native = fair_tenant.define_module("Native")?;
    native.define_singleton_method("build_info", magnus::function!(build_info, 0))?;
    rule_set::init(ruby, native)?;
    concurrency_rule::init(ruby, native)?;
    client::init(ruby, native)?;
    fair_binding::init(ruby, native)?;
    queue_plan::init(ruby, native)?;
    Ok(())
}

/// `Native.build_info`: a new Hash of symbol keys to strings on every call.
fn build_info(ruby: &Ruby) -> Result<RHash, Error> {
    let hash = ruby.hash_new();
    for (key, value) in build_info::FACTS {
        hash.aset(ruby.to_symbol(key), value)?;
    }
    Ok(hash)
}
