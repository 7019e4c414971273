//! Per-tenant concurrency slots: key naming and the calls behind acquire, release, the
//! heartbeat, the sweep and runtime limits. Every decision is one Lua script, atomic.
//!
//! Keys of a scope (tag `t:<tenant>` with sub `q:<queue>`, or tag `k:<custom key>` with sub `k`),
//! the tag length-prefixed so no tenant or key string can collide with another (the names are spelled
//! in [`crate::names`]):
//! - `<SLOTS_PREFIX><len>:<tag>:<sub>:holders`  jid -> lease expiry (ms)
//! - `<SLOTS_PREFIX><len>:<tag>:<sub>:parked`   payload -> enqueue time (ms)
//! - `<SLOTS_PREFIX><len>:<tag>:<sub>:waiting`  fair-queue tenants waiting for a slot
//! - `<SLOTS_PREFIX><len>:<tag>:<sub>:runs`     jid -> the run holding its slot (one slot per run of a jid)
//! - `<SLOTS_PREFIX><len>:<tag>:<sub>:waits`    jid -> a parked job's own "run limit lease"
//! - `<SLOTS_PREFIX><len>:<tag>:<sub>:gone`     runs given up before their lost acquire reached Redis
//! - `<SLOTS_PREFIX><len>:<tag>:<sub>:others`   jid -> a parked job of several scopes' list of them (msgpack)
//! - `<SLOTS_PREFIX><len>:<tag>:meta`           sub -> "default_limit lease_ms"
//! - `<LIMITS_PREFIX><len>:<tag>`               '*' or sub -> runtime limit
//! - `SLOT_TAGS_KEY`, `LIMITS_INDEX_KEY`: tags to sweep / list
//!
//! Hand-overs push to Sidekiq's `queue:<name>`, so the gem's Redis must be Sidekiq's.

pub mod concurrency;
#[cfg(test)]
mod lockstep;
#[cfg(test)]
pub mod model;
pub mod rate;
#[cfg(test)]
mod several_lockstep;

use std::sync::LazyLock;

use redis::Script;

use crate::error::Result;
use crate::lua_pieces;
use crate::names;
use crate::redis::pool::Pool;

/// A slot script's source: the shared names' prelude, the shared functions, then the script.
macro_rules! slot_source {
    ($file:literal) => {
        LazyLock::new(|| {
            names::script(&[&lua_pieces::only_used(&[
                include_str!("../lua/slots/common.lua"),
                include_str!($file),
            ])])
        })
    };
}

/// The source of a slot script that also wakes fair-queue tenants waiting on a scope
/// (`lua/fair/serve.lua`).
macro_rules! slot_and_fair_source {
    ($file:literal) => {
        LazyLock::new(|| {
            names::script(&[&lua_pieces::only_used(&[
                include_str!("../lua/slots/common.lua"),
                include_str!("../lua/fair/common.lua"),
                include_str!("../lua/fair/serve.lua"),
                include_str!($file),
            ])])
        })
    };
}

/// The source of a script that gives a run's slot back (`lua/slots/give_back.lua`): the fair-queue code that
/// wakes tenants waiting on the scope is defined inside `fair_wake`, only when a release has someone to wake.
/// Defined at the top of the script it would be set up on every call (its closures and patterns: ~18 µs of
/// Redis CPU per call, measured), for the one release in many that needs it. It carries its own prelude of
/// shared names, so the `fair_wake` closure made on every call has few upvalues (with the names as upvalues,
/// ~4 µs per call).
macro_rules! give_back_source {
    ($file:literal) => {
        LazyLock::new(|| {
            names::script(&[&lua_pieces::only_used(&[
                include_str!("../lua/slots/common.lua"),
                &[
                    &fair_wake(),
                    include_str!("../lua/slots/give_back.lua"),
                    include_str!($file),
                ]
                .concat(),
            ])])
        })
    };
}

/// The source of a script for a job of several scopes (`acquire_all.lua`, `release_all.lua`): a release's, with
/// `lua/slots/several.lua`'s reading of its scopes.
macro_rules! several_source {
    ($file:literal) => {
        LazyLock::new(|| {
            names::script(&[&lua_pieces::only_used(&[
                include_str!("../lua/slots/common.lua"),
                &[
                    &fair_wake(),
                    include_str!("../lua/slots/give_back.lua"),
                    include_str!("../lua/slots/several.lua"),
                    include_str!($file),
                ]
                .concat(),
            ])])
        })
    };
}

/// `fair_wake(slot, limit, tokens)`: `wake` of `lua/fair/serve.lua`, its sources set up when it is called.
/// Its fair-queue part carries only what `wake` uses ([`lua_pieces`]) and its own prelude of shared names.
fn fair_wake() -> String {
    let fair = names::script(&[&lua_pieces::only_used(&[
        include_str!("../lua/fair/common.lua"),
        include_str!("../lua/fair/serve.lua"),
        "return wake(slot, limit, tokens)\n",
    ])]);
    format!("local function fair_wake(slot, limit, tokens)\n{fair}end\n")
}

// Run here, or on Sidekiq's own connection by Ruby ([`script`]).
static ACQUIRE_SOURCE: LazyLock<String> = give_back_source!("../lua/slots/acquire.lua");
static RELEASE_SOURCE: LazyLock<String> = give_back_source!("../lua/slots/release.lua");
static ACQUIRE_ALL_SOURCE: LazyLock<String> = several_source!("../lua/slots/acquire_all.lua");
static RELEASE_ALL_SOURCE: LazyLock<String> = several_source!("../lua/slots/release_all.lua");
static RENEW_SOURCE: LazyLock<String> = slot_source!("../lua/slots/renew.lua");
static SWEEP_SOURCE: LazyLock<String> = slot_and_fair_source!("../lua/slots/sweep.lua");
static SET_LIMIT_SOURCE: LazyLock<String> = slot_and_fair_source!("../lua/slots/set_limit.lua");
static DETAILS_SOURCE: LazyLock<String> = slot_source!("../lua/slots/details.lua");
static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(&ACQUIRE_SOURCE));
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(&RELEASE_SOURCE));
static ACQUIRE_ALL: LazyLock<Script> = LazyLock::new(|| Script::new(&ACQUIRE_ALL_SOURCE));
static RELEASE_ALL: LazyLock<Script> = LazyLock::new(|| Script::new(&RELEASE_ALL_SOURCE));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(&RENEW_SOURCE));
static SWEEP: LazyLock<Script> = LazyLock::new(|| Script::new(&SWEEP_SOURCE));
static SET_LIMIT: LazyLock<Script> = LazyLock::new(|| Script::new(&SET_LIMIT_SOURCE));
static DETAILS: LazyLock<Script> = LazyLock::new(|| Script::new(&DETAILS_SOURCE));

