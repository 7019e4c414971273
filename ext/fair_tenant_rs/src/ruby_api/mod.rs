//! The binding layer: one file per Ruby class under `Sidekiq::FairTenant::Native`, named after it,
//! converting and nothing else; shared glue (conversions, errors, GVL release, memoized objects) in
//! [`helpers`].

use magnus::{prelude::*, Error, Ruby, TypedData};

#[cfg(feature = "bench")]
pub mod bench;
pub mod client;
pub mod concurrency;
pub mod fair;
pub mod helpers;
pub mod limits;
pub mod names;
pub mod native;
pub mod queue_plan;
pub mod rate;
pub mod router;
pub mod rule_set;
pub mod server_check;
pub mod slots;
pub mod stats;
pub mod tenant;

/// Defines `Sidekiq::FairTenant::Native` and its classes, and the error classes.
pub fn init(ruby: &Ruby) -> Result<(), Error> {
    let fair_tenant = ruby.define_module("Sidekiq")?.define_module("FairTenant")?;
    helpers::errors::init(ruby, fair_tenant)?;
    let native = fair_tenant.define_module("Native")?;
    native::init(ruby, native)?;
    rule_set::init(ruby, native)?;
    concurrency::init(ruby, native)?;
    rate::init(ruby, native)?;
    router::init(ruby, native)?;
    slots::init(ruby, native)?;
    stats::init(ruby, native)?;
    limits::init(ruby, native)?;
    client::init(ruby, native)?;
    fair::init(ruby, native)?;
    names::init(ruby, native)?;
    queue_plan::init(ruby, native)?;
    server_check::init(ruby, native)?;
    tenant::init(ruby, native)?;
    #[cfg(feature = "bench")]
    bench::init(ruby, native)?;
    resolve_wrapped_classes(ruby);
    Ok(())
}

/// magnus looks a wrapped class up (`Object.const_get`) when it first wraps an object of it, and
/// panics if that call is interrupted: a `Timeout.timeout`, `Thread#raise` or `Thread#kill` landing in
/// a process's first `client.router` (or `RuleSet.new`, ...) surfaced as `fatal`, not as itself.
/// Looked up here, at load, no call can be interrupted there.
fn resolve_wrapped_classes(ruby: &Ruby) {
    client::RbClient::class(ruby);
    router::RbRouter::class(ruby);
    #[cfg(feature = "bench")]
    slots::RbSlots::class(ruby);
    stats::RbStats::class(ruby);
    rule_set::RbRuleSet::class(ruby);
    concurrency::RbConcurrency::class(ruby);
    rate::RbRate::class(ruby);
}
