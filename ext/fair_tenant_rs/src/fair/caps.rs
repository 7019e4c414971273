//! Concurrency caps inside fair queues: the rule of `lua/fair/serve.lua` as a plain model on top of
//! [`Sfq`], run side by side with the scripts by the lockstep test (`fair/lockstep.rs`).
//!
//! A job may carry a slot: a scope (a tenant's jobs in a queue, or a key several tenants may share),
//! a limit (the job's own; a runtime limit set with [`CappedSfq::set_limit`] beats it) and whether the
//! cap is elastic.
//! - a served job takes its slot (it joins the scope's holders); [`CappedSfq::finish`] gives it back,
//!   as does [`CappedSfq::requeue`], which puts the job back in front of its tenant's backlog;
//! - the ready tenant with the smallest start tag is served, as in [`Sfq`]; a tenant whose head job
//!   cannot take its slot leaves the rotation with its start tag, the job back at the front (FIFO), and
//!   waits on the scope: in `capped` under a static cap or a limit of 0 (a wall, even with idle threads),
//!   in `over` under an elastic cap above 0;
//! - while no tenant is ready, `over` tenants are served in the same fair order, past their limit
//!   (work-conserving): a tenant with a new job, or back under its limit, comes first. One served from
//!   `over` starts at max(its tag, V): its tag stayed behind while ready tenants moved V on, and V never
//!   goes backwards;
//! - a tenant served up to its limit whose next job has the same scope leaves at once, at its next start
//!   tag; one whose next job has another, full scope finds out when it is next at the head;
//! - a tenant waits on one scope at a time, its head job's: its waiting entry goes when it leaves where it
//!   waits (woken, served from `over` into `ready`, its backlog emptied, paused, moved between `over` and
//!   `capped`), so a release of that scope never wakes it once it waits elsewhere;
//! - a release or a raised limit wakes the scope's waiting tenants, smallest start tag first (ties: those
//!   in `capped`, then activation, as the Lua's "c"/"o" entries sort), one per free slot, into `ready` at
//!   start tag max(theirs, V): a wait banks no credit; an elastic tenant leaves `over` the same way once
//!   under its limit;
//! - a paused tenant (weight 0) met at the head leaves the rotation and passes the wake on: the next
//!   tenant waiting on its head job's scope is woken, so a slot it was woken for is not left unused;
//! - a job requeued in front of a held-back tenant brings the tenant back into `ready` (max(tag, V)): the
//!   job now at its head may need no slot, or another one;
//! - a running job is never interrupted: a lowered limit holds back only jobs not yet served;
//! - a copy of a job that holds its slot (the same id, pushed again) is not served while it does: its
//!   tenant waits on the scope in `capped` (whatever the cap) until a release or a raised limit wakes
//!   it, and is held back again if the job still holds its slot then.
//!
//! The fetch script serves a tenant woken by the acknowledgements riding with it straight from where it
//! waited when its turn comes first; it must decide as [`CappedSfq::finish`] for each, then
//! [`CappedSfq::pop`], decide here. Leases are time and left out (in Redis an expired holder is dropped when it stands
//! in the way, and the sweep wakes waiters as a release does), as are draining (which ignores caps) and
//! the Lua's bound of 100 hold-backs per fetch.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::fair::rate::{RateState, Window};
use crate::fair::{Place, Sfq, Tag};

/// The concurrency slot a job takes when it is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub scope: String,
    pub limit: usize,
    pub elastic: bool,
}

impl Slot {
    /// A static cap: never more than `limit` running.
    pub fn fixed(scope: &str, limit: usize) -> Slot {
        Slot {
            scope: scope.to_string(),
            limit,
            elastic: false,
        }
    }

    /// An elastic cap: past `limit` only while no tenant under its limit waits (0 still halts).
    pub fn elastic(scope: &str, limit: usize) -> Slot {
        Slot {
            elastic: true,
            ..Slot::fixed(scope, limit)
        }
    }
}

/// Where a backlogged tenant is. The order of `Capped` before `Over` is that of the Lua's waiting entries
/// ("c…" before "o…" at an equal start tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Tier {
    Ready,
    Capped,
    Over,
}

/// A waiting entry: start tag, where the tenant waits (`Capped` or `Over`), its activation.
pub(crate) type Wait = (Tag, Tier, u64);

/// [`Sfq`] with concurrency caps: what `lua/fair/serve.lua` does, without Redis or time.
#[derive(Debug, Default)]
pub struct CappedSfq {
    pub(crate) sfq: Sfq,
    /// Tenants out of the rotation behind a static cap (or a limit of 0), in their place.
    pub(crate) capped: BTreeMap<Place, String>,
    /// Tenants at or past an elastic cap, served only while `ready` is empty.
    pub(crate) over: BTreeMap<Place, String>,
    /// Per job, the scopes it takes when served, its first first (all or none: `take_slots`).
    slots: HashMap<u64, Vec<Slot>>,
    pub(crate) holders: HashMap<String, BTreeSet<u64>>,
    /// Per scope, the tenants waiting on it.
    pub(crate) waiting: HashMap<String, BTreeMap<Wait, String>>,
    /// Per tenant in `capped` or `over`: the scope it waits on and its entry there.
    waits: HashMap<String, (String, Wait)>,
    /// Jobs served and not yet finished or requeued, their tenants, and how many copies of each (a job
    /// pushed twice: a stalled process may take a copy back while another runs).
    inflight: HashMap<u64, (String, usize)>,
    /// Under `time`: per job in flight, its tenant's activation when served and its charge (ms).
    charges: HashMap<u64, (u64, f64)>,
    limits: HashMap<String, usize>,
    /// Per scope, the limit carried by the job that registered it last (its first holder, or a waiter
    /// while it had none, the first waiter held back on it, or the highest of the copies a take-back found it without holders for: the Lua's
    /// sweep registration): what a deleted runtime limit wakes by.
    registered: HashMap<String, usize>,
    /// Scopes of one tag (a tenant's queues, or a key), and limits set for a whole tag (`*`).
    tags: HashMap<String, String>,
    tag_limits: HashMap<String, usize>,
    /// Rate caps: per job its scope and windows; per scope its windows' state; the time (ms).
    rates: HashMap<u64, Vec<(String, Vec<Window>)>>,
    rate_states: HashMap<String, RateState>,
    clock: u64,
    /// Tenants out of the rotation until a rate window lets their head job start: the instant, their place.
    pub(crate) rated: HashMap<String, (u64, Place)>,
    /// The scopes pass_others woke in this call.
    passed: std::collections::HashSet<String>,
}

impl CappedSfq {
    pub fn new() -> CappedSfq {
        CappedSfq::default()
    }

    /// A queue fair by worker time (`lua/fair/time.lua`).
    pub fn by_time() -> CappedSfq {
        CappedSfq {
            sfq: Sfq::by_time(),
            ..CappedSfq::default()
        }
    }

    /// The charge (ms) of a job in flight of a queue fair by worker time.
    pub fn charge_of(&self, job: u64) -> Option<f64> {
        self.charges.get(&job).map(|c| c.1)
    }

    /// A tenant's weight; 0 pauses it (met at the head, it leaves the rotation), above 0 resumes it.
    pub fn set_weight(&mut self, tenant: &str, weight: f64) {
        self.sfq.set_weight(tenant, weight);
    }

    /// A job (an id, unique) to the back of the tenant's backlog, with the slot it takes, if any.
    pub fn push(&mut self, tenant: &str, job: u64, slot: Option<Slot>) {
        self.push_scopes(tenant, job, slot.into_iter().collect());
    }

    /// A job with several scopes (`fair_tenant_concurrency: [...]`): served only when every one has room,
    /// taking them all at once. A scope named again is one scope; at most
    /// [`crate::names::MAX_CONCURRENCY_SCOPES`] are kept (the scripts' `slot_of`).
    pub fn push_scopes(&mut self, tenant: &str, job: u64, scopes: Vec<Slot>) {
        let mut kept: Vec<Slot> = Vec::new();
        for slot in scopes {
            if kept.len() < crate::names::MAX_CONCURRENCY_SCOPES as usize
                && !kept.iter().any(|k| k.scope == slot.scope)
            {
                kept.push(slot);
            }
        }
        if !kept.is_empty() {
            self.slots.insert(job, kept);
        }
        self.sfq.push(tenant, job);
    }