/// What `acquire` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// A free slot was taken: run the job.
    Acquired,
    /// The job already held its slot (handed over while parked, or acquired twice): run it.
    Held,
    /// No slot: the job is parked and will be pushed back to its queue when one frees.
    Parked,
    /// A copy of a job that ran already (its run was given up after a lost reply): acknowledge it, do not run it.
    Dropped,
}

impl Acquired {
    /// What `acquire.lua` returned: 0 or 4 acquired, 1 held, 3 dropped, anything else parked.
    pub fn from_code(code: i64) -> Acquired {
        match code {
            0 | ROOMY => Acquired::Acquired,
            1 => Acquired::Held,
            3 => Acquired::Dropped,
            _ => Acquired::Parked,
        }
    }

    /// The name Ruby sees (a Symbol): `acquired`, `held` or `parked`.
    pub fn name(self) -> &'static str {
        match self {
            Acquired::Acquired => "acquired",
            Acquired::Held => "held",
            Acquired::Parked => "parked",
            Acquired::Dropped => "dropped",
        }
    }
}

/// `acquire.lua`'s code for a slot taken with room: another slot of the scope is free and nobody waits for one.
const ROOMY: i64 = 4;

/// `acquire.lua`'s reply: what it did, whether the run's release may wait for the thread's next acquire (at most
/// [`names::RELEASE_DEFER_MS`]), and how many parked jobs the release it carried handed a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireReply {
    pub acquired: Acquired,
    pub deferrable: bool,
    pub handed: u64,
}

impl AcquireReply {
    /// The release of a run may ride with the thread's next acquire only when its slot was taken with room
    /// (code 4): a scope at its limit, or with parked jobs or fair-queue tenants waiting, gets its slot back at
    /// once.
    pub fn from_reply(code: i64, handed: u64) -> AcquireReply {
        AcquireReply {
            acquired: Acquired::from_code(code),
            deferrable: code == ROOMY,
            handed,
        }
    }
}

/// The field of a tag's limits hash that applies to all its scopes.
pub const ALL: &[u8] = names::ALL_SCOPES.as_bytes();

/// What names a job's scope ([`Scope::of_job`]): the value of its class's `key:` method (None when blank), or
/// its tenant (None when it has none), its queue and the queue it was re-routed from.
#[derive(Debug, Clone, Copy)]
pub enum ScopeSource<'a> {
    Key(Option<&'a [u8]>),
    Tenant {
        tenant: Option<&'a [u8]>,
        queue: &'a [u8],
        rerouted_from: Option<&'a [u8]>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    tag: Vec<u8>,
    sub: Vec<u8>,
}

fn join(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

impl Scope {
    /// The default scope: a tenant's jobs from one (original) queue.
    pub fn tenant_queue(tenant: &[u8], queue: &[u8]) -> Scope {
        Scope {
            tag: tenant_tag(tenant),
            sub: join(&[names::QUEUE_SUB.as_bytes(), queue]),
        }
    }

    /// A scope named by the job class's key method (e.g. one customer's webhooks).
    pub fn custom(key: &[u8]) -> Scope {
        Scope {
            tag: key_tag(key),
            sub: names::KEY_SUB.as_bytes().to_vec(),
        }
    }

    /// A job's scope for one entry of its `fair_tenant_concurrency` or `fair_tenant_rate` option, from what the
    /// caller found (the one rule for both): by the class's `key:` method, its value ([`Scope::custom`]; None
    /// when the value is blank: no scope), else by the job's tenant, its jobs from its original queue (the one it
    /// was re-routed from, else its own; [`Scope::tenant_queue`]); None without a tenant.
    pub fn of_job(source: ScopeSource<'_>) -> Option<Scope> {
        match source {
            ScopeSource::Key(key) => key.map(Scope::custom),
            ScopeSource::Tenant {
                tenant,
                queue,
                rerouted_from,
            } => tenant.map(|t| Scope::tenant_queue(t, rerouted_from.unwrap_or(queue))),
        }
    }

    /// Rebuilds a scope from the `[tag, sub]` pair handed out to Ruby.
    pub fn from_parts(tag: Vec<u8>, sub: Vec<u8>) -> Scope {
        Scope { tag, sub }
    }

    pub fn tag(&self) -> &[u8] {
        &self.tag
    }

    pub fn sub(&self) -> &[u8] {
        &self.sub
    }

    pub fn holders(&self) -> Vec<u8> {
        join(&[&base(&self.tag), &self.sub, names::HOLDERS.as_bytes()])
    }

    pub fn parked(&self) -> Vec<u8> {
        join(&[&base(&self.tag), &self.sub, names::PARKED.as_bytes()])
    }

    /// The run holding each holder's slot (a server thread's token; `HANDED` + the parking run's while
    /// a handed-over job waits to be fetched).
    pub fn runs(&self) -> Vec<u8> {
        join(&[&base(&self.tag), &self.sub, names::RUNS.as_bytes()])
    }

    /// Each parked job's own terms: its run, default limit and lease.
    pub fn waits(&self) -> Vec<u8> {
        join(&[&base(&self.tag), &self.sub, names::WAITS.as_bytes()])
    }

    /// Runs given up (a lost acquire reply) before their acquire reached Redis: it takes nothing when it does.
    pub fn gone(&self) -> Vec<u8> {
        join(&[&base(&self.tag), &self.sub, names::GONE.as_bytes()])
    }

    /// Fair-queue tenants waiting for a slot of this scope (`lua/fair/serve.lua`).
    pub fn waiting(&self) -> Vec<u8> {
        join(&[&base(&self.tag), &self.sub, names::WAITING.as_bytes()])
    }

    /// The index of [`Self::waiting`]: "<len>:<queue><tenant>" -> that tenant's waiting entry.
    pub fn waiting_index(&self) -> Vec<u8> {
        join(&[&self.waiting(), names::WAITING_INDEX.as_bytes()])
    }
}

pub fn tenant_tag(tenant: &[u8]) -> Vec<u8> {
    join(&[names::TENANT_TAG.as_bytes(), tenant])
}

pub fn key_tag(key: &[u8]) -> Vec<u8> {
    join(&[names::KEY_TAG.as_bytes(), key])
}

/// Field of the limits hash for one queue of a tenant.
pub fn queue_field(queue: &[u8]) -> Vec<u8> {
    join(&[names::QUEUE_SUB.as_bytes(), queue])
}

fn base(tag: &[u8]) -> Vec<u8> {
    join(&[
        names::SLOTS_PREFIX.as_bytes(),
        tag.len().to_string().as_bytes(),
        b":",
        tag,
        b":",
    ])
}

pub(crate) fn meta(tag: &[u8]) -> Vec<u8> {
    join(&[&base(tag), names::META.as_bytes()])
}

pub fn limits_key(tag: &[u8]) -> Vec<u8> {
    join(&[
        names::LIMITS_PREFIX.as_bytes(),
        tag.len().to_string().as_bytes(),
        b":",
        tag,
    ])
}

pub fn tags_key() -> String {
    names::SLOT_TAGS_KEY.to_string()
}

pub fn limits_index_key() -> String {
    names::LIMITS_INDEX_KEY.to_string()
}

/// Sidekiq stores `enqueued_at` in seconds (float) before 8.0 and in milliseconds since.
pub fn enqueue_score_ms(enqueued_at: f64) -> f64 {
    if enqueued_at > 1e11 {
        enqueued_at
    } else {
        enqueued_at * 1000.0
    }
}

/// The run a release or renew names to act on whichever run holds the jid (specs and benchmarks through
/// `Native::Slots`, and the renewal of a slot a fair queue's fetch took, which has no run).
pub const ANY_RUN: &[u8] = b"";

/// One run of a job asking for a slot.
pub struct Request<'a> {
    pub scope: &'a Scope,
    pub jid: &'a [u8],
    /// This run's token: a slot belongs to one run of its jid.
    pub run: &'a [u8],
    pub lease_ms: u64,
    pub default_limit: u64,
}

/// A [`Request`] that owns its parts (built from copies of Ruby strings); [`Slot::request`] lends
/// it to the scripts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub scope: Scope,
    pub jid: Vec<u8>,
    pub run: Vec<u8>,
    pub lease_ms: u64,
    pub default_limit: u64,
}

