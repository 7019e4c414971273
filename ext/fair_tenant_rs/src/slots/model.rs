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
            // A copy handed over for another run that parked it: that run's re-sent acquire takes nothing.
            if let Some(Owner::Handed(parker)) = &owner {
                if !parker.is_empty() && parker != ask.run {
                    self.gone.insert(parker.clone());
                }
            }
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

/// A scope of a job of several as its call names it (`lua/slots/several.lua`): the scope's name, the job's
/// default limit there and its lease (ms).
pub type Listed = (String, u64, u64);

/// Issue 32's rule on plain queues, as a model (docs/plans/issue-32.md) of `lua/slots/acquire_all.lua`,
/// `release_all.lua` (with and without a payload: release and forget), and the multi-scope branch of
/// `hand_over` (common.lua) as releases, `set_limit.lua` and `sweep.lua` run it: a job names several scopes,
/// each a [`PlainSlots`]; it starts only when every one has room (a free slot, no slot of its jid there, and no
/// older job parked there), taking a slot in each at once, or parks on the first scope that refuses, holding
/// nothing. A hand-over on a scope looks at its oldest parked job's other scopes: one refuses -> the job moves to
/// park there (its enqueue score kept); all have room -> it is handed a slot in every scope at once. Lost
/// replies as the scripts handle them: re-sent calls, runs given up (`gone` in the first scope), handed-over
/// copies taken back from the queue's tail or marked dropped, and the partial holds a reclaimed lease leaves.
#[derive(Debug, Default, Clone)]
pub struct MultiSlots {
    pub scopes: BTreeMap<String, PlainSlots>,
    /// Each scope's `OTHERS` hash: scope -> jid -> the scopes of the job parked there.
    pub others: BTreeMap<String, BTreeMap<String, Vec<Listed>>>,
    /// `queue:<name>` of every job (one queue), left to right (hand-overs push right; Sidekiq pops right).
    pub queue: Vec<String>,
    /// jid -> its scopes as its last acquire named them (for [`Self::check`]).
    pub lists: BTreeMap<String, Vec<Listed>>,
    /// Slots taken past the limit in force when they were taken.
    pub breaches: Vec<String>,
    /// How often each path of the scripts was taken (the lockstep asserts its sequences reach them).
    pub seen: BTreeMap<&'static str, u64>,
}

impl MultiSlots {
    fn saw(&mut self, path: &'static str) {
        *self.seen.entry(path).or_default() += 1;
    }

    pub fn scope(&mut self, name: &str) -> &mut PlainSlots {
        self.scopes.entry(name.to_string()).or_default()
    }

    /// `room_for` (common.lua): a free slot (expired leases dropped only when none is), no slot of the jid
    /// there already, and no older job parked there.
    fn room_for(&mut self, o: &Listed, jid: &str, score: f64, now: u64) -> bool {
        let s = self.scope(&o.0);
        let limit = s.limit(o.1) as usize;
        if s.holders.len() >= limit {
            let reclaimed = s.reclaim(now);
            let full = s.holders.len() >= limit;
            if reclaimed > 0 {
                self.saw("room_for reclaimed");
            }
            if full {
                self.saw("room_for: full");
                return false;
            }
        }
        let s = self.scope(&o.0);
        if s.holders.contains_key(jid) {
            self.saw("room_for: the jid holds a slot there");
            return false;
        }
        let room = s.parked.first().is_none_or(|(older, _, _)| score < *older);
        if !room {
            self.saw("room_for: an older job parked");
        }
        room
    }

    /// A slot taken in `o` (ZADD holders, HSET runs), noting a breach of the limit in force.
    fn take(&mut self, o: &Listed, jid: &str, until: u64, owner: Owner) {
        let s = self.scope(&o.0);
        s.holders.insert(jid.to_string(), until);
        s.runs.insert(jid.to_string(), owner);
        let (held, limit) = (s.holders.len() as u64, s.limit(o.1));
        if held > limit {
            self.breaches.push(format!(
                "{jid} took a slot of {} past its limit {limit}",
                o.0
            ));
        }
    }

