//! Sidekiq queue weights implied by the classes' rules, and the checks a server process runs
//! at boot on the queues it works on.

use std::collections::BTreeMap;

/// One routed job class: its own queue and its rules' queues, in rule order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub job_class: String,
    pub source: String,
    pub targets: Vec<String>,
}

/// queue -> weight: a class's own queue weighs 2^n for n rules, rule i 2^(n-1-i) (the last,
/// harshest rule 1); a queue shared by several classes keeps its largest weight. Sorted by
/// weight, heaviest first, then by name.
pub fn weights(classes: &[Routed]) -> Vec<(String, u64)> {
    let mut out: BTreeMap<&str, u64> = BTreeMap::new();
    for c in classes {
        let n = c.targets.len().min(62) as u32;
        let w = out.entry(&c.source).or_insert(0);
        *w = (*w).max(1 << n);
        for (i, t) in c.targets.iter().enumerate() {
            let w = out.entry(t).or_insert(0);
            *w = (*w).max(1 << n.saturating_sub(1 + i as u32));
        }
    }
    let mut list: Vec<(String, u64)> = out.into_iter().map(|(q, w)| (q.to_string(), w)).collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    list
}

/// The `:queues:` block for `sidekiq.yml`, each class's routing as a comment above it.
pub fn yaml(classes: &[Routed]) -> String {
    let mut out = String::new();
    for c in classes {
        out.push_str(&format!(
            "# {}: {} -> {}\n",
            c.job_class,
            c.source,
            c.targets.join(", ")
        ));
    }
    out.push_str(":queues:\n");
    for (queue, weight) in weights(classes) {
        out.push_str(&format!("  - [{queue}, {weight}]\n"));
    }
    out
}

/// Problems with the queues one process works on (`process`: queue -> weight): a class whose
/// queue it processes re-routes to a queue it does not (the jobs would be stranded), or a
/// throttled queue outweighs its source.
pub fn problems(process: &BTreeMap<String, u64>, classes: &[Routed]) -> Vec<String> {
    let mut out = Vec::new();
    for c in classes {
        let Some(&source_weight) = process.get(&c.source) else {
            continue;
        };
        let mut seen: Vec<&str> = Vec::new();
        for t in &c.targets {
            if *t == c.source || seen.contains(&t.as_str()) {
                continue;
            }
            seen.push(t);
            match process.get(t) {
                None => out.push(format!(
                    "{} re-routes to {t:?}, which this process does not work on (it works on {}): \
                     re-routed jobs would be stranded unless another process does",
                    c.job_class,
                    process.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
                Some(&w) if w > source_weight => out.push(format!(
                    "{}: throttled queue {t:?} (weight {w}) outweighs its source {:?} (weight {source_weight}): \
                     throttled tenants would be served first",
                    c.job_class, c.source
                )),
                Some(_) => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routed(class: &str, source: &str, targets: &[&str]) -> Routed {
        Routed {
            job_class: class.into(),
            source: source.into(),
            targets: targets.iter().map(|t| t.to_string()).collect(),
        }
    }

    fn process(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(q, w)| (q.to_string(), *w)).collect()
    }

    #[test]
    fn halves_the_weight_per_rule_and_keeps_the_largest_for_shared_queues() {
        let classes = [
            routed("SyncJob", "default", &["throttled_2x", "throttled_4x"]),
            routed("MailJob", "default", &["slow"]),
        ];
        assert_eq!(
            weights(&classes),
            vec![
                ("default".into(), 4),
                ("throttled_2x".into(), 2),
                ("slow".into(), 1),
                ("throttled_4x".into(), 1)
            ]
        );
        assert_eq!(
            yaml(&classes[..1]),
            "# SyncJob: default -> throttled_2x, throttled_4x\n:queues:\n  - [default, 4]\n  - [throttled_2x, 2]\n  - [throttled_4x, 1]\n"
        );
    }

    #[test]
    fn flags_stranded_targets_and_throttled_queues_that_outweigh_their_source() {
        let classes = [routed(
            "SyncJob",
            "default",
            &["throttled_2x", "throttled_4x", "throttled_4x"],
        )];
        let found = problems(&process(&[("default", 1), ("throttled_2x", 3)]), &classes);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[1].contains("re-routes to \"throttled_4x\", which this process does not work on (it works on default, throttled_2x)"));
        assert!(found[0]
            .contains("\"throttled_2x\" (weight 3) outweighs its source \"default\" (weight 1)"));
    }

    #[test]
    fn is_quiet_when_set_up_as_implied_or_not_working_on_the_source() {
        let classes = [routed("SyncJob", "default", &["throttled_2x", "default"])];
        let implied: BTreeMap<String, u64> = weights(&classes).into_iter().collect();
        assert!(problems(&implied, &classes).is_empty());
        assert!(problems(&process(&[("critical", 1)]), &classes).is_empty());
    }
}
