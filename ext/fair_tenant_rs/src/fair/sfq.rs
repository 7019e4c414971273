//! [`Sfq`]: the fair-order rule as a plain model, what `lua/fair/common.lua` does without Redis.

use std::collections::{BTreeMap, HashMap};

/// The rule as a model: what the Lua scripts do, without Redis.
#[derive(Debug, Default)]
pub struct Sfq {
    pub(crate) v: f64,
    seq: u64,
    /// Backlogged, servable tenants: their place (start tag, activation) -> tenant.
    pub(crate) ready: BTreeMap<Place, String>,
    pub(crate) backlog: HashMap<String, std::collections::VecDeque<u64>>,
    /// Finish tags of tenants that went idle.
    pub(crate) finish: HashMap<String, f64>,
    weights: HashMap<String, f64>,
    pub(crate) paused: Vec<String>,
    /// Fair by worker time (`lua/fair/time.lua`): a served job is charged its tenant's mean run time.
    pub(crate) time: bool,
    /// Under `time`: tenants' mean run times (ms), the queue's, and the charge of the job served last.
    pub(crate) means: HashMap<String, f64>,
    pub(crate) mean: Option<f64>,
    pub(crate) charged: Option<f64>,
    /// The activation of the tenant served last by [`Sfq::pop`].
    served_seq: u64,
}

/// A tenant's place in the rotation: its start tag, then its activation (the tie-break).
pub(crate) type Place = (Tag, u64);

/// An f64 start tag with a total order (tags are never NaN).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub(crate) struct Tag(pub(crate) f64);
impl Eq for Tag {}
#[allow(clippy::derive_ord_xor_partial_ord)]
impl Ord for Tag {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Sfq {
    pub fn new() -> Sfq {
        Sfq::default()
    }

    /// A queue fair by worker time: each job served is charged an estimate of its run time.
    pub fn by_time() -> Sfq {
        Sfq {
            time: true,
            ..Sfq::default()
        }
    }

    /// The next job in fair order, its tenant, its tenant's activation and its charge (ms, under `time`).
    pub fn pop_charged(&mut self) -> Option<(String, u64, u64, Option<f64>)> {
        let (tenant, job) = self.pop()?;
        Some((tenant, job, self.served_seq, self.charged))
    }

    /// What a job of `tenant` is charged when served (ms): its mean, else the queue's, else the default,
    /// bounded.
    pub fn estimate(&self, tenant: &str) -> f64 {
        let mean = self.means.get(tenant).copied().or(self.mean);
        bounded_ms(mean.unwrap_or(crate::names::TIME_DEFAULT_MS as f64))
    }

    /// A job of `tenant` ran `ran` ms: the means learn it (an EWMA; the first run is taken as it is).
    /// Returns the run time bounded, what its correction counts.
    pub(crate) fn learn(&mut self, tenant: &str, ran: f64) -> f64 {
        let ran = bounded_ms(ran);
        let d = crate::names::TIME_EWMA_DIVISOR as f64;
        let m = self.means.entry(tenant.to_string()).or_insert(ran);
        *m += (ran - *m) / d;
        let all = self.mean.get_or_insert(ran);
        *all += (ran - *all) / d;
        ran
    }

    /// The correction of a charge (`lua/fair/serve.lua`'s charge_back) where this model keeps tenants: a job
    /// of `tenant`, served at activation `seq` and charged `charged` ms, ran `ran` ms. The means learn it;
    /// the tenant's tag in `ready` under that activation, or its finish tag when idle, moves by
    /// (ran - charged) / 1000 / weight, never below `V` by a refund. Returns the move still to make when
    /// the tenant was met in neither (a caller with more tiers looks there), else None.
    pub(crate) fn charge_back(
        &mut self,
        tenant: &str,
        seq: u64,
        charged: f64,
        ran: f64,
    ) -> Option<f64> {
        let ran = self.learn(tenant, ran);
        let w = self.weight(tenant);
        if w == 0.0 || ran == charged {
            return None;
        }
        let delta = (ran - charged) / 1000.0 / w;
        let found = (self.ready.iter())
            .find(|(at, t)| at.1 == seq && t.as_str() == tenant)
            .map(|(&at, _)| at);
        if let Some(at) = found {
            let new = Tag(self.moved(at.0 .0, delta));
            self.ready.remove(&at);
            self.ready.insert((new, seq), tenant.to_string());
            return None;
        }
        if let Some(&f) = self.finish.get(tenant) {
            let new = self.moved(f, delta);
            self.finish.insert(tenant.to_string(), new);
            return None;
        }
        Some(delta)
    }