    /// `park_in` (common.lua): the payload parked on `o` with the job's terms there and its list of scopes.
    #[allow(clippy::too_many_arguments)]
    fn park_in(
        &mut self,
        o: &Listed,
        jid: &str,
        run: &str,
        payload: &str,
        score: f64,
        list: &[Listed],
    ) {
        let ask = Ask {
            jid,
            run,
            limit: o.1,
            lease: o.2,
            payload,
            score,
        };
        self.scope(&o.0).park(&ask);
        self.others
            .entry(o.0.clone())
            .or_default()
            .insert(jid.to_string(), list.to_vec());
    }

    fn take_back(&mut self, payload: &str) -> bool {
        let tail = self.queue.len().saturating_sub(names::FORGET_TAIL as usize);
        match self.queue[tail..].iter().rposition(|p| p == payload) {
            Some(at) => {
                self.queue.remove(tail + at);
                self.saw("taken back");
                true
            }
            None => false,
        }
    }

    /// `hand_over` (common.lua) on scope `name`; `fallback`: the (limit, lease) of a parked job without terms.
    /// Returns (handed, more).
    pub fn hand_over(&mut self, name: &str, fallback: (u64, u64), now: u64) -> (u64, u64) {
        self.scope(name).reclaim(now);
        let mut running = self.scope(name).holders.len() as u64;
        let (mut handed, mut moved, mut bytes) = (0u64, 0u64, 0u64);
        loop {
            let s = self.scope(name);
            let Some((score, payload, jid)) = s.parked.first().cloned() else {
                return (handed, 0);
            };
            if handed + moved >= names::HAND_OVER_BATCH || bytes >= names::HAND_OVER_BYTES {
                return (handed, 1);
            }
            bytes += payload.len() as u64;
            let (run, limit, lease) = match s.waits.get(&jid) {
                Some(t) => (t.run.clone(), t.limit, t.lease),
                None => (String::new(), fallback.0, fallback.1),
            };
            if running >= s.limit(limit) || s.holders.contains_key(&jid) {
                return (handed, 0);
            }
            let list = self.others.get(name).and_then(|o| o.get(&jid)).cloned();
            let (mut others, mut refusing) = (Vec::new(), None);
            for o in list.iter().flatten() {
                if o.0 != name {
                    others.push(o.clone());
                    if refusing.is_none() && !self.room_for(o, &jid, score, now) {
                        refusing = Some(o.clone());
                    }
                }
            }
            let s = self.scope(name);
            s.parked.remove(0);
            s.waits.remove(&jid);
            if list.is_some() {
                self.others
                    .entry(name.to_string())
                    .or_default()
                    .remove(&jid);
            }
            match refusing {
                Some(o) => {
                    let list = list.unwrap_or_default();
                    self.park_in(&o, &jid, &run, &payload, score, &list);
                    self.saw("hand_over: moved");
                    moved += 1;
                }
                None => {
                    let here = (name.to_string(), limit, lease);
                    self.take(&here, &jid, now + lease, Owner::Handed(run.clone()));
                    for o in &others {
                        self.take(o, &jid, now + o.2, Owner::Handed(run.clone()));
                    }
                    self.queue.push(payload);
                    self.saw("hand_over: handed");
                    running += 1;
                    handed += 1;
                }
            }
        }
    }

    /// `free_as` (several.lua): the jid's slot of `s` freed when `owner` holds it (give_back.lua without a
    /// payload), then handed over when jobs are parked there. Returns (handed, more).
    fn free_as(&mut self, s: &Listed, jid: &str, owner: &Owner, now: u64) -> (u64, u64) {
        let sc = self.scope(&s.0);
        if sc.runs.get(jid) != Some(owner) {
            return (0, 0);
        }
        let freed = sc.holders.remove(jid).is_some();
        sc.runs.remove(jid);
        if !freed || sc.parked.is_empty() {
            return (0, 0);
        }
        self.hand_over(&s.0, (s.1, s.2), now)
    }

