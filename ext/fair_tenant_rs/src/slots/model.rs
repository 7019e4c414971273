//! The plain-queue slot rule of one scope as plain Rust: what `lua/slots/acquire.lua`, `release.lua` (with and
//! without a payload: release and forget), `set_limit.lua` and `sweep.lua` do to its holders, runs, parked jobs,
//! their terms, the runs given up and the queue hand-overs push to, and what a fair queue's fetch and
//! acknowledgement of a job of the scope do to them (`lua/fair/serve.lua`'s take_slot and release_slot).
//! `slots/lockstep.rs` runs both side by side.

use std::collections::{BTreeMap, BTreeSet};

use crate::names;

/// Who holds a holder's slot (`RUNS`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Owner {
    Run(String),
    /// Handed over to the copy of the job parked by this run, not fetched yet (`HANDED` + run).
    Handed(String),
    /// Given up after its copy was fetched: the copy drops itself (`DROPPED`).
    Dropped,
}

impl Owner {
    /// As stored in the runs hash.
    pub fn stored(&self) -> String {
        match self {
            Owner::Run(r) => r.clone(),
            Owner::Handed(r) => format!("{}{r}", names::HANDED),
            Owner::Dropped => names::DROPPED.to_string(),
        }
    }
}

/// A parked job's own terms (`WAITS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    pub run: String,
    pub limit: u64,
    pub lease: u64,
}

/// One acquiring run: jid, run token, its class's limit and lease, payload, enqueue score (ms).
pub struct Ask<'a> {
    pub jid: &'a str,
    pub run: &'a str,
    pub limit: u64,
    pub lease: u64,
    pub payload: &'a str,
    pub score: f64,
}

#[derive(Debug, Default, Clone)]
pub struct PlainSlots {
    /// jid -> lease expiry (ms).
    pub holders: BTreeMap<String, u64>,
    pub runs: BTreeMap<String, Owner>,
    /// (score, payload, jid), oldest first.
    pub parked: Vec<(f64, String, String)>,
    pub waits: BTreeMap<String, Terms>,
    pub gone: BTreeSet<String>,
    /// The scope's sweep registration: (default limit, lease) of the job that parked last.
    pub meta: Option<(u64, u64)>,
    /// The tag-wide runtime limit.
    pub limit_override: Option<u64>,
    /// `queue:<name>` left to right (hand-overs push right; Sidekiq pops right).
    pub queue: Vec<String>,
}

impl PlainSlots {
    fn limit(&self, default: u64) -> u64 {
        self.limit_override.unwrap_or(default)
    }

    fn reclaim(&mut self, now: u64) -> u64 {
        let expired: Vec<String> = self
            .holders
            .iter()
            .filter(|(_, &until)| until <= now)
            .map(|(jid, _)| jid.clone())
            .collect();
        for jid in &expired {
            self.holders.remove(jid);
            self.runs.remove(jid);
        }
        expired.len() as u64
    }

    fn take_back(&mut self, payload: &str) -> bool {
        let tail = self.queue.len().saturating_sub(names::FORGET_TAIL as usize);
        match self.queue[tail..].iter().rposition(|p| p == payload) {
            Some(at) => {
                self.queue.remove(tail + at);
                true
            }
            None => false,
        }
    }

    /// `hand_over` (common.lua): `fallback` is the (limit, lease) for a parked job without terms.
    fn hand_over(&mut self, now: u64, fallback: (u64, u64)) -> (u64, u64) {
        self.reclaim(now);
        let mut running = self.holders.len() as u64;
        let (mut handed, mut bytes) = (0, 0);
        loop {
            let Some((_, payload, jid)) = self.parked.first().cloned() else {
                return (handed, 0);
            };
            if handed >= names::HAND_OVER_BATCH || bytes >= names::HAND_OVER_BYTES {
                return (handed, 1);
            }
            let (run, limit, lease) = match self.waits.get(&jid) {
                Some(t) => (t.run.clone(), t.limit, t.lease),
                None => (String::new(), fallback.0, fallback.1),
            };
            if running >= self.limit(limit) || self.holders.contains_key(&jid) {
                return (handed, 0);
            }
            self.parked.remove(0);
            self.waits.remove(&jid);
            self.holders.insert(jid.clone(), now + lease);
            self.runs.insert(jid, Owner::Handed(run));
            bytes += payload.len() as u64;
            self.queue.push(payload);
            running += 1;
            handed += 1;
        }
    }

