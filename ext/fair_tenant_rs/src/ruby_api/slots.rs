//! `Sidekiq::FairTenant::Native::Slots`: per-tenant concurrency slots as the server middleware and
//! the heartbeat use them: the class's functions build each script call's keys and arguments (sent on
//! Sidekiq's connection, `concurrency/slot_calls.rb`) and read the replies. Binding only: key naming
//! and the scripts live in `slots/mod.rs` and `lua/slots/`. Instances over a client's pool
//! (`client.slots`, for specs and `bin/bench`) exist only with the cargo feature `bench`: `bench/slots.rs`.

#[cfg(feature = "bench")]
use std::sync::Arc;

use magnus::{prelude::*, Error, RArray, RModule, RString, Ruby, Value};

#[cfg(feature = "bench")]
use crate::handle::Handle;
use crate::ruby_api::helpers::convert::{bytes, pair, text_pair};
use crate::ruby_api::helpers::errors::argument_error;
use crate::slots::{self, AcquireReply, Running, Scope, ScopeSource, Slot};

/// `[keys, argv]` as two Arrays of binary Strings.
pub(crate) fn call(
    ruby: &Ruby,
    (keys, args): (Vec<Vec<u8>>, Vec<Vec<u8>>),
) -> Result<RArray, Error> {
    let strings =
        |parts: Vec<Vec<u8>>| ruby.ary_from_iter(parts.iter().map(|p| ruby.str_from_slice(p)));
    Ok(ruby.ary_from_iter([strings(keys), strings(args)]))
}

/// `[[tag, sub, jid, run, lease_ms], ...]` as the renew script's entries.
pub(crate) fn running_slots(running: RArray) -> Result<Vec<Running>, Error> {
    let mut entries = Vec::with_capacity(running.len());
    for item in running.into_iter() {
        let (tag, sub, jid, run, lease_ms): (RString, RString, RString, RString, u64) =
            magnus::TryConvert::try_convert(item)?;
        entries.push((
            Scope::from_parts(bytes(tag), bytes(sub)),
            bytes(jid),
            bytes(run),
            lease_ms,
        ));
    }
    Ok(entries)
}

/// The slots of one run of a job of several scopes: `scopes` an Array of `[tag, sub, lease_ms, default_limit]`.
fn several_slots(
    ruby: &Ruby,
    scopes: RArray,
    jid: RString,
    run: RString,
) -> Result<Vec<Slot>, Error> {
    if scopes.is_empty() {
        return Err(argument_error(ruby, "a job of several scopes names none"));
    }
    let (jid, run) = (bytes(jid), bytes(run));
    let mut slots = Vec::with_capacity(scopes.len());
    for item in scopes.into_iter() {
        let (tag, sub, lease_ms, default_limit): (RString, RString, u64, u64) =
            magnus::TryConvert::try_convert(item)?;
        slots.push(Slot {
            scope: Scope::from_parts(bytes(tag), bytes(sub)),
            jid: jid.clone(),
            run: run.clone(),
            lease_ms,
            default_limit,
        });
    }
    Ok(slots)
}

/// A `Native::Slots` instance, over a client's pool: made only with the cargo feature `bench` (specs and
/// `bin/bench`: `client.slots`, `Native::Slots.new(client)`; its methods in `bench/slots.rs`). The gem's own
/// calls are the class's functions below, run on Sidekiq's connection.
#[cfg(feature = "bench")]
#[magnus::wrap(class = "Sidekiq::FairTenant::Native::Slots", free_immediately, size)]
pub struct RbSlots(pub(crate) Arc<Handle>);

/// `run`: the run's token. The `Native::Slots` instance methods (`bench/slots.rs`) have none: an acquire acts
/// as one run per jid (its jid), a release frees whichever run holds the jid (`ANY_RUN`).
pub(crate) fn slot(
    tag: RString,
    sub: RString,
    (jid, run): (RString, Option<Vec<u8>>),
    lease_ms: u64,
    default_limit: u64,
) -> Slot {
    let jid = bytes(jid);
    Slot {
        scope: Scope::from_parts(bytes(tag), bytes(sub)),
        run: run.unwrap_or_else(|| jid.clone()),
        jid,
        lease_ms,
        default_limit,
    }
}

/// `[tag, sub]` of the default scope: a tenant's jobs from one queue.
fn tenant_scope(ruby: &Ruby, tenant: RString, queue: RString) -> Result<RArray, Error> {
    let scope = Scope::tenant_queue(&bytes(tenant), &bytes(queue));
    text_pair(ruby, scope.tag(), scope.sub())
}

