//! Issue 32's rule on plain queues in lockstep: random sequences of acquires of jobs of several concurrency scopes
//! (class A: its tenant's scope, limit 1 or 2, and the custom key "api", limit 2; class B: "api" limit 1 and
//! "left" limit 1; class B': "left" then "api", limit 2), re-sent acquires (a lost reply), acquires that reach
//! Redis late (after their run was given up), releases by current and stale runs, give-backs after lost replies
//! (forget), fetches of handed-over copies, a tag-wide runtime limit on "api", sweeps and a moving clock with
//! leases running out, run through `acquire_all.lua` and `release_all.lua` as users run them (their source from
//! [`super::script`], with `now_ms` reading a key of the test's in place of TIME) on a redis-server of its own,
//! and through [`MultiSlots`]. After every step the replies and every scope's state (holders with leases, runs,
//! parked jobs in order with scores, their terms, which have a list of scopes, runs given up, the sweep
//! registration) and the queue must agree, and [`MultiSlots::check`] must hold: no slot taken past a limit, a
//! jid holds a live slot in all of its scopes or none, a run that parked a job holds none of its slots.
//!
//! `SEVERAL_LOCKSTEP_SEQUENCES` (default 200), `SEVERAL_LOCKSTEP_STEPS` (default 60), `SEVERAL_LOCKSTEP_SEED`.

use std::collections::BTreeMap;

use redis::{Connection, Script};

use super::model::{Listed, MultiSlots, Terms};
use super::{self as slots, Scope, ALL};
use crate::names;
use crate::redis::test_server::{env, now_ms, seed, Rng, Server};

const CLOCK_KEY: &str = "several-lockstep:clock";
const JOBS: usize = 8;
const QUEUE: &str = "default";
/// The scopes by their names in the model.
const SCOPES: [&str; 4] = ["t0", "t1", "api", "left"];
/// The first job's enqueue time (ms, with a fraction: no Sidekiq 8 tie-break in `park_score`).
const ENQUEUED: f64 = 1_700_000_000_000.5;

fn scope_of(name: &str) -> Scope {
    match name {
        "t0" | "t1" => Scope::tenant_queue(name.as_bytes(), QUEUE.as_bytes()),
        _ => Scope::custom(name.as_bytes()),
    }
}

/// Job `n`'s scopes in the order its class names them, each with its class's limit and lease: jobs 0..=3 are
/// class A (tenant t0 limit 1 or t1 limit 2, then "api" limit 2; lease 5 s), 4 and 5 class B ("api" limit 1,
/// "left" limit 1), 6 and 7 class B' ("left" limit 1, "api" limit 2), leases 4 s.
fn job_scopes(n: usize) -> Vec<Listed> {
    let l = |name: &str, limit, lease| (name.to_string(), limit, lease);
    match n {
        0..=3 if n.is_multiple_of(2) => vec![l("t0", 1, 5_000), l("api", 2, 5_000)],
        0..=3 => vec![l("t1", 2, 5_000), l("api", 2, 5_000)],
        4 | 5 => vec![l("api", 1, 4_000), l("left", 1, 4_000)],
        _ => vec![l("left", 1, 4_000), l("api", 2, 4_000)],
    }
}

fn payload(n: usize) -> String {
    format!("{{\"jid\":\"j{n}\",\"queue\":\"{QUEUE}\"}}")
}

fn job_of(payload: &str) -> usize {
    jid_of(payload)[1..].parse().unwrap()
}