impl Slot {
    pub fn request(&self) -> Request<'_> {
        Request {
            scope: &self.scope,
            jid: &self.jid,
            run: &self.run,
            lease_ms: self.lease_ms,
            default_limit: self.default_limit,
        }
    }
}

pub fn acquire(
    pool: &Pool,
    req: &Request<'_>,
    payload: &[u8],
    enqueued_at: f64,
) -> Result<Acquired> {
    let (keys, args) = acquire_call(req, payload, enqueued_at, None);
    let (code, handed): (i64, u64) = pool.with(|c| invocation(&ACQUIRE, keys, args).invoke(c))?;
    Ok(AcquireReply::from_reply(code, handed).acquired)
}

/// Whether a carried release can name only its jid and run: the keys, lease and default limit it would send are
/// the acquire's.
fn same_terms(req: &Request<'_>, release: &Request<'_>) -> bool {
    req.scope == release.scope
        && req.lease_ms == release.lease_ms
        && req.default_limit == release.default_limit
}

/// `(KEYS, ARGV)` of `acquire.lua` for one job asking for a slot, in the order of its contract; `carried`: the
/// release of the thread's previous run, done first in the same call.
pub fn acquire_call(
    req: &Request<'_>,
    payload: &[u8],
    enqueued_at: f64,
    carried: Option<&Request<'_>>,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let s = req.scope;
    let keys = vec![
        s.holders(),
        s.parked(),
        limits_key(&s.tag),
        meta(&s.tag),
        tags_key().into_bytes(),
        s.runs(),
        s.waits(),
        s.gone(),
        s.waiting(),
    ];
    let args = vec![
        req.jid.to_vec(),
        req.lease_ms.to_string().into_bytes(),
        req.default_limit.to_string().into_bytes(),
        s.sub.clone(),
        s.tag.clone(),
        payload.to_vec(),
        enqueue_score_ms(enqueued_at).to_string().into_bytes(),
        req.run.to_vec(),
    ];
    let (mut keys, mut args) = (keys, args);
    match carried {
        // The same scope and terms: only the release's jid and run (the script reads the rest from this call).
        Some(release) if same_terms(req, release) => {
            args.extend([release.jid.to_vec(), release.run.to_vec()]);
        }
        Some(release) => {
            let (release_keys, release_args) = release_call(release);
            keys.extend(release_keys);
            args.extend(release_args);
        }
        None => {}
    }
    (keys, args)
}

fn invocation(
    script: &'static Script,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
) -> redis::ScriptInvocation<'static> {
    let mut inv = script.prepare_invoke();
    for key in keys {
        inv.key(key);
    }
    for arg in args {
        inv.arg(arg);
    }
    inv
}

/// Frees the run's slot; returns how many parked jobs were handed a slot.
pub fn release(pool: &Pool, req: &Request<'_>) -> Result<u64> {
    let (keys, args) = release_call(req);
    let (handed, _more): (u64, u64) = pool.with(|c| invocation(&RELEASE, keys, args).invoke(c))?;
    Ok(handed)
}

/// `(sha, source)` of a slot script a caller runs on another connection (EVALSHA, then EVAL):
/// `acquire`, `release`, `acquire_all`, `release_all`, `renew`, `sweep`, `set_limit` or `details`.
/// The slot scripts' names ([`script`]); none is a fair-queue script's (the gem's script runner keeps both
/// by name; `fair/scripts.rs` checks).
pub const SCRIPT_NAMES: [&str; 8] = [
    "acquire",
    "release",
    "acquire_all",
    "release_all",
    "renew",
    "sweep",
    "set_limit",
    "details",
];

pub fn script(name: &str) -> Option<(&'static str, &'static str)> {
    match name {
        "acquire" => Some((ACQUIRE.get_hash(), ACQUIRE_SOURCE.as_str())),
        "release" => Some((RELEASE.get_hash(), RELEASE_SOURCE.as_str())),
        "acquire_all" => Some((ACQUIRE_ALL.get_hash(), ACQUIRE_ALL_SOURCE.as_str())),
        "release_all" => Some((RELEASE_ALL.get_hash(), RELEASE_ALL_SOURCE.as_str())),
        "renew" => Some((RENEW.get_hash(), RENEW_SOURCE.as_str())),
        "sweep" => Some((SWEEP.get_hash(), SWEEP_SOURCE.as_str())),
        "set_limit" => Some((SET_LIMIT.get_hash(), SET_LIMIT_SOURCE.as_str())),
        "details" => Some((DETAILS.get_hash(), DETAILS_SOURCE.as_str())),
        _ => None,
    }
}