    /// The next job in fair order and its tenant; the job holds its slot until [`CappedSfq::finish`] or
    /// [`CappedSfq::requeue`].
    pub fn pop(&mut self) -> Option<(String, u64)> {
        self.rate_wake();
        loop {
            let (tier, (&at, tenant)) = match self.sfq.ready.first_key_value() {
                Some(top) => (Tier::Ready, top),
                None => (Tier::Over, self.over.first_key_value()?),
            };
            let tenant = tenant.clone();
            let start = match tier {
                Tier::Ready => at.0 .0,
                _ => at.0 .0.max(self.sfq.v),
            };
            if let Some(job) = self.turn(tier, at, &tenant, start) {
                if let Some(charged) = self.sfq.charged {
                    self.charges.insert(job, (at.1, charged));
                }
                self.in_flight(job, &tenant);
                return Some((tenant, job));
            }
        }
    }

    /// A served job is done (acknowledged): its slot is given back and waiting tenants are woken.
    /// Idempotent.
    pub fn finish(&mut self, job: u64) {
        self.finish_timed(job, None);
    }

    /// A served job is done after running `ran` ms (under `time`: its charge is corrected first, so a
    /// tenant its release wakes has its tag), then as [`CappedSfq::finish`].
    pub fn finish_timed(&mut self, job: u64, ran: Option<f64>) {
        let Some(tenant) = self.inflight_tenant(job).map(str::to_string) else {
            return;
        };
        if let (Some(&(seq, charged)), Some(ran)) = (self.charges.get(&job), ran) {
            self.charge_back(&tenant, seq, charged, ran);
        }
        self.out_of_flight(job);
        if !self.inflight.contains_key(&job) {
            self.charges.remove(&job);
        }
        self.release(job);
    }

    /// One more copy of the job in flight.
    fn in_flight(&mut self, job: u64, tenant: &str) {
        let entry = (self.inflight.entry(job)).or_insert_with(|| (tenant.to_string(), 0));
        entry.1 += 1;
    }

    /// One copy of the job out of flight. Returns its tenant.
    fn out_of_flight(&mut self, job: u64) -> Option<String> {
        let entry = self.inflight.get_mut(&job)?;
        entry.1 -= 1;
        let tenant = entry.0.clone();
        if entry.1 == 0 {
            self.inflight.remove(&job);
        }
        Some(tenant)
    }

    /// Jobs acknowledged together by a fetch (`lua/fair/fetch.lua`): every charge is corrected (by each
    /// run time, under `time`) before any slot is released, then each as [`CappedSfq::finish`].
    pub fn finish_together(&mut self, done: &[(u64, Option<f64>)]) {
        for &(job, ran) in done {
            let tenant = self.inflight_tenant(job).map(str::to_string);
            if let (Some(tenant), Some(ran)) = (tenant, ran) {
                if let Some(&(seq, charged)) = self.charges.get(&job) {
                    self.charge_back(&tenant, seq, charged, ran);
                }
            }
        }
        for &(job, _) in done {
            self.finish(job);
        }
    }

    /// The correction of a charge (`lua/fair/serve.lua`'s charge_back): the means learn the run time; the
    /// tenant's tag, where it is under the activation it was served at (ready, over or capped, with its
    /// waiting entry; rated; or its finish tag when idle), moves by (ran - charged) / 1000 / weight, never below V
    /// by a refund. Met nowhere (paused, back from idle under a new activation, pruned), nothing moves.
    fn charge_back(&mut self, tenant: &str, seq: u64, charged: f64, ran: f64) {
        let Some(delta) = self.sfq.charge_back(tenant, seq, charged, ran) else {
            return;
        };
        for tier in [Tier::Over, Tier::Capped] {
            let found = (self.tier(tier).iter())
                .find(|(at, t)| at.1 == seq && t.as_str() == tenant)
                .map(|(&at, _)| at);
            let Some(at) = found else { continue };
            let new = Tag(self.sfq.moved(at.0 .0, delta));
            self.tier(tier).remove(&at);
            self.tier(tier).insert((new, seq), tenant.to_string());
            if let Some((scope, (tag, to, s))) = self.waits.get(tenant).cloned() {
                if let Some(waiting) = self.waiting.get_mut(&scope) {
                    if waiting.remove(&(tag, to, s)).is_some() {
                        waiting.insert((new, to, s), tenant.to_string());
                        self.waits.insert(tenant.to_string(), (scope, (new, to, s)));
                    }
                }
            }
            return;
        }
        if let Some((_, (tag, _))) = self.rated.get_mut(tenant).filter(|r| r.1 .1 == seq) {
            *tag = Tag(self.sfq.moved(tag.0, delta));
        }
    }

    /// A served job back to the front of its tenant's backlog (requeued, or recovered from a dead
    /// process): its slot is given back, and a tenant held back on its former head job's scope rejoins
    /// `ready`. Idempotent.
    pub fn requeue(&mut self, job: u64) {
        let Some(tenant) = self.out_of_flight(job) else {
            return;
        };
        self.release(job);
        if !self.sfq.push_front(&tenant, job) {
            if let Some((_, (tag, tier, seq))) = self.forget(&tenant) {
                self.tier(tier).remove(&(tag, seq));
                self.rejoin(tenant, tag, seq);
            }
        }
    }

    /// A waiting job deleted (through Sidekiq's API; `lua/fair/delete.lua`). A tenant held back on its
    /// head job's scope whose head job goes rejoins `ready` at max(tag, V) (the job now at its head may need
    /// no slot, or another one); one whose backlog empties leaves wherever it was, its waiting entry too,
    /// as [`Sfq::delete`]. Returns whether the job was waiting.
    pub fn delete(&mut self, job: u64) -> bool {
        let found = self.sfq.backlog.iter().find(|(_, l)| l.contains(&job));
        let Some((tenant, list)) = found.map(|(t, l)| (t.clone(), l)) else {
            return false;
        };
        let (head, last) = (list.front() == Some(&job), list.len() == 1);
        if head {
            if let Some((_, (tag, tier, seq))) = self.forget(&tenant) {
                self.tier(tier).remove(&(tag, seq));
                if last {
                    self.sfq.left_at(&tenant, tag.0);
                } else {
                    self.rejoin(tenant.clone(), tag, seq);
                }
            } else if last {
                if let Some((_, (tag, _))) = self.rated.remove(&tenant) {
                    self.sfq.left_at(&tenant, tag.0);
                }
            }
        }
        let deleted = self.sfq.delete(&tenant, job);
        let copies = self.sfq.backlog.values().any(|l| l.contains(&job));
        if !copies && !self.inflight.contains_key(&job) {
            self.slots.remove(&job);
        }
        deleted
    }

    /// The job is held to a rate cap: its scope and windows.
    pub fn set_rate(&mut self, job: u64, scope: &str, windows: Vec<Window>) {
        self.rates.insert(job, vec![(scope.to_string(), windows)]);
    }

    /// One more rate scope for the job (windows with their own `key:`): it starts only when every scope allows
    /// it. A scope named again is passed over; at most [`crate::names::MAX_CONCURRENCY_SCOPES`] are kept (the
    /// scripts' `rate_of`).
    pub fn add_rate(&mut self, job: u64, scope: &str, windows: Vec<Window>) {
        let scopes = self.rates.entry(job).or_default();
        if scopes.len() < crate::names::MAX_CONCURRENCY_SCOPES as usize
            && !scopes.iter().any(|(s, _)| s == scope)
        {
            scopes.push((scope.to_string(), windows));
        }
    }

    /// The time (ms; Redis's clock in the scripts).
    pub fn set_clock(&mut self, now: u64) {
        self.clock = now;
    }

