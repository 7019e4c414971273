//! `Sidekiq::FairTenant::Native::Tenant`: a tenant name as the gem stores it. Binding only: the rule is in
//! [`crate::tenant`].

use magnus::{prelude::*, Error, RModule, RString, Ruby};

/// `Tenant.stored(name)`: the short form (a UTF-8 String) of a name longer than `Names::TENANT_MAX_BYTES`
/// bytes, or nil for a name kept as it is. Reads the name's bytes whatever its encoding.
fn stored(ruby: &Ruby, name: RString) -> Option<RString> {
    // SAFETY: the bytes are read (and the digest computed) before any Ruby code can run.
    let bytes = unsafe { name.as_slice() };
    crate::tenant::short_tenant(bytes).map(|short| ruby.str_new(&short))
}

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let module = native.define_module("Tenant")?;
    module.define_singleton_method("stored", magnus::function!(stored, 1))?;
    Ok(())
}
