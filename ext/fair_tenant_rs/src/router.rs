//! Enqueue-time routing: one EVALSHA per push registers the job and picks the rule.

use std::sync::LazyLock;

use redis::Script;

use crate::error::Result;
use crate::pool::Pool;
use crate::rules::{format_seconds, RuleSet};

static ROUTE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/route.lua")));
static NOOP: LazyLock<Script> = LazyLock::new(|| Script::new("return 0"));

/// One push to decide.
pub struct Enqueue<'a> {
    pub key: &'a [u8],
    pub jid: &'a [u8],
    /// Seconds since the epoch, from the caller's clock.
    pub now: f64,
}

/// Registers `job` and returns the index of the rule that fires, if any.
pub fn route(pool: &Pool, rules: &RuleSet, job: &Enqueue<'_>) -> Result<Option<usize>> {
    let mut inv = ROUTE.prepare_invoke();
    inv.key(job.key)
        .arg(job.jid)
        .arg(format_seconds(job.now))
        .arg(format_seconds(rules.window()))
        .arg(rules.window().ceil().max(1.0) as u64)
        .arg(rules.keep());
    for a in rules.script_args() {
        inv.arg(a);
    }
    let chosen: i64 = pool.with(|c| inv.invoke(c))?;
    Ok(usize::try_from(chosen).ok())
}

/// The SHA1 of the route script, for stats and tests.
pub fn script_sha() -> String {
    ROUTE.get_hash().to_string()
}

/// One EVALSHA of a script that does nothing, on the same pool: the floor `bin/bench`
/// compares routing against.
pub fn noop(pool: &Pool, key: &[u8]) -> Result<()> {
    let _: i64 = pool.with(|c| NOOP.key(key).invoke(c))?;
    Ok(())
}
