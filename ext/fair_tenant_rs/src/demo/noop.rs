//! A script that does nothing: the floor `bin/bench` compares routing against.

use std::sync::LazyLock;

use redis::Script;

use crate::error::Result;
use crate::redis::pool::Pool;

static NOOP: LazyLock<Script> = LazyLock::new(|| Script::new("return 0"));

/// One EVALSHA of the script, on `pool`.
pub fn noop(pool: &Pool, key: &[u8]) -> Result<()> {
    let _: i64 = pool.with(|c| NOOP.key(key).invoke(c))?;
    Ok(())
}
