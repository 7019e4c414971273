//! `Sidekiq::FairTenant::Native::RuleSet`: a validated `fair_tenant_queues` value.
//! Binding only: reads the Ruby rules into [`RawRule`]s, parsing lives in `rules.rs`.

use magnus::{
    prelude::*, r_hash::ForEach, value::ReprValue, Error, Float, Integer, RArray, RHash, RModule,
    RString, Ruby, Symbol, Value,
};

use crate::helpers::errors::argument_error;
use crate::rules::{RawRule, RawValue, RuleSet};

#[magnus::wrap(class = "Sidekiq::FairTenant::Native::RuleSet", free_immediately, size)]
pub struct RbRuleSet(pub RuleSet);

impl RbRuleSet {
    fn new(ruby: &Ruby, job_class: String, raw: Value, max_window: f64) -> Result<Self, Error> {
        let Some(array) = RArray::from_value(raw) else {
            let msg = RuleSet::not_an_array(&job_class, &inspect(raw)).to_string();
            return Err(argument_error(ruby, msg));
        };
        let mut rules = Vec::with_capacity(array.len());
        for item in array.into_iter() {
            rules.push(read_rule(item)?);
        }
        RuleSet::parse(&job_class, &rules, max_window)
            .map(RbRuleSet)
            .map_err(|e| argument_error(ruby, e.to_string()))
    }

    fn queues(&self) -> Vec<String> {
        self.0.rules().iter().map(|r| r.queue.clone()).collect()
    }

    fn queue(&self, index: i64) -> Option<String> {
        self.0.queue_at(index).map(str::to_string)
    }

    fn keep(&self) -> u64 {
        self.0.keep()
    }

    fn window(&self) -> f64 {
        self.0.window()
    }

    fn to_a(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let out = ruby.ary_new_capa(rb_self.0.rules().len());
        for r in rb_self.0.rules() {
            let h = ruby.hash_new();
            h.aset("queue", r.queue.as_str())?;
            h.aset("threshold", r.threshold)?;
            h.aset("per", r.per)?;
            out.push(h)?;
        }
        Ok(out)
    }
}

fn read_rule(item: Value) -> Result<RawRule, Error> {
    let Some(hash) = RHash::from_value(item) else {
        return Ok(RawRule::NotAHash(inspect(item)));
    };
    let mut queue = RawValue::Missing;
    let mut threshold = RawValue::Missing;
    let mut per = RawValue::Missing;
    let mut unknown_keys = Vec::new();
    hash.foreach(|k: Value, v: Value| {
        let name = if let Some(sym) = Symbol::from_value(k) {
            sym.name()?.into_owned()
        } else if let Some(s) = RString::from_value(k) {
            s.to_string()?
        } else {
            inspect(k)
        };
        match name.as_str() {
            "queue" => queue = read_value(v)?,
            "threshold" => threshold = read_value(v)?,
            "per" => per = read_value(v)?,
            _ => unknown_keys.push(name),
        }
        Ok(ForEach::Continue)
    })?;
    Ok(RawRule::Hash {
        queue,
        threshold,
        per,
        unknown_keys,
        inspect: inspect(item),
    })
}

fn read_value(v: Value) -> Result<RawValue, Error> {
    if v.is_nil() {
        return Ok(RawValue::Nil);
    }
    if let Some(i) = Integer::from_value(v) {
        return Ok(i
            .to_i64()
            .map(RawValue::Int)
            .unwrap_or_else(|_| RawValue::Other(inspect(v))));
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
    Ok(RawValue::Other(inspect(v)))
}

fn inspect(v: Value) -> String {
    v.inspect()
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("RuleSet", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(RbRuleSet::new, 3))?;
    class.define_method("queues", magnus::method!(RbRuleSet::queues, 0))?;
    class.define_method("queue", magnus::method!(RbRuleSet::queue, 1))?;
    class.define_method("keep", magnus::method!(RbRuleSet::keep, 0))?;
    class.define_method("window", magnus::method!(RbRuleSet::window, 0))?;
    class.define_method("to_a", magnus::method!(RbRuleSet::to_a, 0))?;
    Ok(())
}
