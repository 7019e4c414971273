//! Re-routing rules on fair queues: what a server process says at boot when job classes with
//! `fair_tenant_queues` rules send their jobs to a fair queue. Their rules do not re-route those
//! jobs unless a rule says `from_fair_queue: true` ([`crate::routing::rules::RuleSet::routes`]).

use std::collections::BTreeMap;

use crate::routing::rules::FROM_FAIR_QUEUE;

/// A job class with rules whose own queue is a fair queue.
#[derive(Debug, Clone, PartialEq)]
pub struct FairSource {
    pub job_class: String,
    /// The class's own queue (a fair queue).
    pub queue: String,
    /// Target queues of the rules that still apply there (`from_fair_queue: true`), in order.
    pub kept: Vec<String>,
    /// Whether some of its rules do not apply there (no `from_fair_queue: true`).
    pub held: bool,
}

/// One line for the log, or `None` when no class with rules sends jobs to a fair queue.
pub fn notice(sources: &[FairSource]) -> Option<String> {
    let mut held: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut kept = Vec::new();
    for s in sources {
        if s.held {
            held.entry(&s.queue).or_default().push(&s.job_class);
        }
        if !s.kept.is_empty() {
            kept.push(format!(
                "{} ({} -> {})",
                s.job_class,
                s.queue,
                s.kept.join(", ")
            ));
        }
    }
    let mut parts = Vec::new();
    let held: Vec<String> = held
        .into_iter()
        .map(|(queue, mut classes)| {
            classes.sort_unstable();
            classes.dedup();
            format!("{} in {queue}", classes.join(", "))
        })
        .collect();
    if !held.is_empty() {
        parts.push(format!(
            "fair queues keep their jobs: fair_tenant_queues rules do not re-route jobs of a fair queue \
             (it already serves tenants in fair order; re-routing would spread a greedy tenant over \
             queues that Sidekiq's queue weights pick from), so the jobs of {} stay there. To re-route \
             from a fair queue anyway (e.g. a tenant to processes of its own), add {FROM_FAIR_QUEUE}: \
             true to the rule.",
            held.join("; ")
        ));
    }
    if !kept.is_empty() {
        kept.sort_unstable();
        parts.push(format!(
            "Rules with {FROM_FAIR_QUEUE}: true re-route jobs of fair queues: {}.",
            kept.join("; ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(job_class: &str, queue: &str, kept: &[&str], held: bool) -> FairSource {
        FairSource {
            job_class: job_class.into(),
            queue: queue.into(),
            kept: kept.iter().map(|q| q.to_string()).collect(),
            held,
        }
    }

    #[test]
    fn says_nothing_without_classes_on_fair_queues() {
        assert_eq!(notice(&[]), None);
    }

    #[test]
    fn names_the_classes_by_queue_and_the_way_to_opt_in() {
        let line = notice(&[
            source("SyncOrdersJob", "default", &[], true),
            source("CsvJob", "imports", &[], true),
            source("ImportJob", "default", &[], true),
        ])
        .unwrap();
        assert!(
            line.contains(
                "the jobs of ImportJob, SyncOrdersJob in default; CsvJob in imports stay there"
            ),
            "{line}"
        );
        assert!(
            line.contains("add from_fair_queue: true to the rule."),
            "{line}"
        );
        assert!(!line.contains("re-route:"), "{line}");
    }

    #[test]
    fn lists_the_rules_that_asked_to_re_route() {
        let line = notice(&[
            source("WhaleJob", "default", &["whales"], false),
            source("SyncOrdersJob", "default", &[], true),
            source("MixedJob", "default", &["own"], true),
        ])
        .unwrap();
        assert!(
            line.contains("the jobs of MixedJob, SyncOrdersJob in default stay"),
            "{line}"
        );
        let kept = "re-route jobs of fair queues: MixedJob (default -> own); WhaleJob (default -> whales).";
        assert!(line.ends_with(kept), "{line}");
        let only = notice(&[source("WhaleJob", "default", &["whales"], false)]).unwrap();
        assert_eq!(
            only,
            "Rules with from_fair_queue: true re-route jobs of fair queues: WhaleJob (default -> whales)."
        );
    }
}