    fn park(&mut self, ask: &Ask<'_>) {
        self.parked.retain(|(_, p, _)| p != ask.payload);
        let at = self
            .parked
            .iter()
            .position(|(s, p, _)| (*s, p.as_str()) > (ask.score, ask.payload))
            .unwrap_or(self.parked.len());
        let entry = (ask.score, ask.payload.to_string(), ask.jid.to_string());
        self.parked.insert(at, entry);
        let terms = Terms {
            run: ask.run.to_string(),
            limit: ask.limit,
            lease: ask.lease,
        };
        self.waits.insert(ask.jid.to_string(), terms);
        self.meta = Some((ask.limit, ask.lease));
    }

    /// `acquire.lua`: 0 acquired, 1 held, 2 parked, 3 dropped, 4 acquired with room. Scores with a fraction (no Sidekiq 8 tie-break).
    pub fn acquire(&mut self, ask: &Ask<'_>, now: u64) -> i64 {
        if self.gone.contains(ask.run) {
            return 3;
        }
        let owner = self.runs.get(ask.jid).cloned();
        let held = self.holders.contains_key(ask.jid);
        let fallback = (ask.limit, ask.lease);
        if held && owner == Some(Owner::Dropped) {
            self.holders.remove(ask.jid);
            self.runs.remove(ask.jid);
            self.hand_over(now, fallback);
            return 3;
        }
        if held && owner == Some(Owner::Handed(ask.run.to_string())) {
            self.take_back(ask.payload);
        }
        let claimable = match &owner {
            None => true,
            Some(Owner::Run(r)) => r == ask.run,
            Some(Owner::Handed(_)) => true,
            Some(Owner::Dropped) => false,
        };
        if held && claimable {
            self.holders.insert(ask.jid.to_string(), now + ask.lease);
            self.runs
                .insert(ask.jid.to_string(), Owner::Run(ask.run.to_string()));
            return 1;
        }
        if !held && owner.is_some() {
            self.runs.remove(ask.jid);
        }
        if self.waits.get(ask.jid).is_some_and(|t| t.run == ask.run) {
            return 2;
        }
        let limit = self.limit(ask.limit) as i64;
        let mut free = limit - self.holders.len() as i64;
        if free <= 0 && self.reclaim(now) > 0 {
            free = limit - self.holders.len() as i64;
        }
        if free > 0 && !held && self.parked.first().is_none_or(|(s, _, _)| ask.score < *s) {
            self.holders.insert(ask.jid.to_string(), now + ask.lease);
            self.runs
                .insert(ask.jid.to_string(), Owner::Run(ask.run.to_string()));
            // With room: another slot free and nobody parked, so the run's release may wait for its thread.
            return if free > 1 && self.parked.is_empty() {
                4
            } else {
                0
            };
        }
        self.park(ask);
        if free > 0 {
            self.hand_over(now, fallback);
        }
        2
    }

    /// `release.lua`: a run's release, or with `payload` (queue "default") its give-back after a lost reply.
    /// Returns (handed, more).
    pub fn release(
        &mut self,
        jid: &str,
        run: &str,
        payload: Option<&str>,
        fallback: (u64, u64),
        now: u64,
    ) -> (u64, u64) {
        let owner = self.runs.get(jid).cloned();
        let mut freed = false;
        // Only the holding run frees a slot: a holder with no run is a fair fetch's, or taken again after a
        // reclaim dropped this run's lease.
        if owner == Some(Owner::Run(run.to_string())) || run.is_empty() {
            freed = self.holders.remove(jid).is_some();
            self.runs.remove(jid);
        } else if let Some(payload) = payload {
            if owner == Some(Owner::Handed(run.to_string())) {
                if self.take_back(payload) {
                    freed = self.holders.remove(jid).is_some();
                    self.runs.remove(jid);
                } else {
                    self.runs.insert(jid.to_string(), Owner::Dropped);
                }
            } else if self.waits.get(jid).is_some_and(|t| t.run == run) {
                self.parked.retain(|(_, p, _)| p != payload);
                self.waits.remove(jid);
            } else {
                self.gone.insert(run.to_string());
            }
        }
        if !freed || self.parked.is_empty() {
            return (0, 0);
        }
        self.hand_over(now, fallback)
    }

