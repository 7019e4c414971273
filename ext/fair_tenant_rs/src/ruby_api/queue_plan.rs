//! `Sidekiq::FairTenant::Native::QueuePlan`: queue weights and boot checks.
//! Binding only: the decisions live in `routing/queues.rs`.

use std::collections::BTreeMap;

use magnus::{prelude::*, Error, RModule, Ruby};

use crate::routing::queues::{self, Routed};

/// `[[job_class, source_queue, [rule_queue, ...]], ...]` as the Ruby side builds it.
type RawClasses = Vec<(String, String, Vec<String>)>;

fn routed(classes: RawClasses) -> Vec<Routed> {
    classes
        .into_iter()
        .map(|(job_class, source, targets)| Routed {
            job_class,
            source,
            targets,
        })
        .collect()
}

fn weights(classes: RawClasses) -> Vec<(String, u64)> {
    queues::weights(&routed(classes))
}

fn yaml(classes: RawClasses) -> String {
    queues::yaml(&routed(classes))
}

fn problems(process: BTreeMap<String, u64>, classes: RawClasses) -> Vec<String> {
    queues::problems(&process, &routed(classes))
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let module = namespace.define_module("QueuePlan")?;
    let _ = ruby;
    module.define_singleton_method("weights", magnus::function!(weights, 1))?;
    module.define_singleton_method("yaml", magnus::function!(yaml, 1))?;
    module.define_singleton_method("problems", magnus::function!(problems, 2))?;
    Ok(())
}
