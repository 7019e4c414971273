//! Conversions every binding file uses: Ruby strings to bytes, seconds to a `Duration`, byte pairs
//! and limit targets back to Ruby.

use std::time::Duration;

use magnus::{Error, RArray, RHash, RString, Ruby};

use super::errors::argument_error;
use crate::slots::LimitTarget;

/// Copies a Ruby string's bytes (binary safe: invalid UTF-8 stays as it is).
pub fn bytes(s: RString) -> Vec<u8> {
    // SAFETY: copied at once, with the GVL held.
    unsafe { s.as_slice() }.to_vec()
}

/// A positive number of seconds; `ArgumentError` naming the setting otherwise.
pub fn seconds(ruby: &Ruby, name: &str, s: f64) -> Result<Duration, Error> {
    Duration::try_from_secs_f64(s)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            argument_error(
                ruby,
                format!("{name} must be a positive number of seconds, got {s}"),
            )
        })
}

/// `[a, b]` as two new (binary) strings: a limit's `[tag, field]`, a script's `[sha, source]`.
pub fn pair(ruby: &Ruby, a: &[u8], b: &[u8]) -> Result<RArray, Error> {
    let out = ruby.ary_new_capa(2);
    out.push(ruby.str_from_slice(a))?;
    out.push(ruby.str_from_slice(b))?;
    Ok(out)
}

/// Bytes as a Ruby string: UTF-8 when they are valid UTF-8 (a tenant or key name that may go into a job's JSON:
/// Ruby 3.3's JSON refuses binary strings with high bytes), binary otherwise.
pub fn text(ruby: &Ruby, b: &[u8]) -> RString {
    match std::str::from_utf8(b) {
        Ok(s) => ruby.str_new(s),
        Err(_) => ruby.str_from_slice(b),
    }
}

/// `[a, b]` as [`text`] strings: a scope's `[tag, sub]` as a job carries it.
pub fn text_pair(ruby: &Ruby, a: &[u8], b: &[u8]) -> Result<RArray, Error> {
    let out = ruby.ary_new_capa(2);
    out.push(text(ruby, a))?;
    out.push(text(ruby, b))?;
    Ok(out)
}

/// Adds `tenant:` and `queue:` (nil for every queue), or `key:`, of a limit's target to `h`.
pub fn put_target(ruby: &Ruby, h: RHash, target: LimitTarget) -> Result<(), Error> {
    match target {
        LimitTarget::Tenant(tenant, queue) => {
            h.aset(ruby.to_symbol("tenant"), text(ruby, &tenant))?;
            h.aset(ruby.to_symbol("queue"), queue.map(|q| text(ruby, &q)))
        }
        LimitTarget::Key(key) => h.aset(ruby.to_symbol("key"), text(ruby, &key)),
    }
}