fn jid_of(payload: &str) -> String {
    payload
        .split("\"jid\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or(payload)
        .to_string()
}

#[derive(Debug, Clone)]
enum Op {
    /// A new run of job `n` sends its acquire, or (`resend`) the job's last run sends it again (its reply lost;
    /// a run whose acquire was held back: it arrives now).
    Acquire {
        job: usize,
        resend: bool,
    },
    /// A new run of job `n` whose acquire is on its way: it reaches Redis with a later `resend`.
    Late {
        job: usize,
    },
    /// The `pick`th last run of job `n` releases its slots.
    Release {
        job: usize,
        pick: usize,
    },
    /// The `pick`th last run of job `n` is given up after a lost acquire reply (release_all with its payload).
    Forget {
        job: usize,
        pick: usize,
    },
    /// A thread pops the job at the queue's tail and acquires it with a run of its own, at once (`claim`) or
    /// with a later [`Op::Claim`].
    Fetch {
        claim: bool,
    },
    /// The thread that popped the oldest copy not claimed yet acquires it.
    Claim,
    /// A tag-wide runtime limit on "api".
    Limit(Option<u64>),
    Sweep(usize),
    Clock(u64),
}

fn random_op(rng: &mut Rng) -> Op {
    let job = rng.below(JOBS);
    let pick = [0, 0, 1, 2][rng.below(4)];
    match rng.below(24) {
        0..=6 => Op::Acquire { job, resend: false },
        7..=8 => Op::Acquire { job, resend: true },
        9 => Op::Late { job },
        10..=12 => Op::Release { job, pick },
        13..=14 => Op::Forget { job, pick },
        15..=16 => Op::Fetch { claim: true },
        17 => Op::Fetch { claim: false },
        18 => Op::Claim,
        19 => Op::Limit([None, Some(1), Some(2), Some(3)][rng.below(4)]),
        20 => Op::Sweep(rng.below(SCOPES.len())),
        _ => Op::Clock(rng.below(4) as u64 * 1_000),
    }
}

/// One run of a job: its token, whether its acquire reached Redis, and whether it was given up before that.
#[derive(Debug, Clone)]
struct RunOf {
    token: String,
    sent: bool,
    forgotten_unsent: bool,
}

/// A sequence: its operations and each job's enqueue time (ms).
#[derive(Debug, Clone)]
struct Sequence {
    ops: Vec<Op>,
    scores: Vec<f64>,
}

/// One scope as Redis holds it: holders, runs, parked, waits, jids with a list of scopes, runs given up, meta.
type ScopeRead = (
    Vec<(String, u64)>,
    BTreeMap<String, String>,
    Vec<(String, f64)>,
    BTreeMap<String, String>,
    Vec<String>,
    Vec<String>,
    Option<String>,
);

/// A text replacement in `acquire_all.lua`'s source (a mutation the lockstep must catch).
type Mutation = (&'static str, &'static str);

struct Lockstep<'a> {
    con: &'a mut Connection,
    acquire_all: Script,
    release_all: Script,
    set_limit: Script,
    sweep: Script,
    model: MultiSlots,
    now: u64,
    scores: Vec<f64>,
    runs: BTreeMap<usize, Vec<RunOf>>,
    next_run: usize,
    /// Copies popped from the queue and not claimed yet, oldest first.
    popped: Vec<usize>,
}

/// A slot script's source with `now_ms` reading CLOCK_KEY, after `mutation`.
fn test_script(name: &str, mutation: Option<Mutation>) -> Script {
    let (_, source) = slots::script(name).unwrap();
    let time = "redis.call('TIME')";
    assert!(source.contains(time), "now_ms reads TIME");
    let mut source = source.replace(
        time,
        &format!("redis.call('HMGET', '{CLOCK_KEY}', 's', 'u')"),
    );
    if let Some((from, to)) = mutation {
        assert!(source.contains(from), "the mutated text is in {name}");
        source = source.replace(from, to);
    }
    Script::new(&source)
}

fn invoke<T: redis::FromRedisValue>(
    con: &mut Connection,
    script: &Script,
    (keys, args): (Vec<Vec<u8>>, Vec<Vec<u8>>),
) -> T {
    let mut inv = script.prepare_invoke();
    for k in keys {
        inv.key(k);
    }
    for a in args {
        inv.arg(a);
    }
    inv.invoke(con).unwrap()
}

