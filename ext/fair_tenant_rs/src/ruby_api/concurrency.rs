//! `Sidekiq::FairTenant::Native::Concurrency`: a validated `fair_tenant_concurrency` option.
//! Binding only: parsing lives in `slots/concurrency.rs`.

use magnus::{prelude::*, Error, RHash, RModule, Ruby, Value};

use crate::routing::rules::RawValue;
use crate::ruby_api::helpers::errors::argument_error;
use crate::ruby_api::helpers::values::{inspect, read_options};
use crate::slots::concurrency::{Concurrency, RawConcurrency};

#[magnus::wrap(
    class = "Sidekiq::FairTenant::Native::Concurrency",
    free_immediately,
    size
)]
pub struct RbConcurrency(pub Concurrency);

impl RbConcurrency {
    fn new(ruby: &Ruby, job_class: String, raw: Value) -> Result<Self, Error> {
        let Some(hash) = RHash::from_value(raw) else {
            return Err(argument_error(
                ruby,
                format!(
                    "{job_class}: invalid fair_tenant_concurrency {}: must be a Hash like {{ limit: 1, lease: 60 }}",
                    inspect(raw)?
                ),
            ));
        };
        let (mut v, unknown_keys) = read_options(hash, &["limit", "lease", "key", "elastic"])?;
        let elastic = v.pop().unwrap_or(RawValue::Missing);
        let key = v.pop().unwrap_or(RawValue::Missing);
        let lease = v.pop().unwrap_or(RawValue::Missing);
        let limit = v.pop().unwrap_or(RawValue::Missing);
        let parsed = RawConcurrency {
            limit,
            lease,
            key,
            elastic,
            unknown_keys,
            inspect: inspect(raw)?,
        };
        Concurrency::parse(&job_class, &parsed)
            .map(RbConcurrency)
            .map_err(|e| argument_error(ruby, e.to_string()))
    }

    fn limit(&self) -> u64 {
        self.0.limit
    }

    fn lease(&self) -> f64 {
        self.0.lease
    }

    fn lease_ms(&self) -> u64 {
        self.0.lease_ms()
    }

    fn key_method(&self) -> Option<String> {
        self.0.key_method.clone()
    }

    fn elastic(&self) -> bool {
        self.0.elastic
    }
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Concurrency", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(RbConcurrency::new, 2))?;
    class.define_method("limit", magnus::method!(RbConcurrency::limit, 0))?;
    class.define_method("lease", magnus::method!(RbConcurrency::lease, 0))?;
    class.define_method("lease_ms", magnus::method!(RbConcurrency::lease_ms, 0))?;
    class.define_method("key_method", magnus::method!(RbConcurrency::key_method, 0))?;
    class.define_method("elastic", magnus::method!(RbConcurrency::elastic, 0))?;
    Ok(())
}
