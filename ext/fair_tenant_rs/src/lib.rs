//! Rust core of the `sidekiq-fair_tenant-rs` gem. Layers, each depending only on those below it
//! (`tests/layout.rs` fails on an import circle):
//!
//! - [`ruby_api`] (private): the bindings, one file per Ruby class under `Sidekiq::FairTenant::Native`
//!   (`client`, `router`, `slots`, `stats`, `limits`, `fair`, `rule_set`, `concurrency`, `queue_plan`,
//!   `server_check`, `names`; `native` for the module's own methods), converting and nothing else;
//!   `ruby_api/helpers/` holds the glue (conversions, errors, GVL release, memoized objects).
//!   Everything below is plain Rust, unit-tested with `cargo test`.
//! - Features, each with its rules and its scripts (`lua/<feature>/`):
//!   [`routing`] (`rules`: the re-routing rule; `router`: one script call per push, with
//!   `lua/routing/route.lua`; `keys`: the `enqueues_key` format; `stats`; `queues`: queue weights and
//!   boot checks), [`slots`] (concurrency slots: keys and scripts, `lua/slots/`; `concurrency`: the
//!   `fair_tenant_concurrency` option), [`fair`] (fair queues: the rule, its keys and scripts,
//!   `lua/fair/`, the serving rule in `lua/fair/serve.lua`; `caps`: the rule with concurrency caps as a
//!   model; `rules`: re-routing rules on fair queues; `lockstep`, test-only: the Lua against the models).
//! - [`handle`]: the pool and key format the bindings share.
//! - [`names`]: every name the data in Redis shares between Rust, Lua and Ruby, spelled once (key
//!   prefixes and suffixes, fields, separators, defaults, limits); the scripts' prelude is built there.
//! - [`redis`]: connections: `pool`, `connect` (opening one), `outage`, `server` (settings), `sentinel`,
//!   `tls`, `server_check` (what the scripts need from the server).
//! - [`error`], [`build_info`].
//! - [`demo`] (`ideal`: the simulated schedule `bin/demo` measures against), only with the cargo
//!   feature `bench`, as are the bench hooks (`Client#noop_eval`, `Router#route_args`) and the slot API
//!   kept for specs (`client.slots`, `Native::Slots` instances: `ruby_api/bench/slots.rs`).

pub mod build_info;
#[cfg(any(test, feature = "bench"))]
pub mod demo;
pub mod error;
pub mod fair;
pub mod handle;
mod lua_pieces;
pub mod names;
pub mod redis;
pub mod routing;
pub mod slots;
pub mod tenant;

mod ruby_api;

#[magnus::init(name = "fair_tenant_rs")]
fn init(ruby: &magnus::Ruby) -> Result<(), magnus::Error> {
    ruby_api::init(ruby)
}