/// `(KEYS, ARGV)` of `release.lua` for one run's slot, in the order of its contract.
pub fn release_call(req: &Request<'_>) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let s = req.scope;
    let keys = vec![
        s.holders(),
        s.parked(),
        limits_key(&s.tag),
        s.waiting(),
        s.runs(),
        s.waits(),
        s.gone(),
    ];
    let args = vec![
        req.jid.to_vec(),
        req.lease_ms.to_string().into_bytes(),
        req.default_limit.to_string().into_bytes(),
        s.sub.clone(),
        req.run.to_vec(),
    ];
    (keys, args)
}

/// `(KEYS, ARGV)` of `release.lua` for a run given up after its acquire's reply was lost (it ran without a
/// slot): it also takes back the run's parked copy (`payload`, as the acquire sent it), or that copy handed
/// over to `queue` and not fetched yet.
pub fn forget_call(
    req: &Request<'_>,
    payload: &[u8],
    queue: &[u8],
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (keys, mut args) = release_call(req);
    args.extend([payload.to_vec(), queue.to_vec()]);
    (keys, args)
}

/// The KEYS and ARGV every scope of a job of several adds to `acquire_all.lua` and `release_all.lua`
/// (`lua/slots/several.lua`), its first scope first.
fn several_parts(reqs: &[Request<'_>], keys: &mut Vec<Vec<u8>>, args: &mut Vec<Vec<u8>>) {
    for req in reqs {
        let s = req.scope;
        keys.extend([
            s.holders(),
            s.parked(),
            limits_key(&s.tag),
            s.waiting(),
            s.runs(),
            s.waits(),
            s.gone(),
            meta(&s.tag),
        ]);
        args.extend([
            req.lease_ms.to_string().into_bytes(),
            req.default_limit.to_string().into_bytes(),
            s.sub.clone(),
            s.tag.clone(),
        ]);
    }
}

/// `(KEYS, ARGV)` of `acquire_all.lua`: one run of a job of several scopes (the same jid and run in each
/// request) asking for a slot in every one at once.
pub fn acquire_all_call(
    reqs: &[Request<'_>],
    payload: &[u8],
    enqueued_at: f64,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let first = &reqs[0];
    let mut keys = Vec::with_capacity(reqs.len() * 8);
    let mut args = vec![
        first.jid.to_vec(),
        first.run.to_vec(),
        payload.to_vec(),
        enqueue_score_ms(enqueued_at).to_string().into_bytes(),
    ];
    several_parts(reqs, &mut keys, &mut args);
    (keys, args)
}

/// `(KEYS, ARGV)` of `release_all.lua`: the run's slots of a job of several scopes freed, or, with
/// `forget` (`(payload, queue)`: its acquire_all's reply was lost and it ran without them), what that call
/// may have taken given back.
pub fn release_all_call(
    reqs: &[Request<'_>],
    forget: Option<(&[u8], &[u8])>,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let first = &reqs[0];
    let (payload, queue) = forget.unwrap_or((b"", b""));
    let mut keys = Vec::with_capacity(reqs.len() * 8);
    let mut args = vec![
        first.jid.to_vec(),
        first.run.to_vec(),
        payload.to_vec(),
        queue.to_vec(),
    ];
    several_parts(reqs, &mut keys, &mut args);
    (keys, args)
}

/// A running job's slot as the heartbeat renews it: `(scope, jid, run, lease_ms)` (run empty for a slot a
/// fair queue's fetch took).
pub type Running = (Scope, Vec<u8>, Vec<u8>, u64);

/// Extends the leases of running jobs. Returns how many were renewed.
pub fn renew(pool: &Pool, running: &[Running]) -> Result<u64> {
    if running.is_empty() {
        return Ok(0);
    }
    let (keys, args) = renew_call(running);
    pool.with(|c| invocation(&RENEW, keys, args).invoke(c))
}

/// `(KEYS, ARGV)` of `renew.lua`: each job's holders and runs keys, and its jid, run and lease (ms).
pub fn renew_call(running: &[Running]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let keys = running
        .iter()
        .flat_map(|(scope, _, _, _)| [scope.holders(), scope.runs()])
        .collect();
    let args = running
        .iter()
        .flat_map(|(_, jid, run, lease_ms)| {
            [jid.clone(), run.clone(), lease_ms.to_string().into_bytes()]
        })
        .collect();
    (keys, args)
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Parked jobs handed a slot.
    pub handed: u64,
    /// Expired leases (of killed workers) reclaimed.
    pub reclaimed: u64,
}

/// Reclaims expired leases and hands freed slots to parked jobs, for every tag with parked
/// jobs (at most `max_tags` of them per call).
pub fn sweep(pool: &Pool, max_tags: usize) -> Result<Swept> {
    let tags: Vec<Vec<u8>> = pool.with(|c| {
        redis::cmd("SRANDMEMBER")
            .arg(tags_key())
            .arg(max_tags)
            .query(c)
    })?;
    let mut swept = Swept::default();
    for tag in tags {
        let (keys, args) = sweep_call(&tag);
        let (handed, reclaimed, _more): (u64, u64, u64) =
            pool.with(|c| invocation(&SWEEP, keys, args).invoke(c))?;
        swept.handed += handed;
        swept.reclaimed += reclaimed;
    }
    Ok(swept)
}

/// `(KEYS, ARGV)` of `sweep.lua` for one tag of [`tags_key`] (which a sweep picks `SRANDMEMBER`).
pub fn sweep_call(tag: &[u8]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let keys = vec![limits_key(tag), meta(tag), tags_key().into_bytes()];
    (keys, vec![base(tag), tag.to_vec()])
}

/// `(keys, args)` of `set_limit.lua`: sets (`Some`) or deletes (`None`) a runtime limit and applies
/// it at once; the reply is `[jobs handed a slot, 1 when more could go now]` (call again until 0).
pub fn set_limit_call(
    tag: &[u8],
    field: &[u8],
    value: Option<u64>,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let keys = vec![limits_key(tag), meta(tag), limits_index_key().into_bytes()];
    let args = vec![
        field.to_vec(),
        value
            .map(|v| v.to_string())
            .unwrap_or_default()
            .into_bytes(),
        base(tag),
        tag.to_vec(),
    ];
    (keys, args)
}

/// The `set_limit.lua` call of [`set_limit_call`] as an invocation, for the lockstep test.
#[cfg(test)]
pub(crate) fn set_limit_invocation(
    tag: &[u8],
    field: &[u8],
    value: Option<u64>,
) -> redis::ScriptInvocation<'static> {
    let (keys, args) = set_limit_call(tag, field, value);
    invocation(&SET_LIMIT, keys, args)
}

/// One runtime limit as stored: `(tag, field, limit)`.
pub type LimitEntry = (Vec<u8>, Vec<u8>, u64);

/// A limit as stored (a decimal from `set_limit.lua`); `None` for anything else.
pub fn stored_limit(stored: &[u8]) -> Option<u64> {
    std::str::from_utf8(stored).ok()?.parse().ok()
}

/// Stored limits in (tag, field) order, as targets; an entry this gem could not have written is
/// left out.
pub fn limit_targets(mut entries: Vec<LimitEntry>) -> Vec<(LimitTarget, u64)> {
    entries.sort();
    entries
        .into_iter()
        .filter_map(|(tag, field, limit)| Some((limit_target(&tag, &field)?, limit)))
        .collect()
}

/// The `(tag, field)` of the limits entry for a tenant (on every queue, or on `queue`) or for a
/// custom concurrency key; `None` unless exactly one of `tenant` and `key` is given, and `queue`
/// only with `tenant`.
pub fn limit_entry(
    tenant: Option<&[u8]>,
    queue: Option<&[u8]>,
    key: Option<&[u8]>,
) -> Option<(Vec<u8>, Vec<u8>)> {
    match (tenant, queue, key) {
        (Some(tenant), queue, None) => Some((
            tenant_tag(tenant),
            queue.map_or_else(|| ALL.to_vec(), queue_field),
        )),
        (None, None, Some(key)) => Some((key_tag(key), ALL.to_vec())),
        _ => None,
    }
}

/// What a limits entry applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitTarget {
    /// A tenant, on every queue (`None`) or one queue.
    Tenant(Vec<u8>, Option<Vec<u8>>),
    /// A custom concurrency key.
    Key(Vec<u8>),
}

/// Reads back what `tenant_tag`/`key_tag` and `queue_field` wrote.
pub fn limit_target(tag: &[u8], field: &[u8]) -> Option<LimitTarget> {
    let queue = if field == ALL {
        None
    } else {
        Some(field.strip_prefix(names::QUEUE_SUB.as_bytes())?.to_vec())
    };
    if let Some(tenant) = tag.strip_prefix(names::TENANT_TAG.as_bytes()) {
        Some(LimitTarget::Tenant(tenant.to_vec(), queue))
    } else {
        let key = tag.strip_prefix(names::KEY_TAG.as_bytes())?;
        queue.is_none().then(|| LimitTarget::Key(key.to_vec()))
    }
}

/// What a scope's `(tag, sub)` names, as a limit target: a tenant on a queue, or a custom key (whose sub is
/// `KEY_SUB`, where a limits entry has `ALL`); `None` for anything this gem did not write.
pub fn scope_target(tag: &[u8], sub: &[u8]) -> Option<LimitTarget> {
    if sub == names::KEY_SUB.as_bytes() {
        let key = tag.strip_prefix(names::KEY_TAG.as_bytes())?;
        return Some(LimitTarget::Key(key.to_vec()));
    }
    limit_target(tag, sub)
}

/// A scope's holders (jid, lease expiry ms) and how many jobs it has parked.
pub struct ScopeState {
    pub holders: Vec<(Vec<u8>, u64)>,
    pub parked: u64,
}

pub fn inspect(pool: &Pool, scope: &Scope) -> Result<ScopeState> {
    pool.with(|c| {
        let holders: Vec<(Vec<u8>, u64)> = redis::cmd("ZRANGE")
            .arg(scope.holders())
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(c)?;
        let parked: u64 = redis::cmd("ZCARD").arg(scope.parked()).query(c)?;
        Ok(ScopeState { holders, parked })
    })
}

/// Everything the Web tab shows about one scope.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeDetails {
    pub holders: Vec<(Vec<u8>, u64)>,
    pub parked: u64,
    /// Enqueue time (ms) of the oldest parked job.
    pub oldest_parked_ms: Option<f64>,
    /// The runtime override in force (the scope's own, else the tag-wide one).
    pub limit_override: Option<u64>,
    /// The class's limit, as recorded when a job of the scope last parked.
    pub default_limit: Option<u64>,
}

