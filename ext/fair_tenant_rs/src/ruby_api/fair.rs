//! `Sidekiq::FairTenant::Native::Fair`: the fair-queue rule's scripts and keys, for the Ruby push path
//! and fetcher, which run the scripts on Sidekiq's own connections (so a job stays in the shard its
//! client chose). Binding only: the rule and the key names are in [`crate::fair`].

use magnus::{prelude::*, Error, RModule, RString, Ruby, Value};

use crate::fair;
use crate::ruby_api::helpers::errors::argument_error;

fn script(ruby: &Ruby, name: String) -> Result<&'static fair::FairScript, Error> {
    fair::script(&name)
        .ok_or_else(|| argument_error(ruby, format!("no fair-queue script named {name:?}")))
}

fn source(ruby: &Ruby, name: String) -> Result<RString, Error> {
    Ok(ruby.str_new(&script(ruby, name)?.source))
}

fn sha(ruby: &Ruby, name: String) -> Result<RString, Error> {
    Ok(ruby.str_new(&script(ruby, name)?.sha))
}

fn function(ruby: &Ruby, name: String) -> Result<RString, Error> {
    script(ruby, name.clone())?;
    Ok(ruby.str_new(&fair::library().function(&name)))
}

/// `[verdict, version]` for the fair state's format version found (nil: none): verdict "same", "upgrade",
/// "newer" (version: the one found) or "unreadable".
fn format_verdict(stored: Option<String>) -> (&'static str, Option<u64>) {
    match fair::format_verdict(stored.as_deref()) {
        fair::FormatVerdict::Same => ("same", None),
        fair::FormatVerdict::Upgrade => ("upgrade", None),
        fair::FormatVerdict::Newer(v) => ("newer", Some(v)),
        fair::FormatVerdict::Unreadable => ("unreadable", None),
    }
}

fn check_weight(ruby: &Ruby, weight: f64) -> Result<f64, Error> {
    fair::check_weight(weight).map_err(|e| argument_error(ruby, e))
}

/// `[queue, mode]` of an entry of `fair_queues` (`imports:time`); ArgumentError with the rule otherwise.
fn parse_fair_queue(ruby: &Ruby, entry: String) -> Result<(String, &'static str), Error> {
    let (queue, mode) = fair::parse_fair_queue(&entry).map_err(|e| argument_error(ruby, e))?;
    Ok((queue, mode.name()))
}

/// `[queue, mode]` of a Hash entry of `fair_queues` (`{ "imports" => :time }`).
fn fair_queue_mode(
    ruby: &Ruby,
    queue: String,
    mode: String,
) -> Result<(String, &'static str), Error> {
    fair::check_queue(&queue).map_err(|e| argument_error(ruby, e))?;
    let mode = fair::fair_mode(&mode).map_err(|e| argument_error(ruby, e))?;
    Ok((queue.trim().to_string(), mode.name()))
}

/// A weight field; ArgumentError for a queue that is no valid fair queue name.
fn weight_field(ruby: &Ruby, tenant: String, queue: Option<String>) -> Result<String, Error> {
    fair::check_weight_tenant(&tenant).map_err(|e| argument_error(ruby, e))?;
    if let Some(q) = &queue {
        fair::check_queue(q).map_err(|e| argument_error(ruby, e))?;
    }
    Ok(fair::weight_field(&tenant, queue.as_deref()))
}

fn parse_weight_field(ruby: &Ruby, field: String) -> Value {
    let (tenant, queue) = fair::parse_weight_field(&field);
    let out = ruby.ary_new_capa(2);
    let _ = out.push(tenant);
    let _ = out.push(queue);
    out.as_value()
}

/// An in-flight field's id (Integer), or nil for bytes that are no field.
fn field_id(field: RString) -> Option<u64> {
    // SAFETY: read before any Ruby code can run.
    let bytes = unsafe { field.as_slice() };
    fair::field_id(bytes).map(|(id, _)| id)
}

/// `[queue, tenant, job]` of an in-flight entry, or nil: queue and tenant as UTF-8 strings, the job with the
/// bytes it was pushed with (binary), whatever the entry's encoding tag.
fn decode_entry(ruby: &Ruby, entry: RString) -> Result<Value, Error> {
    // SAFETY: the slice is copied into new Ruby strings before any Ruby code can run.
    let bytes = unsafe { entry.as_slice() };
    Ok(match fair::split_entry(bytes) {
        Some((queue, tenant, job)) => {
            let parts = [
                ruby.enc_str_new(queue, ruby.utf8_encoding()),
                ruby.enc_str_new(tenant, ruby.utf8_encoding()),
                ruby.str_from_slice(job),
            ];
            ruby.ary_from_iter(parts).as_value()
        }
        None => ruby.qnil().as_value(),
    })
}