    /// A fair queue's fetch serves job `jid` of the scope (`serve.lua`'s take_slot, not beyond the limit): it
    /// takes the jid's slot when the scope has room, expired leases dropped (their runs left as they are) when
    /// they stand in the way, and no plain run owns that slot afterwards. The first holder registers the scope.
    /// Not while the jid holds a slot whose lease runs on, unless handed over (or given up) for a parked copy,
    /// which this copy is: a plain run of it, or a fair copy, still runs. Returns whether it took it.
    pub fn fair_take(&mut self, jid: &str, limit: u64, lease: u64, now: u64) -> bool {
        let held = self.holders.get(jid).is_some_and(|&until| until > now);
        let handed = matches!(self.runs.get(jid), Some(Owner::Handed(_) | Owner::Dropped));
        if held && !handed {
            return false;
        }
        let cap = self.limit(limit) as usize;
        if self.holders.len() >= cap {
            self.holders.retain(|_, &mut until| until > now);
            if self.holders.len() >= cap {
                return false;
            }
        }
        if self.holders.is_empty() {
            self.meta = Some((limit, lease));
        }
        self.holders.insert(jid.to_string(), now + lease);
        self.runs.remove(jid);
        true
    }

    /// That job acknowledged (`serve.lua`'s release_slot): its jid's slot freed, whoever holds it; no parked job
    /// is handed it (fair-queue tenants waiting on the scope are woken). Returns whether a slot was freed.
    pub fn fair_ack(&mut self, jid: &str) -> bool {
        self.holders.remove(jid).is_some()
    }

    /// `set_limit.lua` for the tag-wide field (None: deleted). Returns (handed, more).
    pub fn set_limit(&mut self, value: Option<u64>, now: u64) -> (u64, u64) {
        self.limit_override = value;
        match self.meta {
            Some(fallback) => self.hand_over(now, fallback),
            None => (0, 0),
        }
    }

    /// `sweep.lua`: (handed, reclaimed, more).
    pub fn sweep(&mut self, now: u64) -> (u64, u64, u64) {
        let Some(fallback) = self.meta else {
            return (0, 0, 0);
        };
        let reclaimed = self.reclaim(now);
        let (handed, more) = self.hand_over(now, fallback);
        if self.holders.is_empty() && self.parked.is_empty() {
            self.meta = None;
        }
        (handed, reclaimed, more)
    }
}

/// Issue 32's rule on plain queues, as a model (docs/plans/issue-32.md): a job names several scopes, each a
/// [`PlainSlots`]; it starts only when every one has room (a free slot, and no older job parked there), taking a
/// slot in each at once, or parks on the first scope that refuses, holding nothing. A hand-over on a scope looks
/// at its oldest parked job's other scopes: one refuses -> the job moves to park there (its enqueue score kept);
/// all have room -> it is handed a slot in every scope at once. Lost replies are not modelled yet.
#[derive(Debug, Default, Clone)]
pub struct MultiSlots {
    pub scopes: BTreeMap<String, PlainSlots>,
    /// jid -> its scopes (name, limit, lease), in the order its option gives, while it is parked or holds slots.
    pub lists: BTreeMap<String, Vec<(String, u64, u64)>>,
}

impl MultiSlots {
    fn has_room(&mut self, scope: &(String, u64, u64), score: f64, now: u64) -> bool {
        let s = self.scopes.entry(scope.0.clone()).or_default();
        let cap = s.limit(scope.1) as usize;
        if s.holders.len() >= cap {
            s.reclaim(now);
        }
        s.holders.len() < cap && s.parked.first().is_none_or(|(older, _, _)| score < *older)
    }

    fn take_all(&mut self, jid: &str, owner: Owner, now: u64) {
        for (name, _, lease) in self.lists[jid].clone() {
            let s = self.scopes.entry(name).or_default();
            s.holders.insert(jid.to_string(), now + lease);
            s.runs.insert(jid.to_string(), owner.clone());
        }
    }

    fn park_on(
        &mut self,
        scope: &(String, u64, u64),
        jid: &str,
        run: &str,
        payload: &str,
        score: f64,
    ) {
        let ask = Ask {
            jid,
            run,
            limit: scope.1,
            lease: scope.2,
            payload,
            score,
        };
        self.scopes.entry(scope.0.clone()).or_default().park(&ask);
    }