    /// Tenants waiting for a rate window: (tenant, start tag, activation, instant), first instant first.
    pub fn rated(&self) -> Vec<(String, f64, u64, u64)> {
        let mut out: Vec<_> = (self.rated.iter())
            .map(|(t, (due, (tag, seq)))| (t.clone(), tag.0, *seq, *due))
            .collect();
        out.sort_by_key(|a| (a.3, a.2));
        out
    }

    /// How long (ms, at least 1) until the first rate-capped tenant may start, if one waits.
    pub fn rate_next(&self) -> Option<u64> {
        let due = self.rated.values().map(|(d, _)| *d).min()?;
        Some(due.saturating_sub(self.clock).max(1))
    }

    /// Rate-capped tenants whose instant came rejoin `ready` at max(tag, V), RATE_WAKE_BATCH at most, by
    /// instant then member (activation, then tenant), as the Lua's sorted set orders them.
    fn rate_wake(&mut self) {
        let mut due: Vec<(u64, String)> = (self.rated.iter())
            .filter(|(_, (d, _))| *d <= self.clock)
            .map(|(t, (d, (_, seq)))| (*d, format!("{seq:016x}{t}")))
            .collect();
        due.sort();
        for (_, member) in due.into_iter().take(crate::names::RATE_WAKE_BATCH as usize) {
            let tenant = member[16..].to_string();
            let (_, (tag, seq)) = self.rated.remove(&tenant).expect("due");
            self.rejoin(tenant, tag, seq);
        }
    }

    /// A runtime limit for a scope (beats the jobs' own); raising it wakes waiting tenants.
    pub fn set_limit(&mut self, scope: &str, limit: usize) {
        self.limits.insert(scope.to_string(), limit);
        self.wake(scope, limit);
    }

    /// The scope's runtime limit deleted: its jobs' own applies again. Waiting tenants are woken by the
    /// limit of the job that registered the scope (jobs sharing a key may carry different limits: a
    /// tenant woken for a slot its own job's lower limit denies is held back again at its turn).
    pub fn clear_limit(&mut self, scope: &str) {
        self.limits.remove(scope);
        if let Some(limit) = self.scope_limit(scope) {
            self.wake(scope, limit);
        }
    }

    /// The scope belongs to `tag`: a limit set for the whole tag applies to it (its own beats it).
    pub fn set_tag(&mut self, scope: &str, tag: &str) {
        self.tags.insert(scope.to_string(), tag.to_string());
    }

    /// A runtime limit for every scope of a tag (`None`: deleted), applied to each at once.
    pub fn set_tag_limit(&mut self, tag: &str, limit: Option<usize>) {
        match limit {
            Some(l) => self.tag_limits.insert(tag.to_string(), l),
            None => self.tag_limits.remove(tag),
        };
        let mut scopes: Vec<String> = self.registered.keys().cloned().collect();
        scopes.retain(|s| self.tags.get(s).is_some_and(|t| t == tag));
        for scope in scopes {
            if let Some(limit) = self.scope_limit(&scope) {
                self.wake(&scope, limit);
            }
        }
    }

    /// A registered scope's limit: its runtime limit, its tag's, or the registered job's.
    fn scope_limit(&self, scope: &str) -> Option<usize> {
        let tag_limit = self.tags.get(scope).and_then(|t| self.tag_limits.get(t));
        let runtime = self.limits.get(scope).or(tag_limit);
        runtime.or(self.registered.get(scope)).copied()
    }

    /// Waiting jobs taken back in flight by the process a recovery took them from (it had only stalled,
    /// and is still running them), all in one call: each out of its tenant's backlog as
    /// [`CappedSfq::delete`], in flight again, holding its slot again whatever the scope's count (it runs).
    /// A scope they found without holders is registered with the highest limit its copies carry, whatever
    /// their order (the Lua takes them in a hash's order). Returns those that were still waiting, in order.
    pub fn reclaim(&mut self, jobs: &[u64]) -> Vec<u64> {
        // Per scope met: the highest limit of its copies, or None when it had holders already.
        let mut fresh: HashMap<String, Option<usize>> = HashMap::new();
        let mut back = Vec::new();
        for &job in jobs {
            let Some(tenant) = (self.sfq.backlog.iter())
                .find(|(_, l)| l.contains(&job))
                .map(|(t, _)| t.clone())
            else {
                continue;
            };
            let slots = self.slots.get(&job).cloned();
            self.delete(job);
            if let Some(slots) = slots {
                for slot in &slots {
                    let holders = self.holders.entry(slot.scope.clone()).or_default();
                    let limit = fresh
                        .entry(slot.scope.clone())
                        .or_insert_with(|| holders.is_empty().then_some(slot.limit));
                    if let Some(limit) = limit {
                        *limit = (*limit).max(slot.limit);
                    }
                    holders.insert(job);
                }
                self.slots.insert(job, slots);
            }
            self.in_flight(job, &tenant);
            back.push(job);
        }
        for (scope, limit) in fresh {
            if let Some(limit) = limit {
                self.registered.insert(scope, limit);
            }
        }
        back
    }

    /// The tenant of a job in flight.
    pub fn inflight_tenant(&self, job: u64) -> Option<&str> {
        self.inflight.get(&job).map(|e| e.0.as_str())
    }

    /// A tenant's waiting jobs, oldest first.
    pub fn backlog(&self, tenant: &str) -> Option<&std::collections::VecDeque<u64>> {
        self.sfq.backlog.get(tenant)
    }

    /// The slot a job takes when served, if any.
    pub fn slot_of(&self, job: u64) -> Option<&Slot> {
        self.slots.get(&job).and_then(|s| s.first())
    }

    /// Every scope a job takes when served, its first first.
    pub fn scopes_of(&self, job: u64) -> &[Slot] {
        self.slots.get(&job).map_or(&[], Vec::as_slice)
    }

    /// Whether the job holds its slot.
    pub fn holds(&self, job: u64) -> bool {
        self.slot_of(job)
            .and_then(|s| self.holders.get(&s.scope))
            .is_some_and(|h| h.contains(&job))
    }

    /// Jobs holding a slot of the scope.
    pub fn running(&self, scope: &str) -> usize {
        self.holders.get(scope).map_or(0, BTreeSet::len)
    }

    /// Tenants behind a static cap (or a limit of 0), smallest start tag first.
    pub fn capped(&self) -> Vec<&str> {
        self.capped.values().map(String::as_str).collect()
    }

    /// Tenants at or past an elastic cap, smallest start tag first.
    pub fn over(&self) -> Vec<&str> {
        self.over.values().map(String::as_str).collect()
    }

    /// Tenants waiting on a scope, first to be woken first.
    pub fn waiting(&self, scope: &str) -> Vec<&str> {
        self.waiting
            .get(scope)
            .map_or_else(Vec::new, |w| w.values().map(String::as_str).collect())
    }

    fn tier(&mut self, tier: Tier) -> &mut BTreeMap<Place, String> {
        match tier {
            Tier::Ready => &mut self.sfq.ready,
            Tier::Capped => &mut self.capped,
            Tier::Over => &mut self.over,
        }
    }

    fn limit(&self, slot: &Slot) -> usize {
        let tag_limit = self
            .tags
            .get(&slot.scope)
            .and_then(|t| self.tag_limits.get(t));
        self.limits
            .get(&slot.scope)
            .or(tag_limit)
            .copied()
            .unwrap_or(slot.limit)
    }

