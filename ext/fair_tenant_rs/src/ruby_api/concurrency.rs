//! `Sidekiq::FairTenant::Native::Concurrency`: a validated `fair_tenant_concurrency` option.
//! Binding only: parsing lives in `slots/concurrency.rs`.

use magnus::{prelude::*, Error, RArray, RHash, RModule, Ruby, Value};

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

fn shape_error(ruby: &Ruby, job_class: &str, raw: Value) -> Result<Error, Error> {
    Ok(argument_error(
        ruby,
        format!(
            "{job_class}: invalid fair_tenant_concurrency {}: must be a Hash like {{ limit: 1, lease: 60 }}, or an \
             Array of them like [{{ limit: 2 }}, {{ limit: 20, key: :api_scope }}]",
            inspect(raw)?
        ),
    ))
}

fn read_raw(hash: RHash, raw: Value) -> Result<RawConcurrency, Error> {
    let (mut v, unknown_keys) = read_options(hash, &["limit", "lease", "key", "elastic"])?;
    let elastic = v.pop().unwrap_or(RawValue::Missing);
    let key = v.pop().unwrap_or(RawValue::Missing);
    let lease = v.pop().unwrap_or(RawValue::Missing);
    let limit = v.pop().unwrap_or(RawValue::Missing);
    Ok(RawConcurrency {
        limit,
        lease,
        key,
        elastic,
        unknown_keys,
        inspect: inspect(raw)?,
    })
}

impl RbConcurrency {
    fn new(ruby: &Ruby, job_class: String, raw: Value) -> Result<Self, Error> {
        let Some(hash) = RHash::from_value(raw) else {
            return Err(shape_error(ruby, &job_class, raw)?);
        };
        Concurrency::parse(&job_class, &read_raw(hash, raw)?)
            .map(RbConcurrency)
            .map_err(|e| argument_error(ruby, e.to_string()))
    }

    /// Every scope the option names: a Hash is one, an Array lists them (Concurrency::parse_all).
    fn list(ruby: &Ruby, job_class: String, raw: Value) -> Result<RArray, Error> {
        let out = ruby.ary_new();
        if RHash::from_value(raw).is_some() {
            out.push(Self::new(ruby, job_class, raw)?)?;
            return Ok(out);
        }
        let Some(array) = RArray::from_value(raw) else {
            return Err(shape_error(ruby, &job_class, raw)?);
        };
        let mut raws = Vec::with_capacity(array.len());
        for item in array.into_iter() {
            let Some(hash) = RHash::from_value(item) else {
                return Err(shape_error(ruby, &job_class, raw)?);
            };
            raws.push(read_raw(hash, item)?);
        }
        let scopes = Concurrency::parse_all(&job_class, &raws, &inspect(raw)?)
            .map_err(|e| argument_error(ruby, e.to_string()))?;
        for scope in scopes {
            out.push(RbConcurrency(scope))?;
        }
        Ok(out)
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
    class.define_singleton_method("list", magnus::function!(RbConcurrency::list, 2))?;
    class.define_method("limit", magnus::method!(RbConcurrency::limit, 0))?;
    class.define_method("lease", magnus::method!(RbConcurrency::lease, 0))?;
    class.define_method("lease_ms", magnus::method!(RbConcurrency::lease_ms, 0))?;
    class.define_method("key_method", magnus::method!(RbConcurrency::key_method, 0))?;
    class.define_method("elastic", magnus::method!(RbConcurrency::elastic, 0))?;
    Ok(())
}