impl<'a> Lockstep<'a> {
    fn new(con: &'a mut Connection, scores: &[f64], mutation: Option<Mutation>) -> Lockstep<'a> {
        let _: () = redis::cmd("FLUSHALL").query(con).unwrap();
        let now = now_ms();
        let mut ls = Lockstep {
            con,
            acquire_all: test_script("acquire_all", mutation),
            release_all: test_script("release_all", None),
            set_limit: test_script("set_limit", None),
            sweep: test_script("sweep", None),
            model: MultiSlots::default(),
            now,
            scores: scores.to_vec(),
            runs: BTreeMap::new(),
            next_run: 0,
            popped: Vec::new(),
        };
        ls.set_clock();
        ls
    }

    fn set_clock(&mut self) {
        let _: () = redis::cmd("HSET")
            .arg(CLOCK_KEY)
            .arg("s")
            .arg(self.now / 1000)
            .arg("u")
            .arg(self.now % 1000 * 1000)
            .query(self.con)
            .unwrap();
    }

    fn fresh_run(&mut self, n: usize, sent: bool) -> String {
        self.next_run += 1;
        let token = format!("r{}", self.next_run);
        self.runs.entry(n).or_default().push(RunOf {
            token: token.clone(),
            sent,
            forgotten_unsent: false,
        });
        token
    }

    /// The requests of one run of job `n`, one per scope.
    fn slots(n: usize, run: &str) -> Vec<slots::Slot> {
        job_scopes(n)
            .into_iter()
            .map(|(name, limit, lease)| slots::Slot {
                scope: scope_of(&name),
                jid: format!("j{n}").into_bytes(),
                run: run.as_bytes().to_vec(),
                lease_ms: lease,
                default_limit: limit,
            })
            .collect()
    }

    /// Job `n`'s acquire by `run` through both; the replies (lua, model) and the scripts' code.
    fn acquire(&mut self, n: usize, run: &str) -> (String, String, i64) {
        let slots = Self::slots(n, run);
        let reqs: Vec<_> = slots.iter().map(|s| s.request()).collect();
        let (payload, score) = (payload(n), self.scores[n]);
        let call = slots::acquire_all_call(&reqs, payload.as_bytes(), score);
        let lua: (i64, i64) = invoke(self.con, &self.acquire_all, call);
        let code = self.model.acquire(
            &format!("j{n}"),
            run,
            &payload,
            slots::enqueue_score_ms(score),
            &job_scopes(n),
            self.now,
        );
        (format!("{lua:?}"), format!("{:?}", (code, 0)), lua.0)
    }

    /// A copy of job `n` popped from the queue is acquired by a run of its thread's.
    fn claim(&mut self, n: usize) -> Result<(String, String), String> {
        // Handed over in every scope (as the hand-over left it): the copy runs.
        let handed = job_scopes(n).iter().all(|(name, _, _)| {
            let owner: Option<String> = redis::cmd("HGET")
                .arg(scope_of(name).runs())
                .arg(format!("j{n}"))
                .query(self.con)
                .unwrap();
            owner.is_some_and(|o| o.starts_with(names::HANDED))
        });
        let run = self.fresh_run(n, true);
        let (lua, model, code) = self.acquire(n, &run);
        if handed && code != 1 {
            return Err(format!(
                "the fetched copy of j{n}, handed a slot in every scope, got {lua}"
            ));
        }
        Ok((format!("j{n} {lua}"), format!("j{n} {model}")))
    }

    fn step(&mut self, op: &Op) -> Result<String, String> {
        let now = self.now;
        let (lua, model) = match *op {
            Op::Acquire { job: n, resend } => {
                let last = self.runs.get(&n).and_then(|r| r.last()).cloned();
                let (run, given_up) = match (resend, last) {
                    (true, Some(last)) => {
                        self.runs.get_mut(&n).unwrap().last_mut().unwrap().sent = true;
                        (last.token, last.forgotten_unsent)
                    }
                    _ => (self.fresh_run(n, true), false),
                };
                let (lua, model, code) = self.acquire(n, &run);
                if given_up && code != 3 {
                    return Err(format!(
                        "the acquire of {run}, given up before it came, took something: {lua}"
                    ));
                }
                (lua, model)
            }
            Op::Late { job: n } => {
                let run = self.fresh_run(n, false);
                return Ok(format!("{run} on its way"));
            }
            Op::Release { job: n, pick } | Op::Forget { job: n, pick } => {
                let Some(runs) = self.runs.get_mut(&n) else {
                    return Ok("no such run".into());
                };
                let Some(at) = runs.len().checked_sub(1 + pick) else {
                    return Ok("no such run".into());
                };
                let forget = matches!(op, Op::Forget { .. });
                if forget && !runs[at].sent {
                    runs[at].forgotten_unsent = true;
                }
                let run = runs[at].token.clone();
                let slots = Self::slots(n, &run);
                let reqs: Vec<_> = slots.iter().map(|s| s.request()).collect();
                let payload = payload(n);
                let given = forget.then_some((payload.as_bytes(), QUEUE.as_bytes()));
                let call = slots::release_all_call(&reqs, given);
                let lua: (u64, u64) = invoke(self.con, &self.release_all, call);
                let given = forget.then_some(payload.as_str());
                let model = self
                    .model
                    .release(&format!("j{n}"), &run, given, &job_scopes(n), now);
                (format!("{run} {lua:?}"), format!("{run} {model:?}"))
            }
            Op::Fetch { claim } => {
                let lua: Option<String> = redis::cmd("RPOP")
                    .arg(format!("queue:{QUEUE}"))
                    .query(self.con)
                    .unwrap();
                let model = self.model.queue.pop();
                if lua != model {
                    return Err(format!("fetched: lua {lua:?}, model {model:?}"));
                }
                let Some(p) = lua else {
                    return Ok("queue empty".into());
                };
                if !claim {
                    self.popped.push(job_of(&p));
                    return Ok(format!("j{} popped", job_of(&p)));
                }
                self.claim(job_of(&p))?
            }
            Op::Claim => {
                if self.popped.is_empty() {
                    return Ok("nothing popped".into());
                }
                let n = self.popped.remove(0);
                self.claim(n)?
            }
            Op::Limit(value) => {
                let call = slots::set_limit_call(scope_of("api").tag(), ALL, value);
                let lua: (u64, u64) = invoke(self.con, &self.set_limit, call);
                let model = self.model.set_limit("api", value, now);
                (format!("{lua:?}"), format!("{model:?}"))
            }
            Op::Sweep(i) => {
                let call = slots::sweep_call(scope_of(SCOPES[i]).tag());
                let lua: (u64, u64, u64) = invoke(self.con, &self.sweep, call);
                let model = self.model.sweep(SCOPES[i], now);
                (format!("{lua:?}"), format!("{model:?}"))
            }
            Op::Clock(ms) => {
                self.now += ms;
                self.set_clock();
                (String::new(), String::new())
            }
        };
        if lua != model {
            return Err(format!("replies differ: lua {lua} model {model}"));
        }
        let (lua_state, model_state) = (self.lua_state(), self.model_state());
        if lua_state != model_state {
            let mut diff = String::from("state differs (lua | model):\n");
            for (a, b) in lua_state.lines().zip(model_state.lines()) {
                let mark = if a == b { "  " } else { "!!" };
                diff.push_str(&format!("    {mark} {a}\n    {mark} {b}\n"));
            }
            return Err(diff);
        }
        self.model
            .check(self.now)
            .map_err(|e| format!("rule broken: {e}\n{lua_state}"))?;
        Ok(lua)
    }

    fn lua_state(&mut self) -> String {
        let mut out = String::new();
        for name in SCOPES {
            let s = scope_of(name);
            let holders = s.holders();
            let others = [
                &holders[..holders.len() - names::HOLDERS.len()],
                names::OTHERS.as_bytes(),
            ]
            .concat();
            let (holders, runs, parked, waits, others, gone, meta): ScopeRead = redis::pipe()
                .cmd("ZRANGE")
                .arg(&holders)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .cmd("HGETALL")
                .arg(s.runs())
                .cmd("ZRANGE")
                .arg(s.parked())
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .cmd("HGETALL")
                .arg(s.waits())
                .cmd("HKEYS")
                .arg(others)
                .cmd("HKEYS")
                .arg(s.gone())
                .cmd("HGET")
                .arg(slots::meta(s.tag()))
                .arg(s.sub())
                .query(self.con)
                .unwrap();
            let mut holders = holders;
            holders.sort();
            let parked: Vec<(String, f64)> =
                parked.into_iter().map(|(p, at)| (jid_of(&p), at)).collect();
            let (mut others, mut gone) = (others, gone);
            others.sort();
            gone.sort();
            out.push_str(&format!(
                "{name}: holders {holders:?} runs {runs:?} parked {parked:?} waits {waits:?} lists {others:?} gone {gone:?} meta {meta:?}\n"
            ));
        }
        let queue: Vec<String> = redis::cmd("LRANGE")
            .arg(format!("queue:{QUEUE}"))
            .arg(0)
            .arg(-1)
            .query(self.con)
            .unwrap();
        let queue: Vec<String> = queue.iter().map(|p| jid_of(p)).collect();
        out.push_str(&format!("queue {queue:?}"));
        out
    }

    fn model_state(&self) -> String {
        let mut out = String::new();
        let empty = Default::default();
        for name in SCOPES {
            let m = self.model.scopes.get(name).unwrap_or(&empty);
            let holders: Vec<(String, u64)> =
                m.holders.iter().map(|(j, &u)| (j.clone(), u)).collect();
            let runs: BTreeMap<String, String> = m
                .runs
                .iter()
                .map(|(j, o)| (j.clone(), o.stored()))
                .collect();
            let parked: Vec<(String, f64)> =
                m.parked.iter().map(|(at, _, j)| (j.clone(), *at)).collect();
            let waits: BTreeMap<String, String> = m
                .waits
                .iter()
                .map(|(j, Terms { run, limit, lease })| {
                    (j.clone(), format!("{run} {limit} {lease}"))
                })
                .collect();
            let others: Vec<String> = self
                .model
                .others
                .get(name)
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            let gone: Vec<String> = m.gone.iter().cloned().collect();
            let meta = m.meta.map(|(limit, lease)| format!("{limit} {lease}"));
            out.push_str(&format!(
                "{name}: holders {holders:?} runs {runs:?} parked {parked:?} waits {waits:?} lists {others:?} gone {gone:?} meta {meta:?}\n"
            ));
        }
        let queue: Vec<String> = self.model.queue.iter().map(|p| jid_of(p)).collect();
        out.push_str(&format!("queue {queue:?}"));
        out
    }
}

/// Runs a sequence from an empty Redis; Err: the failing step's index, and a trace up to it with the error.
fn run(
    con: &mut Connection,
    seq: &Sequence,
    mutation: Option<Mutation>,
    paths: &mut BTreeMap<&'static str, u64>,
) -> Result<(), (usize, String)> {
    let mut ls = Lockstep::new(con, &seq.scores, mutation);
    let mut trace = String::new();
    let mut outcome = Ok(());
    for (i, op) in seq.ops.iter().enumerate() {
        match ls.step(op) {
            Ok(reply) => trace.push_str(&format!("  {i:3} {op:?} -> {reply}\n")),
            Err(e) => {
                outcome = Err((i, format!("{trace}  {i:3} {op:?}: {e}")));
                break;
            }
        }
    }
    *paths = std::mem::take(&mut ls.model.seen);
    outcome
}

/// The shortest failing sequence found: the failing prefix, then operations removed (chunks, then one at a
/// time) while it still fails.
fn shrink(con: &mut Connection, seq: &Sequence, at: usize) -> (Sequence, String) {
    let mut seq = Sequence {
        ops: seq.ops[..=at].to_vec(),
        scores: seq.scores.clone(),
    };
    let mut failure = run(con, &seq, None, &mut BTreeMap::new())
        .expect_err("the prefix fails")
        .1;
    loop {
        let before = seq.ops.len();
        let mut chunk = seq.ops.len() / 2;
        while chunk >= 1 {
            let mut i = 0;
            while i + chunk <= seq.ops.len() {
                let mut fewer = seq.clone();
                fewer.ops.drain(i..i + chunk);
                match run(con, &fewer, None, &mut BTreeMap::new()) {
                    Err((at, f)) => {
                        fewer.ops.truncate(at + 1);
                        seq = fewer;
                        failure = f;
                    }
                    Ok(()) => i += 1,
                }
            }
            chunk /= 2;
        }
        if seq.ops.len() == before {
            return (seq, failure);
        }
    }
}

/// Each job's enqueue time: the jobs in a random order, a second apart.
fn random_scores(rng: &mut Rng) -> Vec<f64> {
    let mut order: Vec<usize> = (0..JOBS).collect();
    for i in (1..JOBS).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order
        .into_iter()
        .map(|k| ENQUEUED + k as f64 * 1_000.0)
        .collect()
}

#[test]
fn several_scope_scripts_and_the_model_agree() {
    let server = Server::start();
    let mut con = server.connect();
    let seed = seed("SEVERAL_LOCKSTEP_SEED");
    let mut rng = Rng(seed);
    let steps = env("SEVERAL_LOCKSTEP_STEPS", 60) as usize;
    let sequences = env("SEVERAL_LOCKSTEP_SEQUENCES", 200);
    let mut seen: BTreeMap<&'static str, u64> = BTreeMap::new();
    for sequence in 0..sequences {
        let scores = random_scores(&mut rng);
        let ops: Vec<Op> = (0..steps).map(|_| random_op(&mut rng)).collect();
        let seq = Sequence { ops, scores };
        let mut paths = BTreeMap::new();
        let outcome = run(&mut con, &seq, None, &mut paths);
        for (path, n) in paths {
            *seen.entry(path).or_default() += n;
        }
        if let Err((at, _)) = outcome {
            let (small, failure) = shrink(&mut con, &seq, at);
            panic!(
                "several lockstep: SEVERAL_LOCKSTEP_SEED={seed}: sequence {sequence} diverged at step {at}; \
                 shortest failing sequence (scores {:?}):\n{failure}",
                small.scores
            );
        }
    }
    eprintln!("several lockstep: {sequences} sequences of {steps} steps (seed {seed}), paths taken: {seen:#?}");
    // The default run reaches every path of the rule (a smaller one need not).
    if sequences * steps as u64 >= 12_000 {
        let missed: Vec<&&str> = PATHS.iter().filter(|p| !seen.contains_key(**p)).collect();
        assert!(missed.is_empty(), "paths no sequence took: {missed:?}");
    }
}

/// The paths of the scripts every default run must take ([`MultiSlots::seen`]); a copy marked dropped and then
/// claimed (a few times a run) is [`a_lost_reply_never_runs_a_job_twice_nor_takes_a_slot_late`]'s.
const PATHS: [&str; 18] = [
    "acquire: acquired",
    "acquire: parked on its first scope",
    "acquire: parked on a later scope",
    "acquire: re-sent while held",
    "acquire: re-sent while parked",
    "acquire: re-sent after its copy was handed over",
    "acquire: a fetched copy claims",
    "acquire: partial hold given back",
    "acquire: gone",
    "hand_over: handed",
    "hand_over: moved",
    "room_for: full",
    "room_for: the jid holds a slot there",
    "room_for: an older job parked",
    "room_for reclaimed",
    "taken back",
    "forget: parked copy taken back",
    "forget: gone",
];

/// Jobs enqueued in their numbers' order.
fn in_order() -> Vec<f64> {
    (0..JOBS).map(|n| ENQUEUED + n as f64 * 1_000.0).collect()
}

fn acquire(job: usize) -> Op {
    Op::Acquire { job, resend: false }
}

/// j0 (t0, api) and j1 (t1, api) fill "api" (limit 2); j3 (t1 with room, api full) and j6 ("left" free, then
/// api full) must park on api holding nothing. Two mutations of `acquire_all.lua` that let a job start with one
/// scope full (only its first scope asked; a full scope's refusal dropped from `room_for`) must fail the lockstep.
#[test]
fn a_job_of_two_scopes_never_starts_with_one_full() {
    let server = Server::start();
    let mut con = server.connect();
    let seq = Sequence {
        ops: vec![acquire(0), acquire(1), acquire(3), acquire(6)],
        scores: in_order(),
    };
    if let Err((_, e)) = run(&mut con, &seq, None, &mut BTreeMap::new()) {
        panic!("the scripts as they are:\n{e}");
    }
    let held = |con: &mut Connection, name: &str, jid: &str| -> bool {
        let score: Option<f64> = redis::cmd("ZSCORE")
            .arg(scope_of(name).holders())
            .arg(jid)
            .query(con)
            .unwrap();
        score.is_some()
    };
    for (name, jid) in [("t1", "j3"), ("api", "j3"), ("left", "j6"), ("api", "j6")] {
        assert!(
            !held(&mut con, name, jid),
            "{jid} holds {name} while parked"
        );
    }
    let parked: Vec<String> = redis::cmd("ZRANGE")
        .arg(scope_of("api").parked())
        .arg(0)
        .arg(-1)
        .query(&mut con)
        .unwrap();
    let parked: Vec<String> = parked.iter().map(|p| jid_of(p)).collect();
    assert_eq!(parked, ["j3", "j6"], "both park on the full scope");

    let mutations: [Mutation; 2] = [
        (
            "for _, s in ipairs(scopes) do\n  if not room_for(s, jid, score, now) then",
            "for _, s in ipairs({ scopes[1] }) do\n  if not room_for(s, jid, score, now) then",
        ),
        (
            "if redis.call('ZCARD', s.holders) >= limit then return false end",
            "if false then return false end",
        ),
    ];
    for mutation in mutations {
        let failed = run(&mut con, &seq, Some(mutation), &mut BTreeMap::new());
        assert!(
            failed.is_err(),
            "acquire_all.lua mutated ({:?} -> {:?}) let a job start with one scope full unnoticed",
            mutation.0,
            mutation.1
        );
    }
}

/// Lost replies, fixed: j2 parks on t0 behind j0; j0's release hands j2's copy over; a thread pops it; j2's run
/// is given up (its reply lost) before the copy is claimed, so the copy is marked dropped in every scope, and its
/// claim drops it (3) and frees both slots. Then a run of j1 given up before its acquire reached Redis: the acquire,
/// when it comes, takes nothing (3).
#[test]
fn a_lost_reply_never_runs_a_job_twice_nor_takes_a_slot_late() {
    let server = Server::start();
    let mut con = server.connect();
    let seq = Sequence {
        ops: vec![
            acquire(0),
            acquire(2),
            Op::Release { job: 0, pick: 0 },
            Op::Fetch { claim: false },
            Op::Forget { job: 2, pick: 0 },
            Op::Claim,
            Op::Late { job: 1 },
            Op::Forget { job: 1, pick: 0 },
            Op::Acquire {
                job: 1,
                resend: true,
            },
        ],
        scores: in_order(),
    };
    let mut paths = BTreeMap::new();
    if let Err((_, e)) = run(&mut con, &seq, None, &mut paths) {
        panic!("lost replies:\n{e}");
    }
    for path in [
        "forget: copy marked dropped",
        "acquire: dropped copy",
        "forget: gone",
        "acquire: gone",
    ] {
        assert!(paths.contains_key(path), "{path}: {paths:?}");
    }
    for name in ["t0", "api", "t1"] {
        let held: u64 = redis::cmd("ZCARD")
            .arg(scope_of(name).holders())
            .query(&mut con)
            .unwrap();
        assert_eq!(held, 0, "{name} holds a slot after every job ended");
    }
}