    /// One turn of the tenant at `at` in `tier`, starting at `start`: its oldest job if the job can
    /// take its slot (V moves to `start`, the tenant's next job starts at start + 1 / weight, in `ready`,
    /// or held back when that job's scope is now full); else it is held back. A paused tenant leaves the
    /// rotation and passes the wake on. Returns the job served.
    fn turn(&mut self, tier: Tier, at: Place, tenant: &str, start: f64) -> Option<u64> {
        self.tier(tier).remove(&at);
        let w = self.sfq.weight(tenant);
        let job = match self.sfq.backlog.get_mut(tenant) {
            Some(list) if w > 0.0 => list.pop_front(),
            _ => None,
        };
        let Some(job) = job else {
            self.forget(tenant);
            if w == 0.0 {
                self.sfq.paused.push(tenant.to_string());
                self.pass_on(tenant);
            }
            return None;
        };
        // A rate window first (it only reads), then the slot: neither is spent on a job the other refuses.
        // Every scope of the job's rate cap is read; it waits until the latest instant one of them allows.
        let rate = self.rates.get(&job).cloned().unwrap_or_default();
        let mut rate_now = Vec::with_capacity(rate.len());
        let mut rate_due: Option<u64> = None;
        for (scope, windows) in &rate {
            let state = self.rate_states.entry(scope.clone()).or_default();
            let now = state.clock(self.clock);
            rate_now.push(now);
            if let Some(due) = state.due(windows, now) {
                rate_due = Some(rate_due.map_or(due, |d| d.max(due)));
            }
        }
        if let Some(due) = rate_due {
            self.sfq.backlog.get_mut(tenant)?.push_front(job);
            self.forget(tenant);
            self.rated
                .insert(tenant.to_string(), (due, (Tag(start), at.1)));
            return None;
        }
        let slots = self.slots.get(&job).cloned();
        let slot = slots.as_ref().and_then(|s| s.first()).cloned();
        let (mut running, mut limit) = (0, 0);
        if let Some(all) = &slots {
            match self.take_slots(all, job, tier == Tier::Over) {
                Ok(taken) => (running, limit) = taken,
                Err((limit, copy, slot)) => {
                    self.sfq.backlog.get_mut(tenant)?.push_front(job);
                    let slot = if copy {
                        // A copy of a holder waits in `capped`, whatever the cap (never served from `over`).
                        Slot {
                            elastic: false,
                            ..slot.clone()
                        }
                    } else {
                        slot.clone()
                    };
                    self.hold_back(tenant, (Tag(start), at.1), &slot, limit);
                    if !copy {
                        self.pass_others(all, &slot.scope);
                    }
                    return None;
                }
            }
        }
        for ((scope, windows), now) in rate.iter().zip(rate_now) {
            let state = self.rate_states.get_mut(scope).expect("read above");
            state.record(windows, now);
        }
        match self.sfq.served(tenant, start, w) {
            Some(finish) => {
                let place = (Tag(finish), at.1);
                let next = self.sfq.backlog[tenant].front();
                match (&slot, next.and_then(|&j| self.slot_of(j)).cloned()) {
                    (Some(slot), Some(next)) if next.scope == slot.scope && running >= limit => {
                        self.hold_back(tenant, place, &next, limit)
                    }
                    _ => {
                        self.forget(tenant);
                        self.sfq.ready.insert(place, tenant.to_string());
                    }
                }
            }
            None => {
                self.forget(tenant);
            }
        }
        Some(job)
    }

    /// Whether the job's slot may be taken: its scope has room, or past the limit when `beyond` (an elastic cap
    /// served from `over`; never at 0); never for a copy of a job that holds the slot already (the same id:
    /// two copies running at once would share one holder, and the first to end would free it while the
    /// other runs). Ok: (holders now, limit); Err: (the limit, refused as such a copy). Only checks:
    /// [`CappedSfq::take_slots`] takes.
    fn room(&self, slot: &Slot, job: u64, beyond: bool) -> Result<(usize, usize), (usize, bool)> {
        let limit = self.limit(slot);
        let holders = self.holders.get(&slot.scope);
        let running = holders.map_or(0, BTreeSet::len);
        if holders.is_some_and(|h| h.contains(&job)) {
            return Err((limit, true));
        }
        if running >= limit && !(beyond && slot.elastic && limit > 0) {
            return Err((limit, false));
        }
        Ok((running, limit))
    }

    /// A job's scopes all at once, or none: each checked in order as [`CappedSfq::room`]; the first that
    /// refuses is returned with its limit and whether it refused a copy (its tenant waits there). Ok: the
    /// first scope's holders after and limit.
    fn take_slots(
        &mut self,
        slots: &[Slot],
        job: u64,
        beyond: bool,
    ) -> Result<(usize, usize), (usize, bool, Slot)> {
        let mut first = None;
        for slot in slots {
            match self.room(slot, job, beyond) {
                Ok((_, limit)) => first = first.or(Some(limit)),
                Err((limit, copy)) => return Err((limit, copy, slot.clone())),
            }
        }
        for slot in slots {
            let holders = self.holders.entry(slot.scope.clone()).or_default();
            if holders.is_empty() {
                self.registered.insert(slot.scope.clone(), slot.limit);
            }
            holders.insert(job);
        }
        Ok((self.running(&slots[0].scope), first.unwrap_or(0)))
    }

    /// A tenant of several scopes held back on `refused` (full): every other scope of its job wakes its next
    /// waiters (a slot it may have been woken for is not left unused). Each scope at most once a call
    /// ([`CappedSfq::begin_call`]): jobs sharing a key may carry different limits, so one that has room there
    /// by its own wakes a tenant whose job, by its lower one, has none, which is held back and wakes the first
    /// again through another scope, for ever. A waiter left with room then is woken by the scope's next
    /// release or the sweep. Not for a copy of a job holding its slots (it holds every scope of the job, whose
    /// release wakes them all).
    fn pass_others(&mut self, slots: &[Slot], refused: &str) {
        if slots.len() < 2 {
            return;
        }
        for slot in slots.iter().filter(|s| s.scope != refused) {
            if self.passed.insert(slot.scope.clone()) {
                let limit = self.limit(slot);
                self.wake(&slot.scope, limit);
            }
        }
    }

    /// A script call begins (the scripts' `begin_call`): what [`CappedSfq::pass_others`] passed on is forgotten.
    pub fn begin_call(&mut self) {
        self.passed.clear();
    }

    /// The tenant (out of any tier) waits on the slot's scope at `place`: in `over` under an elastic cap
    /// above 0, else in `capped`. Its entry replaces the one it had.
    fn hold_back(&mut self, tenant: &str, place: Place, slot: &Slot, limit: usize) {
        let to = if slot.elastic && limit > 0 {
            Tier::Over
        } else {
            Tier::Capped
        };
        self.forget(tenant);
        // Registered whoever holds the scope (a plain queue's runs may, and only the sweep sees them die); a
        // registration already there stays, but for a scope without holders.
        if self.running(&slot.scope) == 0 {
            self.registered.insert(slot.scope.clone(), slot.limit);
        } else {
            self.registered
                .entry(slot.scope.clone())
                .or_insert(slot.limit);
        }
        let entry = (place.0, to, place.1);
        self.waiting
            .entry(slot.scope.clone())
            .or_default()
            .insert(entry, tenant.to_string());
        self.waits
            .insert(tenant.to_string(), (slot.scope.clone(), entry));
        self.tier(to).insert(place, tenant.to_string());
    }

    /// Drops the tenant's waiting entry, if it has one (it leaves where it waited); returns it.
    fn forget(&mut self, tenant: &str) -> Option<(String, Wait)> {
        let (scope, entry) = self.waits.remove(tenant)?;
        if let Some(waiting) = self.waiting.get_mut(&scope) {
            waiting.remove(&entry);
            if waiting.is_empty() {
                self.waiting.remove(&scope);
            }
        }
        Some((scope, entry))
    }

    /// Into `ready` at max(tag, V): a wait banks no credit.
    fn rejoin(&mut self, tenant: String, tag: Tag, seq: u64) {
        let tag = Tag(tag.0.max(self.sfq.v));
        self.sfq.ready.insert((tag, seq), tenant);
    }

    /// A served job's slot back, and waiting tenants woken into it.
    fn release(&mut self, job: u64) {
        for slot in self.scopes_of(job).to_vec() {
            let released = (self.holders.get_mut(&slot.scope)).is_some_and(|h| h.remove(&job));
            if released {
                let limit = self.limit(&slot);
                self.wake(&slot.scope, limit);
            }
        }
    }

