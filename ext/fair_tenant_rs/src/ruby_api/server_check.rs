//! `Sidekiq::FairTenant::Native::ServerCheck`: the boot check of the server's version against what the
//! scripts need. Binding only: the needs and the rule live in [`crate::redis::server_check`].

use magnus::{prelude::*, Error, RModule, Ruby};

use crate::redis::server_check::ServerInfo;

/// `ServerCheck.problem(info, fair_queues)`: the error message, or nil when the server has everything.
fn problem(info: String, fair_queues: bool) -> Option<String> {
    ServerInfo::parse(&info).problem(fair_queues)
}

/// `ServerCheck.describe(info)`: `"valkey 9.1.2 (Redis 7.2.4 commands)"`.
fn describe(info: String) -> String {
    ServerInfo::parse(&info).describe()
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let _ = ruby;
    let module = namespace.define_module("ServerCheck")?;
    module.define_singleton_method("problem", magnus::function!(problem, 2))?;
    module.define_singleton_method("describe", magnus::function!(describe, 1))?;
    Ok(())
}