/// An acknowledgement's timing under `time` (binary): `charged` as the fetch reply gave it, `ran_ms` measured.
fn timing(ruby: &Ruby, charged: RString, ran_ms: i64, queue: RString, member: RString) -> RString {
    // SAFETY: the slices are copied into a new Ruby string before any Ruby code can run.
    let bytes = unsafe {
        fair::timing(
            charged.as_slice(),
            ran_ms,
            queue.as_slice(),
            member.as_slice(),
        )
    };
    ruby.str_from_slice(&bytes)
}

/// `[held jid, charge, member]` of a fair job's extras in the fetch reply, or nil: jid and charge as UTF-8
/// strings, the member binary.
fn served_extras(ruby: &Ruby, extras: RString) -> Result<Value, Error> {
    // SAFETY: the slice is copied into new Ruby strings before any Ruby code can run.
    let bytes = unsafe { extras.as_slice() };
    Ok(match fair::served_extras(bytes) {
        Some((held, charged, member)) => {
            let parts = [
                ruby.enc_str_new(held, ruby.utf8_encoding()),
                ruby.enc_str_new(charged, ruby.utf8_encoding()),
                ruby.str_from_slice(member),
            ];
            ruby.ary_from_iter(parts).as_value()
        }
        None => ruby.qnil().as_value(),
    })
}

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let module = native.define_module("Fair")?;
    module.define_singleton_method("script_source", magnus::function!(source, 1))?;
    module.define_singleton_method(
        "script_names",
        magnus::function!(|| fair::scripts::script_names().collect::<Vec<_>>(), 0),
    )?;
    module.define_singleton_method("script_sha", magnus::function!(sha, 1))?;
    module.define_singleton_method("function_name", magnus::function!(function, 1))?;
    module.define_singleton_method(
        "library_source",
        magnus::function!(|| fair::library().source.as_str(), 0),
    )?;
    module.define_singleton_method("base", magnus::function!(|q: String| fair::base(&q), 1))?;
    module.define_singleton_method("weights_key", magnus::function!(fair::weights_key, 0))?;
    module.define_singleton_method(
        "inflight_key",
        magnus::function!(|identity: String| fair::inflight_key(&identity), 1),
    )?;
    module.define_singleton_method("weight_field", magnus::function!(weight_field, 2))?;
    module.define_singleton_method("decode_entry", magnus::function!(decode_entry, 1))?;
    module.define_singleton_method("timing", magnus::function!(timing, 4))?;
    module.define_singleton_method("served_extras", magnus::function!(served_extras, 1))?;
    module.define_singleton_method("field_id", magnus::function!(field_id, 1))?;
    module.define_singleton_method("parse_fair_queue", magnus::function!(parse_fair_queue, 1))?;
    module.define_singleton_method("fair_queue_mode", magnus::function!(fair_queue_mode, 2))?;
    module.define_singleton_method("check_weight", magnus::function!(check_weight, 1))?;
    module.define_singleton_method("format_key", magnus::function!(fair::format_key, 0))?;
    module.define_singleton_method("format_verdict", magnus::function!(format_verdict, 1))?;
    module.const_set("FORMAT", fair::FAIR_FORMAT)?;
    module.define_singleton_method(
        "parse_weight_field",
        magnus::function!(parse_weight_field, 1),
    )?;
    module.define_singleton_method("registry_key", magnus::function!(fair::registry_key, 0))?;
    module.define_singleton_method(
        "recovery_lock_key",
        magnus::function!(fair::recovery_lock_key, 0),
    )?;
    module.define_singleton_method(
        "recovery_suspects_key",
        magnus::function!(fair::recovery_suspects_key, 0),
    )?;
    module.define_singleton_method("recovering_key", magnus::function!(fair::recovering_key, 0))?;
    module.define_singleton_method(
        "recovery_lease_key",
        magnus::function!(fair::recovery_lease_key, 0),
    )?;
    module.const_set("RECOVERY_LAPSE_SECONDS", fair::RECOVERY_LAPSE_SECONDS)?;
    module.const_set("RECOVERY_INTERVAL_SECONDS", fair::RECOVERY_INTERVAL_SECONDS)?;
    module.const_set("RECOVERY_LEASE_MS", fair::RECOVERY_LEASE_MS)?;
    module.const_set("RECOVERY_BATCH", fair::RECOVERY_BATCH)?;
    module.const_set("INFLIGHT_AUDIT_SECONDS", fair::INFLIGHT_AUDIT_SECONDS)?;
    module.define_singleton_method(
        "recovered_key",
        magnus::function!(|identity: String| fair::recovered_key(&identity), 1),
    )?;
    module.const_set("RECOVERED_KEEP_SECONDS", fair::RECOVERED_KEEP_SECONDS)?;
    module.const_set("SHARED_TENANT", fair::SHARED_TENANT)?;
    Ok(())
}
