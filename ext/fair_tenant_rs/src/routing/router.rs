//! Enqueue-time routing: one EVALSHA per push registers the job and picks the rule.

use std::sync::LazyLock;

use redis::Script;

use crate::error::Result;
use crate::redis::pool::Pool;
use crate::routing::keys::KeyFormat;
use crate::routing::rules::RuleSet;

static ROUTE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/routing/route.lua")));

/// Tenants kept in a class's index; mirrored in `lua/routing/route.lua`.
pub const INDEX_CAP: usize = 10_000;

/// One push to decide.
pub struct Enqueue<'a> {
    pub key: &'a [u8],
    /// The class's tenant index.
    pub index: &'a [u8],
    pub tenant: &'a [u8],
    /// Seconds since the epoch, from the caller's clock.
    pub now: f64,
    /// Whether the job's queue is a fair queue: only rules with `from_fair_queue` fire then.
    pub fair_queue: bool,
}

/// One push's keys, owned (the tenant's key and the class's tenant index); [`Push::at`] lends
/// them out as an [`Enqueue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Push {
    pub key: Vec<u8>,
    pub index: Vec<u8>,
    pub tenant: Vec<u8>,
}

impl Push {
    pub fn new(keys: &KeyFormat, queue: &[u8], job_class: &[u8], tenant: &[u8]) -> Push {
        Push {
            key: keys.render(queue, job_class, tenant),
            index: keys.index_key(queue, job_class),
            tenant: tenant.to_vec(),
        }
    }

    pub fn at(&self, now: f64, fair_queue: bool) -> Enqueue<'_> {
        Enqueue {
            key: &self.key,
            index: &self.index,
            tenant: &self.tenant,
            now,
            fair_queue,
        }
    }
}

/// Registers one enqueue and returns the index of the rule that fires, if any.
pub fn route(pool: &Pool, rules: &RuleSet, job: &Enqueue<'_>) -> Result<Option<usize>> {
    let mut inv = ROUTE.prepare_invoke();
    inv.key(job.key).key(job.index);
    for arg in script_args(rules, job) {
        inv.arg(arg);
    }
    let chosen: i64 = pool.with(|c| inv.invoke(c))?;
    Ok(usize::try_from(chosen).ok())
}

/// The route script's ARGV for one push (its KEYS are the tenant's key and the class's index).
/// `bin/bench` pipelines calls built from these to measure the script's server time.
pub fn script_args(rules: &RuleSet, job: &Enqueue<'_>) -> [Vec<u8>; 4] {
    [
        job.now.to_be_bytes().to_vec(),
        ttl_ms(2.0 * rules.window()).to_string().into_bytes(),
        script_spec(rules, job.now, job.fair_queue),
        job.tenant.to_vec(),
    ]
}

/// How stale the tenant index's time of a busy tenant may get, in seconds (at most a hundredth
/// of the longest window).
pub fn index_every(window: f64) -> f64 {
    (window / 100.0).min(1.0)
}

/// The script's numbers, packed as 8-byte big-endian doubles so that it parses no decimal text:
/// `keep`, the longest window, the index staleness, then `threshold, now - per` for every rule
/// in order. The window starts are computed here with the same f64 subtraction the script
/// would do. A rule that does not apply to this push ([`RuleSet::applies`]) gets an infinite
/// threshold, which no count exceeds: the script counts the push the same way, and that rule
/// never fires.
fn script_spec(rules: &RuleSet, now: f64, fair_queue: bool) -> Vec<u8> {
    let mut spec = Vec::with_capacity(24 + 16 * rules.rules().len());
    spec.extend_from_slice(&(rules.keep() as f64).to_be_bytes());
    spec.extend_from_slice(&rules.window().to_be_bytes());
    spec.extend_from_slice(&index_every(rules.window()).to_be_bytes());
    for (i, r) in rules.rules().iter().enumerate() {
        let threshold = if rules.applies(i, fair_queue) {
            r.threshold as f64
        } else {
            f64::INFINITY
        };
        spec.extend_from_slice(&threshold.to_be_bytes());
        spec.extend_from_slice(&(now - r.per).to_be_bytes());
    }
    spec
}