    /// A paused tenant gives up the slot it may have been woken for: the next tenant waiting on its head
    /// job's scope is woken (as a release would).
    fn pass_on(&mut self, tenant: &str) {
        let head = self.sfq.backlog.get(tenant).and_then(|l| l.front());
        for slot in head.map_or(&[][..], |&j| self.scopes_of(j)).to_vec() {
            let limit = self.limit(&slot);
            self.wake(&slot.scope, limit);
        }
    }

    /// Wakes the scope's waiting tenants, first in line first, one per free slot (holders below the
    /// limit; tenants woken earlier and not yet served are not counted), into `ready` at max(tag, V).
    fn wake(&mut self, scope: &str, limit: usize) {
        let free = limit.saturating_sub(self.running(scope));
        for _ in 0..free {
            let Some(&(tag, tier, seq)) = self.waiting.get(scope).and_then(|w| w.keys().next())
            else {
                break;
            };
            let tenant = self.tier(tier).remove(&(tag, seq));
            let tenant = tenant.expect("a waiting entry names where its tenant waits");
            self.forget(&tenant);
            self.rejoin(tenant, tag, seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `threads` workers: every free one pops; jobs finish in the order a test picks.
    struct Sim {
        q: CappedSfq,
        threads: usize,
        running: Vec<(String, u64)>,
        served: Vec<(String, u64)>,
    }

    impl Sim {
        fn new(q: CappedSfq, threads: usize) -> Sim {
            Sim {
                q,
                threads,
                running: Vec::new(),
                served: Vec::new(),
            }
        }

        /// Each free thread takes a job, until one finds none. Returns the tenants served.
        fn fill(&mut self) -> Vec<String> {
            let mut started = Vec::new();
            while self.running.len() < self.threads {
                let Some(next) = self.q.pop() else { break };
                started.push(next.0.clone());
                self.running.push(next.clone());
                self.served.push(next);
            }
            started
        }

        fn finish(&mut self, i: usize) {
            let (_, job) = self.running.remove(i);
            self.q.finish(job);
        }

        fn finish_oldest(&mut self) {
            self.finish(0);
        }

        fn busy(&self, tenant: &str) -> usize {
            self.running.iter().filter(|(t, _)| t == tenant).count()
        }

        fn idle(&self) -> usize {
            self.threads - self.running.len()
        }

        fn served_to(&self, tenant: &str) -> usize {
            self.served.iter().filter(|(t, _)| t == tenant).count()
        }
    }

    /// A small deterministic generator, for finishing jobs in a scrambled order.
    struct Lcg(u64);
    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n as u64) as usize
        }
    }

    fn push_jobs(q: &mut CappedSfq, tenant: &str, ids: std::ops::Range<u64>, slot: Option<Slot>) {
        for id in ids {
            q.push(tenant, id, slot.clone());
        }
    }

    #[test]
    fn a_rate_capped_tenant_waits_for_its_instant_and_keeps_its_place() {
        let mut q = CappedSfq::new();
        q.set_clock(10_000);
        let window = vec![Window {
            limit: 2,
            per_ms: 1000,
        }];
        for j in 0..6 {
            q.push("a", j, None);
            q.set_rate(j, "a", window.clone());
            if j < 4 {
                q.push("b", 100 + j, None);
            }
        }
        let served: Vec<String> = (0..6).map(|_| q.pop().unwrap().0).collect();
        // a twice, then only b while a waits for 11,000 (both starts in one bucket at 10,000).
        assert_eq!(served, ["a", "b", "a", "b", "b", "b"]);
        assert_eq!(q.rated().len(), 1);
        assert_eq!(q.rate_next(), Some(1000));
        assert_eq!(q.pop(), None);
        q.set_clock(10_999);
        assert_eq!(q.pop(), None);
        q.set_clock(11_000);
        // Back at max(its tag, V): its turn comes at once, no credit banked for the wait.
        assert_eq!(q.pop(), Some(("a".to_string(), 2)));
        assert_eq!(q.pop(), Some(("a".to_string(), 3)));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn a_refused_slot_spends_no_rate_start_and_both_caps_hold() {
        let mut q = CappedSfq::new();
        q.set_clock(0);
        let window = vec![Window {
            limit: 2,
            per_ms: 1000,
        }];
        for j in 0..4 {
            q.push("a", j, Some(Slot::fixed("a", 1)));
            q.set_rate(j, "a", window.clone());
        }
        assert_eq!(q.pop(), Some(("a".to_string(), 0)));
        assert_eq!(q.pop(), None); // the slot: held back, no start counted
        assert_eq!(q.capped(), ["a"]);
        q.finish(0);
        assert_eq!(q.pop(), Some(("a".to_string(), 1)));
        q.finish(1);
        assert_eq!(q.pop(), None); // the rate: 2 starts in the window
        assert_eq!(q.rate_next(), Some(1000));
        q.set_clock(1000);
        assert_eq!(q.pop(), Some(("a".to_string(), 2)));
    }

    #[test]
    fn without_slots_it_serves_as_sfq_does() {
        let (mut plain, mut capped) = (Sfq::new(), CappedSfq::new());
        plain.set_weight("c", 3.0);
        capped.set_weight("c", 3.0);
        for j in 0..300 {
            let t = ["a", "b", "c"][j as usize % 3];
            plain.push(t, j);
            capped.push(t, j, None);
        }
        let a: Vec<_> = std::iter::from_fn(|| plain.pop()).collect();
        let b: Vec<_> = std::iter::from_fn(|| capped.pop()).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn a_static_cap_is_a_wall_even_with_idle_threads() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "a", 0..40, Some(Slot::fixed("a", 2)));
        let mut sim = Sim::new(q, 8);
        sim.fill();
        assert_eq!((sim.busy("a"), sim.idle()), (2, 6));
        assert_eq!(sim.q.capped(), ["a"]);
        let mut rng = Lcg(7);
        while !sim.running.is_empty() {
            sim.finish(rng.below(sim.running.len()));
            sim.fill();
            assert!(sim.q.running("a") <= 2);
            assert_eq!(sim.q.running("a"), sim.busy("a"));
        }
        assert_eq!(sim.served.len(), 40);
    }

