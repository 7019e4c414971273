//! Fair order inside a queue: the scheduling rule, its keys and its scripts.
//!
//! The rule is start-time fair queueing (Goyal et al.) with one job as one unit of work:
//! - a tenant whose backlog was empty gets the start tag `S = max(V, F)` (`F`: the finish tag of its
//!   last job served, forgotten once `V` passes it), so a tenant back from idle cannot bank credit;
//! - the backlogged tenant with the smallest start tag is served; `V` becomes that tag, and the tenant's
//!   next job starts at `F = S + 1 / weight`;
//! - equal tags go to the tenant that became backlogged first (an activation counter), never by name;
//! - weight 0 pauses a tenant (its jobs stay, it leaves the rotation until its weight is raised);
//! - FIFO within a tenant; work-conserving: a lone tenant is served at every fetch.
//!
//! [`Sfq`] is the rule as a plain model, unit-tested here; `lua/fair/common.lua` applies the same rule
//! in Redis (`push.lua`, `fetch.lua`, `ack.lua`). A change to the policy changes both;
//! the lockstep test (`fair/lockstep.rs`) runs random sequences through both and fails on any difference.
//! Concurrency caps inside fair queues (`lua/fair/serve.lua`) are modelled on top of it in
//! [`crate::fair::caps`].

#[cfg(test)]
pub mod caps;
#[cfg(test)]
mod lockstep;
pub mod rules;

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use redis::Script;

macro_rules! fair_script {
    ($file:literal) => {
        LazyLock::new(|| {
            FairScript::new(concat!(
                include_str!("../lua/slots/common.lua"),
                include_str!("../lua/fair/common.lua"),
                include_str!("../lua/fair/serve.lua"),
                include_str!($file)
            ))
        })
    };
}

/// A script's source (the common part included) and its SHA1, for callers that run it on Sidekiq's
/// own connections (EVALSHA, then EVAL on NOSCRIPT).
pub struct FairScript {
    pub source: &'static str,
    pub sha: String,
}

impl FairScript {
    fn new(source: &'static str) -> FairScript {
        FairScript {
            source,
            sha: Script::new(source).get_hash().to_string(),
        }
    }
}

static PUSH: LazyLock<FairScript> = fair_script!("../lua/fair/push.lua");
static FETCH: LazyLock<FairScript> = fair_script!("../lua/fair/fetch.lua");
static ADOPT: LazyLock<FairScript> = fair_script!("../lua/fair/adopt.lua");
static ACK: LazyLock<FairScript> = fair_script!("../lua/fair/ack.lua");
static CLEAR: LazyLock<FairScript> = fair_script!("../lua/fair/clear.lua");
static WEIGHT: LazyLock<FairScript> = fair_script!("../lua/fair/weight.lua");
static DRAIN: LazyLock<FairScript> = fair_script!("../lua/fair/drain.lua");
static STATS: LazyLock<FairScript> = fair_script!("../lua/fair/stats.lua");
static JOBS: LazyLock<FairScript> = fair_script!("../lua/fair/jobs.lua");
static DELETE: LazyLock<FairScript> = fair_script!("../lua/fair/delete.lua");
static LATENCY: LazyLock<FairScript> = fair_script!("../lua/fair/latency.lua");
static HELD: LazyLock<FairScript> = fair_script!("../lua/fair/held.lua");

/// The scripts by name: `push`, `fetch`, `adopt`, `ack`, `clear`, `weight`, `drain`, `stats`, and for
/// Sidekiq's API and Web UI `jobs`, `delete`, `latency`, `held`.
pub fn script(name: &str) -> Option<&'static FairScript> {
    match name {
        "push" => Some(&PUSH),
        "fetch" => Some(&FETCH),
        "adopt" => Some(&ADOPT),
        "ack" => Some(&ACK),
        "clear" => Some(&CLEAR),
        "weight" => Some(&WEIGHT),
        "drain" => Some(&DRAIN),
        "stats" => Some(&STATS),
        "jobs" => Some(&JOBS),
        "delete" => Some(&DELETE),
        "latency" => Some(&LATENCY),
        "held" => Some(&HELD),
        _ => None,
    }
}

