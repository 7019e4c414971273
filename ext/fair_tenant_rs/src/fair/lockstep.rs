//! The fair-queue serving rule in lockstep: random sequences of operations run through the scripts that
//! run in production (`fair_push`, `fair_fetch`, `fair_ack`, `fair_weight`, `set_limit` on a redis-server
//! of its own) and through the model ([`CappedSfq`]); after every step the job served, every tenant's place
//! (ready, capped, over, rated, paused, idle finish tags, with start tags and activations; rated with its
//! instant), backlogs, slot holders and waiters, and the wait a fetch that served nothing replies must be
//! the same. Some tenants' jobs carry rate windows; the clock moves on (or back) between operations: the
//! library loaded here reads it from a key where production's reads TIME (`load_library`).
//!
//! `LOCKSTEP_SEQUENCES` (default 300), `LOCKSTEP_STEPS` (ops per sequence, default 60) and `LOCKSTEP_SEED`
//! (default: from the clock) choose the run; a failure prints the seed and the shortest failing sequence
//! found by removing operations while it still fails.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use redis::{Connection, Value};

use crate::fair::caps::{CappedSfq, Slot, Tier};
use crate::fair::rate::Window;
use crate::fair::scripts::Function;
use crate::fair::{self, Tag};
use crate::slots;

/// The test's own redis-server (used by the fair tests too).
pub(crate) use crate::redis::test_server::Server;
use crate::redis::test_server::{env, now_ms, seed, Rng};

const QUEUE: &str = "fq";
/// The scripts' clock in this test (`now_ms` reads it in place of TIME: see `load_library`).
const CLOCK_KEY: &str = "lockstep:clock";

/// Where a sequence's clock starts: now (the slot scripts, which read TIME, see leases as the fair ones do).
fn clock_start() -> u64 {
    now_ms()
}
const LEASE_MS: u64 = 3_600_000;
const PROCESSES: usize = 3;

/// A concurrency scope of the sequence: its Redis tag and sub, its jobs' limit, static or elastic.
#[derive(Debug, Clone)]
struct ScopeDef {
    tag: String,
    sub: String,
    limit: usize,
    elastic: bool,
}

impl ScopeDef {
    fn name(&self) -> String {
        format!("{} {}", self.tag, self.sub)
    }
}

/// The tenants and scopes of one sequence: each tenant has its own scope, and two custom keys are
/// shared by every tenant (one static, one elastic), whose jobs carry one of three limits.
#[derive(Debug, Clone)]
struct World {
    tenants: Vec<String>,
    scopes: Vec<ScopeDef>,
    /// Most jobs on the shared keys (more tenants woken at once).
    crowded: bool,
    /// Per tenant, the rate windows its jobs carry (four in five of them), if any.
    rates: Vec<Option<Vec<Window>>>,
    /// The queue is fair by worker time: jobs are charged, and acknowledgements carry run times.
    time: bool,
    /// Jobs of several scopes (`fair_tenant_concurrency: [...]`): some of a tenant's own scope also take the
    /// static shared key, and some of a shared key also take their tenant's own scope (two classes naming
    /// the same two scopes in different orders). See [`World::more_scopes`].
    several: bool,
    /// With `several`: windows of a rate scope shared by every tenant (`key:` per window), which one job in
    /// four carries besides its tenant's own (or alone). See [`World::rate_scopes`].
    shared_rate: Option<Vec<Window>>,
}

impl World {
    fn random(rng: &mut Rng) -> World {
        let tenants: Vec<String> = ["a", "b", "c", "d", "e"][..2 + rng.below(4)]
            .iter()
            .map(|t| t.to_string())
            .collect();
        let mut scopes: Vec<ScopeDef> = tenants
            .iter()
            .map(|t| ScopeDef {
                tag: format!("t:{t}"),
                sub: format!("q:{QUEUE}"),
                limit: 1 + rng.below(3),
                elastic: rng.chance(50),
            })
            .collect();
        for (key, elastic) in [("s1", false), ("s2", true)] {
            scopes.push(ScopeDef {
                tag: format!("k:{key}"),
                sub: "k".into(),
                limit: 1 + rng.below(2),
                elastic,
            });
        }
        let rates = tenants
            .iter()
            .map(|_| {
                rng.chance(50).then(|| {
                    (0..1 + rng.below(2))
                        .map(|_| Window {
                            limit: 1 + rng.below(3) as u64,
                            per_ms: [300, 1000, 2500][rng.below(3)],
                        })
                        .collect()
                })
            })
            .collect();
        World {
            tenants,
            scopes,
            crowded: rng.chance(50),
            rates,
            time: rng.chance(50),
            several: false,
            shared_rate: None,
        }
    }

    /// A job's rate scopes, its first first: (tag, sub, windows).
    fn rate_scopes(&self, tenant: &str, jid: u64) -> Vec<(String, String, Vec<Window>)> {
        let mut out: Vec<_> = (self.rate(tenant, jid).into_iter())
            .map(|w| (format!("t:{tenant}"), format!("q:{QUEUE}"), w.clone()))
            .collect();
        if let Some(shared) = self.shared_rate.as_ref().filter(|_| jid % 4 == 3) {
            out.push(("k:api".into(), "k".into(), shared.clone()));
        }
        out
    }

    /// The scopes a job takes after its first (`first`: its scope's index), drawn from its jid: one in three
    /// of a tenant's own scope also takes the static shared key; one in three of a shared key also takes
    /// its tenant's own scope, one in six both keys (the other first).
    fn more_scopes(&self, tenant: &str, jid: u64, first: Option<usize>) -> Vec<usize> {
        let (Some(first), true) = (first, self.several) else {
            return Vec::new();
        };
        let t = self
            .tenants
            .iter()
            .position(|x| x == tenant)
            .expect("a tenant");
        let keys = self.tenants.len();
        match (first >= keys, jid % 6) {
            (false, 1 | 4) => vec![keys],
            (true, 2) => vec![t],
            (true, 5) => vec![if first == keys { keys + 1 } else { keys }, t],
            _ => Vec::new(),
        }
    }

