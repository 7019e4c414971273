//! Every name the gem's data in Redis shares between Rust, Lua and Ruby, spelled once: key prefixes and
//! suffixes, hash fields, entry layouts and separators, defaults and limits.
//!
//! Rust uses the constants; a Lua script names them `K_<NAME>`, and [`script`] writes each one's value in
//! its place (in parentheses) when the script is built, so its SHA is that of the final text. Values in
//! place, not locals of a prelude nor a table: a Lua function allows 200 locals and a script's shared
//! helpers need them (`fair/lua_limits.rs`), and a constant costs nothing per call (a table would cost the
//! fetch script ~0.8 µs of server time per call). Ruby reads them from `Sidekiq::FairTenant::Native::Names`.
//! A test scans the scripts and the Ruby library for hand-spelled copies of the names in [`NAMES`].

/// The root of every key the gem writes.
macro_rules! root {
    () => {
        "sidekiq-fair_tenant"
    };
}

pub const ROOT: &str = root!();

// Routing.
/// The original gem's per-tenant enqueue counter key (`Kernel#format` references).
pub const DEFAULT_ENQUEUES_KEY: &str =
    concat!(root!(), ":enqueued:%<job_class>s:tenant:%<fair_tenant>s");
/// Prefix of the per-class tenant index (a hash: tenant -> newest enqueue time, packed).
pub const TENANTS_PREFIX: &str = concat!(root!(), ":tenants:");
/// Tenants kept in a class's tenant index.
pub const INDEX_CAP: u64 = 10_000;
/// Bytes before the enqueue times in a tenant key's value (two packed doubles).
pub const ROUTE_HEADER: u64 = 16;
/// Written (with a short TTL) to check that a connection may write.
pub const PROBE_KEY: &str = concat!(root!(), ":probe");

// Concurrency slots: `<SLOTS_PREFIX><len>:<tag>:<sub><HOLDERS>` and so on (slots.rs).
pub const SLOTS_PREFIX: &str = concat!(root!(), ":slots:");
pub const LIMITS_PREFIX: &str = concat!(root!(), ":limits:");
pub const SLOT_TAGS_KEY: &str = concat!(root!(), ":slots:tags");
pub const LIMITS_INDEX_KEY: &str = concat!(root!(), ":limits:index");
pub const HOLDERS: &str = ":holders";
pub const PARKED: &str = ":parked";
pub const WAITING: &str = ":waiting";
/// A scope's holders' runs: jid -> the run token of the server thread holding its slot, or
/// [`HANDED`] + the parking run's token while a handed-over slot waits for its job to be fetched.
pub const RUNS: &str = ":runs";
/// A scope's parked jobs' own terms: jid -> "<run><META_SEPARATOR><default limit><META_SEPARATOR><lease ms>".
pub const WAITS: &str = ":waits";
pub const HANDED: &str = "^";
/// A run's value in `RUNS` once its run was given up (a lost acquire reply) after its copy was handed over and
/// fetched: the copy that claims the slot drops itself (the job ran already).
pub const DROPPED: &str = "~";
/// A scope's runs given up whose lost acquire had not reached Redis yet: run -> 1, the hash expiring
/// `GONE_TTL_MS` after its last write; such an acquire, when it comes, takes nothing.
pub const GONE: &str = ":gone";
/// A scope's parked jobs of several scopes (issue 32, plain queues): jid -> every scope of the job, packed with
/// cmsgpack as `{ {base, sub, limits key, default limit, lease ms}, ... }`, so a hand-over takes a slot in
/// each at once, or moves the job to park on the one that refuses.
pub const OTHERS: &str = ":others";
pub const GONE_TTL_MS: u64 = 600_000;
/// Most parked jobs one script call hands a slot (release, sweep, a runtime limit), and most payload bytes
/// (the job that crosses it still goes): the rest go in further calls.
pub const HAND_OVER_BATCH: u64 = 100;
pub const HAND_OVER_BYTES: u64 = 1_000_000;
/// A run given up after a lost acquire reply takes its handed-over copy back from this many jobs at its
/// queue's tail (where a hand-over pushes it), at most.
pub const FORGET_TAIL: u64 = 50;
/// Most runs a server process keeps to give back after lost acquire replies (`LostReplies`) while Redis does not
/// answer; past it the oldest are dropped (their leases expire; a parked copy may then run the job again).
pub const LOST_REPLIES_MAX: u64 = 10_000;
/// How long a job's acquire is sent again (the same run: idempotent) while Redis does not answer, before the job
/// runs without its slot (fail-open), and the pause between two sends: a stall shorter than this ends with the
/// acquire's own answer (acquired, parked or dropped), so no copy of the job is left to run it again.
pub const ACQUIRE_PATIENCE_MS: u64 = 5_000;
pub const ACQUIRE_PAUSE_MS: u64 = 100;
/// Longest a finished job's release waits for the thread's next acquire to carry it (one round trip per job in
/// place of two) before it is sent alone; only a slot taken with room waits (`acquire.lua`'s code 4).
pub const RELEASE_DEFER_MS: u64 = 5;
/// Appended to a scope's waiting key: its index, a hash "<len>:<queue><tenant>" -> that tenant's waiting
/// entry, so a requeue, a recovery or a removal finds a tenant's entry in O(1) however many wait.
pub const WAITING_INDEX: &str = ":index";
/// A tenant missing from a waiting index (held back by a version that kept none) is looked for among the
/// scope's entries only while the scope has at most this many (one read of them all).
pub const WAITING_SCAN_MAX: u64 = 1000;
/// How deep in its tenant's list a process back from a stall looks for the copy of a recovered job still
/// waiting (at the front, behind only the jobs recovered or requeued to that tenant since): bounds that call.
pub const TAKE_BACK_DEPTH: u64 = 10_000;
/// A tag's sweep registration: sub -> "<default limit><META_SEPARATOR><lease ms>".
pub const META: &str = "meta";
pub const META_SEPARATOR: &str = " ";
/// Tag of a tenant's scopes and sub of one queue's; tag and sub of a custom key's scope.
pub const TENANT_TAG: &str = "t:";
pub const QUEUE_SUB: &str = "q:";
pub const KEY_TAG: &str = "k:";
pub const KEY_SUB: &str = "k";
/// The field of a tag's limits hash that applies to all its scopes.
pub const ALL_SCOPES: &str = "*";
pub const DEFAULT_LIMIT: u64 = 1;
pub const DEFAULT_LEASE_MS: u64 = 60_000;
/// The payload field of a fair-queue job that takes a slot when served, an array laid out as
/// [`SLOT_FIELDS`] (the prelude numbers them from 1: `K_SLOT_TAG` ... `K_SLOT_ELASTIC`).
pub const SLOT_FIELD: &str = "fair_tenant_slot";
pub const SLOT_FIELDS: [&str; 5] = ["tag", "sub", "limit", "lease", "elastic"];
/// The payload field of a fair-queue job with several concurrency scopes: the scopes after its first (which
/// stays in [`SLOT_FIELD`], so a fetcher of a version without this field still holds the job to it during
/// a rolling deploy), an array of [`SLOT_FIELDS`] arrays, right after [`SLOT_FIELD`] in the job's head.
pub const SLOT_MORE_FIELD: &str = "fair_tenant_slots_more";