    /// 0 acquired (a slot in every scope), 1 held already by this run, 2 parked (on the first scope that refuses).
    pub fn acquire(
        &mut self,
        jid: &str,
        run: &str,
        payload: &str,
        score: f64,
        scopes: &[(String, u64, u64)],
        now: u64,
    ) -> i64 {
        let mine = Owner::Run(run.to_string());
        if scopes.iter().all(|(name, _, _)| {
            self.scopes.get(name).is_some_and(|s| {
                s.holders.contains_key(jid)
                    && matches!(s.runs.get(jid), Some(o) if *o == mine || matches!(o, Owner::Handed(r) if r == run))
            })
        }) {
            self.lists.insert(jid.to_string(), scopes.to_vec());
            self.take_all(jid, mine, now);
            return 1;
        }
        if scopes.iter().any(|(name, _, _)| {
            self.scopes
                .get(name)
                .is_some_and(|s| s.waits.get(jid).is_some_and(|t| t.run == run))
        }) {
            return 2;
        }
        self.lists.insert(jid.to_string(), scopes.to_vec());
        let refusing = scopes
            .iter()
            .find(|scope| !self.has_room(scope, score, now))
            .cloned();
        match refusing {
            None => {
                self.take_all(jid, mine, now);
                0
            }
            Some(scope) => {
                self.park_on(&scope, jid, run, payload, score);
                2
            }
        }
    }

    /// A slot of `scope` came free: its parked jobs, oldest first, while it has room (at most
    /// HAND_OVER_BATCH): each moves to park on another of its scopes that refuses, or is handed a slot in all.
    /// The payloads handed over go to `queue`. Returns how many were handed over.
    pub fn hand_over(&mut self, scope: &str, now: u64) -> u64 {
        let mut handed = 0;
        for _ in 0..names::HAND_OVER_BATCH {
            let Some(s) = self.scopes.get_mut(scope) else {
                break;
            };
            s.reclaim(now);
            let Some((score, payload, jid)) = s.parked.first().cloned() else {
                break;
            };
            let list = self.lists.get(&jid).cloned().unwrap_or_default();
            let Some(here) = list.iter().find(|(name, _, _)| name == scope).cloned() else {
                break;
            };
            if s.holders.len() >= s.limit(here.1) as usize {
                break;
            }
            let run = s.waits.get(&jid).map(|t| t.run.clone()).unwrap_or_default();
            s.parked.remove(0);
            s.waits.remove(&jid);
            // The others are asked as if this job were not parked anywhere (it is the oldest where it goes).
            let refusing = list
                .iter()
                .filter(|(name, _, _)| name != scope)
                .find(|other| !self.has_room(other, score, now))
                .cloned();
            match refusing {
                Some(other) => self.park_on(&other, &jid, &run, &payload, score),
                None => {
                    self.take_all(&jid, Owner::Handed(run), now);
                    self.scopes.get_mut(scope).unwrap().queue.push(payload);
                    handed += 1;
                }
            }
        }
        handed
    }

    /// A run ends: its slot in every scope it owns is freed, and each freed scope hands over.
    pub fn release(&mut self, jid: &str, run: &str, now: u64) -> u64 {
        let Some(list) = self.lists.get(jid).cloned() else {
            return 0;
        };
        let mut freed = Vec::new();
        for (name, _, _) in &list {
            let s = self.scopes.entry(name.clone()).or_default();
            if s.runs.get(jid) == Some(&Owner::Run(run.to_string())) {
                s.holders.remove(jid);
                s.runs.remove(jid);
                freed.push(name.clone());
            }
        }
        if freed.len() == list.len() {
            self.lists.remove(jid);
        }
        freed.iter().map(|name| self.hand_over(name, now)).sum()
    }