    /// `acquire_all.lua`: 0 acquired (a slot in every scope), 1 held (this run's, or handed over), 2 parked (on the
    /// first scope that refuses), 3 dropped (a run given up, or a copy of a job that ran already).
    pub fn acquire(
        &mut self,
        jid: &str,
        run: &str,
        payload: &str,
        score: f64,
        scopes: &[Listed],
        now: u64,
    ) -> i64 {
        self.lists.insert(jid.to_string(), scopes.to_vec());
        if self.scope(&scopes[0].0).gone.contains(run) {
            self.saw("acquire: gone");
            return 3;
        }
        let owners: Vec<Option<Owner>> = scopes
            .iter()
            .map(|s| self.scope(&s.0).runs.get(jid).cloned())
            .collect();
        let held: Vec<bool> = scopes
            .iter()
            .map(|s| self.scope(&s.0).holders.contains_key(jid))
            .collect();
        let claimable = |o: &Option<Owner>| match o {
            None | Some(Owner::Handed(_)) => true,
            Some(Owner::Run(r)) => r == run,
            Some(Owner::Dropped) => false,
        };
        let n = scopes.len();
        if (0..n).any(|i| held[i] && owners[i] == Some(Owner::Dropped)) {
            self.saw("acquire: dropped copy");
            for i in 0..n {
                if held[i] && owners[i] == Some(Owner::Dropped) {
                    self.free_as(&scopes[i], jid, &Owner::Dropped, now);
                }
            }
            return 3;
        }
        if (0..n).all(|i| held[i] && claimable(&owners[i])) {
            if owners.contains(&Some(Owner::Handed(run.to_string()))) {
                self.saw("acquire: re-sent after its copy was handed over");
                self.take_back(payload);
            } else if owners.contains(&Some(Owner::Run(run.to_string()))) {
                self.saw("acquire: re-sent while held");
            } else {
                self.saw("acquire: a fetched copy claims");
            }
            // A copy handed over for another run that parked it: that run's re-sent acquire takes nothing.
            let parker = owners.iter().find_map(|o| match o {
                Some(Owner::Handed(r)) if !r.is_empty() && r != run => Some(r.clone()),
                _ => None,
            });
            if let Some(parker) = parker {
                self.scope(&scopes[0].0).gone.insert(parker);
            }
            for s in scopes {
                let sc = self.scope(&s.0);
                sc.holders.insert(jid.to_string(), now + s.2);
                sc.runs.insert(jid.to_string(), Owner::Run(run.to_string()));
            }
            return 1;
        }
        if scopes.iter().any(|s| {
            self.scope(&s.0)
                .waits
                .get(jid)
                .is_some_and(|t| t.run == run)
        }) {
            self.saw("acquire: re-sent while parked");
            return 2;
        }
        // Partial holds (a lease reclaimed since a hand-over): given back (handed over if the job parks).
        let mut freed = Vec::new();
        for i in 0..n {
            let sc = self.scope(&scopes[i].0);
            if held[i] && claimable(&owners[i]) {
                sc.holders.remove(jid);
                sc.runs.remove(jid);
                freed.push(scopes[i].clone());
                self.saw("acquire: partial hold given back");
            } else if !held[i] && owners[i].is_some() {
                sc.runs.remove(jid);
            }
        }
        let mut refusing = None;
        for s in scopes {
            if !self.room_for(s, jid, score, now) {
                refusing = Some(s.clone());
                break;
            }
        }
        match refusing {
            None => {
                for s in scopes {
                    self.take(s, jid, now + s.2, Owner::Run(run.to_string()));
                }
                self.saw("acquire: acquired");
                0
            }
            Some(o) => {
                self.park_in(&o, jid, run, payload, score, scopes);
                self.saw(if o == scopes[0] {
                    "acquire: parked on its first scope"
                } else {
                    "acquire: parked on a later scope"
                });
                self.hand_over(&o.0, (o.1, o.2), now);
                for f in freed.iter().filter(|f| f.0 != o.0) {
                    self.hand_over(&f.0, (f.1, f.2), now);
                }
                2
            }
        }
    }