// Rate caps inside fair queues (`fair_tenant_rate`, fair/rate.rs): a scope's windows in one hash
// `<RATE_PREFIX><len>:<tag>:<sub>`, one field per window length (ms): its live buckets.
pub const RATE_PREFIX: &str = concat!(root!(), ":rate:");
/// The payload field of a fair-queue job with a rate cap: [tag, sub, limit, per ms, limit, per ms, ...].
pub const RATE_FIELD: &str = "fair_tenant_rate_cap";
/// The payload field of a fair-queue job whose rate windows name several scopes (`key:` per window): the scopes
/// after its first (which stays in [`RATE_FIELD`]), an array of [`RATE_FIELD`] arrays, right after it.
pub const RATE_MORE_FIELD: &str = "fair_tenant_rate_caps_more";
/// Field of a scope's rate hash: the greatest Redis time (ms) the scope has seen (its clock never goes back).
pub const RATE_SEEN: &str = "t";
/// Buckets per window length: a start is counted at most per / RATE_BUCKETS too long.
pub const RATE_BUCKETS: u64 = 20;
/// Most windows one `fair_tenant_rate` option may hold.
pub const MAX_RATE_WINDOWS: u64 = 8;
/// Most concurrency scopes one job may name (`fair_tenant_concurrency: [{ limit: 2 }, { limit: 20, key: :api }]`):
/// each is one more set of keys every start and release of the job touches.
pub const MAX_CONCURRENCY_SCOPES: u64 = 4;
/// Most rate-capped tenants one serving call brings back into the rotation once due.
pub const RATE_WAKE_BATCH: u64 = 20;
/// Runtime rate overrides: `<RATE_LIMITS_PREFIX><len>:<tag>`, field sub (or [`ALL_SCOPES`]) -> windows as
/// "limit:per ms,limit:per ms" ([`RATE_OVERRIDE_SEPARATOR`] between windows, `:` inside one).
pub const RATE_LIMITS_PREFIX: &str = concat!(root!(), ":rate-limits:");
/// The tags that have runtime rate overrides.
pub const RATE_LIMITS_INDEX_KEY: &str = concat!(root!(), ":rate-limits:index");
/// Runtime rate overrides whose recheck of the fair queues' rated tenants is under way: member (`rate.rs`'s
/// `recheck_member`) -> the writer's nonce. The writer removes its own when done; a recovery sweep finishes
/// one a writer left (killed, a call refused).
pub const RATE_RECHECKS_KEY: &str = concat!(root!(), ":rate-limits:rechecks");
pub const RATE_OVERRIDE_SEPARATOR: &str = ",";

