//! `Sidekiq::FairTenant::Native::Rate`: a validated `fair_tenant_rate` option.
//! Binding only: parsing lives in `slots/rate.rs`; a runtime override (`Sidekiq::FairTenant.rates`) is read
//! by the same parser.

use magnus::{prelude::*, Error, RArray, RHash, RModule, RString, Ruby, Value};

use crate::names::RATE_LIMITS_INDEX_KEY;
use crate::routing::rules::RawValue;
use crate::ruby_api::helpers::convert::{bytes, put_target, text_pair};
use crate::ruby_api::helpers::errors::argument_error;
use crate::ruby_api::helpers::values::{inspect, read_options};
use crate::slots;
use crate::slots::rate::{
    overrides_key, recheck_member, recheck_target, stored_windows, Rate, RawRate, RawWindow, Window,
};

/// What an invalid override's ArgumentError names in place of a class.
const OVERRIDE: &str = "Sidekiq::FairTenant.rates";

#[magnus::wrap(class = "Sidekiq::FairTenant::Native::Rate", free_immediately, size)]
pub struct RbRate(pub Rate);

const SHAPE: &str =
    "must be an Array of windows like [{ limit: 2, per: 1 }], or a Hash like { windows: [...], key: :shop_id }";

fn window(v: Value) -> Result<Option<RawWindow>, Error> {
    let Some(hash) = RHash::from_value(v) else {
        return Ok(None);
    };
    let (mut vals, unknown_keys) = read_options(hash, &["limit", "per", "key"])?;
    let key = vals.pop().unwrap_or(RawValue::Missing);
    let per = vals.pop().unwrap_or(RawValue::Missing);
    let limit = vals.pop().unwrap_or(RawValue::Missing);
    Ok(Some(RawWindow {
        limit,
        per,
        key,
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
        Rate::parse(&job_class, &Self::raw(ruby, raw)?)
            .map(RbRate)
            .map_err(|e| argument_error(ruby, e.to_string()))
    }

    /// Every rate scope the option names (Rate::parse_all): windows grouped by key.
    fn list(ruby: &Ruby, job_class: String, raw: Value) -> Result<RArray, Error> {
        let scopes = Rate::parse_all(&job_class, &Self::raw(ruby, raw)?)
            .map_err(|e| argument_error(ruby, e.to_string()))?;
        let out = ruby.ary_new_capa(scopes.len());
        for scope in scopes {
            out.push(RbRate(scope))?;
        }
        Ok(out)
    }

    fn raw(ruby: &Ruby, raw: Value) -> Result<RawRate, Error> {
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
                    key: RawValue::Missing,
                    unknown_keys,
                }];
            }
        } else {
            parsed.shape_error = Some(SHAPE.into());
        }
        Ok(parsed)
    }

    /// limit, per (ms), limit, per (ms), ...: what a job carries after its scope.
    fn flat(&self) -> Vec<u64> {
        self.0.flat()
    }

    fn key_method(&self) -> Option<String> {
        self.0.key_method.clone()
    }

    /// An override's windows: `[{ limit:, per: }, ...]` (per in seconds or a Duration) or "5/1,10000/86400";
    /// no key (the override names its scope).
    fn for_override(ruby: &Ruby, raw: Value) -> Result<Self, Error> {
        let rate = match RString::from_value(raw) {
            Some(text) => Rate::parse_text(OVERRIDE, &text.to_string()?)
                .map(RbRate)
                .map_err(|e| argument_error(ruby, e.to_string()))?,
            None => RbRate::new(ruby, OVERRIDE.to_string(), raw)?,
        };
        if rate.0.key_method.is_some() {
            return Err(argument_error(
                ruby,
                format!("{OVERRIDE}: the windows take no key: (give key: to set instead)"),
            ));
        }
        Ok(rate)
    }

    /// The windows as an override stores them.
    fn encoded(&self) -> String {
        self.0.encode()
    }

    fn windows(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        windows_array(ruby, &rb_self.0.windows)
    }
}