/// Prefix of every fair-queue key.
pub const PREFIX: &str = "sidekiq-fair_tenant:fair:";
/// Most wake-up tokens kept per queue: enough to wake every idle thread of a large fleet.
pub const TOKEN_CAP: u64 = 1000;
/// The tenant of jobs that name none.
pub const SHARED_TENANT: &str = "";

/// The key prefix of a fair queue's keys; `{queue}` is its Redis Cluster hash tag.
pub fn base(queue: &str) -> String {
    format!("{PREFIX}{{{queue}}}:")
}

/// [`base`] with `%Q` for the queue's name (the requeue script fills it in per entry).
pub fn base_template() -> String {
    format!("{PREFIX}{{%Q}}:")
}

/// The weights hash: `tenant` and `tenant \n queue` fields.
pub fn weights_key() -> String {
    format!("{PREFIX}weights")
}

/// A weight field: the tenant's, or the tenant's in one queue.
pub fn weight_field(tenant: &str, queue: Option<&str>) -> String {
    match queue {
        Some(q) => format!("{tenant}\n{q}"),
        None => tenant.to_string(),
    }
}

/// The in-flight list of one Sidekiq process (its identity).
pub fn inflight_key(identity: &str) -> String {
    format!("{PREFIX}inflight:{identity}")
}

/// The set of process identities that have an in-flight list (for orphan recovery).
pub fn registry_key() -> String {
    format!("{PREFIX}inflight-owners")
}

/// Registered processes whose Sidekiq heartbeat a recovery sweep found gone: identity -> when first seen
/// gone (Redis time, seconds). Cleared when the heartbeat is back or the process's jobs were recovered.
pub fn recovery_suspects_key() -> String {
    format!("{PREFIX}inflight-suspects")
}

/// Seconds a process's heartbeat key must stay gone, after a sweep first found it gone, before its
/// in-flight jobs are recovered: longer than one Sidekiq heartbeat interval (5 s in 6.x/7.x, 10 s in
/// 8.x), so a live process whose key was deleted or evicted has beaten again by then.
pub const RECOVERY_LAPSE_SECONDS: u64 = 11;

/// The copies a recovery made of one process's in-flight jobs: original entry -> the copy's entry (its
/// queue, tenant and payload as put back). A process that comes back (it had stalled) takes the copies
/// still waiting back into its in-flight list, as they were, before it fetches anything, so it neither
/// fetches them again nor leaves them to run after it finished them.
pub fn recovered_key(identity: &str) -> String {
    format!("{PREFIX}recovered:{identity}")
}

/// How long a recovery's copies are remembered for their process to come back: a process stalled
/// longer than this runs them again (at least once).
pub const RECOVERED_KEEP_SECONDS: u64 = 3600;

/// Held (SET NX, with a TTL) by the process recovering orphaned in-flight jobs.
pub fn recovery_lock_key() -> String {
    format!("{PREFIX}recovery-lock")
}

/// An in-flight job and where it goes back to: `<len>:<queue><len>:<tenant><job>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub queue: String,
    pub tenant: String,
    pub job: String,
}

impl Entry {
    pub fn encode(&self) -> String {
        format!(
            "{}:{}{}:{}{}",
            self.queue.len(),
            self.queue,
            self.tenant.len(),
            self.tenant,
            self.job
        )
    }

    pub fn decode(entry: &str) -> Option<Entry> {
        let (queue, tenant, job) = split_entry(entry.as_bytes())?;
        Some(Entry {
            queue: String::from_utf8(queue.to_vec()).ok()?,
            tenant: String::from_utf8(tenant.to_vec()).ok()?,
            job: String::from_utf8(job.to_vec()).ok()?,
        })
    }
}

