//! Read-only views of the routing state for the stats API, the Web tab and the CLI.
//!
//! A class's active tenants come from its tenant index (written by the enqueue script, see
//! `lua/routing/route.lua`); each tenant's counts, next queue and last re-route are computed here from
//! the enqueue times its key holds, with the same comparisons as the script.

use crate::error::Result;
use crate::redis::pool::Pool;
use crate::routing::keys::KeyFormat;
use crate::routing::router::{decode_times, index_every};
use crate::routing::rules::RuleSet;

/// MGET batch size when reading many tenants' keys.
const BATCH: usize = 500;

/// What a tenant's stored enqueue times say at `now`.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Enqueues inside each rule's window (exact up to the largest threshold + 1: older
    /// times are not kept).
    pub counts: Vec<u64>,
    /// The rule a job enqueued now would be routed by.
    pub next_rule: Option<usize>,
    /// When the newest re-routed enqueue still on record happened.
    pub last_reroute: Option<f64>,
    /// Enqueues inside the longest window: what "greediest" sorts by.
    pub recent: u64,
}

/// Evaluates `times` (oldest first, as stored); on a fair queue only the rules with
/// `from_fair_queue` fire ([`RuleSet::decide_for`]).
pub fn evaluate(rules: &RuleSet, times: &[f64], now: f64, fair_queue: bool) -> Evaluation {
    let counts = rules
        .rules()
        .iter()
        .map(|r| times.iter().filter(|&&t| t >= now - r.per).count() as u64)
        .collect();
    let recent = times.iter().filter(|&&t| t >= now - rules.window()).count() as u64;
    let mut newest_first: Vec<f64> = Vec::with_capacity(times.len() + 1);
    newest_first.push(now);
    newest_first.extend(times.iter().rev());
    let next_rule = rules.decide_for(&newest_first, now, fair_queue);
    // The job enqueued at times[j] saw times[..=j]: replay from the newest until one fired.
    let last_reroute = (0..times.len())
        .rev()
        .find(|&j| {
            rules
                .decide_for(&newest_first[times.len() - j..], times[j], fair_queue)
                .is_some()
        })
        .map(|j| times[j]);
    Evaluation {
        counts,
        next_rule,
        last_reroute,
        recent,
    }
}

/// One tenant of a class.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantRow {
    pub tenant: Vec<u8>,
    pub last_enqueue: f64,
    pub eval: Evaluation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Most recent enqueue first (reads only the page's keys).
    Recent,
    /// Most enqueues in the longest window first (reads every active tenant's key).
    Greedy,
}

impl Order {
    /// `recent` or `greedy`.
    pub fn named(name: &str) -> Option<Order> {
        match name {
            "recent" => Some(Order::Recent),
            "greedy" => Some(Order::Greedy),
            _ => None,
        }
    }
}

/// Which class's tenants to read.
pub struct Query<'a> {
    pub keys: &'a KeyFormat,
    pub rules: &'a RuleSet,
    pub job_class: &'a [u8],
    pub queue: &'a [u8],
    pub now: f64,
    /// Whether `queue` is a fair queue.
    pub fair_queue: bool,
}

/// A page of active tenants and how many there are in all.
pub struct Page {
    pub total: u64,
    pub rows: Vec<TenantRow>,
}

pub fn tenants(
    pool: &Pool,
    q: &Query<'_>,
    order: Order,
    offset: usize,
    limit: usize,
) -> Result<Page> {
    let index = q.keys.index_key(q.queue, q.job_class);
    let entries: Vec<(Vec<u8>, Vec<u8>)> =
        pool.with(|c| redis::cmd("HGETALL").arg(&index).query(c))?;
    // The index's time of a busy tenant may be up to `index_every` old: keep those at the edge.
    let window = q.rules.window();
    let members = active(entries, q.now - window - index_every(window));
    let total = members.len() as u64;
    let rows = match order {
        Order::Recent => {
            let page: Vec<_> = members.into_iter().skip(offset).take(limit).collect();
            read_rows(pool, q, page)?
        }
        Order::Greedy => {
            let mut rows = read_rows(pool, q, members)?;
            rows.sort_by(|a, b| {
                b.eval
                    .recent
                    .cmp(&a.eval.recent)
                    .then(b.last_enqueue.total_cmp(&a.last_enqueue))
                    .then(a.tenant.cmp(&b.tenant))
            });
            rows.into_iter().skip(offset).take(limit).collect()
        }
    };
    Ok(Page { total, rows })
}