fn windows_array(ruby: &Ruby, windows: &[Window]) -> Result<RArray, Error> {
    let out = ruby.ary_new_capa(windows.len());
    for w in windows {
        let h = ruby.hash_new();
        h.aset(ruby.to_symbol("limit"), w.limit)?;
        h.aset(ruby.to_symbol("per"), w.per_ms as f64 / 1000.0)?;
        out.push(h)?;
    }
    Ok(out)
}

/// A stored override (an HGET reply) as `[{limit:, per:}, ...]`; nil when absent or not one this gem wrote.
fn stored(ruby: &Ruby, value: Option<RString>) -> Result<Option<RArray>, Error> {
    match value.and_then(|v| stored_windows(&bytes(v))) {
        Some(w) => windows_array(ruby, &w).map(Some),
        None => Ok(None),
    }
}

fn key(ruby: &Ruby, tag: RString) -> RString {
    ruby.str_from_slice(&overrides_key(&bytes(tag)))
}

fn recheck(ruby: &Ruby, tag: RString, field: RString) -> RString {
    ruby.str_from_slice(&recheck_member(&bytes(tag), &bytes(field)))
}

/// `[tag, field]` of a recheck member; nil for bytes this gem could not have written.
fn recheck_of(ruby: &Ruby, member: RString) -> Result<Option<RArray>, Error> {
    let Some((tag, field)) = recheck_target(&bytes(member)) else {
        return Ok(None);
    };
    text_pair(ruby, &tag, &field).map(Some)
}

fn index_key() -> &'static str {
    RATE_LIMITS_INDEX_KEY
}

/// `[{tenant:, queue:, windows:} | {key:, windows:}, ...]` of stored entries `[[tag, field, windows], ...]`,
/// sorted; entries this gem could not have written left out.
fn targets(ruby: &Ruby, entries: RArray) -> Result<RArray, Error> {
    let mut stored = Vec::with_capacity(entries.len());
    let mut windows = Vec::with_capacity(entries.len());
    for item in entries.into_iter() {
        let (tag, field, value): (RString, RString, RString) =
            magnus::TryConvert::try_convert(item)?;
        if let Some(w) = stored_windows(&bytes(value)) {
            stored.push((bytes(tag), bytes(field), windows.len() as u64));
            windows.push(w);
        }
    }
    let listed = slots::limit_targets(stored);
    let out = ruby.ary_new_capa(listed.len());
    for (target, at) in listed {
        let h = ruby.hash_new();
        put_target(ruby, h, target)?;
        h.aset(
            ruby.to_symbol("windows"),
            windows_array(ruby, &windows[at as usize])?,
        )?;
        out.push(h)?;
    }
    Ok(out)
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Rate", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(RbRate::new, 2))?;
    class.define_singleton_method("list", magnus::function!(RbRate::list, 2))?;
    class.define_method("flat", magnus::method!(RbRate::flat, 0))?;
    class.define_method("key_method", magnus::method!(RbRate::key_method, 0))?;
    class.define_singleton_method("for_override", magnus::function!(RbRate::for_override, 1))?;
    class.define_method("encoded", magnus::method!(RbRate::encoded, 0))?;
    class.define_method("windows", magnus::method!(RbRate::windows, 0))?;
    class.define_singleton_method("stored", magnus::function!(stored, 1))?;
    class.define_singleton_method("overrides_key", magnus::function!(key, 1))?;
    class.define_singleton_method("overrides_index_key", magnus::function!(index_key, 0))?;
    class.define_singleton_method("recheck_member", magnus::function!(recheck, 2))?;
    class.define_singleton_method("recheck_target", magnus::function!(recheck_of, 1))?;
    class.define_singleton_method("override_targets", magnus::function!(targets, 1))?;
    Ok(())
}
