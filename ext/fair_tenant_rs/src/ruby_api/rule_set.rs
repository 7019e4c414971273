//! `Sidekiq::FairTenant::Native::RuleSet`: a validated `fair_tenant_queues` value.
//! Binding only: reads the Ruby rules into [`RawRule`]s, parsing lives in `routing/rules.rs`.

use magnus::{prelude::*, Error, RArray, RHash, RModule, Ruby, TryConvert, Value};

use crate::fair::rules::{self as fair_rules, FairSource};
use crate::routing::rules::{RawRule, RawValue, RuleSet, RULE_KEYS};
use crate::ruby_api::helpers::errors::argument_error;
use crate::ruby_api::helpers::values::{inspect, read_options};

#[magnus::wrap(class = "Sidekiq::FairTenant::Native::RuleSet", free_immediately, size)]
pub struct RbRuleSet(pub RuleSet);

impl RbRuleSet {
    fn new(ruby: &Ruby, job_class: String, raw: Value, max_window: f64) -> Result<Self, Error> {
        let Some(array) = RArray::from_value(raw) else {
            let msg = RuleSet::not_an_array(&job_class, &inspect(raw)?).to_string();
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

    /// `routes?(fair_queue)`: whether a push to such a queue goes through routing at all.
    fn routes(&self, fair_queue: bool) -> bool {
        self.0.routes(fair_queue)
    }

    /// The queues the rules can send a job of a fair queue (or not) to.
    fn queues_from(&self, fair_queue: bool) -> Vec<String> {
        self.0.queues(fair_queue)
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
            if r.from_fair_queue {
                h.aset("from_fair_queue", true)?;
            }
            out.push(h)?;
        }
        Ok(out)
    }
}

fn read_rule(item: Value) -> Result<RawRule, Error> {
    let Some(hash) = RHash::from_value(item) else {
        return Ok(RawRule::NotAHash(inspect(item)?));
    };
    let (mut values, unknown_keys) = read_options(hash, &RULE_KEYS)?;
    let from_fair_queue = values.pop().unwrap_or(RawValue::Missing);
    let per = values.pop().unwrap_or(RawValue::Missing);
    let threshold = values.pop().unwrap_or(RawValue::Missing);
    let queue = values.pop().unwrap_or(RawValue::Missing);
    Ok(RawRule::Hash {
        queue,
        threshold,
        per,
        from_fair_queue,
        unknown_keys,
        inspect: inspect(item)?,
    })
}

/// The boot line of a server whose fair queues are the queues of classes with rules, or nil.
/// `classes`: `[[job_class, queue, rule_set], ...]` for the classes whose queue is fair.
fn fair_queue_notice(classes: RArray) -> Result<Option<String>, Error> {
    let mut sources = Vec::with_capacity(classes.len());
    for entry in classes.into_iter() {
        let (job_class, queue, rules): (String, String, Value) = TryConvert::try_convert(entry)?;
        let rules = <&RbRuleSet>::try_convert(rules)?;
        let kept = rules.0.queues(true);
        sources.push(FairSource {
            job_class,
            queue,
            held: kept.len() < rules.0.rules().len(),
            kept,
        });
    }
    Ok(fair_rules::notice(&sources))
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("RuleSet", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(RbRuleSet::new, 3))?;
    class.define_singleton_method("fair_queue_notice", magnus::function!(fair_queue_notice, 1))?;
    class.define_method("queues", magnus::method!(RbRuleSet::queues, 0))?;
    class.define_method("routes?", magnus::method!(RbRuleSet::routes, 1))?;
    class.define_method("queues_from", magnus::method!(RbRuleSet::queues_from, 1))?;
    class.define_method("queue", magnus::method!(RbRuleSet::queue, 1))?;
    class.define_method("keep", magnus::method!(RbRuleSet::keep, 0))?;
    class.define_method("window", magnus::method!(RbRuleSet::window, 0))?;
    class.define_method("to_a", magnus::method!(RbRuleSet::to_a, 0))?;
    Ok(())
}