    /// A tag moved by `delta` (a refund never below `V`, nor a tag above where it was).
    pub(crate) fn moved(&self, tag: f64, delta: f64) -> f64 {
        let new = tag + delta;
        if delta < 0.0 && new < self.v {
            return if self.v < tag { self.v } else { tag };
        }
        new
    }

    pub fn set_weight(&mut self, tenant: &str, weight: f64) {
        self.weights.insert(tenant.to_string(), weight.max(0.0));
        if weight > 0.0 {
            if let Some(i) = self.paused.iter().position(|t| t == tenant) {
                self.paused.remove(i);
                self.activate(tenant);
            }
        }
    }

    pub(crate) fn weight(&self, tenant: &str) -> f64 {
        self.weights.get(tenant).copied().unwrap_or(1.0)
    }

    /// A job (an id) to the back of the tenant's backlog.
    pub fn push(&mut self, tenant: &str, job: u64) {
        let list = self.backlog.entry(tenant.to_string()).or_default();
        list.push_back(job);
        if list.len() == 1 {
            self.activate(tenant);
        }
    }

    /// A job back to the *front* of the tenant's backlog (requeued or recovered: it runs next for that
    /// tenant), the tenant activated when its backlog was empty. Returns whether it was.
    pub fn push_front(&mut self, tenant: &str, job: u64) -> bool {
        let list = self.backlog.entry(tenant.to_string()).or_default();
        list.push_front(job);
        let activated = list.len() == 1;
        if activated {
            self.activate(tenant);
        }
        activated
    }

    fn activate(&mut self, tenant: &str) {
        if self.weight(tenant) == 0.0 {
            self.paused.push(tenant.to_string());
            return;
        }
        let start = match self.finish.remove(tenant) {
            Some(f) if f > self.v => f,
            _ => self.v,
        };
        self.seq += 1;
        let at = (Tag(start), self.seq);
        self.ready.insert(at, tenant.to_string());
    }

    /// The next job in fair order, and its tenant.
    pub fn pop(&mut self) -> Option<(String, u64)> {
        loop {
            let (&at, tenant) = self.ready.iter().next()?;
            let tenant = tenant.clone();
            self.ready.remove(&at);
            let w = self.weight(&tenant);
            if w == 0.0 {
                self.paused.push(tenant);
                continue;
            }
            let job = self.backlog.get_mut(&tenant)?.pop_front()?;
            if let Some(finish) = self.served(&tenant, at.0 .0, w) {
                self.ready.insert((Tag(finish), at.1), tenant.clone());
            }
            self.served_seq = at.1;
            return Some((tenant, job));
        }
    }

    /// Bookkeeping once a job of `tenant` (start tag `start`, weight `w`) was taken from its backlog:
    /// `V` moves to `start`; the tenant's next start tag is returned, or, when it has no job left, that
    /// tag is remembered and tags `V` passed are forgotten, FIN_PRUNE at most (only then: a tag at or behind `V` is harmless,
    /// activation takes max(V, tag), so a fetch that leaves its tenant backlogged never prunes).
    pub(crate) fn served(&mut self, tenant: &str, start: f64, w: f64) -> Option<f64> {
        self.v = start;
        self.charged = self.time.then(|| self.estimate(tenant));
        let finish = start + self.charged.map_or(1.0, |c| c / 1000.0) / w;
        let more = self.backlog.get(tenant).is_some_and(|l| !l.is_empty());
        if !more {
            // At most FIN_PRUNE tags a call, lowest first (ties by name's bytes, as in a Redis sorted set).
            let mut behind: Vec<(f64, String)> = (self.finish.iter())
                .filter(|(_, f)| **f <= start)
                .map(|(t, f)| (*f, t.clone()))
                .collect();
            behind.sort_by(|a, b| {
                a.0.total_cmp(&b.0)
                    .then_with(|| a.1.as_bytes().cmp(b.1.as_bytes()))
            });
            for (_, t) in behind.into_iter().take(crate::names::FIN_PRUNE as usize) {
                self.finish.remove(&t);
                if self.time {
                    self.means.remove(&t);
                }
            }
            self.finish.insert(tenant.to_string(), finish);
        }
        more.then_some(finish)
    }