/// Index entries (tenant, packed newest enqueue time) enqueued since `since`, newest first.
pub fn active(entries: Vec<(Vec<u8>, Vec<u8>)>, since: f64) -> Vec<(Vec<u8>, f64)> {
    let mut out: Vec<(Vec<u8>, f64)> = entries
        .into_iter()
        .filter_map(|(tenant, v)| Some((tenant, f64::from_be_bytes(v.try_into().ok()?))))
        .filter(|(_, t)| *t >= since)
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// One tenant, whether or not the index knows it.
pub fn tenant(pool: &Pool, q: &Query<'_>, tenant: &[u8]) -> Result<TenantRow> {
    let key = q.keys.render(q.queue, q.job_class, tenant);
    let value: Option<Vec<u8>> = pool.with(|c| redis::cmd("GET").arg(&key).query(c))?;
    let times = value.map(|v| decode_times(&v)).unwrap_or_default();
    Ok(row(q, tenant.to_vec(), times))
}

fn row(q: &Query<'_>, tenant: Vec<u8>, times: Vec<f64>) -> TenantRow {
    TenantRow {
        tenant,
        last_enqueue: times.last().copied().unwrap_or(0.0),
        eval: evaluate(q.rules, &times, q.now, q.fair_queue),
    }
}

fn read_rows(pool: &Pool, q: &Query<'_>, members: Vec<(Vec<u8>, f64)>) -> Result<Vec<TenantRow>> {
    let mut rows = Vec::with_capacity(members.len());
    for chunk in members.chunks(BATCH) {
        let keys: Vec<Vec<u8>> = chunk
            .iter()
            .map(|(t, _)| q.keys.render(q.queue, q.job_class, t))
            .collect();
        let values: Vec<Option<Vec<u8>>> = pool.with(|c| redis::cmd("MGET").arg(&keys).query(c))?;
        for ((tenant, last), value) in chunk.iter().zip(values) {
            let times = value.map(|v| decode_times(&v)).unwrap_or_default();
            let mut r = row(q, tenant.clone(), times);
            r.last_enqueue = r.last_enqueue.max(*last);
            rows.push(r);
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::rules::{RawRule, RawValue};

    fn rules() -> RuleSet {
        let rule = |q: &str, t: i64, per: i64| RawRule::Hash {
            queue: RawValue::Str(q.into()),
            threshold: RawValue::Int(t),
            per: RawValue::Int(per),
            from_fair_queue: RawValue::Missing,
            unknown_keys: vec![],
            inspect: "{...}".into(),
        };
        RuleSet::parse("Job", &[rule("slow", 2, 100), rule("slower", 1, 1)], 1000.0).unwrap()
    }

    #[test]
    fn counts_each_window_and_predicts_the_next_queue() {
        let e = evaluate(&rules(), &[850.0, 990.0], 1000.0, false);
        assert_eq!(
            (e.counts.clone(), e.recent, e.next_rule),
            (vec![1, 0], 1, None)
        );
        // A job now would be the third in 100 s: over threshold 2.
        let e = evaluate(&rules(), &[950.0, 990.0], 1000.0, false);
        assert_eq!((e.counts.clone(), e.next_rule), (vec![2, 0], Some(0)));
        // And the second within 1 s: the last rule that fires wins.
        let e = evaluate(&rules(), &[950.0, 999.5], 1000.0, false);
        assert_eq!((e.counts, e.next_rule), (vec![2, 1], Some(1)));
    }

    #[test]
    fn on_a_fair_queue_predicts_by_the_rules_that_asked_only() {
        let raw = |q: &str, t: i64, per: i64, fair: bool| RawRule::Hash {
            queue: RawValue::Str(q.into()),
            threshold: RawValue::Int(t),
            per: RawValue::Int(per),
            from_fair_queue: if fair {
                RawValue::Other("true".into())
            } else {
                RawValue::Missing
            },
            unknown_keys: vec![],
            inspect: "{...}".into(),
        };
        let set = RuleSet::parse(
            "Job",
            &[raw("own", 2, 100, true), raw("slower", 1, 1, false)],
            1000.0,
        )
        .unwrap();
        let times = [950.0, 999.5];
        assert_eq!(evaluate(&set, &times, 1000.0, false).next_rule, Some(1));
        let e = evaluate(&set, &times, 1000.0, true);
        assert_eq!((e.counts, e.next_rule), (vec![2, 1], Some(0)));
        assert_eq!(evaluate(&set, &[999.5], 1000.0, true).next_rule, None);
        assert_eq!(evaluate(&rules(), &times, 1000.0, true).next_rule, None);
    }

    #[test]
    fn orders_by_name() {
        assert_eq!(Order::named("recent"), Some(Order::Recent));
        assert_eq!(Order::named("greedy"), Some(Order::Greedy));
        assert_eq!(Order::named("Greedy"), None);
    }

    #[test]
    fn active_entries_are_the_fresh_ones_newest_first() {
        let e = |t: &str, at: f64| (t.as_bytes().to_vec(), at.to_be_bytes().to_vec());
        let entries = vec![
            e("old", 10.0),
            e("b", 950.0),
            e("a", 990.0),
            (b"junk".to_vec(), b"x".to_vec()),
        ];
        let got = active(entries, 900.0);
        assert_eq!(got, vec![(b"a".to_vec(), 990.0), (b"b".to_vec(), 950.0)]);
    }

    #[test]
    fn last_reroute_is_the_newest_enqueue_whose_rule_fired_then() {
        let e = evaluate(&rules(), &[500.0, 990.0, 990.5], 1000.0, false);
        assert_eq!(e.last_reroute, Some(990.5)); // second within 1 s
        let e = evaluate(&rules(), &[950.0, 990.0, 998.0], 1000.0, false);
        assert_eq!(e.last_reroute, Some(998.0)); // third within 100 s
        let e = evaluate(&rules(), &[100.0, 100.5, 990.0], 1000.0, false);
        assert_eq!(e.last_reroute, Some(100.5)); // the newest went through
        let e = evaluate(&rules(), &[100.0, 500.0, 900.0], 1000.0, false);
        assert_eq!(e.last_reroute, None);
        assert_eq!(evaluate(&rules(), &[], 1000.0, false).last_reroute, None);
    }
}