impl ScopeDetails {
    /// Override, else the recorded default; `None` when neither is known.
    pub fn effective_limit(&self) -> Option<u64> {
        self.limit_override.or(self.default_limit)
    }
}

/// `(keys, args)` of `details.lua` for one scope.
pub fn details_call(scope: &Scope) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let keys = vec![
        scope.holders(),
        scope.parked(),
        limits_key(&scope.tag),
        meta(&scope.tag),
    ];
    (keys, vec![scope.sub.clone()])
}

/// `details.lua`'s reply: holders and the oldest parked job as (member, score) lists, the parked
/// count, the scope's and the tag-wide limit, the scope's meta entry.
pub type DetailsReply = (
    Scored,
    u64,
    Scored,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
);

/// A sorted set's (member, score) pairs as a script returns them.
pub type Scored = Vec<(Vec<u8>, Vec<u8>)>;

/// What `details.lua` replied, decoded.
pub fn details_from(reply: DetailsReply) -> ScopeDetails {
    let (holders, parked, oldest, own, all, meta_value) = reply;
    let score = |s: &[u8]| std::str::from_utf8(s).ok()?.parse::<f64>().ok();
    ScopeDetails {
        holders: holders
            .into_iter()
            .filter_map(|(jid, ms)| Some((jid, score(&ms)? as u64)))
            .collect(),
        parked,
        oldest_parked_ms: oldest.first().and_then(|(_, ms)| score(ms)),
        limit_override: [own, all]
            .into_iter()
            .flatten()
            .find_map(|v| stored_limit(&v)),
        default_limit: meta_value
            .as_deref()
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(meta_default),
    }
}

/// The default limit of a meta entry ("default_limit lease_ms").
fn meta_default(value: &str) -> Option<u64> {
    value.split(names::META_SEPARATOR).next()?.parse().ok()
}

/// The SCAN that finds scopes with running jobs: `(MATCH pattern, COUNT, at most so many rounds)`.
pub fn holders_scan() -> (String, u64, usize) {
    (
        format!("{}*{}", names::SLOTS_PREFIX, names::HOLDERS),
        1000,
        100,
    )
}