/// An in-flight entry's queue, tenant and job as bytes: a job is moved as it was pushed, whatever its
/// bytes (not UTF-8, or read back under another default encoding); lengths count bytes, as Lua's `#`.
pub fn split_entry(entry: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (queue, rest) = take_counted(entry)?;
    let (tenant, job) = take_counted(rest)?;
    Some((queue, tenant, job))
}

fn take_counted(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = s.iter().take(21).position(|&b| b == b':')?;
    let digits = &s[..colon];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let len: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let rest = &s[colon + 1..];
    if rest.len() < len {
        return None;
    }
    Some(rest.split_at(len))
}

/// Largest weight accepted.
pub const MAX_WEIGHT: f64 = 1_000_000.0;

/// A weight to store: a number from 0 (pauses the tenant) to [`MAX_WEIGHT`].
pub fn check_weight(weight: f64) -> Result<f64, String> {
    if weight.is_finite() && (0.0..=MAX_WEIGHT).contains(&weight) {
        Ok(weight)
    } else {
        Err(format!(
            "weight must be a number from 0 to {MAX_WEIGHT} (0 pauses the tenant), got {weight}"
        ))
    }
}

/// A weight field back to (tenant, queue).
pub fn parse_weight_field(field: &str) -> (String, Option<String>) {
    match field.split_once('\n') {
        Some((tenant, queue)) => (tenant.to_string(), Some(queue.to_string())),
        None => (field.to_string(), None),
    }
}

