//! `Sidekiq::FairTenant::Native::Rate`: a validated `fair_tenant_rate` option.
//! Binding only: parsing lives in `slots/rate.rs`.

use magnus::{prelude::*, Error, RArray, RHash, RModule, Ruby, Value};

use crate::routing::rules::RawValue;
use crate::ruby_api::helpers::errors::argument_error;
use crate::ruby_api::helpers::values::{inspect, read_options};
use crate::slots::rate::{Rate, RawRate, RawWindow};

#[magnus::wrap(class = "Sidekiq::FairTenant::Native::Rate", free_immediately, size)]
pub struct RbRate(pub Rate);

const SHAPE: &str =
    "must be an Array of windows like [{ limit: 2, per: 1 }], or a Hash like { windows: [...], key: :shop_id }";

fn window(v: Value) -> Result<Option<RawWindow>, Error> {
    let Some(hash) = RHash::from_value(v) else {
        return Ok(None);
    };
    let (mut vals, unknown_keys) = read_options(hash, &["limit", "per"])?;
    let per = vals.pop().unwrap_or(RawValue::Missing);
    let limit = vals.pop().unwrap_or(RawValue::Missing);
    Ok(Some(RawWindow {
        limit,
        per,
        unknown_keys,
    }))
}

fn windows(v: Value) -> Result<Option<Vec<RawWindow>>, Error> {
    let Some(array) = RArray::from_value(v) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(array.len());
    for item in array.into_iter() {
        match window(item)? {
            Some(w) => out.push(w),
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

impl RbRate {
    fn new(ruby: &Ruby, job_class: String, raw: Value) -> Result<Self, Error> {
        let mut parsed = RawRate {
            windows: vec![],
            key: RawValue::Missing,
            shape_error: None,
            inspect: inspect(raw)?,
        };
        if let Some(list) = windows(raw)? {
            parsed.windows = list;
        } else if let Some(hash) = RHash::from_value(raw) {
            let has_windows =
                hash.get(ruby.to_symbol("windows")).is_some() || hash.get("windows").is_some();
            if has_windows {
                let (mut vals, unknown) = read_options(hash, &["windows", "key"])?;
                parsed.key = vals.pop().unwrap_or(RawValue::Missing);
                let list = hash
                    .get(ruby.to_symbol("windows"))
                    .or_else(|| hash.get("windows"));
                match list.map(windows).transpose()?.flatten() {
                    Some(list) => parsed.windows = list,
                    None => parsed.shape_error = Some(SHAPE.into()),
                }
                if let Some(k) = unknown.first() {
                    parsed.shape_error = Some(format!("unknown key {k:?} (allowed: windows, key)"));
                }
            } else {
                let (mut vals, unknown_keys) = read_options(hash, &["limit", "per", "key"])?;
                parsed.key = vals.pop().unwrap_or(RawValue::Missing);
                let per = vals.pop().unwrap_or(RawValue::Missing);
                let limit = vals.pop().unwrap_or(RawValue::Missing);
                parsed.windows = vec![RawWindow {
                    limit,
                    per,
                    unknown_keys,
                }];
            }
        } else {
            parsed.shape_error = Some(SHAPE.into());
        }
        Rate::parse(&job_class, &parsed)
            .map(RbRate)
            .map_err(|e| argument_error(ruby, e.to_string()))
    }

    /// limit, per (ms), limit, per (ms), ...: what a job carries after its scope.
    fn flat(&self) -> Vec<u64> {
        self.0.flat()
    }

    fn key_method(&self) -> Option<String> {
        self.0.key_method.clone()
    }
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Rate", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(RbRate::new, 2))?;
    class.define_method("flat", magnus::method!(RbRate::flat, 0))?;
    class.define_method("key_method", magnus::method!(RbRate::key_method, 0))?;
    Ok(())
}
