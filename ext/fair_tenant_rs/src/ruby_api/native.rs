//! `Sidekiq::FairTenant::Native` itself: the module's own methods.

use magnus::{prelude::*, Error, RHash, RModule, Ruby};

use crate::build_info;

/// `Native.build_info`: a new Hash of symbol keys to strings on every call.
fn build_info(ruby: &Ruby) -> Result<RHash, Error> {
    let hash = ruby.hash_new();
    for (key, value) in build_info::FACTS {
        hash.aset(ruby.to_symbol(key), value)?;
    }
    Ok(hash)
}

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    native.define_singleton_method("build_info", magnus::function!(build_info, 0))?;
    Ok(())
}
