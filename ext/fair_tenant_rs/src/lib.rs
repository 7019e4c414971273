//! Rust core of the `sidekiq-fair_tenant-rs` gem.
//!
//! Plain modules (no Ruby types, unit-tested with `cargo test`): [`rules`], [`concurrency`],
//! [`keys`], [`outage`], [`pool`], [`queues`], [`router`], [`slots`], [`stats`], [`error`]. Binding layer, one file per Ruby class:
//! `client` (`Native::Client`), `rule_set` (`Native::RuleSet`), `concurrency_rule`
//! (`Native::Concurrency`), `queue_plan` (`Native::QueuePlan`); shared glue in `helpers`.

pub mod concurrency;
pub mod error;
pub mod keys;
pub mod outage;
pub mod pool;
pub mod queues;
pub mod router;
pub mod rules;
pub mod slots;
pub mod stats;

mod client;
mod concurrency_rule;
mod helpers;
mod queue_plan;
mod rule_set;

use magnus::{prelude::*, Error, Ruby};

#[magnus::init(name = "fair_tenant_rs")]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let fair_tenant = ruby.define_module("Sidekiq")?.define_module("FairTenant")?;
    helpers::errors::init(ruby, fair_tenant)?;
    let native = fair_tenant.define_module("Native")?;
    rule_set::init(ruby, native)?;
    concurrency_rule::init(ruby, native)?;
    client::init(ruby, native)?;
    queue_plan::init(ruby, native)?;
    Ok(())
}