/// Scopes worth showing, at most `max`, sorted: every scope with parked jobs (`parked`: the tags of
/// [`tags_key`] with their meta hash's subs), then those with running jobs (holders keys a bounded
/// SCAN of [`holders_scan`] found).
pub fn scope_list(
    parked: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
    holder_keys: &[Vec<u8>],
    max: usize,
) -> Vec<Scope> {
    let mut out: Vec<Scope> = parked
        .into_iter()
        .flat_map(|(tag, subs)| {
            subs.into_iter()
                .map(move |sub| Scope::from_parts(tag.clone(), sub))
        })
        .collect();
    out.extend(holder_keys.iter().filter_map(|k| scope_of_holders_key(k)));
    out.sort_by(|a, b| (&a.tag, &a.sub).cmp(&(&b.tag, &b.sub)));
    out.dedup();
    out.truncate(max);
    out
}

/// Reads the scope back out of a holders key (the tag is length-prefixed).
pub fn scope_of_holders_key(key: &[u8]) -> Option<Scope> {
    let rest = key.strip_prefix(names::SLOTS_PREFIX.as_bytes())?;
    let colon = rest.iter().position(|&c| c == b':')?;
    let len: usize = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    let rest = &rest[colon + 1..];
    let tag = rest.get(..len)?;
    let sub = rest
        .get(len..)?
        .strip_prefix(b":")?
        .strip_suffix(names::HOLDERS.as_bytes())?;
    Some(Scope::from_parts(tag.to_vec(), sub.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_call_follows_the_scripts_contract() {
        let scope = Scope::tenant_queue(b"acme", b"default");
        let slot = Slot {
            scope: scope.clone(),
            jid: b"j1".to_vec(),
            run: b"r1".to_vec(),
            lease_ms: 60_000,
            default_limit: 3,
        };
        let (keys, args) = release_call(&slot.request());
        let limits = limits_key(scope.tag());
        let expected_keys = [
            scope.holders(),
            scope.parked(),
            limits,
            scope.waiting(),
            scope.runs(),
            scope.waits(),
            scope.gone(),
        ];
        assert_eq!(keys, expected_keys);
        let expected: [&[u8]; 5] = [b"j1", b"60000", b"3", b"q:default", b"r1"];
        assert_eq!(args, expected.map(<[u8]>::to_vec));
        let (forget_keys, forget_args) = forget_call(&slot.request(), b"{}", b"default");
        assert_eq!(forget_keys, expected_keys);
        assert_eq!(forget_args[5..], [b"{}".to_vec(), b"default".to_vec()]);
        assert!(scope.runs().ends_with(b":q:default:runs"));
        assert!(scope.waits().ends_with(b":q:default:waits"));
        for (name, file) in [
            ("release", include_str!("../lua/slots/release.lua")),
            ("acquire", include_str!("../lua/slots/acquire.lua")),
        ] {
            let (sha, source) = script(name).unwrap();
            assert_eq!(sha, Script::new(source).get_hash());
            assert!(
                source.ends_with(&crate::names::script(&[&lua_pieces::without_comments(
                    file
                )]))
            );
        }
        assert!(
            script("set_limit").is_some_and(|(_, source)| source.ends_with(&crate::names::script(
                &[&lua_pieces::without_comments(include_str!(
                    "../lua/slots/set_limit.lua"
                ))]
            )))
        );
        assert!(script("serve").is_none());
    }

    #[test]
    fn several_scope_calls_follow_the_scripts_contract() {
        let (tenant, api) = (
            Scope::tenant_queue(b"acme", b"plain"),
            Scope::custom(b"api"),
        );
        let slots: Vec<Slot> = [(&tenant, 2, 60_000), (&api, 20, 5_000)]
            .into_iter()
            .map(|(scope, default_limit, lease_ms)| Slot {
                scope: scope.clone(),
                jid: b"j1".to_vec(),
                run: b"r1".to_vec(),
                lease_ms,
                default_limit,
            })
            .collect();
        let reqs: Vec<_> = slots.iter().map(Slot::request).collect();
        let per_scope = |s: &Scope| {
            vec![
                s.holders(),
                s.parked(),
                limits_key(s.tag()),
                s.waiting(),
                s.runs(),
                s.waits(),
                s.gone(),
                meta(s.tag()),
            ]
        };
        let expected_keys = [per_scope(&tenant), per_scope(&api)].concat();
        let scope_args: [&[u8]; 8] = [
            b"60000", b"2", b"q:plain", b"t:acme", b"5000", b"20", b"k", b"k:api",
        ];
        let (keys, args) = acquire_all_call(&reqs, b"{}", 1.5);
        assert_eq!(keys, expected_keys);
        let head: [&[u8]; 4] = [b"j1", b"r1", b"{}", b"1500"];
        assert_eq!(args, [head.to_vec(), scope_args.to_vec()].concat());
        let (keys, args) = release_all_call(&reqs, None);
        assert_eq!(keys, expected_keys);
        let head: [&[u8]; 4] = [b"j1", b"r1", b"", b""];
        assert_eq!(args, [head.to_vec(), scope_args.to_vec()].concat());
        let (_, args) = release_all_call(&reqs, Some((b"{}", b"plain")));
        assert_eq!(args[2..4], [b"{}".to_vec(), b"plain".to_vec()]);
        for (name, file) in [
            ("acquire_all", include_str!("../lua/slots/acquire_all.lua")),
            ("release_all", include_str!("../lua/slots/release_all.lua")),
        ] {
            let (sha, source) = script(name).unwrap();
            assert_eq!(sha, Script::new(source).get_hash());
            assert!(
                source.ends_with(&crate::names::script(&[&lua_pieces::without_comments(
                    file
                )])) && source.contains("local function several(first)")
            );
        }
    }

    #[test]
    fn scope_details_decode_the_scripts_reply() {
        let scope = Scope::tenant_queue(b"acme", b"q");
        let (keys, args) = details_call(&scope);
        let expected = [
            scope.holders(),
            scope.parked(),
            limits_key(scope.tag()),
            meta(scope.tag()),
        ];
        assert_eq!(keys, expected);
        assert_eq!(args, [scope.sub().to_vec()]);
        let d = details_from((
            vec![(b"j1".to_vec(), b"1700000000123".to_vec())],
            2,
            vec![(b"{}".to_vec(), b"1.5e12".to_vec())],
            None,
            Some(b"4".to_vec()),
            Some(b"3 60000".to_vec()),
        ));
        assert_eq!(d.holders, [(b"j1".to_vec(), 1_700_000_000_123)]);
        assert_eq!((d.parked, d.oldest_parked_ms), (2, Some(1.5e12)));
        assert_eq!((d.limit_override, d.default_limit), (Some(4), Some(3)));
        assert_eq!(d.effective_limit(), Some(4));
    }

    #[test]
    fn scope_lists_merge_parked_and_running_scopes_sorted_and_bounded() {
        let (a, b) = (Scope::tenant_queue(b"a", b"q"), Scope::custom(b"x"));
        let parked = vec![(b.tag().to_vec(), vec![b.sub().to_vec()])];
        let running = [a.holders(), b.holders(), b"junk".to_vec()];
        let listed = scope_list(parked.clone(), &running, 10);
        assert_eq!(listed.len(), 2);
        assert_eq!(scope_list(parked, &running, 1).len(), 1);
        let (pattern, _, _) = holders_scan();
        assert!(pattern.starts_with(names::SLOTS_PREFIX) && pattern.ends_with(names::HOLDERS));
    }

    #[test]
    fn set_limit_call_follows_the_scripts_contract() {
        let (tag, field) = limit_entry(Some(b"acme"), Some(b"q"), None).unwrap();
        let (keys, args) = set_limit_call(&tag, &field, Some(7));
        let index = limits_index_key().into_bytes();
        assert_eq!(keys, [limits_key(&tag), meta(&tag), index]);
        assert_eq!(
            args,
            [field.clone(), b"7".to_vec(), base(&tag), tag.clone()]
        );
        assert_eq!(set_limit_call(&tag, &field, None).1[1], b"");
        assert_eq!(stored_limit(b"12"), Some(12));
        assert_eq!(stored_limit(b"-1"), None);
        assert_eq!(stored_limit(b"x"), None);
    }

    #[test]
    fn renew_and_sweep_calls_follow_the_scripts_contracts() {
        let (a, b) = (Scope::tenant_queue(b"a", b"q"), Scope::custom(b"x"));
        let running = [
            (a.clone(), b"j1".to_vec(), b"r1".to_vec(), 900),
            (b.clone(), b"j2".to_vec(), ANY_RUN.to_vec(), 60_000),
        ];
        let (keys, args) = renew_call(&running);
        assert_eq!(keys, [a.holders(), a.runs(), b.holders(), b.runs()]);
        let expected: [&[u8]; 6] = [b"j1", b"r1", b"900", b"j2", b"", b"60000"];
        assert_eq!(args, expected.map(<[u8]>::to_vec));

        let (keys, args) = sweep_call(b"t:a");
        let expected_keys = [limits_key(b"t:a"), meta(b"t:a"), tags_key().into_bytes()];
        assert_eq!(keys, expected_keys);
        assert_eq!(
            args,
            [
                b"sidekiq-fair_tenant:slots:3:t:a:".to_vec(),
                b"t:a".to_vec()
            ]
        );
        for (name, file) in [
            ("renew", include_str!("../lua/slots/renew.lua")),
            ("sweep", include_str!("../lua/slots/sweep.lua")),
        ] {
            assert!(script(name).unwrap().1.ends_with(&crate::names::script(&[
                &lua_pieces::without_comments(file)
            ])));
        }
    }

    #[test]
    fn acquire_call_follows_the_scripts_contract() {
        let scope = Scope::custom(b"customer-42");
        let slot = Slot {
            scope: scope.clone(),
            jid: b"j2".to_vec(),
            run: b"r2".to_vec(),
            lease_ms: 5_000,
            default_limit: 2,
        };
        let (keys, args) = acquire_call(&slot.request(), b"{}", 1_700_000_000.5, None);
        let tag = scope.tag();
        let expected_keys = [
            scope.holders(),
            scope.parked(),
            limits_key(tag),
            meta(tag),
            tags_key().into_bytes(),
            scope.runs(),
            scope.waits(),
            scope.gone(),
            scope.waiting(),
        ];
        assert_eq!(keys, expected_keys);
        let previous = Slot {
            jid: b"j1".to_vec(),
            run: b"r1".to_vec(),
            ..slot.clone()
        };
        let (same_keys, same_args) = acquire_call(
            &slot.request(),
            b"{}",
            1_700_000_000.5,
            Some(&previous.request()),
        );
        assert_eq!(same_keys, keys);
        assert_eq!(
            same_args,
            [args.clone(), vec![b"j1".to_vec(), b"r1".to_vec()]].concat()
        );
        let other = Slot {
            default_limit: 3,
            ..previous
        };
        let (carrying_keys, carrying_args) = acquire_call(
            &slot.request(),
            b"{}",
            1_700_000_000.5,
            Some(&other.request()),
        );
        let (release_keys, release_args) = release_call(&other.request());
        assert_eq!(carrying_keys, [keys.clone(), release_keys].concat());
        assert_eq!(carrying_args, [args.clone(), release_args].concat());
        let expected: [&[u8]; 8] = [
            b"j2",
            b"5000",
            b"2",
            b"k",
            b"k:customer-42",
            b"{}",
            b"1700000000500",
            b"r2",
        ];
        assert_eq!(args, expected.map(<[u8]>::to_vec));
        assert_eq!(Acquired::from_code(0), Acquired::Acquired);
        assert_eq!(Acquired::from_code(1), Acquired::Held);
        assert_eq!(Acquired::from_code(2), Acquired::Parked);
        assert_eq!(Acquired::from_code(3), Acquired::Dropped);
    }

    #[test]
    fn script_names_name_every_slot_script() {
        for name in SCRIPT_NAMES {
            assert!(script(name).is_some(), "{name}");
        }
    }

    #[test]
    fn a_job_scope_is_its_key_else_its_tenant_on_its_original_queue() {
        let key = |k| Scope::of_job(ScopeSource::Key(k));
        assert_eq!(key(Some(&b"shop:1"[..])), Some(Scope::custom(b"shop:1")));
        assert_eq!(key(None), None);
        let tenant = |tenant, rerouted_from| {
            Scope::of_job(ScopeSource::Tenant {
                tenant,
                queue: b"imports_low",
                rerouted_from,
            })
        };
        assert_eq!(
            tenant(Some(&b"acme"[..]), None),
            Some(Scope::tenant_queue(b"acme", b"imports_low"))
        );
        assert_eq!(
            tenant(Some(&b"acme"[..]), Some(&b"imports"[..])),
            Some(Scope::tenant_queue(b"acme", b"imports"))
        );
        assert_eq!(tenant(None, Some(&b"imports"[..])), None);
        assert_ne!(
            Scope::custom(b"acme").tag(),
            Scope::tenant_queue(b"acme", b"").tag()
        );
    }

    #[test]
    fn names_keys_with_length_prefixed_tags() {
        let s = Scope::tenant_queue(b"acme", b"default");
        assert_eq!(
            s.holders(),
            b"sidekiq-fair_tenant:slots:6:t:acme:q:default:holders".to_vec()
        );
        assert_eq!(
            s.parked(),
            b"sidekiq-fair_tenant:slots:6:t:acme:q:default:parked".to_vec()
        );
        assert_eq!(
            limits_key(s.tag()),
            b"sidekiq-fair_tenant:limits:6:t:acme".to_vec()
        );
        assert_eq!(
            meta(s.tag()),
            b"sidekiq-fair_tenant:slots:6:t:acme:meta".to_vec()
        );
    }

    #[test]
    fn tenants_and_custom_keys_never_share_keys() {
        let tenant = Scope::tenant_queue(b"x", b"k");
        let custom = Scope::custom(b"x");
        assert_ne!(tenant.holders(), custom.holders());
        assert_ne!(limits_key(tenant.tag()), limits_key(custom.tag()));
        // A tenant name that looks like another tenant's key suffix stays distinct.
        let a = Scope::tenant_queue(b"a:q:b", b"c");
        let b = Scope::tenant_queue(b"a", b"b:q:c");
        assert_ne!(a.holders(), b.holders());
    }

    #[test]
    fn limit_targets_round_trip() {
        assert_eq!(
            limit_target(&tenant_tag(b"acme"), ALL),
            Some(LimitTarget::Tenant(b"acme".to_vec(), None))
        );
        assert_eq!(
            limit_target(&tenant_tag(b"acme"), &queue_field(b"default")),
            Some(LimitTarget::Tenant(
                b"acme".to_vec(),
                Some(b"default".to_vec())
            ))
        );
        assert_eq!(
            limit_target(&key_tag(b"c-1"), ALL),
            Some(LimitTarget::Key(b"c-1".to_vec()))
        );
        assert_eq!(limit_target(b"junk", ALL), None);
    }

    #[test]
    fn scope_targets_name_a_tenants_queue_or_a_key() {
        let key = Scope::custom(b"partner-api");
        assert_eq!(
            scope_target(key.tag(), key.sub()),
            Some(LimitTarget::Key(b"partner-api".to_vec()))
        );
        let tenant = Scope::tenant_queue(b"acme", b"default");
        assert_eq!(
            scope_target(tenant.tag(), tenant.sub()),
            Some(LimitTarget::Tenant(
                b"acme".to_vec(),
                Some(b"default".to_vec())
            ))
        );
        assert_eq!(scope_target(b"t:acme", names::KEY_SUB.as_bytes()), None);
    }

    #[test]
    fn limit_entries_name_a_tenant_a_tenants_queue_or_a_key() {
        assert_eq!(
            limit_entry(Some(b"acme"), None, None),
            Some((tenant_tag(b"acme"), ALL.to_vec()))
        );
        assert_eq!(
            limit_entry(Some(b"acme"), Some(b"default"), None),
            Some((tenant_tag(b"acme"), queue_field(b"default")))
        );
        assert_eq!(
            limit_entry(None, None, Some(b"c-1")),
            Some((key_tag(b"c-1"), ALL.to_vec()))
        );
        assert_eq!(limit_entry(Some(b"acme"), None, Some(b"c-1")), None);
        assert_eq!(limit_entry(None, Some(b"default"), Some(b"c-1")), None);
        assert_eq!(limit_entry(None, Some(b"default"), None), None);
        assert_eq!(limit_entry(None, None, None), None);
    }

    #[test]
    fn stored_limits_list_sorted_as_targets_without_foreign_entries() {
        let entries = vec![
            (key_tag(b"c-1"), ALL.to_vec(), 2),
            (b"junk".to_vec(), ALL.to_vec(), 9),
            (tenant_tag(b"acme"), queue_field(b"default"), 5),
            (tenant_tag(b"acme"), ALL.to_vec(), 3),
        ];
        assert_eq!(
            limit_targets(entries),
            vec![
                (LimitTarget::Key(b"c-1".to_vec()), 2),
                (LimitTarget::Tenant(b"acme".to_vec(), None), 3),
                (
                    LimitTarget::Tenant(b"acme".to_vec(), Some(b"default".to_vec())),
                    5
                ),
            ]
        );
    }

    #[test]
    fn acquire_outcomes_have_ruby_names_and_slots_lend_requests() {
        let names = [Acquired::Acquired, Acquired::Held, Acquired::Parked].map(Acquired::name);
        assert_eq!(names, ["acquired", "held", "parked"]);
        let slot = Slot {
            scope: Scope::tenant_queue(b"acme", b"default"),
            jid: b"j1".to_vec(),
            run: b"r1".to_vec(),
            lease_ms: 60_000,
            default_limit: 2,
        };
        let req = slot.request();
        assert_eq!(
            (req.scope, req.jid, req.run, req.lease_ms, req.default_limit),
            (&slot.scope, &b"j1"[..], &b"r1"[..], 60_000, 2)
        );
    }

    #[test]
    fn holders_keys_parse_back_into_their_scope() {
        for scope in [
            Scope::tenant_queue(b"acme", b"default"),
            Scope::tenant_queue(b"a:q:b", b"c:holders"),
            Scope::custom(b"customer-42"),
        ] {
            assert_eq!(scope_of_holders_key(&scope.holders()), Some(scope.clone()));
        }
        assert_eq!(
            scope_of_holders_key(b"sidekiq-fair_tenant:slots:tags"),
            None
        );
        assert_eq!(
            scope_of_holders_key(b"sidekiq-fair_tenant:slots:99:t:x:holders"),
            None
        );
        assert_eq!(meta_default("5 60000"), Some(5));
        assert_eq!(meta_default("junk"), None);
    }

    #[test]
    fn normalises_enqueued_at_to_milliseconds() {
        assert_eq!(enqueue_score_ms(1_700_000_000.5), 1_700_000_000_500.0);
        assert_eq!(enqueue_score_ms(1_700_000_000_500.0), 1_700_000_000_500.0);
    }
}