    /// A waiting job taken out of the tenant's backlog (deleted through Sidekiq's API; `lua/fair/delete.lua`).
    /// `V` does not move. A tenant whose backlog empties leaves the rotation (or `paused`), its start tag
    /// remembered while ahead of `V`: back with a new job, it starts no earlier than its next job would have.
    /// Returns whether the job was waiting there.
    pub fn delete(&mut self, tenant: &str, job: u64) -> bool {
        let Some(list) = self.backlog.get_mut(tenant) else {
            return false;
        };
        let Some(i) = list.iter().position(|&j| j == job) else {
            return false;
        };
        list.remove(i);
        if list.is_empty() {
            if let Some(p) = self.paused.iter().position(|t| t == tenant) {
                self.paused.remove(p);
            } else if let Some(at) = self
                .ready
                .iter()
                .find(|(_, t)| *t == tenant)
                .map(|(&at, _)| at)
            {
                self.ready.remove(&at);
                self.left_at(tenant, at.0 .0);
            }
        }
        true
    }

    /// A tenant that left with no job served at `tag` keeps that tag while it is ahead of `V`.
    pub(crate) fn left_at(&mut self, tenant: &str, tag: f64) {
        if tag > self.v {
            self.finish.insert(tenant.to_string(), tag);
        }
    }