/// Milliseconds for a TTL of `window` seconds.
pub fn ttl_ms(window: f64) -> u64 {
    (window * 1000.0).ceil().max(1.0) as u64
}

/// Bytes before the enqueue times in a tenant key's value; mirrored in `lua/routing/route.lua`.
pub const HEADER: usize = 16;

/// Decodes a tenant key's value: its enqueue times, oldest first (after the 16-byte header that
/// says when the script last set the key's TTL and last wrote the tenant's index entry).
pub fn decode_times(value: &[u8]) -> Vec<f64> {
    if !value.len().is_multiple_of(8) {
        return Vec::new();
    }
    value
        .get(HEADER..)
        .unwrap_or_default()
        .chunks_exact(8)
        .map(|c| f64::from_be_bytes(c.try_into().expect("8-byte chunk")))
        .collect()
}

/// The SHA1 of the route script, for stats and tests.
pub fn script_sha() -> String {
    ROUTE.get_hash().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_big_endian_doubles_like_lua_struct_packs_them() {
        let mut v = 1_700_000_000.0f64.to_be_bytes().repeat(2);
        v.extend_from_slice(&1_700_000_000.25f64.to_be_bytes());
        v.extend_from_slice(&1_700_000_001.5f64.to_be_bytes());
        assert_eq!(decode_times(&v), vec![1_700_000_000.25, 1_700_000_001.5]);
        assert!(decode_times(b"").is_empty());
        assert!(decode_times(&v[..16]).is_empty());
        assert!(decode_times(&v[..20]).is_empty());
    }

    #[test]
    fn packs_keep_window_and_staleness_then_threshold_and_window_start_per_rule() {
        use crate::routing::rules::{RawRule, RawValue};
        let rule = |t: i64, per: f64| RawRule::Hash {
            queue: RawValue::Str("slow".into()),
            threshold: RawValue::Int(t),
            per: RawValue::Float(per),
            from_fair_queue: RawValue::Missing,
            unknown_keys: vec![],
            inspect: "{...}".into(),
        };
        let rules = RuleSet::parse("Job", &[rule(100, 3600.0), rule(20, 0.25)], 86_400.0).unwrap();
        let now = 1_700_000_000.123_456;
        let nums = |fair_queue| -> Vec<f64> {
            script_spec(&rules, now, fair_queue)
                .chunks_exact(8)
                .map(|c| f64::from_be_bytes(c.try_into().unwrap()))
                .collect()
        };
        assert_eq!(
            nums(false),
            vec![101.0, 3600.0, 1.0, 100.0, now - 3600.0, 20.0, now - 0.25]
        );
        // On a fair queue neither rule asked to apply: same keep and window, no threshold reachable.
        let inf = f64::INFINITY;
        assert_eq!(
            nums(true),
            vec![101.0, 3600.0, 1.0, inf, now - 3600.0, inf, now - 0.25]
        );
        assert_eq!(index_every(60.0), 0.6);
    }

    #[test]
    fn a_push_names_the_tenants_key_and_the_class_index() {
        let keys = KeyFormat::parse(crate::routing::keys::DEFAULT_ENQUEUES_KEY).unwrap();
        let push = Push::new(&keys, b"default", b"BillingJob", b"acme");
        assert_eq!(
            push.key,
            b"sidekiq-fair_tenant:enqueued:BillingJob:tenant:acme".to_vec()
        );
        assert_eq!(push.index, keys.index_key(b"default", b"BillingJob"));
        let job = push.at(1.5, true);
        assert_eq!(
            (job.key, job.index, job.tenant, job.now, job.fair_queue),
            (&push.key[..], &push.index[..], &b"acme"[..], 1.5, true)
        );
    }

    #[test]
    fn ttl_covers_the_window_in_milliseconds() {
        assert_eq!(ttl_ms(3600.0), 3_600_000);
        assert_eq!(ttl_ms(0.0001), 1);
    }
}