/// A weight as the scripts read it: a number ≥ 0, 1 when unset or unreadable.
pub fn parse_weight(raw: Option<&str>) -> f64 {
    raw.and_then(|w| w.trim().parse::<f64>().ok())
        .filter(|w| w.is_finite())
        .map(|w| w.max(0.0))
        .unwrap_or(1.0)
}

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
            return Some((tenant, job));
        }
    }

    /// Bookkeeping once a job of `tenant` (start tag `start`, weight `w`) was taken from its backlog:
    /// `V` moves to `start`; the tenant's next start tag is returned, or, when it has no job left, that
    /// tag is remembered (and tags `V` passed are forgotten).
    pub(crate) fn served(&mut self, tenant: &str, start: f64, w: f64) -> Option<f64> {
        self.v = start;
        let finish = start + 1.0 / w;
        let more = self.backlog.get(tenant).is_some_and(|l| !l.is_empty());
        if !more {
            self.finish.insert(tenant.to_string(), finish);
        }
        self.finish.retain(|_, f| *f > start);
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

    /// Tenants remembered after going idle (bounded: forgotten once `V` passes their finish tag).
    pub fn remembered(&self) -> usize {
        self.finish.len()
    }
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
    fn idle_tenants_are_forgotten_once_virtual_time_passes_them() {
        let mut sfq = Sfq::new();
        for t in 0..10_000 {
            sfq.push(&format!("t{t}"), 0);
        }
        for j in 0..100 {
            sfq.push("greedy", j);
        }
        served(&mut sfq, 10_100);
        assert!(sfq.remembered() <= 1, "{}", sfq.remembered());
    }

    #[test]
    fn entries_round_trip_with_any_characters() {
        let e = Entry {
            queue: "imports".into(),
            tenant: "a:b\n7:{x}".into(),
            job: r#"{"jid":"1","args":["12:ab"]}"#.into(),
        };
        assert_eq!(Entry::decode(&e.encode()), Some(e.clone()));
        let shared = Entry {
            tenant: SHARED_TENANT.into(),
            ..e
        };
        assert_eq!(Entry::decode(&shared.encode()), Some(shared));
        assert_eq!(Entry::decode("x:y"), None);
        assert_eq!(Entry::decode("99:short"), None);
        assert_eq!(Entry::decode(":x0:"), None);
        assert_eq!(Entry::decode("-1:x0:"), None);
    }

    #[test]
    fn entries_split_as_bytes_whatever_the_job_holds() {
        let job: &[u8] = b"{\"args\":[\"caf\xe9 \xff\"]}";
        let mut entry = b"4:fair4:acme".to_vec();
        entry.extend_from_slice(job);
        assert_eq!(split_entry(&entry), Some((&b"fair"[..], &b"acme"[..], job)));
        let shop = "5:caf\u{e9}10:boutique\u{e9}{}".as_bytes();
        assert_eq!(
            split_entry(shop),
            Some((
                "caf\u{e9}".as_bytes(),
                "boutique\u{e9}".as_bytes(),
                &b"{}"[..]
            ))
        );
        assert_eq!(split_entry(b"not json"), None);
        assert_eq!(split_entry(b"4:fair9:acme{}"), None);
    }

    #[test]
    fn scripts_carry_the_common_rule_and_their_sha() {
        for name in [
            "push", "fetch", "adopt", "ack", "clear", "weight", "drain", "stats", "jobs", "delete",
            "latency", "held",
        ] {
            let s = script(name).unwrap();
            assert!(s.source.contains("local function activate"), "{name}");
            assert_eq!(s.sha.len(), 40);
        }
        assert!(script("nope").is_none());
    }

    #[test]
    fn the_caps_script_names_keys_as_rust_does() {
        let caps = include_str!("../lua/fair/serve.lua");
        let scope = crate::slots::Scope::tenant_queue(b"acme", b"imports");
        let holders = String::from_utf8(scope.holders()).unwrap();
        let slots_base = holders.strip_suffix("6:t:acme:q:imports:holders").unwrap();
        assert!(caps.contains(&format!("local SLOTS_PREFIX = '{slots_base}'")));
        let limits = String::from_utf8(crate::slots::limits_key(scope.tag())).unwrap();
        assert!(caps.contains(&format!(
            "local LIMITS_PREFIX = '{}'",
            limits.strip_suffix("6:t:acme").unwrap()
        )));
        assert!(caps.contains(&format!("local FAIR_PREFIX = '{PREFIX}'")));
        assert!(caps.contains(&format!("local SLOT_TAGS = '{}'", crate::slots::tags_key())));
        assert!(caps.contains(&format!("local FAIR_WEIGHTS = '{}'", weights_key())));
        assert!(caps.contains(&format!("local FAIR_TOKEN_CAP = {TOKEN_CAP}")));
        assert!(caps.contains("return FAIR_PREFIX .. '{' .. queue .. '}:'"));
        assert_eq!(base("imports"), format!("{PREFIX}{{imports}}:"));
        assert!(String::from_utf8(scope.waiting())
            .unwrap()
            .ends_with(":q:imports:waiting"));
    }

    #[test]
    fn keys_share_the_queue_hash_tag() {
        assert_eq!(base("imports"), "sidekiq-fair_tenant:fair:{imports}:");
        assert_eq!(base_template().replace("%Q", "imports"), base("imports"));
        assert_eq!(weight_field("acme", Some("imports")), "acme\nimports");
        assert!(inflight_key("host:1:abc").starts_with(PREFIX));
        assert_ne!(registry_key(), recovery_lock_key());
        assert_ne!(registry_key(), recovery_suspects_key());
        assert!(recovery_suspects_key().starts_with(PREFIX));
        assert_eq!(parse_weight(Some("3")), 3.0);
        assert_eq!(
            parse_weight_field(&weight_field("acme", Some("imports"))),
            ("acme".into(), Some("imports".into()))
        );
        assert_eq!(parse_weight_field("acme"), ("acme".into(), None));
        assert_eq!(check_weight(0.0), Ok(0.0));
        assert_eq!(check_weight(2.5), Ok(2.5));
        for bad in [-1.0, f64::NAN, f64::INFINITY, 2e6] {
            assert!(check_weight(bad).unwrap_err().contains("0 pauses"), "{bad}");
        }
        assert_eq!(parse_weight(Some("-2")), 0.0);
        assert_eq!(parse_weight(Some("junk")), 1.0);
        assert_eq!(parse_weight(None), 1.0);
    }
}