    /// `release_all.lua`: the run's slots freed (each freed scope hands over), or, with `forget` (the payload; its
    /// queue is [`Self::queue`]), what a run whose acquire_all reply was lost may have taken given back. Returns
    /// (handed, more).
    pub fn release(
        &mut self,
        jid: &str,
        run: &str,
        forget: Option<&str>,
        scopes: &[Listed],
        now: u64,
    ) -> (u64, u64) {
        let owners: Vec<Option<Owner>> = scopes
            .iter()
            .map(|s| self.scope(&s.0).runs.get(jid).cloned())
            .collect();
        let mine = Some(Owner::Run(run.to_string()));
        let copy = Owner::Handed(run.to_string());
        let (mut handed, mut more) = (0, 0);
        match forget {
            Some(payload) if !owners.contains(&mine) => {
                if owners.contains(&Some(copy.clone())) {
                    let back = self.take_back(payload);
                    for (s, owner) in scopes.iter().zip(&owners) {
                        if *owner == Some(copy.clone()) {
                            if back {
                                let (n, left) = self.free_as(s, jid, &copy, now);
                                (handed, more) = (handed + n, more.max(left));
                            } else {
                                self.scope(&s.0)
                                    .runs
                                    .insert(jid.to_string(), Owner::Dropped);
                                self.saw("forget: copy marked dropped");
                            }
                        }
                    }
                } else {
                    let mut parked = false;
                    for s in scopes {
                        let sc = self.scope(&s.0);
                        if sc.waits.get(jid).is_some_and(|t| t.run == run) {
                            sc.parked.retain(|(_, p, _)| p != payload);
                            sc.waits.remove(jid);
                            self.others.entry(s.0.clone()).or_default().remove(jid);
                            self.saw("forget: parked copy taken back");
                            parked = true;
                        }
                    }
                    if !parked {
                        self.scope(&scopes[0].0).gone.insert(run.to_string());
                        self.saw("forget: gone");
                    }
                }
            }
            _ => {
                if forget.is_some() && owners.contains(&mine) {
                    self.saw("forget: slots of a run that acquired freed");
                }
                for (s, owner) in scopes.iter().zip(&owners) {
                    if *owner == mine {
                        let (n, left) = self.free_as(s, jid, &Owner::Run(run.to_string()), now);
                        (handed, more) = (handed + n, more.max(left));
                    }
                }
            }
        }
        (handed, more)
    }

    /// `set_limit.lua` for the tag-wide field of scope `name`'s tag (None: deleted). Returns (handed, more).
    pub fn set_limit(&mut self, name: &str, value: Option<u64>, now: u64) -> (u64, u64) {
        let s = self.scope(name);
        s.limit_override = value;
        match s.meta {
            Some(fallback) => self.hand_over(name, fallback, now),
            None => (0, 0),
        }
    }

    /// `sweep.lua` for scope `name`'s tag: (handed, reclaimed, more).
    pub fn sweep(&mut self, name: &str, now: u64) -> (u64, u64, u64) {
        let Some(fallback) = self.scope(name).meta else {
            return (0, 0, 0);
        };
        let reclaimed = self.scope(name).reclaim(now);
        let (handed, more) = self.hand_over(name, fallback, now);
        let s = self.scope(name);
        if s.holders.is_empty() && s.parked.is_empty() {
            s.meta = None;
        }
        (handed, reclaimed, more)
    }