    /// Tenants remembered after going idle (bounded: forgotten at the next idle turn once `V` passed their tag).
    pub fn remembered(&self) -> usize {
        self.finish.len()
    }
}

/// A run time (or charge) within TIME_FLOOR_MS ..= TIME_CAP_MS.
pub fn bounded_ms(ms: f64) -> f64 {
    ms.clamp(
        crate::names::TIME_FLOOR_MS as f64,
        crate::names::TIME_CAP_MS as f64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(sfq: &mut Sfq, n: usize) -> Vec<String> {
        (0..n).filter_map(|_| sfq.pop().map(|(t, _)| t)).collect()
    }

    fn count(list: &[String], tenant: &str) -> usize {
        list.iter().filter(|t| *t == tenant).count()
    }

    #[test]
    fn shares_follow_the_weights_while_all_are_backlogged() {
        let mut sfq = Sfq::new();
        sfq.set_weight("c", 3.0);
        for i in 0..3000 {
            for t in ["a", "b", "c"] {
                sfq.push(t, i);
            }
        }
        let first = served(&mut sfq, 3000);
        // 1:1:3 of 3,000 = 600, 600, 1,800, within ±5%
        for (t, want) in [("a", 600.0), ("b", 600.0), ("c", 1800.0)] {
            let got = count(&first, t) as f64;
            assert!((got - want).abs() <= want * 0.05, "{t}: {got} vs {want}");
        }
    }

    #[test]
    fn fifo_within_a_tenant_and_round_robin_by_activation_not_name() {
        let mut sfq = Sfq::new();
        for (t, j) in [("zed", 1), ("amy", 2), ("zed", 3), ("amy", 4)] {
            sfq.push(t, j);
        }
        let order: Vec<(String, u64)> = std::iter::from_fn(|| sfq.pop()).collect();
        assert_eq!(
            order,
            vec![
                ("zed".into(), 1),
                ("amy".into(), 2),
                ("zed".into(), 3),
                ("amy".into(), 4)
            ]
        );
    }

    #[test]
    fn a_small_tenant_is_served_next_even_behind_a_huge_backlog() {
        let mut sfq = Sfq::new();
        for j in 0..100_000 {
            sfq.push("mega", j);
        }
        served(&mut sfq, 10);
        sfq.push("small", 1);
        let next = served(&mut sfq, 2);
        assert!(next.contains(&"small".to_string()), "{next:?}");
    }

    #[test]
    fn a_tenant_back_from_idle_cannot_bank_credit() {
        let mut sfq = Sfq::new();
        for j in 0..1000 {
            sfq.push("busy", j);
        }
        sfq.push("sleeper", 0);
        served(&mut sfq, 500); // sleeper served once early, then idle for a long time
        for j in 0..100 {
            sfq.push("sleeper", j);
        }
        let next = served(&mut sfq, 20);
        // Back from idle it gets its share (half), not a burst paying back what it missed.
        assert!(count(&next, "sleeper") <= 11, "{next:?}");
        assert!(count(&next, "sleeper") >= 9, "{next:?}");
    }

    #[test]
    fn a_lone_tenant_is_served_every_time() {
        let mut sfq = Sfq::new();
        sfq.set_weight("only", 0.25);
        for j in 0..50 {
            sfq.push("only", j);
        }
        assert_eq!(served(&mut sfq, 60).len(), 50);
    }

    #[test]
    fn weight_zero_pauses_and_raising_it_resumes() {
        let mut sfq = Sfq::new();
        sfq.set_weight("p", 0.0);
        sfq.push("p", 1);
        sfq.push("q", 2);
        assert_eq!(served(&mut sfq, 5), vec!["q".to_string()]);
        sfq.set_weight("p", 2.0);
        assert_eq!(sfq.pop(), Some(("p".into(), 1)));
    }

    #[test]
    fn a_job_pushed_to_the_front_runs_next_for_its_tenant() {
        let mut sfq = Sfq::new();
        sfq.push("a", 1);
        sfq.push("a", 2);
        sfq.push("b", 3);
        assert_eq!(sfq.pop(), Some(("a".into(), 1)));
        assert!(!sfq.push_front("a", 1)); // "a" kept its place: still backlogged
        assert_eq!(served(&mut sfq, 1), ["b"]);
        assert_eq!(sfq.pop(), Some(("a".into(), 1)));
        assert_eq!(sfq.pop(), Some(("a".into(), 2)));
        assert!(sfq.push_front("b", 3)); // an idle tenant is activated, at V (no banked credit)
        assert_eq!(sfq.pop(), Some(("b".into(), 3)));
    }

    #[test]
    fn a_deleted_job_is_never_served() {
        let mut sfq = Sfq::new();
        for (t, j) in [("a", 1), ("a", 2), ("b", 3), ("a", 4)] {
            sfq.push(t, j);
        }
        assert!(sfq.delete("a", 2));
        assert!(!sfq.delete("a", 2));
        assert!(!sfq.delete("b", 1));
        let order: Vec<(String, u64)> = std::iter::from_fn(|| sfq.pop()).collect();
        assert_eq!(
            order,
            vec![("a".into(), 1), ("b".into(), 3), ("a".into(), 4)]
        );
    }

    #[test]
    fn a_tenant_whose_last_job_is_deleted_leaves_and_comes_back_no_earlier() {
        let mut sfq = Sfq::new();
        sfq.push("a", 1);
        sfq.push("a", 2);
        for j in 10..20 {
            sfq.push("b", j);
        }
        assert_eq!(sfq.pop(), Some(("a".into(), 1))); // a's next job starts at 1, V = 0
        assert!(sfq.delete("a", 2));
        assert!(sfq.ready.values().all(|t| t != "a"));
        assert_eq!(sfq.v, 0.0);
        sfq.push("a", 3); // back at its tag 1: b, whose tag is 0, goes first (at V = 0 it would not)
        assert_eq!(served(&mut sfq, 3), ["b", "b", "a"]);
    }

    #[test]
    fn a_paused_tenant_whose_last_job_is_deleted_is_not_resumed_empty() {
        let mut sfq = Sfq::new();
        sfq.set_weight("p", 0.0);
        sfq.push("p", 1);
        assert!(sfq.delete("p", 1));
        assert!(sfq.paused.is_empty());
        sfq.set_weight("p", 1.0);
        assert!(sfq.ready.is_empty());
        assert_eq!(sfq.pop(), None);
    }

    #[test]
    fn idle_tenants_are_forgotten_once_virtual_time_passes_them_fin_prune_per_idle_turn() {
        let mut sfq = Sfq::new();
        for t in 0..10_000 {
            sfq.push(&format!("t{t}"), 0);
        }
        served(&mut sfq, 10_000);
        assert_eq!(sfq.remembered(), 10_000); // all idle at tag 1, none behind V yet
        let late = 10_000 / crate::names::FIN_PRUNE as usize;
        for t in 0..late {
            sfq.push(&format!("late{t}"), 0);
            sfq.push(&format!("late{t}"), 1);
        }
        served(&mut sfq, 2 * late);
        // Each late tenant went idle at start 1, forgetting FIN_PRUNE tags behind it: the 10,000 are gone.
        assert_eq!(sfq.remembered(), late, "{}", sfq.remembered());
        assert!(sfq.finish.keys().all(|t| t.starts_with("late")));
    }
}