    /// Every scope holds at most its limit, and a jid holds a slot in all of its scopes or in none.
    pub fn check(&self) -> Result<(), String> {
        for (name, s) in &self.scopes {
            if let Some((limit, _)) = s.meta {
                if s.holders.len() as u64 > s.limit(limit).max(limit) {
                    return Err(format!("{name} holds {} past its limit", s.holders.len()));
                }
            }
        }
        for (jid, list) in &self.lists {
            let held = list
                .iter()
                .filter(|(name, _, _)| {
                    self.scopes
                        .get(name)
                        .is_some_and(|s| s.holders.contains_key(jid))
                })
                .count();
            if held != 0 && held != list.len() {
                return Err(format!("{jid} holds {held} of its {} scopes", list.len()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod multi_tests {
    use super::*;

    fn scope(name: &str, limit: u64) -> (String, u64, u64) {
        (name.to_string(), limit, 60_000)
    }

    #[test]
    fn a_job_takes_every_scope_at_once_or_parks_holding_nothing() {
        let mut m = MultiSlots::default();
        let both = [scope("tenant:a", 2), scope("api", 1)];
        assert_eq!(m.acquire("j1", "r1", "p1", 1.0, &both, 0), 0);
        assert_eq!(m.acquire("j2", "r2", "p2", 2.0, &both, 0), 2);
        assert!(
            !m.scopes["tenant:a"].holders.contains_key("j2"),
            "no slot held while parked"
        );
        assert_eq!(
            m.scopes["api"].parked.len(),
            1,
            "parked on the scope that refused"
        );
        m.check().unwrap();
        assert_eq!(m.release("j1", "r1", 0), 1);
        assert_eq!(m.scopes["api"].queue, vec!["p2".to_string()]);
        assert!(
            m.scopes["tenant:a"].holders.contains_key("j2")
                && m.scopes["api"].holders.contains_key("j2")
        );
        m.check().unwrap();
    }

    #[test]
    fn a_job_handed_over_by_one_scope_moves_to_the_other_that_is_full() {
        let mut m = MultiSlots::default();
        let (a, b) = (scope("a", 1), scope("b", 1));
        assert_eq!(
            m.acquire("x", "rx", "px", 1.0, std::slice::from_ref(&a), 0),
            0
        );
        assert_eq!(
            m.acquire("y", "ry", "py", 2.0, std::slice::from_ref(&b), 0),
            0
        );
        assert_eq!(
            m.acquire("j", "rj", "pj", 3.0, &[a.clone(), b.clone()], 0),
            2
        );
        assert_eq!(m.scopes["a"].parked.len(), 1);
        assert_eq!(
            m.release("x", "rx", 0),
            0,
            "a is free, b is not: j moves to b"
        );
        assert_eq!(
            (m.scopes["a"].parked.len(), m.scopes["b"].parked.len()),
            (0, 1)
        );
        assert_eq!(m.release("y", "ry", 0), 1);
        assert!(m.scopes["a"].holders.contains_key("j") && m.scopes["b"].holders.contains_key("j"));
        m.check().unwrap();
    }

    #[test]
    fn two_classes_naming_two_scopes_in_opposite_orders_never_deadlock() {
        let mut m = MultiSlots::default();
        let (a, b) = (scope("a", 1), scope("b", 1));
        let mut running: Vec<(String, String)> = Vec::new();
        for i in 0..20u32 {
            let list = if i % 2 == 0 {
                vec![a.clone(), b.clone()]
            } else {
                vec![b.clone(), a.clone()]
            };
            let (jid, run) = (format!("j{i}"), format!("r{i}"));
            if m.acquire(&jid, &run, &format!("p{i}"), f64::from(i), &list, 0) == 0 {
                running.push((jid, run));
            }
            m.check().unwrap();
        }
        assert_eq!(running.len(), 1, "one runs at a time (both scopes at 1)");
        let mut done = 0;
        while let Some((jid, run)) = running.pop() {
            m.release(&jid, &run, 0);
            done += 1;
            m.check().unwrap();
            for (name, s) in &m.scopes {
                for j in s.holders.keys() {
                    if !running.iter().any(|(r, _)| r == j) && name == "a" {
                        let i: u32 = j[1..].parse().unwrap();
                        running.push((j.clone(), format!("r{i}")));
                    }
                }
            }
            // A handed-over job runs under its parked run: claim it as that run would (acquire again).
            for (jid, run) in running.clone() {
                let i: u32 = jid[1..].parse().unwrap();
                let list = m.lists[&jid].clone();
                assert_eq!(
                    m.acquire(&jid, &run, &format!("p{i}"), f64::from(i), &list, 0),
                    1
                );
            }
        }
        assert_eq!(done, 20, "every job ran");
    }
}