    #[test]
    fn a_lone_elastic_tenant_uses_every_thread() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "a", 0..40, Some(Slot::elastic("a", 2)));
        let mut sim = Sim::new(q, 8);
        sim.fill();
        assert_eq!(sim.busy("a"), 8);
        assert_eq!(sim.q.over(), ["a"]);
        while sim.served.len() < 40 {
            sim.finish_oldest();
            sim.fill();
            assert_eq!(sim.idle(), 0);
        }
    }

    #[test]
    fn backlogged_elastic_tenants_share_every_thread_evenly() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "a", 0..1000, Some(Slot::elastic("a", 2)));
        push_jobs(&mut q, "b", 1000..2000, Some(Slot::elastic("b", 2)));
        let mut sim = Sim::new(q, 8);
        sim.fill();
        for _ in 0..500 {
            // Jobs of one length: they finish in the order they started.
            sim.finish_oldest();
            sim.fill();
            assert_eq!(sim.idle(), 0);
            assert!((3..=5).contains(&sim.busy("a")), "{}", sim.busy("a"));
            assert!(sim.served_to("a").abs_diff(sim.served_to("b")) <= 1);
        }
        // Finished in a scrambled order, every thread stays busy and the jobs served stay even.
        let mut rng = Lcg(11);
        for _ in 0..800 {
            sim.finish(rng.below(sim.running.len()));
            sim.fill();
            assert_eq!(sim.idle(), 0);
            assert!(sim.served_to("a").abs_diff(sim.served_to("b")) <= 8);
        }
    }

    #[test]
    fn a_tenant_under_its_limit_is_served_by_the_next_free_thread() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "a", 0..100, Some(Slot::elastic("a", 2)));
        push_jobs(&mut q, "b", 100..200, Some(Slot::elastic("b", 2)));
        let mut sim = Sim::new(q, 8);
        sim.fill();
        let newcomers = [
            ("c", None),
            ("d", Some(Slot::fixed("d", 1))),
            ("e", Some(Slot::elastic("e", 2))),
        ];
        for (i, (tenant, slot)) in newcomers.into_iter().enumerate() {
            sim.q.push(tenant, 1000 + i as u64, slot);
            sim.finish_oldest();
            assert_eq!(sim.fill(), [tenant]);
        }
    }

    #[test]
    fn over_limit_tenants_fall_back_as_their_jobs_finish() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "a", 0..100, Some(Slot::elastic("a", 2)));
        push_jobs(&mut q, "b", 100..200, Some(Slot::elastic("b", 2)));
        let mut sim = Sim::new(q, 8);
        sim.fill();
        assert_eq!((sim.busy("a"), sim.busy("b")), (4, 4));
        push_jobs(&mut sim.q, "c", 200..400, None);
        for step in 0..200 {
            let before = (sim.busy("a"), sim.busy("b"));
            sim.finish_oldest();
            sim.fill();
            assert_eq!(sim.idle(), 0);
            // No running job is interrupted: a tenant loses only the job that finished, and one at or
            // past its limit gets no new job while "c" is ready; once its first jobs are done it stays
            // at its limit.
            for (tenant, was) in [("a", before.0), ("b", before.1)] {
                let now = sim.busy(tenant);
                assert_eq!(sim.q.running(tenant), now);
                assert!(now + 1 >= was && now <= was.max(2), "{tenant} at {step}");
                assert!(step < 8 || now <= 2, "{tenant} at {step}");
            }
        }
        assert!(sim.busy("c") >= 4);
    }

    #[test]
    fn a_capped_tenant_keeps_its_place() {
        // One thread: "a" is held back after every job (its scope is full) and woken when it ends.
        let mut plain = Sfq::new();
        let mut q = CappedSfq::new();
        for j in 0..30 {
            let t = ["a", "b", "c"][j as usize % 3];
            plain.push(t, j);
            q.push(t, j, (t == "a").then(|| Slot::fixed("s", 1)));
        }
        let mut sim = Sim::new(q, 1);
        while sim.fill().len() == 1 {
            let held_back = sim.busy("a") == 1 && sim.served_to("a") < 10;
            assert_eq!(sim.q.capped(), ["a"][..held_back as usize]);
            sim.finish_oldest();
        }
        let order: Vec<_> = std::iter::from_fn(|| plain.pop()).collect();
        assert_eq!(sim.served, order);
    }

    #[test]
    fn a_wait_behind_a_cap_banks_no_credit() {
        // "a" waits behind a limit of 0 as long as it would stay paused in plain SFQ: it comes back with
        // the share of a tenant back from a pause (half), not with a burst paying back its wait.
        let mut plain = Sfq::new();
        let mut q = CappedSfq::new();
        for j in 0..400 {
            let t = ["a", "b"][j as usize % 2];
            plain.push(t, j);
            q.push(t, j, (t == "a").then(|| Slot::fixed("s", 1)));
        }
        let mut sim = Sim::new(q, 1);
        let step = |sim: &mut Sim| {
            sim.fill();
            sim.finish_oldest();
        };
        let mut uncapped = Vec::new();
        for _ in 0..10 {
            step(&mut sim);
            uncapped.push(plain.pop().unwrap());
        }
        sim.q.set_limit("s", 0);
        plain.set_weight("a", 0.0);
        for _ in 0..100 {
            step(&mut sim);
            uncapped.push(plain.pop().unwrap());
        }
        assert!(sim.served[10..].iter().all(|(t, _)| t == "b"));
        sim.q.set_limit("s", 1);
        plain.set_weight("a", 1.0);
        for _ in 0..20 {
            step(&mut sim);
            uncapped.push(plain.pop().unwrap());
        }
        let a_jobs = |list: &[(String, u64)]| list.iter().filter(|(t, _)| t == "a").count();
        let back = a_jobs(&sim.served[110..]);
        assert!((9..=11).contains(&back), "{back}");
        // At most one job apart: woken, "a" keeps its activation, so it wins the first tie with "b"
        // where a tenant back from a pause, activated anew, loses it.
        assert!(back.abs_diff(a_jobs(&uncapped[110..])) <= 1);
        assert_eq!(sim.served[..110], uncapped[..110]);
    }

    #[test]
    fn a_limit_of_zero_halts_and_raising_it_resumes() {
        let mut q = CappedSfq::new();
        q.set_limit("s", 0);
        q.set_limit("e", 0);
        push_jobs(&mut q, "a", 0..10, Some(Slot::fixed("s", 2)));
        push_jobs(&mut q, "b", 10..20, Some(Slot::elastic("e", 2)));
        let mut sim = Sim::new(q, 4);
        assert!(sim.fill().is_empty());
        assert_eq!(sim.q.capped(), ["a", "b"]); // elastic or not: 0 is a wall
        assert!(sim.q.over().is_empty());
        sim.q.set_limit("s", 1);
        assert_eq!(sim.fill(), ["a"]);
        sim.q.set_limit("e", 1);
        assert_eq!(sim.fill(), ["b", "b", "b"]); // elastic again: the idle threads
        assert_eq!(sim.q.over(), ["b"]);
        // Back to 0: the running jobs end as usual, and nothing else starts.
        sim.q.set_limit("s", 0);
        sim.q.set_limit("e", 0);
        assert_eq!((sim.q.running("s"), sim.q.running("e")), (1, 3));
        while !sim.running.is_empty() {
            sim.finish_oldest();
            assert!(sim.fill().is_empty());
        }
        assert_eq!(sim.q.capped(), ["a", "b"]);
    }

    #[test]
    fn lowering_a_limit_interrupts_nothing() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "a", 0..20, Some(Slot::fixed("s", 3)));
        let mut sim = Sim::new(q, 8);
        sim.fill();
        sim.q.set_limit("s", 1);
        assert_eq!(sim.q.running("s"), 3);
        for left in [2, 1] {
            sim.finish_oldest();
            assert!(sim.fill().is_empty());
            assert_eq!(sim.q.running("s"), left);
        }
        sim.finish_oldest();
        assert_eq!(sim.fill(), ["a"]);
        while !sim.running.is_empty() {
            sim.finish_oldest();
            sim.fill();
            assert!(sim.q.running("s") <= 1);
        }
        assert_eq!(sim.served.len(), 20);
    }

    #[test]
    fn a_shared_scope_caps_its_tenants_together_and_wakes_one_per_free_slot() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "x", 0..300, Some(Slot::fixed("k", 3)));
        push_jobs(&mut q, "y", 300..600, Some(Slot::fixed("k", 3)));
        let mut sim = Sim::new(q, 8);
        assert_eq!(sim.fill(), ["x", "y", "x"]);
        assert_eq!(sim.q.capped(), ["y", "x"]); // smallest start tag first
        sim.finish_oldest();
        assert_eq!(sim.q.capped(), ["x"]); // one free slot: one tenant woken, the first in line
        assert_eq!(sim.fill(), ["y"]);
        // Two free slots wake two tenants; one free slot, one.
        sim.q.set_limit("k", 5);
        assert!(sim.q.capped().is_empty());
        assert_eq!(sim.fill().len(), 2);
        sim.q.set_limit("k", 6);
        assert_eq!(sim.q.capped().len(), 1);
        sim.fill();
        let mut rng = Lcg(3);
        for _ in 0..500 {
            sim.finish(rng.below(sim.running.len()));
            sim.fill();
            assert_eq!(sim.q.running("k"), 6);
            assert_eq!(sim.idle(), 2);
            assert!(sim.served_to("x").abs_diff(sim.served_to("y")) <= 4);
        }
    }

    #[test]
    fn fifo_per_tenant_is_kept_through_hold_backs() {
        let mut q = CappedSfq::new();
        let slots = [
            Some(Slot::fixed("s1", 1)),
            Some(Slot::elastic("s2", 1)),
            None,
            Some(Slot::fixed("shared", 2)),
        ];
        for j in 0..400u64 {
            let tenant = ["a", "b", "c"][j as usize % 3];
            q.push(tenant, j, slots[(j / 3 % 4) as usize].clone());
        }
        let mut sim = Sim::new(q, 5);
        let mut rng = Lcg(5);
        sim.fill();
        while !sim.running.is_empty() {
            sim.finish(rng.below(sim.running.len()));
            sim.fill();
            assert!(sim.q.running("s1") <= 1 && sim.q.running("shared") <= 2);
        }
        assert_eq!(sim.served.len(), 400);
        for tenant in ["a", "b", "c"] {
            let jobs: Vec<u64> = sim
                .served
                .iter()
                .filter(|(t, _)| t == tenant)
                .map(|s| s.1)
                .collect();
            assert!(jobs.windows(2).all(|w| w[0] < w[1]), "{tenant}: {jobs:?}");
        }
    }

    /// Serves `n` jobs, each finished at once; returns their tenants.
    fn serve_and_finish(q: &mut CappedSfq, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                let (tenant, job) = q.pop().unwrap();
                q.finish(job);
                tenant
            })
            .collect()
    }

    #[test]
    fn a_tenant_served_from_over_starts_at_v_which_never_goes_backwards() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "e", 0..5, Some(Slot::elastic("e", 1)));
        assert_eq!(q.pop(), Some(("e".into(), 0)));
        assert_eq!(q.over(), ["e"]); // at start tag 1
        push_jobs(&mut q, "u", 100..150, None);
        assert!(serve_and_finish(&mut q, 50).iter().all(|t| t == "u"));
        let v = q.sfq.v;
        assert_eq!(v, 49.0);
        // Nobody ready: "e" is served past its limit, at V (not at its tag 1, which would move V back).
        assert_eq!(q.pop(), Some(("e".into(), 1)));
        assert_eq!(q.sfq.v, v);
        // So a newcomer starts at V too and gets its share, not a burst of 48 jobs.
        push_jobs(&mut q, "n", 200..250, None);
        push_jobs(&mut q, "u", 150..200, None);
        let next = serve_and_finish(&mut q, 30);
        let n = next.iter().filter(|t| *t == "n").count();
        assert!((14..=16).contains(&n), "{next:?}");
    }

    #[test]
    fn a_tenant_that_leaves_over_stops_waiting_on_its_scope() {
        let mut q = CappedSfq::new();
        q.push("y", 1, Some(Slot::elastic("b", 1)));
        assert_eq!(q.pop(), Some(("y".into(), 1)));
        q.push("x", 2, Some(Slot::elastic("a", 1)));
        q.push("x", 3, Some(Slot::elastic("a", 1)));
        q.push("x", 4, Some(Slot::elastic("b", 1)));
        assert_eq!(q.pop(), Some(("x".into(), 2)));
        assert_eq!((q.over(), q.waiting("a")), (vec!["x"], vec!["x"]));
        // Nobody ready: "x" is served from over, and its next job (scope b) takes it to ready.
        assert_eq!(q.pop(), Some(("x".into(), 3)));
        assert!(q.over().is_empty() && q.waiting("a").is_empty());
        push_jobs(&mut q, "u", 10..20, None);
        assert_eq!(q.pop(), Some(("u".into(), 10)));
        // "x" meets the full scope b: it waits in over on b (and only there).
        assert_eq!(q.pop(), Some(("u".into(), 11)));
        assert_eq!((q.over(), q.waiting("b")), (vec!["x"], vec!["x"]));
        q.push("z", 30, Some(Slot::elastic("a", 1)));
        assert_eq!(q.pop(), Some(("u".into(), 12)));
        assert_eq!(q.waiting("a"), ["z"]);
        // Scope a gets a free slot: "z" is woken, not "x" (which waits on b).
        q.finish(2);
        q.finish(3);
        assert_eq!((q.over(), q.waiting("b")), (vec!["x"], vec!["x"]));
        assert!(q.waiting("a").is_empty());
        let next: Vec<String> = (0..2).map(|_| q.pop().unwrap().0).collect();
        assert!(next.contains(&"z".to_string()), "{next:?}");
    }

    #[test]
    fn a_paused_tenant_passes_its_wake_on() {
        let mut q = CappedSfq::new();
        q.push("w", 1, Some(Slot::fixed("a", 1)));
        assert_eq!(q.pop(), Some(("w".into(), 1)));
        q.push("x", 2, Some(Slot::fixed("a", 1)));
        q.push("z", 3, Some(Slot::fixed("a", 1)));
        assert_eq!(q.pop(), None);
        assert_eq!(q.capped(), ["x", "z"]);
        q.set_weight("x", 0.0); // paused while it waits
        q.finish(1); // wakes "x", first in line
        assert_eq!(q.capped(), ["z"]);
        // "x" meets its pause at the head and leaves: the free slot goes to "z", not to waste.
        assert_eq!(q.pop(), Some(("z".into(), 3)));
        assert!(q.capped().is_empty());
        assert_eq!(q.sfq.paused, ["x"]);
        // Resumed, "x" meets the full scope again and waits.
        q.set_weight("x", 1.0);
        assert_eq!(q.pop(), None);
        assert_eq!(q.capped(), ["x"]);
        q.finish(3);
        assert_eq!(q.pop(), Some(("x".into(), 2)));
    }

    #[test]
    fn deleting_a_held_back_tenants_head_job_brings_it_back() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "a", 1..3, Some(Slot::fixed("a", 1)));
        q.push("a", 3, None);
        assert_eq!(q.pop(), Some(("a".into(), 1)));
        assert_eq!(q.pop(), None); // job 2 finds the scope full: a is held back
        assert_eq!(q.capped(), ["a"]);
        assert!(q.delete(2));
        assert!(q.capped().is_empty() && q.waiting("a").is_empty());
        assert_eq!(q.pop(), Some(("a".into(), 3))); // needs no slot
    }

    #[test]
    fn a_held_back_tenant_whose_last_job_is_deleted_leaves_its_tier_and_scope() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "a", 1..3, Some(Slot::fixed("a", 1)));
        assert_eq!(q.pop(), Some(("a".into(), 1)));
        assert_eq!(q.pop(), None);
        assert!(q.delete(2));
        assert!(!q.delete(2));
        assert!(q.capped().is_empty() && q.waiting("a").is_empty());
        q.finish(1);
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn deleting_the_head_job_of_an_over_limit_tenant_brings_it_back_into_ready() {
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "a", 1..4, Some(Slot::elastic("a", 1)));
        q.push("b", 10, None);
        assert_eq!(q.pop(), Some(("a".into(), 1))); // a's next job has the same full scope: a goes over
        assert_eq!(q.over(), ["a"]);
        assert!(q.delete(2));
        assert!(q.over().is_empty() && q.waiting("a").is_empty());
        assert_eq!(q.pop(), Some(("b".into(), 10)));
        assert_eq!(q.pop(), Some(("a".into(), 3))); // held back again, then served past its limit
    }

    #[test]
    fn a_copy_of_a_job_holding_its_slot_waits_until_the_slot_is_given_back() {
        // Job 1 pushed twice (the same id), limit 2: its copy is not served while job 1 holds the slot (they
        // would share it: three running under two once the first ended), even with a slot free; its tenant
        // waits in `capped` under an elastic cap too. Job 2's release wakes it for nothing (held back again).
        for slot in [Slot::fixed("s", 2), Slot::elastic("s", 2)] {
            let mut q = CappedSfq::new();
            q.push("a", 1, Some(slot.clone()));
            q.push("b", 2, Some(slot.clone()));
            q.push("a", 1, Some(slot.clone()));
            q.push("a", 3, Some(slot.clone()));
            assert_eq!(q.pop(), Some(("a".into(), 1)));
            assert_eq!(q.pop(), Some(("b".into(), 2)));
            assert_eq!(q.pop(), None); // "a"'s copy of job 1 at its head
            assert_eq!(q.capped(), ["a"]);
            q.finish(2);
            assert_eq!(q.pop(), None);
            assert_eq!((q.capped(), q.waiting("s")), (vec!["a"], vec!["a"]));
            q.finish(1);
            assert_eq!(q.pop(), Some(("a".into(), 1)));
            assert_eq!(q.pop(), Some(("a".into(), 3)));
            assert_eq!(q.running("s"), 2);
        }
    }

    #[test]
    fn a_tenant_woken_into_a_slot_its_own_jobs_lower_limit_denies_waits_on() {
        // Two classes share an elastic key with limits 2 and 1: "a"'s job (limit 1) is woken by the
        // release of "b"'s (limit 2), but one job still holds the key: "a" is not served past its limit
        // while "b" is ready (the fetch script served it from `over` until the lockstep test found it).
        let mut q = CappedSfq::new();
        push_jobs(&mut q, "b", 1..3, Some(Slot::elastic("s", 2)));
        q.push("a", 3, Some(Slot::elastic("s", 1)));
        q.push("b", 4, None);
        assert_eq!(q.pop(), Some(("b".into(), 1)));
        assert_eq!(q.pop(), Some(("b".into(), 2))); // "a" met the key full for its limit of 1
        assert_eq!(q.over(), ["a"]);
        q.finish(1);
        assert!(q.over().is_empty()); // woken: under the released job's limit of 2 there is room
        assert_eq!(q.pop(), Some(("b".into(), 4)));
        assert_eq!(q.over(), ["a"]);
        assert_eq!(q.pop(), Some(("a".into(), 3))); // nobody ready: past its limit, as elastic caps go
    }

    #[test]
    fn a_take_back_registers_an_empty_scope_with_its_copies_highest_limit_in_any_order() {
        // Three classes share a static key (limits 2, 3, 4); their jobs are recovered from a process that
        // only stalled and comes back for them together, in one order or the other (the Lua reads them
        // from a hash). "b" (limit 2) waits behind the three; the runtime limit deleted, the key's limit is
        // the highest of the copies' (4): "b" is woken, and held back again at its turn by its own limit.
        for order in [[1, 2, 3], [3, 1, 2]] {
            let mut q = CappedSfq::new();
            for (job, limit) in [(1, 2), (2, 3), (3, 4)] {
                q.push(&format!("t{job}"), job, Some(Slot::fixed("k", limit)));
            }
            for _ in 0..3 {
                assert!(q.pop().is_some());
            }
            for job in 1..=3 {
                q.requeue(job); // recovered: back in front, the slots given back
            }
            assert_eq!(q.reclaim(&order), order);
            assert_eq!(q.running("k"), 3);
            q.push("b", 4, Some(Slot::fixed("k", 2)));
            assert_eq!(q.pop(), None);
            assert_eq!(q.capped(), ["b"]);
            q.set_limit("k", 0);
            q.clear_limit("k");
            assert!(q.capped().is_empty(), "order {order:?}");
            assert_eq!(q.pop(), None);
            assert_eq!(q.capped(), ["b"]);
        }
    }

    #[test]
    fn a_job_requeued_in_front_of_a_held_back_tenant_brings_it_back() {
        let mut q = CappedSfq::new();
        q.push("w", 1, Some(Slot::fixed("a", 1)));
        assert_eq!(q.pop(), Some(("w".into(), 1)));
        q.push("x", 2, None);
        q.push("x", 3, Some(Slot::fixed("a", 1)));
        assert_eq!(q.pop(), Some(("x".into(), 2)));
        assert_eq!(q.pop(), None);
        assert_eq!(q.capped(), ["x"]);
        // Job 2 needs no slot: back in front, it is servable, and "x" with it.
        q.requeue(2);
        assert!(q.capped().is_empty());
        assert_eq!(q.pop(), Some(("x".into(), 2)));
        assert_eq!(q.pop(), None);
        // Requeued, a job gives its slot back (waking "x"), and its idle tenant rejoins.
        q.requeue(1);
        q.requeue(1); // idempotent: no longer in flight
        assert_eq!((q.running("a"), q.capped()), (0, vec![]));
        assert_eq!(q.pop(), Some(("w".into(), 1))); // back at V = 1, before "x" at 2
        assert_eq!(q.pop(), None);
        assert_eq!(q.capped(), ["x"]);
        q.finish(1);
        assert_eq!(q.pop(), Some(("x".into(), 3)));
    }

    /// `threads` workers over a queue fair by worker time: each free worker pops, jobs end when their run
    /// time is up (ms, by tenant), earliest first, acknowledged with it. Returns worker time by tenant.
    fn worker_time(
        q: &mut CappedSfq,
        threads: usize,
        jobs: usize,
        run: &[(&str, f64)],
    ) -> HashMap<String, f64> {
        let ms = |t: &str| run.iter().find(|r| r.0 == t).unwrap().1;
        let (mut now, mut busy, mut spent) =
            (0.0, Vec::<(f64, u64, String)>::new(), HashMap::new());
        for _ in 0..jobs {
            while busy.len() < threads {
                let Some((tenant, job)) = q.pop() else { break };
                busy.push((now + ms(&tenant), job, tenant));
            }
            busy.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (end, job, tenant) = busy.remove(0);
            now = end;
            q.finish_timed(job, Some(ms(&tenant)));
            *spent.entry(tenant.clone()).or_insert(0.0) += ms(&tenant);
        }
        spent
    }

    #[test]
    fn by_time_backlogged_tenants_share_worker_time_not_job_counts() {
        let mut q = CappedSfq::by_time();
        for j in 0..20_000 {
            q.push(if j % 2 == 0 { "slow" } else { "fast" }, j, None);
        }
        let spent = worker_time(&mut q, 10, 5_000, &[("slow", 200.0), ("fast", 20.0)]);
        let share = spent["slow"] / (spent["slow"] + spent["fast"]);
        assert!(
            (0.45..=0.55).contains(&share),
            "slow's share of worker time {share}"
        );
    }

    #[test]
    fn by_job_count_the_slow_tenant_holds_most_of_the_worker_time() {
        let mut q = CappedSfq::new();
        for j in 0..20_000 {
            q.push(if j % 2 == 0 { "slow" } else { "fast" }, j, None);
        }
        let spent = worker_time(&mut q, 10, 5_000, &[("slow", 200.0), ("fast", 20.0)]);
        let share = spent["slow"] / (spent["slow"] + spent["fast"]);
        assert!(share > 0.85, "slow's share of worker time {share}");
    }

    #[test]
    fn a_refund_never_puts_a_tag_below_v_no_banked_credit() {
        let mut q = CappedSfq::by_time();
        for j in 0..100 {
            q.push("busy", j, None);
        }
        for j in 1000..1003 {
            q.push("short", j, None);
        }
        let served: Vec<_> = (0..4).filter_map(|_| q.pop()).collect();
        assert_eq!(
            served.iter().filter(|s| s.0 == "short").count(),
            2,
            "{served:?}"
        );
        for (tenant, job) in &served {
            // short's jobs ran under the floor, each charged 1 s: refunds, down to V and no further
            q.finish_timed(*job, Some(if tenant == "short" { 0.0 } else { 1000.0 }));
        }
        let v = q.sfq.v;
        let short = q
            .sfq
            .ready
            .iter()
            .find(|(_, t)| *t == "short")
            .map(|(at, _)| at.0 .0);
        assert_eq!(short, Some(v), "short at {short:?}, v {v}");
        // The means learnt the floor: the next jobs are charged 1 ms.
        assert_eq!(q.sfq.estimate("short"), crate::names::TIME_FLOOR_MS as f64);
    }

    #[test]
    fn a_charge_is_bounded_and_a_new_tenant_pays_the_queue_mean() {
        let mut q = CappedSfq::by_time();
        assert_eq!(q.sfq.estimate("new"), crate::names::TIME_DEFAULT_MS as f64);
        q.push("a", 1, None);
        let (_, job) = q.pop().unwrap();
        q.finish_timed(job, Some(10_000_000.0));
        assert_eq!(q.sfq.estimate("a"), crate::names::TIME_CAP_MS as f64);
        assert_eq!(q.sfq.estimate("new"), crate::names::TIME_CAP_MS as f64);
    }
}
