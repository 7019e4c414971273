//! What only `bin/demo` and `bin/bench` call, defined with the cargo feature `bench`:
//! `Client#noop_eval`, `Router#route_args` and `Fair.simulate` (`simulate_by`, `simulate_rated`); and,
//! for specs too, `Native::Slots` instances (`client.slots`: `bench/slots.rs`).

mod slots;

use magnus::{prelude::*, Error, RArray, RModule, RString, Ruby, TypedData};

use crate::demo::{ideal, noop};
use crate::fair::rate::Window;
use crate::routing::router;
use crate::ruby_api::client::RbClient;
use crate::ruby_api::helpers::convert::bytes;
use crate::ruby_api::helpers::errors::{argument_error, to_ruby};
use crate::ruby_api::helpers::gvl::without_gvl;
use crate::ruby_api::router::RbRouter;
use crate::ruby_api::rule_set::RbRuleSet;

/// `client.noop_eval(key)`: one EVALSHA of a script that does nothing, on the client's pool.
fn noop_eval(client: &RbClient, key: RString) -> Result<(), Error> {
    let (handle, key) = (client.handle(), bytes(key));
    without_gvl(|| noop::noop(&handle.pool, &key))?.map_err(to_ruby)
}

/// `router.route_args(rules, job_class, queue, tenant, now)`: `[keys, argv]` of the route script for
/// one push, without running it.
fn route_args(
    ruby: &Ruby,
    rb_self: &RbRouter,
    rules: &RbRuleSet,
    job_class: RString,
    queue: RString,
    tenant: RString,
    now: f64,
) -> Result<RArray, Error> {
    let push = rb_self.push(job_class, queue, tenant);
    let keys = ruby.ary_from_iter([&push.key, &push.index].map(|k| ruby.str_from_slice(k)));
    let args = router::script_args(&rules.0, &push.at(now, false)).map(|a| ruby.str_from_slice(&a));
    Ok(ruby.ary_from_iter([keys, ruby.ary_from_iter(args)]))
}

/// `Fair.simulate([[tenant, arrival, duration], ...], threads)`: each job's start time, in the order
/// given.
fn simulate(ruby: &Ruby, jobs: Vec<(String, f64, f64)>, threads: usize) -> Result<Vec<f64>, Error> {
    ideal::simulate(&jobs, threads).map_err(|e| argument_error(ruby, e))
}

/// `Fair.simulate_by(jobs, threads, time)`: as `simulate`, fair by worker time when `time`.
fn simulate_by(
    ruby: &Ruby,
    jobs: Vec<(String, f64, f64)>,
    threads: usize,
    time: bool,
) -> Result<Vec<f64>, Error> {
    ideal::simulate_by(&jobs, threads, time).map_err(|e| argument_error(ruby, e))
}

/// `Fair.simulate_rated(jobs, threads, time, [[tenant, [limit, per_ms, ...]], ...])`: as `simulate_by`, those
/// tenants held to their rate windows.
fn simulate_rated(
    ruby: &Ruby,
    jobs: Vec<(String, f64, f64)>,
    threads: usize,
    time: bool,
    rates: Vec<(String, Vec<u64>)>,
) -> Result<Vec<f64>, Error> {
    let rates: Vec<(String, Vec<Window>)> = (rates.into_iter())
        .map(|(tenant, flat)| {
            let windows = (flat.chunks(2))
                .map(|w| Window {
                    limit: w[0],
                    per_ms: w.get(1).copied().unwrap_or(0),
                })
                .collect();
            (tenant, windows)
        })
        .collect();
    ideal::simulate_rated(&jobs, threads, time, &rates).map_err(|e| argument_error(ruby, e))
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    RbClient::class(ruby).define_method("noop_eval", magnus::method!(noop_eval, 1))?;
    RbRouter::class(ruby).define_method("route_args", magnus::method!(route_args, 5))?;
    let fair = native.define_module("Fair")?;
    fair.define_singleton_method("simulate", magnus::function!(simulate, 2))?;
    fair.define_singleton_method("simulate_by", magnus::function!(simulate_by, 3))?;
    fair.define_singleton_method("simulate_rated", magnus::function!(simulate_rated, 4))?;
    slots::init(ruby, native)?;
    Ok(())
}