// Fair queues: `<FAIR_PREFIX>{<queue>}:<suffix>` (fair.rs).
pub const FAIR_PREFIX: &str = concat!(root!(), ":fair:");
/// A fair queue's key prefix, `{<queue>}` its Redis Cluster hash tag, with [`QUEUE_PLACEHOLDER`] for the queue.
pub const FAIR_BASE: &str = concat!(root!(), ":fair:{%Q}:");
pub const QUEUE_PLACEHOLDER: &str = "%Q";
pub const FAIR_WEIGHTS_KEY: &str = concat!(root!(), ":fair:weights");
/// A process's in-flight jobs: a hash, field `<len>:<queue><len>:<tenant><id>[INFLIGHT_SLOT_MARK]` (the id
/// from [`INFLIGHT_SEQ_KEY`], so a field is short and unique; the mark when the job took a concurrency slot),
/// value the job's bytes as they were served. An acknowledgement is an HDEL of the field: the job's bytes never
/// come back, and its cost does not grow with the number in flight. (Format 1 and 2 kept a list of
/// `<len>:<queue><len>:<tenant><job>` entries: a recovery turns one into this hash first, `ack.lua`.)
pub const INFLIGHT_PREFIX: &str = concat!(root!(), ":fair:inflight:");
/// The counter an in-flight field's id comes from: one INCRBY a fetch call, for all the jobs it serves.
pub const INFLIGHT_SEQ_KEY: &str = concat!(root!(), ":fair:inflight-seq");
/// The end of an in-flight field whose job took a concurrency slot: its acknowledgement reads the job (its
/// scope) to give the slot back; others are dropped unread.
pub const INFLIGHT_SLOT_MARK: &str = "s";
pub const INFLIGHT_OWNERS_KEY: &str = concat!(root!(), ":fair:inflight-owners");
pub const INFLIGHT_SUSPECTS_KEY: &str = concat!(root!(), ":fair:inflight-suspects");
pub const INFLIGHT_RECOVERING_KEY: &str = concat!(root!(), ":fair:inflight-recovering");
/// Fair queues where a tenant was paused (weight 0): where a raised weight looks, whatever Sidekiq's `queues`
/// set still names (`Queue#clear` empties it).
pub const FAIR_PAUSED_QUEUES_KEY: &str = concat!(root!(), ":fair:paused-queues");
/// Fair queues switched off (`fair-off`: its drain adds the queue; a process that boots with the queue in
/// `fair_queues` removes it): their requeued and recovered jobs go to `queue:<name>`, and sweeps finish a drain
/// cut short.
pub const FAIR_OFF_KEY: &str = concat!(root!(), ":fair:off");
/// Fair queues whose `Queue#clear` began and has not finished (a hash: queue -> the clear's cut, Redis's time
/// in seconds at its first call, then the finishing sweep's cursor): a recovery sweep finishes a clear cut
/// short, deleting only tenants whose last job was enqueued by the cut (clear.lua).
pub const FAIR_CLEARING_KEY: &str = concat!(root!(), ":fair:clearing");
/// The fair state's format version (`fair/version.rs`).
pub const FAIR_FORMAT_KEY: &str = concat!(root!(), ":fair:format");
pub const RECOVERED_PREFIX: &str = concat!(root!(), ":fair:recovered:");
pub const RECOVERY_LOCK_KEY: &str = concat!(root!(), ":fair:recovery-lock");
pub const RECOVERY_LEASE_KEY: &str = concat!(root!(), ":fair:recovery-lease");
pub const READY: &str = "ready";
pub const STATE: &str = "state";
pub const FIN: &str = "fin";
pub const PAUSED: &str = "paused";
pub const SIG: &str = "sig";
pub const HEADS: &str = "heads";
pub const CAPPED: &str = "capped";
pub const OVER: &str = "over";
/// Tenants out of the rotation until a rate window lets their next job start (score: that instant, ms).
pub const RATED: &str = "rated";
/// The start tags the tenants of [`RATED`] keep (member -> tag).
pub const RATED_TAGS: &str = "rated-tags";
/// Each tenant's member in ready, capped, over or rated (tenant -> member): found without walking the tiers.
pub const MEMBERS: &str = "members";
/// Prefix of a tenant's job list.
pub const TENANT_LIST: &str = "t:";
/// Fields of the state hash: virtual time, jobs waiting, activations.
pub const STATE_V: &str = "v";
pub const STATE_N: &str = "n";
pub const STATE_SEQ: &str = "seq";
/// Between tenant and queue in a per-queue weight's field.
pub const WEIGHT_SEPARATOR: &str = "\n";
/// A member of ready, capped and over: this many hex digits of the tenant's activation, then the tenant.
pub const ACTIVATION_DIGITS: u64 = 16;
/// Most wake-up tokens kept per queue: enough to wake every idle thread of a large fleet.
pub const TOKEN_CAP: u64 = 1000;
/// Most threads of a process one fetch call serves (the wants that queued while a call was under way). The
/// call's fixed cost (registration check, acknowledgements, the reply) is shared by the jobs it serves: at 8
/// a call a minimal fair turn measured 0.47x BRPOP's Redis CPU per job, against 1.67x at 1, and little more
/// is won past that while the call's length grows with each job; 16 covers a process at Sidekiq's usual
/// concurrency (5 to 25) at saturation in one or two calls.
pub const FETCH_BATCH: u64 = 16;
/// Most idle finish tags behind the virtual time one serving call forgets (they are harmless, only memory).
pub const FIN_PRUNE: u64 = 100;
/// Most jobs one call of the push script pushes: a bulk push of more is one call per slice, the calls of one
/// bulk push sent together (one round trip).
pub const PUSH_BATCH: u64 = 100;
/// Prefix (after a fair queue's base) of the key a bulk push's call sets with its id: the same call sent again
/// (a lost reply, a pipeline sent again after one of its calls was refused) finds it and pushes nothing twice.
pub const PUSH_CALL: &str = "pushed:";
/// Seconds a bulk push's call id is kept: far longer than a client takes to send a call again.
pub const PUSH_CALL_TTL: u64 = 300;
/// Most jobs one call of the drain script moves (`fair-off`), paused tenants' included.
pub const DRAIN_BATCH: u64 = 50;
/// Most tenants one call of the clear script deletes (Queue#clear); their lists are UNLINKed.
pub const CLEAR_BATCH: u64 = 200;
/// Most in-flight entries of a dead process one recover call takes back.
pub const RECOVER_BATCH: u64 = 50;
/// Most bytes of in-flight entries one recover call takes back (past the first entry: one entry larger than
/// this goes alone), read RECOVER_PAGE entries per LRANGE: a call carries at most about twice this (the
/// entries and the jobs as put back), however large the jobs.
pub const RECOVER_BYTES: u64 = 1_000_000;
pub const RECOVER_PAGE: u64 = 5;
/// Most bytes of jobs one call carries in or out, past its first job (one job larger than this goes alone):
/// a push or a requeue of many (sliced by the caller), a drain call, a page of a fair backlog (`jobs`). Read
/// from a list one job first, then up to RECOVER_PAGE at a time as many of the largest seen fit.
pub const CALL_BYTES: u64 = 1_000_000;
/// How a fair queue shares its workers: by job count (the default) or by worker time (`queue:time`).
pub const FAIR_MODE_JOBS: &str = "jobs";
pub const FAIR_MODE_TIME: &str = "time";
/// Between a queue's name and its mode in the environment form (`default,imports:time`).
pub const FAIR_MODE_SEPARATOR: &str = ":";
/// Longest fair queue name, in bytes (`fair_queues` refuses longer ones: every key of the queue names it).
pub const FAIR_QUEUE_MAX_BYTES: u64 = 200;
/// Longest tenant name kept as it is, in bytes; a longer one is stored as its first bytes (cut on a character
/// boundary), [`TENANT_DIGEST_SEPARATOR`] and the SHA-1 of the whole name in hex, [`TENANT_MAX_BYTES`] bytes at most.
pub const TENANT_MAX_BYTES: u64 = 256;
pub const TENANT_DIGEST_SEPARATOR: &str = "~sha1:";
/// A fair queue's hash of its tenants' recent mean run times (ms), under `time`.
pub const RUNTIMES: &str = "rt";
/// The field of a fair queue's state hash holding the recent mean run time (ms) of all its tenants.
pub const STATE_MEAN: &str = "mean";
/// What a job of a `time` queue is charged when served (its tenant's mean), and what a measured run time
/// counts, bounded by these (ms); a tenant with no history is charged the queue's mean, or the default.
pub const TIME_FLOOR_MS: u64 = 1;
pub const TIME_CAP_MS: u64 = 60_000;
pub const TIME_DEFAULT_MS: u64 = 1_000;
/// The means move by 1/TIME_EWMA_DIVISOR of the way to each run time measured (an EWMA).
pub const TIME_EWMA_DIVISOR: u64 = 5;
/// Most waiting jobs one call of the find script reads looking for a jid (`why`), and most bytes of them.
pub const FIND_BATCH: u64 = 1000;
pub const FIND_BYTES: u64 = 1_000_000;
/// Most rate-held tenants one call of the set_rate script reads (one job head each) to apply a runtime rate.
pub const RATE_RECHECK_BATCH: u64 = 500;
/// `why`: a tenant's share is computed while at most this many tenants are ready (one weight read each).
pub const WHY_SHARE_MAX: u64 = 1000;
/// `why`: most holders of a concurrency scope listed.
pub const WHY_HOLDERS: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Str(&'static str),
    Int(u64),
}