/// `[tag, sub]` of a custom-key scope.
fn key_scope(ruby: &Ruby, key: RString) -> Result<RArray, Error> {
    let scope = Scope::custom(&bytes(key));
    text_pair(ruby, scope.tag(), scope.sub())
}

/// `[sha, source]` of a slot script (`acquire`, `release`), to run it on Sidekiq's own connection.
fn script(ruby: &Ruby, name: String) -> Result<RArray, Error> {
    let (sha, source) = slots::script(&name)
        .ok_or_else(|| argument_error(ruby, format!("no slot script named {name:?}")))?;
    pair(ruby, sha.as_bytes(), source.as_bytes())
}

/// `[tag, sub]` of a job's scope for one entry of its concurrency or rate option (`Scope::of_job`), or
/// nil: `by_key`, `name` the key method's value (nil when blank); else `name` the job's tenant, with its
/// queue and the one it was re-routed from.
fn job_scope(
    ruby: &Ruby,
    by_key: bool,
    name: Option<RString>,
    queue: Option<RString>,
    rerouted_from: Option<RString>,
) -> Result<Value, Error> {
    let name = name.map(bytes);
    let queue = queue.map(bytes).unwrap_or_default();
    let rerouted_from = rerouted_from.map(bytes);
    let source = if by_key {
        ScopeSource::Key(name.as_deref())
    } else {
        ScopeSource::Tenant {
            tenant: name.as_deref(),
            queue: &queue,
            rerouted_from: rerouted_from.as_deref(),
        }
    };
    Ok(match Scope::of_job(source) {
        Some(scope) => text_pair(ruby, scope.tag(), scope.sub())?.as_value(),
        None => ruby.qnil().as_value(),
    })
}

/// `[keys, argv]` of the acquire script for one run of a job (binary Strings).
#[allow(clippy::too_many_arguments)]
fn acquire_call(
    ruby: &Ruby,
    tag: RString,
    sub: RString,
    jid: RString,
    run: RString,
    lease_ms: u64,
    default_limit: u64,
    payload: RString,
    enqueued_at: f64,
) -> Result<RArray, Error> {
    let slot = slot(tag, sub, (jid, Some(bytes(run))), lease_ms, default_limit);
    let payload = bytes(payload);
    call(
        ruby,
        slots::acquire_call(&slot.request(), &payload, enqueued_at, None),
    )
}

/// `[keys, argv]` of the acquire script carrying the release of the thread's previous run, `carried`:
/// `[tag, sub, jid, run, lease_ms, default_limit]`.
#[allow(clippy::too_many_arguments)]
fn acquire_carrying_call(
    ruby: &Ruby,
    tag: RString,
    sub: RString,
    jid: RString,
    run: RString,
    lease_ms: u64,
    default_limit: u64,
    payload: RString,
    enqueued_at: f64,
    carried: RArray,
) -> Result<RArray, Error> {
    let slot = slot(tag, sub, (jid, Some(bytes(run))), lease_ms, default_limit);
    let (c_tag, c_sub, c_jid, c_run, c_lease, c_limit): (
        RString,
        RString,
        RString,
        RString,
        u64,
        u64,
    ) = magnus::TryConvert::try_convert(carried.as_value())?;
    let previous = self::slot(c_tag, c_sub, (c_jid, Some(bytes(c_run))), c_lease, c_limit);
    let payload = bytes(payload);
    call(
        ruby,
        slots::acquire_call(
            &slot.request(),
            &payload,
            enqueued_at,
            Some(&previous.request()),
        ),
    )
}

/// `[keys, argv]` of the release script for one run's slot (binary Strings).
fn release_call(
    ruby: &Ruby,
    tag: RString,
    sub: RString,
    jid: RString,
    run: RString,
    lease_ms: u64,
    default_limit: u64,
) -> Result<RArray, Error> {
    let slot = slot(tag, sub, (jid, Some(bytes(run))), lease_ms, default_limit);
    call(ruby, slots::release_call(&slot.request()))
}

/// `[keys, argv]` of the release script for a run given up after a lost acquire reply: also takes back its
/// parked copy (`payload` as the acquire sent it) or that copy handed over to `queue` and not fetched yet.
#[allow(clippy::too_many_arguments)]
fn forget_call(
    ruby: &Ruby,
    tag: RString,
    sub: RString,
    jid: RString,
    run: RString,
    lease_ms: u64,
    default_limit: u64,
    payload: RString,
    queue: RString,
) -> Result<RArray, Error> {
    let slot = slot(tag, sub, (jid, Some(bytes(run))), lease_ms, default_limit);
    let (payload, queue) = (bytes(payload), bytes(queue));
    call(ruby, slots::forget_call(&slot.request(), &payload, &queue))
}

