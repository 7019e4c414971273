//! Reading option hashes (`fair_tenant_queues` rules, `fair_tenant_concurrency`) into plain
//! [`RawValue`]s: symbol or string keys, values as Ruby gave them or as JSON brought them back.

use magnus::{
    r_hash::ForEach, value::ReprValue, Error, Float, Integer, RHash, RString, Symbol, Value,
};

use crate::routing::rules::RawValue;

/// Values of `known` keys (Missing when absent) and the names of any other keys.
pub fn read_options(hash: RHash, known: &[&str]) -> Result<(Vec<RawValue>, Vec<String>), Error> {
    let mut values = vec![RawValue::Missing; known.len()];
    let mut unknown = Vec::new();
    hash.foreach(|k: Value, v: Value| {
        let name = if let Some(sym) = Symbol::from_value(k) {
            sym.name()?.into_owned()
        } else if let Some(s) = RString::from_value(k) {
            s.to_string()?
        } else {
            inspect(k)?
        };
        match known.iter().position(|n| *n == name) {
            Some(i) => values[i] = read_value(v)?,
            None => unknown.push(name),
        }
        Ok(ForEach::Continue)
    })?;
    Ok((values, unknown))
}

pub fn read_value(v: Value) -> Result<RawValue, Error> {
    if v.is_nil() {
        return Ok(RawValue::Nil);
    }
    if let Some(i) = Integer::from_value(v) {
        return match i.to_i64() {
            Ok(n) => Ok(RawValue::Int(n)),
            Err(_) => Ok(RawValue::Other(inspect(v)?)),
        };
    }
    if let Some(f) = Float::from_value(v) {
        return Ok(RawValue::Float(f.to_f64()));
    }
    if let Some(s) = RString::from_value(v) {
        // SAFETY: the bytes are copied before any other Ruby call.
        let bytes = unsafe { s.as_slice() };
        return Ok(RawValue::Str(String::from_utf8_lossy(bytes).into_owned()));
    }
    if let Some(sym) = Symbol::from_value(v) {
        return Ok(RawValue::Str(sym.name()?.into_owned()));
    }
    // ActiveSupport::Duration, Rational and friends.
    if v.respond_to("to_f", false)? && !v.respond_to("to_str", false)? {
        let f: f64 = v.funcall("to_f", ())?;
        return Ok(RawValue::Float(f));
    }
    Ok(RawValue::Other(inspect(v)?))
}

/// `v.inspect`, passing on what the call raised. magnus's `Value::inspect` falls back to `to_s` on any
/// error, and so swallowed a `Thread#raise`, `Thread#kill` or `Timeout.timeout` landing in the call.
pub fn inspect(v: Value) -> Result<String, Error> {
    let s: RString = v.funcall("inspect", ())?;
    // SAFETY: the bytes are copied before any other Ruby call.
    Ok(String::from_utf8_lossy(unsafe { s.as_slice() }).into_owned())
}