    /// The rate windows a job of the tenant carries, if any.
    fn rate(&self, tenant: &str, jid: u64) -> Option<&Vec<Window>> {
        let t = self.tenants.iter().position(|x| x == tenant)?;
        self.rates[t].as_ref().filter(|_| jid % 5 != 4)
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// One push call: (tenant, scope or none) per job, a custom key's job with its class's limit (the
    /// classes sharing a key may carry different limits: the scope's, or one more).
    Push(Vec<(usize, Option<(usize, usize)>)>),
    /// A fetch by a process for this many waiting threads (a batch), its in-flight jobs at these positions
    /// acknowledged in the same call.
    Fetch(usize, Vec<usize>, usize),
    Ack(usize, Vec<usize>),
    Requeue(usize, Vec<usize>),
    /// A process taken for dead: its in-flight jobs back to their tenants, those at these positions to
    /// the dead set. `stalled`: it was alive, and its next call takes back the copies still waiting.
    Recover {
        process: usize,
        dead: Vec<usize>,
        stalled: bool,
    },
    /// A waiting job of a tenant (at this position of its backlog) deleted through Sidekiq's API.
    Delete(usize, usize),
    /// A tenant's weight (None: deleted, back to 1).
    Weight(usize, Option<f64>),
    /// A runtime limit for a scope, or (true) for its whole tag (`*`); None: deleted.
    Limit(usize, Option<usize>, bool),
    /// The clock moves on (ms), or back (Redis restarted with a clock behind): the rate windows' view of
    /// time never goes back.
    Tick(i64),
    /// A job with a slot pushed earlier (the n-th, modulo how many were) pushed again, the same payload: a single
    /// push sent twice after a lost reply, or a client pushing one jid twice. A copy of a job that holds its
    /// slot must wait until it is given back.
    Again(usize),
}

fn random_op(rng: &mut Rng, world: &World) -> Op {
    let tenants = world.tenants.len();
    let picks = |rng: &mut Rng| (0..rng.below(4)).map(|_| rng.below(8)).collect::<Vec<_>>();
    match rng.below(110) {
        100.. => Op::Tick(rng.below(1800) as i64 - 300),
        0..=29 => Op::Push(
            (0..1 + rng.below(3))
                .map(|_| {
                    let tenant = rng.below(tenants);
                    let (s1, s2) = if world.crowded { (6, 9) } else { (2, 3) };
                    let scope = match rng.below(if world.crowded { 10 } else { 5 }) {
                        0 => None,
                        n if n < s1 => Some((tenants, rng.below(3))),
                        n if n < s2 => Some((tenants + 1, rng.below(3))),
                        _ => Some((tenant, 0)),
                    };
                    (tenant, scope)
                })
                .collect(),
        ),
        30..=59 => Op::Fetch(
            rng.below(PROCESSES),
            picks(rng),
            [1, 1, 1, 2, 3, 5][rng.below(6)],
        ),
        60..=71 => Op::Ack(rng.below(PROCESSES), vec![rng.below(8)]),
        72..=79 => Op::Requeue(rng.below(PROCESSES), vec![rng.below(8)]),
        80..=85 => Op::Recover {
            process: rng.below(PROCESSES),
            dead: if rng.chance(30) {
                vec![rng.below(4)]
            } else {
                vec![]
            },
            stalled: rng.chance(50),
        },
        86..=88 => Op::Delete(rng.below(tenants), rng.below(4)),
        89..=93 => {
            let w = [
                None,
                Some(0.0),
                Some(0.0),
                Some(0.5),
                Some(1.0),
                Some(2.0),
                Some(3.0),
            ];
            Op::Weight(rng.below(tenants), w[rng.below(w.len())])
        }
        _ => {
            let limit = [None, Some(0), Some(1), Some(2), Some(3)];
            let scope = rng.below(world.scopes.len());
            Op::Limit(scope, limit[rng.below(limit.len())], rng.chance(30))
        }
    }
}

/// One process as the driver sees it: its identity (a new one after a crash) and its in-flight jobs, newest
/// first, each field with the model's job id.
#[derive(Debug, Default)]
struct Process {
    generation: u32,
    inflight: Vec<(String, u64)>,
    /// Copies a recovery made while the process only stalled (field, job): taken back by its next call.
    recovered: Vec<(String, u64)>,
}

/// A tenant waiting on a scope: where ('c'apped, 'o'ver), start tag, activation, tenant.
type Waiter = (char, f64, u64, String);

/// What both sides hold, in the same shape. Tags are compared exactly.
#[derive(Debug, PartialEq)]
struct View {
    v: f64,
    waiting_jobs: i64,
    ready: Vec<(String, f64, u64)>,
    capped: Vec<(String, f64, u64)>,
    over: Vec<(String, f64, u64)>,
    /// Tenants waiting for a rate window: tenant, start tag, activation, instant.
    rated: Vec<(String, f64, u64, u64)>,
    idle: Vec<(String, f64)>,
    paused: Vec<String>,
    backlogs: Vec<(String, Vec<u64>)>,
    holders: Vec<(String, Vec<u64>)>,
    waiters: Vec<(String, Vec<Waiter>)>,
    /// Per process, its in-flight jobs (as a set: copies taken back come in a hash's order).
    inflight: Vec<Vec<u64>>,
    /// Under `time`: the tenants' mean run times (ms) and the queue's.
    means: Vec<(String, f64)>,
    mean: Option<f64>,
}

struct Lockstep<'a> {
    con: &'a mut Connection,
    world: &'a World,
    model: CappedSfq,
    processes: Vec<Process>,
    next_jid: u64,
    push: Function,
    fetch: Function,
    ack: Function,
    weight: Function,
    delete: Function,
    /// What the last step's scripts did (pushed jobs and their limits, the job served), for the report.
    note: String,
    clock: u64,
    /// Under `time`: per job, the charge and member its last fetch replied (what its acknowledgement sends).
    timings: std::collections::HashMap<u64, (String, String)>,
    /// Per job pushed, its tenant and scope (what `Again` pushes once more).
    pushed: Vec<(String, Option<(usize, usize)>)>,
}

/// Run times (ms) acknowledgements carry, by job: below the floor, typical, the default, past the cap.
const RUNS: [u64; 9] = [0, 1, 7, 20, 200, 999, 1_000, 2_500, 70_000];

fn ran_of(job: u64) -> u64 {
    RUNS[(job.wrapping_mul(7) % RUNS.len() as u64) as usize]
}

fn script(name: &str) -> Function {
    Function::new(name)
}