    /// The rule's invariants at `now`: no slot was taken past the limit in force; a jid holds a live slot (lease
    /// not over) in all of its scopes or in none; a run that parked a job holds no slot of it; and each scope's
    /// parked jobs, their terms and their lists of scopes name the same jids.
    pub fn check(&self, now: u64) -> Result<(), String> {
        if let Some(breach) = self.breaches.first() {
            return Err(breach.clone());
        }
        for (jid, list) in &self.lists {
            let live = list
                .iter()
                .filter(|(name, _, _)| {
                    self.scopes
                        .get(name)
                        .and_then(|s| s.holders.get(jid))
                        .is_some_and(|&until| until > now)
                })
                .count();
            if live != 0 && live != list.len() {
                return Err(format!("{jid} holds {live} of its {} scopes", list.len()));
            }
            for (parked_on, _, _) in list {
                let Some(t) = self.scopes.get(parked_on).and_then(|s| s.waits.get(jid)) else {
                    continue;
                };
                let parker = [Owner::Run(t.run.clone()), Owner::Handed(t.run.clone())];
                for (name, _, _) in list {
                    let Some(s) = self.scopes.get(name) else {
                        continue;
                    };
                    if s.holders.contains_key(jid)
                        && s.runs.get(jid).is_some_and(|o| parker.contains(o))
                    {
                        return Err(format!(
                            "{jid} parked on {parked_on} by {} holds a slot of {name}",
                            t.run
                        ));
                    }
                }
            }
        }
        for (name, s) in &self.scopes {
            let parked: BTreeSet<&String> = s.parked.iter().map(|(_, _, j)| j).collect();
            let waits: BTreeSet<&String> = s.waits.keys().collect();
            let others: BTreeSet<&String> = self
                .others
                .get(name)
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            if parked != waits || parked != others {
                return Err(format!(
                    "{name}: parked {parked:?}, terms {waits:?}, lists {others:?}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod multi_tests {
    use super::*;

    fn scope(name: &str, limit: u64) -> Listed {
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
        m.check(0).unwrap();
        assert_eq!(m.release("j1", "r1", None, &both, 0), (1, 0));
        assert_eq!(m.queue, vec!["p2".to_string()]);
        assert!(
            m.scopes["tenant:a"].holders.contains_key("j2")
                && m.scopes["api"].holders.contains_key("j2")
        );
        m.check(0).unwrap();
    }

    #[test]
    fn a_job_handed_over_by_one_scope_moves_to_the_other_that_is_full() {
        let mut m = MultiSlots::default();
        let (a, b) = (scope("a", 1), scope("b", 1));
        let (only_a, only_b) = (std::slice::from_ref(&a), std::slice::from_ref(&b));
        assert_eq!(m.acquire("x", "rx", "px", 1.0, only_a, 0), 0);
        assert_eq!(m.acquire("y", "ry", "py", 2.0, only_b, 0), 0);
        let both = [a.clone(), b.clone()];
        assert_eq!(m.acquire("j", "rj", "pj", 3.0, &both, 0), 2);
        assert_eq!(m.scopes["a"].parked.len(), 1);
        assert_eq!(
            m.release("x", "rx", None, only_a, 0),
            (0, 0),
            "a is free, b is not: j moves to b"
        );
        assert_eq!(
            (m.scopes["a"].parked.len(), m.scopes["b"].parked.len()),
            (0, 1)
        );
        assert_eq!(m.release("y", "ry", None, only_b, 0), (1, 0));
        assert!(m.scopes["a"].holders.contains_key("j") && m.scopes["b"].holders.contains_key("j"));
        m.check(0).unwrap();
    }

    #[test]
    fn two_classes_naming_two_scopes_in_opposite_orders_never_deadlock() {
        let mut m = MultiSlots::default();
        let (a, b) = (scope("a", 1), scope("b", 1));
        let list = |i: u32| {
            if i.is_multiple_of(2) {
                vec![a.clone(), b.clone()]
            } else {
                vec![b.clone(), a.clone()]
            }
        };
        let mut running: Vec<u32> = Vec::new();
        for i in 0..20u32 {
            let (jid, run) = (format!("j{i}"), format!("r{i}"));
            if m.acquire(&jid, &run, &format!("p{i}"), f64::from(i), &list(i), 0) == 0 {
                running.push(i);
            }
            m.check(0).unwrap();
        }
        assert_eq!(running, vec![0], "one runs at a time (both scopes at 1)");
        let mut done = 0;
        while let Some(i) = running.pop() {
            m.release(&format!("j{i}"), &format!("r{i}"), None, &list(i), 0);
            done += 1;
            m.check(0).unwrap();
            // A handed-over copy is fetched and claimed by its parked run (held).
            while let Some(payload) = m.queue.pop() {
                let i: u32 = payload[1..].parse().unwrap();
                let code = m.acquire(
                    &format!("j{i}"),
                    &format!("r{i}"),
                    &payload,
                    f64::from(i),
                    &list(i),
                    0,
                );
                assert_eq!(code, 1);
                running.push(i);
            }
        }
        assert_eq!(done, 20, "every job ran");
    }
}