/// Where the scan test looks for hand-spelled copies of a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// String literals of the scripts and of the Ruby library.
    Everywhere,
    /// String literals of the scripts only (the value is too common a word in Ruby).
    Lua,
    /// Not scanned as a literal (one character used for other things too); `spelled` may still list the
    /// code that betrays a copy.
    Literal,
}

pub struct Name {
    pub name: &'static str,
    pub value: Value,
    pub scan: Scan,
    /// Lua code that spells the name by hand without quoting it (a magic number, a format).
    pub spelled: &'static [&'static str],
}

const fn s(name: &'static str, value: &'static str, scan: Scan) -> Name {
    Name {
        name,
        value: Value::Str(value),
        scan,
        spelled: &[],
    }
}

const fn n(name: &'static str, value: u64, spelled: &'static [&'static str]) -> Name {
    Name {
        name,
        value: Value::Int(value),
        scan: Scan::Literal,
        spelled,
    }
}

use Scan::{Everywhere, Literal, Lua};

/// The registry the prelude, `Native::Names` and the scan test read.
pub const NAMES: &[Name] = &[
    s("ROOT", ROOT, Everywhere),
    s("DEFAULT_ENQUEUES_KEY", DEFAULT_ENQUEUES_KEY, Everywhere),
    s("TENANTS_PREFIX", TENANTS_PREFIX, Everywhere),
    n("INDEX_CAP", INDEX_CAP, &["10000", "10_000"]),
    n(
        "ROUTE_HEADER",
        ROUTE_HEADER,
        &[">= 16", "value, 17)", "* 8 + 17", "9, 16)"],
    ),
    s("PROBE_KEY", PROBE_KEY, Everywhere),
    s("SLOTS_PREFIX", SLOTS_PREFIX, Everywhere),
    s("LIMITS_PREFIX", LIMITS_PREFIX, Everywhere),
    s("SLOT_TAGS_KEY", SLOT_TAGS_KEY, Everywhere),
    s("LIMITS_INDEX_KEY", LIMITS_INDEX_KEY, Everywhere),
    s("HOLDERS", HOLDERS, Everywhere),
    s("PARKED", PARKED, Lua),
    s("WAITING", WAITING, Lua),
    s("RUNS", RUNS, Lua),
    s("WAITS", WAITS, Lua),
    s("HANDED", HANDED, Literal),
    s("DROPPED", DROPPED, Literal),
    s("GONE", GONE, Lua),
    s("OTHERS", OTHERS, Lua),
    n("GONE_TTL_MS", GONE_TTL_MS, &[]),
    n("HAND_OVER_BATCH", HAND_OVER_BATCH, &[]),
    n("HAND_OVER_BYTES", HAND_OVER_BYTES, &[]),
    n("FORGET_TAIL", FORGET_TAIL, &[]),
    n("LOST_REPLIES_MAX", LOST_REPLIES_MAX, &[]),
    n("ACQUIRE_PATIENCE_MS", ACQUIRE_PATIENCE_MS, &[]),
    n("ACQUIRE_PAUSE_MS", ACQUIRE_PAUSE_MS, &[]),
    n("RELEASE_DEFER_MS", RELEASE_DEFER_MS, &[]),
    s("WAITING_INDEX", WAITING_INDEX, Lua),
    n("WAITING_SCAN_MAX", WAITING_SCAN_MAX, &[]),
    n("TAKE_BACK_DEPTH", TAKE_BACK_DEPTH, &[]),
    s("META", META, Everywhere),
    s("META_SEPARATOR", META_SEPARATOR, Literal),
    s("TENANT_TAG", TENANT_TAG, Everywhere),
    s("QUEUE_SUB", QUEUE_SUB, Everywhere),
    s("KEY_TAG", KEY_TAG, Everywhere),
    s("KEY_SUB", KEY_SUB, Lua),
    s("ALL_SCOPES", ALL_SCOPES, Lua),
    n("DEFAULT_LIMIT", DEFAULT_LIMIT, &[]),
    n("DEFAULT_LEASE_MS", DEFAULT_LEASE_MS, &["60000", "60_000"]),
    s("SLOT_FIELD", SLOT_FIELD, Everywhere),
    s("SLOT_MORE_FIELD", SLOT_MORE_FIELD, Everywhere),
    s("RATE_PREFIX", RATE_PREFIX, Everywhere),
    s("RATE_FIELD", RATE_FIELD, Everywhere),
    s("RATE_MORE_FIELD", RATE_MORE_FIELD, Everywhere),
    s("RATE_SEEN", RATE_SEEN, Literal),
    n("RATE_BUCKETS", RATE_BUCKETS, &[]),
    n("MAX_RATE_WINDOWS", MAX_RATE_WINDOWS, &[]),
    n("MAX_CONCURRENCY_SCOPES", MAX_CONCURRENCY_SCOPES, &[]),
    n("RATE_WAKE_BATCH", RATE_WAKE_BATCH, &[]),
    s("RATE_LIMITS_PREFIX", RATE_LIMITS_PREFIX, Everywhere),
    s("RATE_LIMITS_INDEX_KEY", RATE_LIMITS_INDEX_KEY, Everywhere),
    s("RATE_RECHECKS_KEY", RATE_RECHECKS_KEY, Everywhere),
    s("RATE_OVERRIDE_SEPARATOR", RATE_OVERRIDE_SEPARATOR, Literal),
    s("FAIR_PREFIX", FAIR_PREFIX, Everywhere),
    s("FAIR_BASE", FAIR_BASE, Everywhere),
    s("QUEUE_PLACEHOLDER", QUEUE_PLACEHOLDER, Everywhere),
    s("FAIR_WEIGHTS_KEY", FAIR_WEIGHTS_KEY, Everywhere),
    s("INFLIGHT_PREFIX", INFLIGHT_PREFIX, Everywhere),
    s("INFLIGHT_SEQ_KEY", INFLIGHT_SEQ_KEY, Everywhere),
    s("INFLIGHT_SLOT_MARK", INFLIGHT_SLOT_MARK, Lua),
    s("INFLIGHT_OWNERS_KEY", INFLIGHT_OWNERS_KEY, Everywhere),
    s("INFLIGHT_SUSPECTS_KEY", INFLIGHT_SUSPECTS_KEY, Everywhere),
    s(
        "INFLIGHT_RECOVERING_KEY",
        INFLIGHT_RECOVERING_KEY,
        Everywhere,
    ),
    s("FAIR_PAUSED_QUEUES_KEY", FAIR_PAUSED_QUEUES_KEY, Everywhere),
    s("FAIR_OFF_KEY", FAIR_OFF_KEY, Everywhere),
    s("FAIR_CLEARING_KEY", FAIR_CLEARING_KEY, Everywhere),
    s("FAIR_FORMAT_KEY", FAIR_FORMAT_KEY, Everywhere),
    s("RECOVERED_PREFIX", RECOVERED_PREFIX, Everywhere),
    s("RECOVERY_LOCK_KEY", RECOVERY_LOCK_KEY, Everywhere),
    s("RECOVERY_LEASE_KEY", RECOVERY_LEASE_KEY, Everywhere),
    s("READY", READY, Everywhere),
    s("STATE", STATE, Everywhere),
    s("FIN", FIN, Everywhere),
    s("PAUSED", PAUSED, Lua),
    s("SIG", SIG, Everywhere),
    s("HEADS", HEADS, Everywhere),
    s("CAPPED", CAPPED, Everywhere),
    s("OVER", OVER, Everywhere),
    s("RATED", RATED, Everywhere),
    s("RATED_TAGS", RATED_TAGS, Everywhere),
    s("MEMBERS", MEMBERS, Everywhere),
    s("TENANT_LIST", TENANT_LIST, Everywhere),
    s("STATE_V", STATE_V, Everywhere),
    s("STATE_N", STATE_N, Everywhere),
    s("STATE_SEQ", STATE_SEQ, Everywhere),
    s("WEIGHT_SEPARATOR", WEIGHT_SEPARATOR, Lua),
    n(
        "ACTIVATION_DIGITS",
        ACTIVATION_DIGITS,
        &["sub(17)", "%016x", "(?, 16)", "..16]", "[16..", "+ 18"],
    ),
    n("TOKEN_CAP", TOKEN_CAP, &["CAP = 1000"]),
    n("FIN_PRUNE", FIN_PRUNE, &[]),
    n("FETCH_BATCH", FETCH_BATCH, &[]),
    n("PUSH_BATCH", PUSH_BATCH, &[]),
    s("PUSH_CALL", PUSH_CALL, Everywhere),
    n("PUSH_CALL_TTL", PUSH_CALL_TTL, &[]),
    n("DRAIN_BATCH", DRAIN_BATCH, &[]),
    n("CLEAR_BATCH", CLEAR_BATCH, &[]),
    n("RECOVER_BATCH", RECOVER_BATCH, &[]),
    n("RECOVER_BYTES", RECOVER_BYTES, &[]),
    n("RECOVER_PAGE", RECOVER_PAGE, &[]),
    n("CALL_BYTES", CALL_BYTES, &[]),
    s("FAIR_MODE_JOBS", FAIR_MODE_JOBS, Literal),
    s("FAIR_MODE_TIME", FAIR_MODE_TIME, Literal),
    s("FAIR_MODE_SEPARATOR", FAIR_MODE_SEPARATOR, Literal),
    n("FAIR_QUEUE_MAX_BYTES", FAIR_QUEUE_MAX_BYTES, &[]),
    n("TENANT_MAX_BYTES", TENANT_MAX_BYTES, &[]),
    s("RUNTIMES", RUNTIMES, Lua),
    s("STATE_MEAN", STATE_MEAN, Lua),
    n("TIME_FLOOR_MS", TIME_FLOOR_MS, &[]),
    n("TIME_CAP_MS", TIME_CAP_MS, &[]),
    n("TIME_DEFAULT_MS", TIME_DEFAULT_MS, &[]),
    n("TIME_EWMA_DIVISOR", TIME_EWMA_DIVISOR, &[]),
    n("FIND_BATCH", FIND_BATCH, &[]),
    n("FIND_BYTES", FIND_BYTES, &[]),
    n("RATE_RECHECK_BATCH", RATE_RECHECK_BATCH, &[]),
    n("WHY_SHARE_MAX", WHY_SHARE_MAX, &[]),
    n("WHY_HOLDERS", WHY_HOLDERS, &[]),
];

/// A script's final text: its parts, each `K_<NAME>` replaced by the name's value in parentheses. Panics on
/// a `K_<NAME>` not in [`NAMES`] (the test building every script catches it).
pub fn script(parts: &[&str]) -> String {
    let body = parts.concat();
    let names = lua_names();
    let mut out = String::with_capacity(body.len());
    let mut copied = 0;
    for (at, ident) in references(&body) {
        let value = names
            .iter()
            .find(|(n, _)| *n == ident)
            .unwrap_or_else(|| panic!("K_{ident}: no such shared name (names.rs)"))
            .1;
        out.push_str(&body[copied..at]);
        out.push('(');
        out.push_str(&lua_value(value));
        out.push(')');
        copied = at + 2 + ident.len();
    }
    out.push_str(&body[copied..]);
    out
}

/// Where `body` reads a name as `K_<NAME>`, and the name.
fn references(body: &str) -> impl Iterator<Item = (usize, &str)> {
    body.match_indices("K_").filter_map(move |(at, _)| {
        if at > 0 && is_ident(body.as_bytes()[at - 1]) {
            return None;
        }
        let rest = &body[at + 2..];
        let end = rest
            .bytes()
            .position(|b| !is_ident(b))
            .unwrap_or(rest.len());
        (end > 0).then_some((at, &rest[..end]))
    })
}

/// Every name a script may use: the registry, then `SLOT_<FIELD>` = its position (from 1).
fn lua_names() -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = NAMES
        .iter()
        .map(|n| (n.name.to_string(), n.value))
        .collect();
    for (i, field) in SLOT_FIELDS.iter().enumerate() {
        out.push((
            format!("SLOT_{}", field.to_uppercase()),
            Value::Int(i as u64 + 1),
        ));
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn lua_value(value: Value) -> String {
    match value {
        Value::Int(i) => i.to_string(),
        Value::Str(s) => {
            let mut out = String::from("'");
            for b in s.bytes() {
                match b {
                    b'\\' => out.push_str("\\\\"),
                    b'\'' => out.push_str("\\'"),
                    b' '..=b'~' => out.push(b as char),
                    other => out.push_str(&format!("\\{other:03}")),
                }
            }
            out.push('\'');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.ends_with("target") {
                    files(&path, ext, out);
                }
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }

    fn crate_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// The Ruby files scanned: the library, and the benchmarks and demo that ship in the repository.
    fn ruby_files() -> Vec<PathBuf> {
        let root = crate_dir().join("../..");
        let mut out = Vec::new();
        for dir in ["lib", "bench", "demo"] {
            files(&root.join(dir), "rb", &mut out);
        }
        out
    }

    fn lua_files() -> Vec<PathBuf> {
        let mut out = Vec::new();
        files(&crate_dir(), "lua", &mut out);
        out
    }

    /// A source reduced to what the scan reads: its code (comments and string contents blanked) and its
    /// string literals, each with its line.
    #[derive(Default)]
    struct Lexed {
        code: String,
        literals: Vec<(usize, String)>,
    }

    /// Lua: `--` comments, '...' and "..." strings with backslash escapes.
    fn lex_lua(src: &str) -> Lexed {
        let mut out = Lexed::default();
        let b = src.as_bytes();
        let (mut i, mut line) = (0, 1);
        while i < b.len() {
            match b[i] {
                b'-' if b.get(i + 1) == Some(&b'-') => {
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                }
                q @ (b'\'' | b'"') => {
                    let mut lit = Vec::new();
                    i += 1;
                    while i < b.len() && b[i] != q {
                        if b[i] == b'\\' && i + 1 < b.len() {
                            i += 1;
                            match b[i] {
                                b'n' => lit.push(b'\n'),
                                b't' => lit.push(b'\t'),
                                d if d.is_ascii_digit() => {
                                    let end = (i..b.len().min(i + 3))
                                        .take_while(|&j| b[j].is_ascii_digit())
                                        .last()
                                        .unwrap();
                                    lit.push(src[i..=end].parse().unwrap());
                                    i = end;
                                }
                                c => lit.push(c),
                            }
                        } else {
                            lit.push(b[i]);
                        }
                        i += 1;
                    }
                    out.literals
                        .push((line, String::from_utf8_lossy(&lit).into_owned()));
                    out.code.push_str("''");
                    i += 1;
                }
                c => {
                    if c == b'\n' {
                        line += 1;
                    }
                    out.code.push(c as char);
                    i += 1;
                }
            }
        }
        out
    }

    /// Ruby, roughly: `#` comments, heredocs (skipped: text for people), '...' strings, and "..." strings
    /// split at their `#{...}` interpolations (whose code is lexed too).
    fn lex_ruby(src: &str) -> Lexed {
        let mut out = Lexed::default();
        let mut heredoc: Option<String> = None;
        let mut code = String::new();
        for (n, text) in src.lines().enumerate() {
            if let Some(end) = &heredoc {
                if text.trim() == end {
                    heredoc = None;
                }
                code.push('\n');
                continue;
            }
            if let Some(at) = text.find("<<~").or_else(|| text.find("<<-")) {
                let word: String = text[at + 3..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                if !word.is_empty() {
                    heredoc = Some(word);
                }
            }
            lex_ruby_line(text, n + 1, &mut out.literals, &mut code);
            code.push('\n');
        }
        out.code = code;
        out
    }

    fn lex_ruby_line(
        text: &str,
        line: usize,
        literals: &mut Vec<(usize, String)>,
        code: &mut String,
    ) {
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'#' => return,
                b'?' if i + 1 < b.len() && matches!(b[i + 1], b'\'' | b'"') => {
                    i += 2; // a character literal
                }
                b'\'' => {
                    let mut lit = String::new();
                    i += 1;
                    while i < b.len() && b[i] != b'\'' {
                        if b[i] == b'\\' && i + 1 < b.len() && matches!(b[i + 1], b'\'' | b'\\') {
                            i += 1;
                        }
                        lit.push(b[i] as char);
                        i += 1;
                    }
                    literals.push((line, lit));
                    code.push_str("''");
                    i += 1;
                }
                b'"' => {
                    let mut lit = String::new();
                    i += 1;
                    while i < b.len() && b[i] != b'"' {
                        if b[i] == b'\\' && i + 1 < b.len() {
                            i += 1;
                            lit.push(if b[i] == b'n' { '\n' } else { b[i] as char });
                        } else if b[i] == b'#' && b.get(i + 1) == Some(&b'{') {
                            literals.push((line, std::mem::take(&mut lit)));
                            let (mut depth, start) = (1, i + 2);
                            i += 2;
                            while i < b.len() && depth > 0 {
                                match b[i] {
                                    b'{' => depth += 1,
                                    b'}' => depth -= 1,
                                    _ => {}
                                }
                                i += 1;
                            }
                            lex_ruby_line(&text[start..i - 1], line, literals, code);
                            continue;
                        } else {
                            lit.push(b[i] as char);
                        }
                        i += 1;
                    }
                    literals.push((line, lit));
                    code.push_str("\"\"");
                    i += 1;
                }
                c => {
                    code.push(c as char);
                    i += 1;
                }
            }
        }
    }

    /// Why a literal is a hand-spelled copy of `name`, if it is.
    fn copies(name: &Name, literal: &str) -> bool {
        let Value::Str(value) = name.value else {
            return false;
        };
        if literal.is_empty() {
            return false;
        }
        if name.name == "ROOT" {
            // The root in a key (not the CLI's "sidekiq-fair_tenant: <message>").
            return literal
                .match_indices(ROOT)
                .any(|(at, _)| literal[at + ROOT.len()..].starts_with(':'))
                && !literal.contains(&format!("{ROOT}: "));
        }
        literal == value
            || value.strip_prefix(':') == Some(literal)
            || (value.contains(ROOT) && literal.contains(value))
    }

    /// Every hand-spelled copy of a registered name in `files`: "path:line NAME".
    fn scan(files: &[PathBuf], lex: fn(&str) -> Lexed, lua: bool) -> Vec<String> {
        let mut found = Vec::new();
        for path in files {
            let src = std::fs::read_to_string(path).unwrap();
            let lexed = lex(&src);
            let shown = path.display();
            for name in NAMES {
                let scanned = match name.scan {
                    Scan::Everywhere => true,
                    Scan::Lua => lua,
                    Scan::Literal => false,
                };
                if scanned {
                    for (line, literal) in &lexed.literals {
                        if copies(name, literal) {
                            found.push(format!("{shown}:{line} {} ({literal:?})", name.name));
                        }
                    }
                }
                for pattern in name.spelled.iter().filter(|_| lua) {
                    for (at, _) in lexed.code.match_indices(pattern) {
                        let line = lexed.code[..at].matches('\n').count() + 1;
                        found.push(format!("{shown}:{line} {} ({pattern:?})", name.name));
                    }
                }
            }
        }
        found
    }

    #[test]
    fn no_script_spells_a_shared_name_by_hand() {
        let lua = lua_files();
        assert!(lua.len() >= 20, "found {} scripts", lua.len());
        let found = scan(&lua, lex_lua, true);
        assert!(
            found.is_empty(),
            "spelled by hand (use K_<NAME>):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn no_ruby_file_spells_a_shared_name_by_hand() {
        let ruby = ruby_files();
        assert!(ruby.len() >= 40, "found {} Ruby files", ruby.len());
        let found = scan(&ruby, lex_ruby, false);
        assert!(
            found.is_empty(),
            "spelled by hand (use Native::Names::<NAME>):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn no_rust_file_but_this_one_spells_a_shared_name() {
        let mut rust = Vec::new();
        files(&crate_dir().join("src"), "rs", &mut rust);
        let mut found = Vec::new();
        for path in rust.iter().filter(|p| !p.ends_with("names.rs")) {
            let src = std::fs::read_to_string(path).unwrap();
            let code = src.split("#[cfg(test)]\nmod tests").next().unwrap();
            if path
                .file_name()
                .is_some_and(|f| f.to_string_lossy().ends_with("lockstep.rs"))
            {
                continue; // a test: it reads the layout as it is stored, by hand on purpose
            }
            for (n, line) in code.lines().enumerate() {
                let code_part = line.split("//").next().unwrap();
                if code_part.contains(&format!("\"{ROOT}")) {
                    found.push(format!("{}:{} ROOT", path.display(), n + 1));
                }
                for name in NAMES.iter().filter(|n| n.scan != Scan::Literal) {
                    if let Value::Str(value) = name.value {
                        if code_part.contains(&format!("\"{value}\"")) {
                            found.push(format!("{}:{} {}", path.display(), n + 1, name.name));
                        }
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "spelled by hand (use names::<NAME>):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn the_scan_finds_what_it_looks_for() {
        let lua = lex_lua("local x = base .. ':holders' -- 'ready' in a comment\nreturn m:sub(17), \"a\\nb\", '\\010'");
        assert_eq!(
            lua.literals,
            vec![(1, ":holders".into()), (2, "a\nb".into()), (2, "\n".into())]
        );
        assert!(lua.code.contains("sub(17)") && !lua.code.contains("ready"));
        let ruby = lex_ruby(
            "x = \"#{base}heads\" # \"ready\"\ny = '#{z}' + \"#{a.join(\"sig\")}\"\nt = <<~TEXT\n  \"over\"\nTEXT\n",
        );
        let literals: Vec<&str> = ruby.literals.iter().map(|(_, l)| l.as_str()).collect();
        assert!(
            literals.contains(&"heads") && literals.contains(&"sig"),
            "{literals:?}"
        );
        assert!(
            !literals.contains(&"ready") && !literals.contains(&"over"),
            "{literals:?}"
        );
        let by = |n: &str| NAMES.iter().find(|x| x.name == n).unwrap();
        assert!(copies(by("HOLDERS"), "holders") && copies(by("HOLDERS"), ":holders"));
        assert!(copies(by("ROOT"), "sidekiq-fair_tenant:slots:*"));
        assert!(!copies(by("ROOT"), "sidekiq-fair_tenant: bad option"));
        assert!(copies(by("FAIR_PREFIX"), "x sidekiq-fair_tenant:fair:y"));
        assert!(!copies(by("HEADS"), "headsets"));
    }

    #[test]
    fn every_name_is_unique_and_scripts_carry_rust_values() {
        let mut seen: Vec<&str> = NAMES.iter().map(|n| n.name).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), NAMES.len());
        let text =
            script(&["return { K_FAIR_PREFIX, K_WEIGHT_SEPARATOR, K_TOKEN_CAP, K_SLOT_ELASTIC }"]);
        assert_eq!(
            text,
            "return { ('sidekiq-fair_tenant:fair:'), ('\\010'), (1000), (5) }"
        );
        assert_eq!(script(&["return 1"]), "return 1", "no names used");
        assert_eq!(
            script(&["return x.K_..K_TOKEN_CAP..'K'"]),
            "return x.K_..(1000)..'K'"
        );
        assert_eq!(SLOT_FIELDS.len(), 5);
    }

    #[test]
    #[should_panic(expected = "K_NOPE: no such shared name")]
    fn a_script_naming_an_unknown_name_does_not_build() {
        script(&["return K_NOPE"]);
    }

    #[test]
    fn every_script_names_only_registered_names() {
        for path in lua_files() {
            let src = std::fs::read_to_string(&path).unwrap();
            let known = lua_names();
            for (_, r) in references(&src) {
                assert!(
                    known.iter().any(|(n, _)| n == r),
                    "{}: K_{r}",
                    path.display()
                );
            }
        }
    }
}