/// The jid of a job this test wrote (`job_json`: `"jid":"<n>"`, whatever a recovery put in front of it).
fn jid_of(job: &[u8]) -> u64 {
    let text = std::str::from_utf8(job).expect("a job is UTF-8");
    let at = text.find(r#""jid":""#).expect("a job has a jid") + r#""jid":""#.len();
    text[at..].split('"').next().unwrap().parse().unwrap()
}

/// A served fair job's extras ("" or "F<len>:<held><len>:<charged><member>"): held, charged, member.
fn extras_of(extras: &str) -> (String, String, String) {
    let Some(mut rest) = extras.strip_prefix('F') else {
        return Default::default();
    };
    let mut field = || {
        let (len, after) = rest.split_once(':').expect("a length");
        let len: usize = len.parse().expect("a length");
        let (value, after) = after.split_at(len);
        rest = after;
        value.to_string()
    };
    let (held, charged) = (field(), field());
    (held, charged, rest.to_string())
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8(b.clone()).unwrap()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// "<16 hex digits of activation><tenant>" members of ready, capped and over.
fn places(raw: Vec<(String, f64)>) -> Vec<(String, f64, u64)> {
    raw.into_iter()
        .map(|(m, tag)| {
            (
                m[16..].to_string(),
                tag,
                u64::from_str_radix(&m[..16], 16).unwrap(),
            )
        })
        .collect()
}

impl<'a> Lockstep<'a> {
    fn new(con: &'a mut Connection, world: &'a World) -> Lockstep<'a> {
        let _: () = redis::cmd("FLUSHALL").query(con).unwrap();
        let clock = clock_start();
        set_clock(con, clock);
        Lockstep {
            con,
            world,
            model: {
                let mut model = if world.time {
                    CappedSfq::by_time()
                } else {
                    CappedSfq::new()
                };
                model.set_clock(clock);
                for d in &world.scopes {
                    model.set_tag(&d.name(), &d.tag);
                }
                model
            },
            processes: (0..PROCESSES).map(|_| Process::default()).collect(),
            next_jid: 1,
            push: script("push"),
            fetch: script("fetch"),
            ack: script("ack"),
            weight: script("weight"),
            delete: script("delete"),
            note: String::new(),
            clock,
            timings: Default::default(),
            pushed: Vec::new(),
        }
    }

    /// What an acknowledgement of `job` carries besides its entry: "" unless the queue is fair by time.
    fn timing(&self, job: u64) -> String {
        match self.timings.get(&job) {
            Some((charged, member)) => {
                format!("{charged} {} {}:{QUEUE}{member}", ran_of(job), QUEUE.len())
            }
            None => String::new(),
        }
    }

    /// The model's side of an acknowledgement.
    fn finish_model(&mut self, job: u64) {
        let ran = self.world.time.then(|| ran_of(job) as f64);
        self.model.finish_timed(job, ran);
    }

    fn identity(&self, p: usize) -> String {
        format!("host:{p}:{}", self.processes[p].generation)
    }

    /// The in-flight entries at `picks` (positions modulo the list's length, each once).
    fn picked(&self, p: usize, picks: &[usize]) -> Vec<(String, u64)> {
        let list = &self.processes[p].inflight;
        let mut chosen: Vec<(String, u64)> = Vec::new();
        for &i in picks {
            if list.is_empty() {
                break;
            }
            let e = &list[i % list.len()];
            if !chosen.contains(e) {
                chosen.push(e.clone());
            }
        }
        chosen
    }

    fn forget_inflight(&mut self, p: usize, entries: &[(String, u64)]) {
        self.processes[p].inflight.retain(|e| !entries.contains(e));
    }

    /// A stalled process's next call: the copies still waiting back in flight, under their fields.
    fn comes_back(&mut self, p: usize) {
        let copies = std::mem::take(&mut self.processes[p].recovered);
        let jobs: Vec<u64> = copies.iter().map(|c| c.1).collect();
        for job in self.model.reclaim(&jobs) {
            let field = copies
                .iter()
                .find(|c| c.1 == job)
                .expect("a copy")
                .0
                .clone();
            self.processes[p].inflight.push((field, job));
        }
    }

    /// A job's payload; `slot`: its scope and the limit it carries (and the scopes after it that
    /// [`World::more_scopes`] draws, each with its own limit).
    fn job_json(&self, tenant: &str, jid: u64, slot: Option<(usize, usize)>) -> String {
        let more: Vec<String> = (self
            .world
            .more_scopes(tenant, jid, slot.map(|s| s.0))
            .iter())
        .map(|&m| {
            let d = &self.world.scopes[m];
            format!(
                r#"["{}","{}",{},{LEASE_MS},{}]"#,
                d.tag, d.sub, d.limit, d.elastic as u8
            )
        })
        .collect();
        let more = (!more.is_empty()).then(|| {
            format!(
                r#","{}":[{}]"#,
                crate::names::SLOT_MORE_FIELD,
                more.join(",")
            )
        });
        let slot = slot.map(|(s, limit)| {
            let d = &self.world.scopes[s];
            format!(
                r#","fair_tenant_slot":["{}","{}",{limit},{LEASE_MS},{}]{}"#,
                d.tag,
                d.sub,
                d.elastic as u8,
                more.clone().unwrap_or_default()
            )
        });
        let arrays: Vec<String> = (self.world.rate_scopes(tenant, jid).iter())
            .map(|(tag, sub, windows)| {
                let flat: Vec<String> = (windows.iter())
                    .map(|w| format!("{},{}", w.limit, w.per_ms))
                    .collect();
                format!(r#"["{tag}","{sub}",{}]"#, flat.join(","))
            })
            .collect();
        let rate = arrays.split_first().map(|(first, rest)| {
            let more = if rest.is_empty() {
                String::new()
            } else {
                format!(
                    r#","{}":[{}]"#,
                    crate::names::RATE_MORE_FIELD,
                    rest.join(",")
                )
            };
            format!(r#","fair_tenant_rate_cap":{first}{more}"#)
        });
        // Two jobs in three as FairPush writes them (enqueue time, jid, slot and rate first: read without
        // decoding), the others as an earlier version or another client did (decoded).
        if jid.is_multiple_of(3) {
            format!(
                r#"{{"class":"Job","queue":"{QUEUE}"{},"jid":"{jid}","args":["{tenant}"],"enqueued_at":1700000000.5{}}}"#,
                rate.unwrap_or_default(),
                slot.unwrap_or_default()
            )
        } else {
            format!(
                r#"{{"enqueued_at":1700000000.5,"jid":"{jid}"{}{},"class":"Job","queue":"{QUEUE}","args":["{tenant}"]}}"#,
                slot.unwrap_or_default(),
                rate.unwrap_or_default()
            )
        }
    }

    /// The payload of an in-flight job as it was pushed (its field names its tenant).
    fn job_of_field(&self, field: &str, job: u64) -> String {
        let tenant = fair::Entry::decode(field).unwrap().tenant;
        self.job_json(&tenant, job, self.scope_of(job))
    }

    fn scope_of(&self, job: u64) -> Option<(usize, usize)> {
        let slot = self.model.slot_of(job)?;
        let s = self
            .world
            .scopes
            .iter()
            .position(|s| s.name() == slot.scope)?;
        Some((s, slot.limit))
    }

    /// One push call of these (tenant, payload) pairs.
    fn push_call(&mut self, base: &str, payloads: &[(String, String)]) {
        let mut inv = self.push.prepare_invoke();
        inv.key("queues")
            .key(fair::weights_key())
            .arg(base)
            .arg(QUEUE)
            .arg("1700000000.5")
            .arg("");
        for (tenant, payload) in payloads {
            inv.arg(tenant).arg(payload);
        }
        let _: i64 = inv.invoke(self.con).unwrap();
    }

    /// One job of a push (`scope`: its scope and the limit it carries): the model's side of it, and the
    /// tenant and payload the call sends.
    fn push_one(
        &mut self,
        tenant: &str,
        jid: u64,
        scope: Option<(usize, usize)>,
    ) -> (String, String) {
        let _ = write!(self.note, "{tenant}:{jid}{scope:?} ");
        let payload = self.job_json(tenant, jid, scope);
        let slot = scope.map(|(s, limit)| {
            let d = &self.world.scopes[s];
            Slot {
                scope: d.name(),
                limit,
                elastic: d.elastic,
            }
        });
        let more = (self
            .world
            .more_scopes(tenant, jid, scope.map(|s| s.0))
            .into_iter())
        .map(|m| {
            let d = &self.world.scopes[m];
            Slot {
                scope: d.name(),
                limit: d.limit,
                elastic: d.elastic,
            }
        });
        self.model
            .push_scopes(tenant, jid, slot.into_iter().chain(more).collect());
        for (tag, sub, windows) in self.world.rate_scopes(tenant, jid) {
            self.model.add_rate(jid, &format!("{tag} {sub}"), windows);
        }
        (tenant.to_string(), payload)
    }

    /// Runs one operation on both sides; Err: how they differ.
    fn step(&mut self, op: &Op) -> Result<(), String> {
        self.note.clear();
        let base = fair::base(QUEUE);
        match op {
            Op::Push(jobs) => {
                let mut payloads = Vec::new();
                for &(t, scope) in jobs {
                    let tenant = self.world.tenants[t].clone();
                    let jid = self.next_jid;
                    self.next_jid += 1;
                    let scope = scope.map(|(s, more)| (s, self.world.scopes[s].limit + more));
                    self.pushed.push((tenant.clone(), scope));
                    payloads.push(self.push_one(&tenant, jid, scope));
                }
                self.push_call(&base, &payloads);
            }
            Op::Again(n) => {
                // Jobs with a slot only: a copy of one waits until the first is given back, so no process
                // holds two entries of the same bytes (the driver tells in-flight entries by their bytes).
                let slotted: Vec<usize> = (0..self.pushed.len())
                    .filter(|&i| self.pushed[i].1.is_some())
                    .collect();
                if slotted.is_empty() {
                    return self.compare();
                }
                let i = slotted[n % slotted.len()];
                let (tenant, scope) = self.pushed[i].clone();
                let payload = self.push_one(&tenant, i as u64 + 1, scope);
                self.push_call(&base, &[payload]);
            }
            Op::Fetch(p, picks, wants) => {
                let (p, wants) = (*p, *wants);
                self.comes_back(p);
                let acks = self.picked(p, picks);
                let identity = self.identity(p);
                let mut inv = self.fetch.prepare_invoke();
                inv.key(fair::inflight_key(&identity))
                    .key(fair::weights_key())
                    .key(fair::registry_key())
                    .key(fair::recovered_key(&identity))
                    .arg(&identity)
                    .arg(acks.len());
                for (entry, job) in &acks {
                    inv.arg(entry).arg(self.timing(*job));
                }
                let mode = if self.world.time { "time" } else { "" };
                inv.arg(1).arg(&base).arg(QUEUE).arg(mode);
                for _ in 0..wants {
                    inv.arg("0");
                }
                let reply: Value = inv.invoke(self.con).unwrap();
                let time = self.world.time;
                let done: Vec<(u64, Option<f64>)> = (acks.iter())
                    .map(|&(_, job)| (job, time.then(|| ran_of(job) as f64)))
                    .collect();
                self.model.begin_call();
                self.model.finish_together(&done);
                self.forget_inflight(p, &acks);
                let _ = write!(
                    self.note,
                    "acked {:?}, ",
                    acks.iter().map(|a| a.1).collect::<Vec<_>>()
                );
                let Value::Array(parts) = reply else {
                    return Err(format!("fetch replied {reply:?}"));
                };
                let (starved, soonest, empty) = (&parts[0], &parts[1], &parts[2]);
                if *starved != Value::Nil {
                    return Err(format!("fetch starved on {starved:?}: nothing was adopted"));
                }
                let later = match parts[3] {
                    Value::Int(n) => n as usize,
                    ref other => {
                        return Err(format!("fetch's count of queues to adopt: {other:?}"))
                    }
                };
                let served: Vec<_> = parts[4 + later..].chunks(3).collect();
                // Each want served in the order as many single fetches give: the model pops once a want.
                for pair in &served {
                    self.served_one(p, pair)?;
                }
                if served.len() < wants {
                    // A want found nothing: neither does the model, and the wait until a rate-capped tenant
                    // may start is the model's.
                    if *empty != Value::Int(1) {
                        return Err(format!(
                            "{} of {wants} wants served, empty {empty:?}",
                            served.len()
                        ));
                    }
                    let model = self.model.pop();
                    let due = self.model.rate_next();
                    let lua_due = match soonest {
                        Value::Int(ms) => Some(*ms as u64),
                        _ => None,
                    };
                    if model.is_some() || due != lua_due {
                        return Err(format!(
                            "fetch served nothing (wait {lua_due:?} ms), model {model:?} (wait {due:?})"
                        ));
                    }
                } else if *empty != Value::Int(0) {
                    return Err(format!("every want served, empty {empty:?}"));
                }
            }
            Op::Ack(p, picks) | Op::Requeue(p, picks) => {
                let p = *p;
                self.comes_back(p);
                let entries = self.picked(p, picks);
                let mode = if matches!(op, Op::Ack(..)) {
                    "ack"
                } else {
                    "requeue"
                };
                let found = self.finish_call(p, mode, &entries, &[]);
                if found != entries.len() as i64 {
                    return Err(format!("{mode}: lua found {found} of {}", entries.len()));
                }
                for (_, job) in &entries {
                    if mode == "ack" {
                        self.finish_model(*job);
                    } else {
                        self.model.requeue(*job);
                    }
                }
                self.forget_inflight(p, &entries);
            }
            Op::Recover {
                process,
                dead,
                stalled,
            } => {
                let p = *process; // recovered by another process: this one's pending copies stay pending
                let entries = self.processes[p].inflight.clone();
                let dead = self.picked(p, dead);
                let found = self.finish_call(p, "recover", &entries, &dead);
                if found != entries.len() as i64 {
                    return Err(format!("recover: lua found {found} of {}", entries.len()));
                }
                let mut copies = Vec::new();
                for e in &entries {
                    if dead.contains(e) {
                        self.model.finish(e.1);
                    } else {
                        self.model.requeue(e.1);
                        copies.push(e.clone());
                    }
                }
                let proc = &mut self.processes[p];
                proc.inflight.clear();
                if *stalled {
                    proc.recovered.extend(copies);
                } else {
                    proc.recovered.clear();
                    proc.generation += 1; // a new process in its place
                }
            }
            Op::Delete(t, i) => {
                let tenant = self.world.tenants[*t].clone();
                let Some(job) = self
                    .model
                    .backlog(&tenant)
                    .and_then(|l| (!l.is_empty()).then(|| l[*i % l.len()]))
                else {
                    return self.compare();
                };
                let payload = self.job_json(&tenant, job, self.scope_of(job));
                let reply: Vec<Value> = self
                    .delete
                    .arg(&base)
                    .arg(QUEUE)
                    .arg(payload)
                    .arg(&tenant)
                    .arg("")
                    .arg(0)
                    .arg(1000) // a tenant's place searched: few tenants, each tier read whole in one step
                    .invoke(self.con)
                    .unwrap();
                let deleted = matches!(reply.first(), Some(Value::Int(1)));
                if deleted != self.model.delete(job) {
                    return Err(format!("delete {tenant}'s job {job}: lua {deleted}"));
                }
            }
            Op::Weight(t, w) => {
                let tenant = self.world.tenants[*t].clone();
                let value = w.map(|w| w.to_string()).unwrap_or_default();
                let _: i64 = self
                    .weight
                    .key(fair::weights_key())
                    .arg(&tenant)
                    .arg(value)
                    .arg(&tenant)
                    .arg(QUEUE)
                    .invoke(self.con)
                    .unwrap();
                self.model.set_weight(&tenant, w.unwrap_or(1.0));
            }
            Op::Tick(ms) => {
                self.clock = self.clock.saturating_add_signed(*ms);
                set_clock(self.con, self.clock);
                self.model.set_clock(self.clock);
            }
            Op::Limit(s, limit, whole_tag) => {
                let d = &self.world.scopes[*s];
                let field = if *whole_tag { "*" } else { d.sub.as_str() };
                let value = limit.map(|l| l as u64);
                let inv = slots::set_limit_invocation(d.tag.as_bytes(), field.as_bytes(), value);
                let _: (i64, i64) = inv.invoke(self.con).unwrap();
                match (limit, whole_tag) {
                    (_, true) => self.model.set_tag_limit(&d.tag, *limit),
                    (Some(l), false) => self.model.set_limit(&d.name(), *l),
                    (None, false) => self.model.clear_limit(&d.name()),
                }
            }
        }
        self.compare()
    }

    /// `lua/fair/ack.lua` for a process's entries: ack, requeue, or recover (`dead` of them to the dead set).
    fn finish_call(
        &mut self,
        p: usize,
        mode: &str,
        entries: &[(String, u64)],
        dead: &[(String, u64)],
    ) -> i64 {
        let identity = self.identity(p);
        if mode == "recover" {
            // As the liveness look judged it: suspected long enough (its heartbeat key never exists here).
            let _: i64 = redis::cmd("HSET")
                .arg(fair::recovery_suspects_key())
                .arg(&identity)
                .arg("0")
                .query(self.con)
                .unwrap();
        }
        let mut inv = self.ack.prepare_invoke();
        inv.key(fair::inflight_key(&identity))
            .key(fair::weights_key())
            .key(fair::registry_key())
            .key(fair::recovery_suspects_key())
            .key("dead")
            .key(fair::recovered_key(&identity))
            .key(fair::recovering_key())
            .arg(mode)
            .arg(&identity)
            .arg("0")
            .arg(fair::RECOVERED_KEEP_SECONDS);
        // Recovery takes the newest first (Ruby's Recovery sorts the fields by id).
        for e in entries {
            inv.arg(&e.0);
            if mode == "ack" {
                inv.arg(self.timing(e.1));
            }
            if mode == "recover" {
                let job = self.job_of_field(&e.0, e.1);
                inv.arg(if dead.contains(e) { "dead" } else { "fair" })
                    .arg(job);
            }
        }
        inv.invoke(self.con).unwrap()
    }

    /// Everything the scripts hold, read in one round trip.
    fn lua_view(&mut self) -> View {
        let base = fair::base(QUEUE);
        let mut pipe = redis::pipe();
        let zrange = |pipe: &mut redis::Pipeline, key: String| {
            pipe.cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES");
        };
        pipe.cmd("HGETALL").arg(format!("{base}state"));
        pipe.cmd("HGETALL")
            .arg(format!("{base}{}", crate::names::RUNTIMES));
        pipe.cmd("SMEMBERS").arg(format!("{base}paused"));
        for tier in ["fin", "ready", "capped", "over", "rated"] {
            zrange(&mut pipe, format!("{base}{tier}"));
        }
        pipe.cmd("HGETALL").arg(format!("{base}rated-tags"));
        pipe.cmd("HGETALL")
            .arg(format!("{base}{}", crate::names::MEMBERS));
        for t in &self.world.tenants {
            pipe.cmd("LRANGE")
                .arg(format!("{base}t:{t}"))
                .arg(0)
                .arg(-1);
        }
        for d in &self.world.scopes {
            let scope = slots::Scope::from_parts(d.tag.clone().into(), d.sub.clone().into());
            zrange(&mut pipe, String::from_utf8(scope.holders()).unwrap());
            zrange(&mut pipe, String::from_utf8(scope.waiting()).unwrap());
            pipe.cmd("HGETALL")
                .arg(String::from_utf8(scope.waiting_index()).unwrap());
        }
        for p in 0..PROCESSES {
            pipe.cmd("HVALS").arg(fair::inflight_key(&self.identity(p)));
        }
        let replies: Vec<Value> = pipe.query(self.con).unwrap();
        let mut replies = replies.into_iter();
        let mut next = || replies.next().unwrap();
        let state: BTreeMap<String, String> = redis::from_redis_value(next()).unwrap();
        let means: BTreeMap<String, f64> = redis::from_redis_value(next()).unwrap();
        let mut paused: Vec<String> = redis::from_redis_value(next()).unwrap();
        paused.sort();
        let mut zset = || -> Vec<(String, f64)> { redis::from_redis_value(next()).unwrap() };
        let mut idle = zset();
        idle.sort_by(|a, b| a.0.cmp(&b.0));
        let (ready, capped, over) = (places(zset()), places(zset()), places(zset()));
        let rated_due = zset();
        let mut next = || replies.next().unwrap();
        let tags: BTreeMap<String, f64> = redis::from_redis_value(next()).unwrap();
        // The members index names every tenant's member in the tiers, and nothing else (common.lua).
        let members: BTreeMap<String, String> = redis::from_redis_value(next()).unwrap();
        let expected: BTreeMap<String, String> = ready
            .iter()
            .chain(&capped)
            .chain(&over)
            .map(|(t, _, seq)| (t.clone(), format!("{seq:016x}{t}")))
            .chain(
                rated_due
                    .iter()
                    .map(|(m, _)| (m[16..].to_string(), m.clone())),
            )
            .collect();
        assert_eq!(members, expected, "members index");
        let rated = rated_due
            .into_iter()
            .map(|(m, due)| {
                let seq = u64::from_str_radix(&m[..16], 16).unwrap();
                (m[16..].to_string(), tags[&m], seq, due as u64)
            })
            .collect();
        let mut backlogs = Vec::new();
        for t in &self.world.tenants {
            let jobs: Vec<Vec<u8>> = redis::from_redis_value(next()).unwrap();
            if !jobs.is_empty() {
                backlogs.push((t.clone(), jobs.iter().map(|j| jid_of(j)).collect()));
            }
        }
        let mut holders = Vec::new();
        let mut waiters = Vec::new();
        let prefix = format!("{}:{QUEUE}", QUEUE.len());
        for d in &self.world.scopes {
            let held: Vec<(String, f64)> = redis::from_redis_value(next()).unwrap();
            if !held.is_empty() {
                let mut jobs: Vec<u64> = held.iter().map(|(j, _)| j.parse().unwrap()).collect();
                jobs.sort();
                holders.push((d.name(), jobs));
            }
            let waiting: Vec<(String, f64)> = redis::from_redis_value(next()).unwrap();
            // The scope's index names each entry by its queue and tenant, and nothing else (serve.lua).
            let index: BTreeMap<String, String> = redis::from_redis_value(next()).unwrap();
            let expected: BTreeMap<String, String> = waiting
                .iter()
                .map(|(e, _)| {
                    let member = e[1..].strip_prefix(&prefix).expect("this queue's entry");
                    (format!("{prefix}{}", &member[16..]), e.clone())
                })
                .collect();
            assert_eq!(index, expected, "waiting index of {}", d.name());
            if !waiting.is_empty() {
                let list = waiting
                    .into_iter()
                    .map(|(e, tag)| {
                        let tier = e.chars().next().unwrap();
                        let member = e[1..].strip_prefix(&prefix).expect("this queue's entry");
                        let seq = u64::from_str_radix(&member[..16], 16).unwrap();
                        (tier, tag, seq, member[16..].to_string())
                    })
                    .collect();
                waiters.push((d.name(), list));
            }
        }
        let inflight = (0..PROCESSES)
            .map(|_| {
                let held: Vec<Vec<u8>> = redis::from_redis_value(next()).unwrap();
                let mut jobs: Vec<u64> = held.iter().map(|job| jid_of(job)).collect();
                jobs.sort();
                jobs
            })
            .collect();
        View {
            means: means.into_iter().collect(),
            mean: (state.get(crate::names::STATE_MEAN)).map(|m| m.parse().unwrap()),
            v: state.get("v").map_or(0.0, |v| v.parse().unwrap()),
            waiting_jobs: state.get("n").map_or(0, |n| n.parse().unwrap()),
            ready,
            capped,
            over,
            rated,
            idle,
            paused,
            backlogs,
            holders,
            waiters,
            inflight,
        }
    }

    fn model_view(&self) -> View {
        let m = &self.model;
        let tier = |t: &BTreeMap<(Tag, u64), String>| {
            t.iter()
                .map(|((tag, seq), tenant)| (tenant.clone(), tag.0, *seq))
                .collect::<Vec<_>>()
        };
        let mut idle: Vec<(String, f64)> =
            m.sfq.finish.iter().map(|(t, f)| (t.clone(), *f)).collect();
        idle.sort_by(|a, b| a.0.cmp(&b.0));
        let mut paused = m.sfq.paused.clone();
        paused.sort();
        let backlogs = self
            .world
            .tenants
            .iter()
            .filter_map(|t| {
                let jobs: Vec<u64> = m.sfq.backlog.get(t)?.iter().copied().collect();
                (!jobs.is_empty()).then(|| (t.clone(), jobs))
            })
            .collect();
        let mut holders = Vec::new();
        let mut waiters = Vec::new();
        for d in &self.world.scopes {
            if let Some(h) = m.holders.get(&d.name()).filter(|h| !h.is_empty()) {
                holders.push((d.name(), h.iter().copied().collect()));
            }
            if let Some(w) = m.waiting.get(&d.name()).filter(|w| !w.is_empty()) {
                let list = w
                    .iter()
                    .map(|((tag, tier, seq), tenant)| {
                        let c = if *tier == Tier::Over { 'o' } else { 'c' };
                        (c, tag.0, *seq, tenant.clone())
                    })
                    .collect();
                waiters.push((d.name(), list));
            }
        }
        let mut means: Vec<(String, f64)> =
            m.sfq.means.iter().map(|(t, v)| (t.clone(), *v)).collect();
        means.sort_by(|a, b| a.0.cmp(&b.0));
        View {
            means,
            mean: m.sfq.mean,
            v: m.sfq.v,
            waiting_jobs: m.sfq.backlog.values().map(|l| l.len() as i64).sum(),
            ready: tier(&m.sfq.ready),
            capped: tier(&m.capped),
            over: tier(&m.over),
            rated: m.rated(),
            idle,
            paused,
            backlogs,
            holders,
            waiters,
            inflight: self
                .processes
                .iter()
                .map(|p| {
                    let mut jobs: Vec<u64> = p.inflight.iter().map(|e| e.1).collect();
                    jobs.sort();
                    jobs
                })
                .collect(),
        }
    }

    /// One job a fetch served (`triple`: its in-flight field, the job, and "" or
    /// "F<len>:<held><len>:<charged><member>"), against the model's next.
    fn served_one(&mut self, p: usize, triple: &[Value]) -> Result<(), String> {
        let [Value::BulkString(field), Value::BulkString(job), extras] = triple else {
            return Err(format!("a served job: {triple:?}"));
        };
        let (_, tenant, _) = fair::split_entry(field).ok_or("a field")?;
        let tenant = String::from_utf8(tenant.to_vec()).unwrap();
        let job = jid_of(job);
        let entry = String::from_utf8(field.clone()).unwrap();
        let (_, slotted) = fair::field_id(field).ok_or("a field's id")?;
        let (held, charged, member) = extras_of(&text(extras).unwrap_or_default());
        if !charged.is_empty() {
            self.timings.insert(job, (charged, member));
        }
        let model = self.model.pop();
        let _ = write!(self.note, "served {:?} ", (&tenant, job));
        if Some((tenant.clone(), job)) != model {
            return Err(format!("served: lua {:?}, model {model:?}", (tenant, job)));
        }
        let lua_charge = self.timings.get(&job).map(|c| c.0.parse::<f64>().unwrap());
        if self.world.time && lua_charge != self.model.charge_of(job) {
            return Err(format!(
                "charge of {tenant}'s job {job}: lua {lua_charge:?}, model {:?}",
                self.model.charge_of(job)
            ));
        }
        let holds = self.model.holds(job).then(|| job.to_string());
        if (!held.is_empty()).then_some(held.clone()) != holds || slotted != holds.is_some() {
            return Err(format!(
                "slot taken by {tenant}'s job {job}: lua {held:?}, field marked {slotted}"
            ));
        }
        self.processes[p].inflight.insert(0, (entry, job));
        Ok(())
    }

    fn compare(&mut self) -> Result<(), String> {
        let (lua, model) = (self.lua_view(), self.model_view());
        if lua == model {
            return Ok(());
        }
        let mut diff = String::new();
        let (l, m) = (format!("{lua:#?}"), format!("{model:#?}"));
        let _ = writeln!(diff, "state differs (lua | model):");
        for (a, b) in l.lines().zip(m.lines()) {
            let mark = if a == b { "  " } else { "!!" };
            let _ = writeln!(diff, "{mark} {a:<50} | {b}");
        }
        Err(diff)
    }
}

/// The scripts' clock (seconds, microseconds, as TIME replies).
fn set_clock(con: &mut Connection, ms: u64) {
    let _: () = redis::cmd("HSET")
        .arg(CLOCK_KEY)
        .arg("s")
        .arg(ms / 1000)
        .arg("u")
        .arg(ms % 1000 * 1000)
        .query(con)
        .unwrap();
}

/// The function library with its clock read from CLOCK_KEY (`now_ms`'s TIME), so the test moves time on;
/// the rest of the text, and the functions' names, are production's.
fn load_library(con: &mut Connection) {
    let source = &fair::library().source;
    let time = "redis.call('TIME')";
    assert!(source.contains(time), "now_ms reads TIME");
    let test = source.replace(
        time,
        &format!("redis.call('HMGET', '{CLOCK_KEY}', 's', 'u')"),
    );
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(test)
        .query(con)
        .unwrap();
}

/// Runs a sequence from an empty Redis; Err: the failing step's index and the difference.
fn run(con: &mut Connection, world: &World, ops: &[Op]) -> Result<(), (usize, String)> {
    let mut l = Lockstep::new(con, world);
    for (i, op) in ops.iter().enumerate() {
        l.step(op).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// The sequence again, each step with what the scripts did and hold after it (the failing step's
/// difference follows).
fn trace(con: &mut Connection, world: &World, ops: &[Op]) -> String {
    let mut l = Lockstep::new(con, world);
    let mut out = String::new();
    for (i, op) in ops.iter().enumerate() {
        let failed = l.step(op).is_err();
        let v = l.lua_view();
        let _ = writeln!(out, "  {i:>3} {op:?}  {}", l.note);
        let _ = writeln!(
            out,
            "      v {} ready {:?} capped {:?} over {:?} paused {:?} holders {:?} waiters {:?}",
            v.v, v.ready, v.capped, v.over, v.paused, v.holders, v.waiters
        );
        if failed {
            break;
        }
    }
    out
}

/// The shortest failing sequence found: the failing prefix, then operations removed (chunks, then one
/// at a time) while it still fails.
fn shrink(con: &mut Connection, world: &World, ops: &[Op], at: usize) -> (Vec<Op>, usize, String) {
    let mut ops = ops[..=at].to_vec();
    let mut failure = run(con, world, &ops).expect_err("the prefix fails");
    loop {
        let before = ops.len();
        let mut chunk = ops.len() / 2;
        while chunk >= 1 {
            let mut i = 0;
            while i + chunk <= ops.len() {
                let mut fewer = ops.clone();
                fewer.drain(i..i + chunk);
                match run(con, world, &fewer) {
                    Err(f) => {
                        ops = fewer[..=f.0].to_vec();
                        failure = f;
                    }
                    Ok(()) => i += 1,
                }
            }
            chunk /= 2;
        }
        // Then fewer jobs in a push, fewer acknowledgements in a fetch.
        for i in 0..ops.len() {
            let mut j = 0;
            while j < parts(&ops[i]) {
                let mut simpler = ops.clone();
                without_part(&mut simpler[i], j);
                match run(con, world, &simpler) {
                    Err(f) if f.0 == ops.len() - 1 => {
                        ops = simpler;
                        failure = f;
                    }
                    _ => j += 1,
                }
            }
        }
        if ops.len() == before {
            return (ops, failure.0, failure.1);
        }
    }
}

fn parts(op: &Op) -> usize {
    match op {
        Op::Push(jobs) if jobs.len() > 1 => jobs.len(),
        Op::Fetch(_, acks, _) => acks.len(),
        _ => 0,
    }
}

fn without_part(op: &mut Op, i: usize) {
    match op {
        Op::Push(jobs) => {
            jobs.remove(i);
        }
        Op::Fetch(_, acks, _) => {
            acks.remove(i);
        }
        _ => {}
    }
}

#[test]
fn the_scripts_and_the_model_serve_alike() {
    random_runs("lockstep", 0);
}

/// The same with jobs pushed again (`Again`, one operation in ten): copies of jobs that hold their slot
/// (queues fair by job count only, recovered processes dead, not stalled).
#[test]
fn copies_of_jobs_pushed_again_are_served_alike() {
    random_runs("lockstep (copies)", 10);
}

/// Random sequences (a failure is shrunk and replayed); `again`: the percentage of operations replaced by a
/// job pushed again, drawn from a second generator so that the first one's sequences stay as they were.
fn random_runs(name: &str, again: u64) {
    let seed = seed("LOCKSTEP_SEED");
    let sequences = env("LOCKSTEP_SEQUENCES", 300);
    let steps = env("LOCKSTEP_STEPS", 60) as usize;
    println!(
        "{name}: seed {seed}, {sequences} sequences of {steps} steps (LOCKSTEP_SEED to replay)"
    );
    let server = Server::start();
    let mut con = server.connect();
    load_library(&mut con);
    for n in 0..sequences {
        let mut rng = Rng(seed.wrapping_add(n));
        let mut copies = Rng((seed ^ 0x5eed_c0b1e5).wrapping_add(n));
        let mut world = World::random(&mut rng);
        // Jobs of several scopes in half the sequences, drawn apart so the others' sequences stay as they were.
        let mut several = Rng((seed ^ 0x5c0_9e5).wrapping_add(n));
        world.several = several.chance(50);
        world.shared_rate = (world.several && several.chance(50)).then(|| {
            vec![Window {
                limit: 1 + several.below(3) as u64,
                per_ms: [300, 1000][several.below(2)],
            }]
        });
        // With copies, by job count only: the driver keeps one charge per job id (the last fetch's), and a
        // copy taken back by a stalled process would acknowledge with another copy's.
        world.time &= again == 0;
        let ops: Vec<Op> = (0..steps)
            .map(|_| {
                let op = random_op(&mut rng, &world);
                match op {
                    _ if again > 0 && copies.chance(again) => Op::Again(copies.below(64)),
                    // With copies, every recovered process died: a stalled one's take-back may take a copy
                    // of the same bytes as one another process runs, and a process may then hold two equal
                    // entries, which the driver (telling entries by their bytes) does not follow.
                    Op::Recover { process, dead, .. } if again > 0 => Op::Recover {
                        process,
                        dead,
                        stalled: false,
                    },
                    op => op,
                }
            })
            .collect();
        if let Err((at, _)) = run(&mut con, &world, &ops) {
            let (short, at, why) = shrink(&mut con, &world, &ops, at);
            let mut report = format!(
                "{name}: LOCKSTEP_SEED={seed}: sequence {n} diverged; shortest failing sequence \
                 ({} of {} steps), fails at step {at}:\n{world:?}\n",
                short.len(),
                ops.len()
            );
            report.push_str(&trace(&mut con, &world, &short));
            panic!("{report}{why}");
        }
    }
}

/// A world of the given tenants and scopes (`(tag, sub)`, limit, elastic).
fn world(tenants: &[&str], scopes: &[(&str, &str, usize, bool)]) -> World {
    World {
        tenants: tenants.iter().map(|t| t.to_string()).collect(),
        scopes: scopes
            .iter()
            .map(|&(tag, sub, limit, elastic)| ScopeDef {
                tag: tag.into(),
                sub: sub.into(),
                limit,
                elastic,
            })
            .collect(),
        crowded: false,
        rates: tenants.iter().map(|_| None).collect(),
        time: false,
        several: false,
        shared_rate: None,
    }
}

/// Five tenants, most jobs on the shared keys (the world of the take-back regressions).
fn crowded_world() -> World {
    let q = "q:fq";
    World {
        crowded: true,
        ..world(
            &["a", "b", "c", "d", "e"],
            &[
                ("t:a", q, 2, false),
                ("t:b", q, 2, false),
                ("t:c", q, 3, true),
                ("t:d", q, 2, false),
                ("t:e", q, 3, true),
                ("k:s1", "k", 2, false),
                ("k:s2", "k", 2, true),
            ],
        )
    }
}

/// The shortest sequences of the divergences the random runs found (docs/LOCKSTEP.md), replayed every time:
/// the paths they take are rare (the third one came up once in thousands of sequences).
#[test]
fn the_divergences_found_stay_fixed() {
    use Op::*;
    let q = "q:fq";
    let server = Server::start();
    let mut con = server.connect();
    load_library(&mut con);
    let cases = [
        // A woken tenant was held to the released job's limit, not its own (`take_slot`'s shortcut).
        (
            world(
                &["a", "b", "c", "d"],
                &[
                    ("t:a", q, 3, false),
                    ("t:b", q, 2, false),
                    ("t:c", q, 3, false),
                    ("t:d", q, 3, true),
                    ("k:s1", "k", 1, false),
                    ("k:s2", "k", 1, true),
                ],
            ),
            vec![
                Push(vec![(1, None), (1, Some((1, 0))), (1, Some((5, 1)))]),
                Fetch(0, vec![4, 4], 1),
                Fetch(2, vec![], 1),
                Push(vec![(3, Some((3, 0))), (0, Some((0, 0)))]),
                Push(vec![(1, Some((4, 1))), (2, Some((4, 1)))]),
                Fetch(0, vec![3], 1),
                Fetch(1, vec![], 1),
                Fetch(1, vec![3], 1),
                Fetch(1, vec![4, 1], 1),
                Fetch(0, vec![3, 2], 1),
                Push(vec![
                    (3, Some((4, 0))),
                    (2, Some((5, 0))),
                    (3, Some((4, 0))),
                ]),
                Fetch(1, vec![6, 1], 1),
                Fetch(0, vec![3, 3], 1),
            ],
        ),
        // A woken tenant was served past its own job's elastic limit while another was ready (`turn`).
        (
            world(
                &["a", "b"],
                &[
                    ("t:a", q, 2, true),
                    ("t:b", q, 1, true),
                    ("k:s1", "k", 1, false),
                    ("k:s2", "k", 1, true),
                ],
            ),
            vec![
                Push(vec![(1, Some((3, 1))), (1, Some((3, 1)))]),
                Push(vec![
                    (0, Some((3, 0))),
                    (0, Some((0, 0))),
                    (1, Some((1, 0))),
                ]),
                Fetch(1, vec![], 1),
                Fetch(2, vec![0, 0], 1),
                Fetch(1, vec![0, 7], 1),
            ],
        ),
        // Tenants woken together were counted as holders for the one served (`wake`).
        (
            world(
                &["a", "b", "c", "d"],
                &[
                    ("t:a", q, 2, false),
                    ("t:b", q, 3, true),
                    ("t:c", q, 2, true),
                    ("t:d", q, 2, false),
                    ("k:s1", "k", 1, false),
                    ("k:s2", "k", 1, true),
                ],
            ),
            vec![
                Push(vec![(1, Some((4, 0))), (0, Some((0, 0))), (2, None)]),
                Fetch(0, vec![], 1),
                Push(vec![(3, Some((3, 0)))]),
                Push(vec![(2, None), (3, None)]),
                Weight(3, Some(3.0)),
                Push(vec![
                    (3, Some((5, 0))),
                    (0, Some((4, 0))),
                    (0, Some((4, 1))),
                ]),
                Fetch(1, vec![], 1),
                Fetch(2, vec![1], 1),
                Push(vec![(3, Some((4, 1)))]),
                Fetch(2, vec![4, 0], 1),
                Fetch(0, vec![], 1),
                Fetch(1, vec![], 1),
                Push(vec![(3, Some((4, 1))), (2, Some((4, 1)))]),
                Fetch(2, vec![6], 1),
                Requeue(2, vec![7]),
                Recover {
                    process: 1,
                    dead: vec![0],
                    stalled: false,
                },
                Fetch(1, vec![1], 1),
                Push(vec![
                    (3, Some((4, 0))),
                    (2, Some((2, 0))),
                    (3, Some((4, 1))),
                ]),
                Fetch(2, vec![], 1),
                Requeue(0, vec![1]),
                Fetch(1, vec![0], 1),
                Fetch(2, vec![4], 1),
            ],
        ),
        // A stalled process took back two copies on a scope left without holders (k:s1, limits 3 and 4):
        // the scripts registered it with the limit of the copy the recovered hash gave first (an order a
        // server seeds at random), the model with the newest's, so a deleted runtime limit woke the tenant
        // waiting there (b) in one and not in the other. Now the highest limit of the copies registers it.
        (
            crowded_world(),
            vec![
                Push(vec![(0, Some((5, 1)))]),
                Push(vec![(2, Some((5, 2)))]),
                Fetch(0, vec![], 1),
                Fetch(0, vec![], 1),
                Push(vec![(4, Some((5, 1))), (1, Some((5, 0)))]),
                Recover {
                    process: 0,
                    dead: vec![],
                    stalled: true,
                },
                Fetch(0, vec![], 1),
                Fetch(1, vec![], 1),
                Limit(5, None, false),
            ],
        ),
        // The same with three copies (limits 2, 3, 4): the hash's order picks the highest one time in three.
        (
            crowded_world(),
            vec![
                Push(vec![
                    (0, Some((5, 0))),
                    (2, Some((5, 1))),
                    (3, Some((5, 2))),
                ]),
                Fetch(0, vec![], 3),
                Push(vec![(1, Some((5, 0)))]),
                Recover {
                    process: 0,
                    dead: vec![],
                    stalled: true,
                },
                Fetch(0, vec![], 1),
                Limit(5, None, false),
            ],
        ),
    ];
    for (i, (world, ops)) in cases.iter().enumerate() {
        if let Err((at, why)) = run(&mut con, world, ops) {
            let steps = trace(&mut con, world, ops);
            panic!("lockstep regression {i} fails at step {at}:\n{steps}{why}");
        }
    }
}

/// A job pushed twice (a single push sent again after a lost reply): its copy is not served while the first
/// copy holds the job's slot, whatever the room (the two would share one holder, and the first to end would
/// free it while the other runs: with a limit of 2, J, its copy and K ran, then L once J's first copy ended).
/// The copy's tenant waits in `capped` (an elastic cap too) and is served when the slot is given back:
/// acknowledged, requeued, or recovered.
/// A job of two scopes (its tenant's, with room, and a shared one, full) does not start, and takes neither: its
/// tenant waits on the shared scope and comes back when it frees. A script that checked only a job's first scope
/// (a one-line change) starts it and fails here, at the second fetch.
#[test]
fn a_job_starts_only_when_every_scope_has_room() {
    use Op::*;
    let q = "q:fq";
    let server = Server::start();
    let mut con = server.connect();
    load_library(&mut con);
    let mut two = world(
        &["a", "b"],
        &[
            ("t:a", q, 2, false),
            ("t:b", q, 2, false),
            ("k:s1", "k", 1, false),
            ("k:s2", "k", 1, true),
        ],
    );
    two.several = true;
    // jids 1 and 4 of a tenant's own scope also take k:s1 (World::more_scopes); 2 and 3 take nothing.
    let ops = vec![
        Push(vec![
            (0, Some((0, 0))),
            (0, None),
            (0, None),
            (1, Some((1, 0))),
        ]),
        Fetch(0, vec![], 1),
        Fetch(1, vec![], 2),
        Ack(0, vec![0]),
        Fetch(2, vec![], 1),
        Fetch(2, vec![], 1),
    ];
    if let Err((at, why)) = run(&mut con, &two, &ops) {
        let steps = trace(&mut con, &two, &ops);
        panic!("fails at step {at}:\n{steps}{why}");
    }
}

#[test]
fn a_copy_of_a_job_holding_its_slot_waits_until_it_is_given_back() {
    use Op::*;
    let q = "q:fq";
    let server = Server::start();
    let mut con = server.connect();
    load_library(&mut con);
    let two = world(
        &["a", "b"],
        &[
            ("t:a", q, 2, false),
            ("t:b", q, 2, true),
            ("k:s1", "k", 1, false),
            ("k:s2", "k", 1, true),
        ],
    );
    let cases = [
        // Static: J (1), its copy, K (2), L (3); the copy waits until J's acknowledgement, L behind it.
        vec![
            Push(vec![(0, Some((0, 0)))]),
            Again(0),
            Push(vec![(0, Some((0, 0))), (0, Some((0, 0)))]),
            Fetch(0, vec![], 1),
            Fetch(1, vec![], 1),
            Fetch(1, vec![], 1),
            Fetch(0, vec![0], 1),
            Fetch(1, vec![], 1),
            Fetch(2, vec![], 1),
        ],
        // Elastic, another tenant ready: the copy is never served past the limit from `over`; K's release
        // wakes it for nothing (held back again), J's serves it.
        vec![
            Push(vec![(1, Some((1, 0))), (1, Some((1, 0)))]),
            Again(0),
            Push(vec![(0, None), (1, Some((1, 0)))]),
            Fetch(0, vec![], 1),
            Fetch(1, vec![], 1),
            Fetch(2, vec![], 3),
            Ack(1, vec![0]),
            Fetch(1, vec![], 2),
            Requeue(0, vec![0]),
            Fetch(0, vec![], 2),
            Fetch(2, vec![], 1),
        ],
        // Recovered: a stalled process's J goes back (its slot given back); another process takes it; the
        // copy waits; the stalled process comes back and takes the copy back (it runs J).
        vec![
            Push(vec![(0, Some((0, 0)))]),
            Again(0),
            Push(vec![(0, Some((0, 0)))]),
            Fetch(0, vec![], 2),
            Recover {
                process: 0,
                dead: vec![],
                stalled: true,
            },
            Fetch(1, vec![], 2),
            Fetch(0, vec![], 1),
            Fetch(1, vec![0], 1),
            Fetch(2, vec![], 1),
        ],
        // A runtime limit raised wakes the copy for nothing; deleted, it is still held back.
        vec![
            Push(vec![(0, Some((2, 0)))]),
            Again(0),
            Fetch(0, vec![], 1),
            Limit(2, Some(3), false),
            Fetch(1, vec![], 1),
            Limit(2, None, false),
            Fetch(1, vec![], 1),
            Ack(0, vec![0]),
            Fetch(1, vec![], 1),
        ],
    ];
    for (i, ops) in cases.iter().enumerate() {
        if let Err((at, why)) = run(&mut con, &two, ops) {
            let steps = trace(&mut con, &two, ops);
            panic!("copy case {i} fails at step {at}:\n{steps}{why}");
        }
    }
}