/// `[keys, argv]` of `acquire_all` for one run of a job of several scopes: `scopes` an Array of
/// `[tag, sub, lease_ms, default_limit]`, its first scope first.
fn acquire_all_call(
    ruby: &Ruby,
    scopes: RArray,
    jid: RString,
    run: RString,
    payload: RString,
    enqueued_at: f64,
) -> Result<RArray, Error> {
    let slots = several_slots(ruby, scopes, jid, run)?;
    let reqs: Vec<_> = slots.iter().map(Slot::request).collect();
    call(
        ruby,
        slots::acquire_all_call(&reqs, &bytes(payload), enqueued_at),
    )
}

/// `[keys, argv]` of `release_all` for the run's slots of a job of several scopes.
fn release_all_call(
    ruby: &Ruby,
    scopes: RArray,
    jid: RString,
    run: RString,
) -> Result<RArray, Error> {
    let slots = several_slots(ruby, scopes, jid, run)?;
    let reqs: Vec<_> = slots.iter().map(Slot::request).collect();
    call(ruby, slots::release_all_call(&reqs, None))
}

/// `[keys, argv]` of `release_all` for a run given up after its acquire_all's reply was lost: what that call
/// may have taken given back (its slots, its parked copy `payload`, that copy handed over to `queue`).
fn forget_all_call(
    ruby: &Ruby,
    scopes: RArray,
    (jid, run): (RString, RString),
    payload: RString,
    queue: RString,
) -> Result<RArray, Error> {
    let slots = several_slots(ruby, scopes, jid, run)?;
    let reqs: Vec<_> = slots.iter().map(Slot::request).collect();
    let (payload, queue) = (bytes(payload), bytes(queue));
    call(
        ruby,
        slots::release_all_call(&reqs, Some((&payload, &queue))),
    )
}

/// `[keys, argv]` of the renew script for `running`: an Array of `[tag, sub, jid, lease_ms]`.
fn renew_call(ruby: &Ruby, running: RArray) -> Result<RArray, Error> {
    call(ruby, slots::renew_call(&running_slots(running)?))
}

/// `[keys, argv]` of the sweep script for one tag of `tags_key`.
fn sweep_call(ruby: &Ruby, tag: RString) -> Result<RArray, Error> {
    call(ruby, slots::sweep_call(&bytes(tag)))
}

/// What the acquire script's reply `[code, handed]` means: `[outcome, deferrable, handed]`, the outcome
/// `:acquired`, `:held`, `:parked` or `:dropped`, deferrable true when the run's release may wait for the
/// thread's next acquire, handed the parked jobs the carried release handed a slot.
fn acquired(ruby: &Ruby, reply: (i64, u64)) -> RArray {
    let reply = AcquireReply::from_reply(reply.0, reply.1);
    ruby.ary_from_iter([
        ruby.to_symbol(reply.acquired.name()).as_value(),
        ruby.into_value(reply.deferrable),
        ruby.into_value(reply.handed),
    ])
}

pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), Error> {
    let class = namespace.define_class("Slots", ruby.class_object())?;
    class.define_singleton_method("tenant_scope", magnus::function!(tenant_scope, 2))?;
    class.define_singleton_method("key_scope", magnus::function!(key_scope, 1))?;
    class.define_singleton_method("job_scope", magnus::function!(job_scope, 4))?;
    class.define_singleton_method(
        "script_names",
        magnus::function!(|| slots::SCRIPT_NAMES.to_vec(), 0),
    )?;
    class.define_singleton_method("script", magnus::function!(script, 1))?;
    class.define_singleton_method("acquire_call", magnus::function!(acquire_call, 8))?;
    class.define_singleton_method(
        "acquire_carrying_call",
        magnus::function!(acquire_carrying_call, 9),
    )?;
    class.define_singleton_method("release_call", magnus::function!(release_call, 6))?;
    class.define_singleton_method("forget_call", magnus::function!(forget_call, 8))?;
    class.define_singleton_method("acquired", magnus::function!(acquired, 1))?;
    class.define_singleton_method("acquire_all_call", magnus::function!(acquire_all_call, 5))?;
    class.define_singleton_method("release_all_call", magnus::function!(release_all_call, 3))?;
    class.define_singleton_method("forget_all_call", magnus::function!(forget_all_call, 4))?;
    class.define_singleton_method("renew_call", magnus::function!(renew_call, 1))?;
    class.define_singleton_method("sweep_call", magnus::function!(sweep_call, 1))?;
    class.define_singleton_method("tags_key", magnus::function!(slots::tags_key, 0))?;
    Ok(())
}
