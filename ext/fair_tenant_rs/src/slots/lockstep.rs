//! The plain-queue slot rule in lockstep: random sequences of acquires (two classes, limits 1 and 3, sharing one
//! scope), re-sent acquires, releases by current and stale runs, give-backs after lost replies (before or after
//! the lost call), fetches of handed-over copies, runtime limits, sweeps and a moving clock, run through the
//! slot scripts users run (their source from [`super::script`], with `now_ms` reading a key of the test's in
//! place of TIME) on a redis-server of its own, and through [`PlainSlots`]; and copies of the same jobs served
//! by a fair queue's fetch and acknowledged (`fair/serve.lua`'s take_slot and release_slot, the functions
//! themselves). After every step the replies and the scope's state (holders with leases, runs, parked jobs in
//! order, their terms, runs given up, the queue) must agree, and a copy a fair fetch served still holds its
//! slot until its acknowledgement or its lease's end (no plain run's release frees it).
//!
//! `SLOTS_LOCKSTEP_SEQUENCES` (default 200), `SLOTS_LOCKSTEP_STEPS` (default 60), `SLOTS_LOCKSTEP_SEED`.

use std::collections::BTreeMap;

use redis::Connection;

use super::model::{Ask, PlainSlots, Terms};
use super::{self as slots, Request, Scope, ALL};
use crate::redis::test_server::{env, now_ms, seed, Rng, Server};

const CLOCK_KEY: &str = "slots-lockstep:clock";
const JOBS: usize = 6;
const LEASE_MS: u64 = 5_000;

#[derive(Debug, Clone)]
enum Op {
    /// A new run of job `n` (or, `resend`, the last run's call sent again), carrying the release of the
    /// `pick`th run of another job (`carry`: a thread's previous job), done first.
    Acquire {
        job: usize,
        resend: bool,
        carry: Option<(usize, usize)>,
    },
    /// The `pick`th run issued for job `n` releases (a stale run when it is not the last).
    Release {
        job: usize,
        pick: usize,
    },
    /// The `pick`th run of job `n` is given up after a lost reply.
    Forget {
        job: usize,
        pick: usize,
    },
    /// A thread fetches the job at the queue's tail.
    Fetch,
    /// A fair queue's fetch serves a copy of job `n` (it takes the jid's slot when the scope has room).
    FairTake {
        job: usize,
    },
    /// That copy is acknowledged: its jid's slot goes back.
    FairAck {
        job: usize,
    },
    Limit(Option<u64>),
    Sweep,
    Clock(u64),
}

fn random_op(rng: &mut Rng) -> Op {
    let job = rng.below(JOBS);
    let pick = rng.below(3);
    let carry = match rng.below(3) {
        0 => Some((rng.below(JOBS), rng.below(3))),
        _ => None,
    };
    match rng.below(23) {
        20..=21 => Op::FairTake { job },
        22 => Op::FairAck { job },
        0..=6 => Op::Acquire {
            job,
            resend: false,
            carry,
        },
        7..=8 => Op::Acquire {
            job,
            resend: true,
            carry,
        },
        9..=11 => Op::Release { job, pick },
        12..=13 => Op::Forget { job, pick },
        14..=15 => Op::Fetch,
        16 => Op::Limit([None, Some(0), Some(1), Some(2), Some(4)][rng.below(5)]),
        17 => Op::Sweep,
        _ => Op::Clock(rng.below(4) as u64 * 1_000),
    }
}

/// Job `n`: its jid, its class's limit (even: 1, odd: 3) and payload.
fn job(n: usize) -> (String, u64, String) {
    let jid = format!("j{n}");
    let limit = if n.is_multiple_of(2) { 1 } else { 3 };
    let payload = format!("{{\"jid\":\"{jid}\",\"queue\":\"default\",\"limit\":{limit}}}");
    (jid, limit, payload)
}

struct Lockstep<'a> {
    con: &'a mut Connection,
    scope: Scope,
    model: PlainSlots,
    now: u64,
    /// Runs issued per job, oldest first, with the enqueue score of each call.
    runs: BTreeMap<usize, Vec<(String, f64)>>,
    next_run: usize,
    next_score: f64,
    /// Jobs a fair fetch served, not acknowledged, with their lease's end: each must hold its slot until then.
    fair_held: BTreeMap<usize, u64>,
}

fn eval<T: redis::FromRedisValue>(
    con: &mut Connection,
    name: &str,
    call: (Vec<Vec<u8>>, Vec<Vec<u8>>),
) -> T {
    let (_, source) = slots::script(name).unwrap();
    eval_source(con, source, call)
}

/// A fair queue's fetch taking a job's slot, or its acknowledgement giving it back: `serve.lua`'s own take_slot
/// and release_slot's body (ZREM, then wake), on a slot table as slot_of builds it.
/// ARGV  tag, sub, jid, default limit, lease (ms), "take" or "ack".  Returns 1: taken (freed), 0: not.
fn fair_source() -> String {
    crate::names::script(&[
        include_str!("../lua/slots/common.lua"),
        include_str!("../lua/fair/common.lua"),
        include_str!("../lua/fair/serve.lua"),
        r"
        local slot = scope_keys(ARGV[1], ARGV[2])
        slot.tag, slot.sub, slot.jid = ARGV[1], ARGV[2], ARGV[3]
        slot.default, slot.lease = tonumber(ARGV[4]), tonumber(ARGV[5])
        if ARGV[6] == 'take' then
          return take_slot(slot, false, nil) and 1 or 0
        end
        if redis.call('ZREM', slot.holders, slot.jid) == 0 then return 0 end
        wake(slot, nil, true)
        return 1
        ",
    ])
}

fn eval_source<T: redis::FromRedisValue>(
    con: &mut Connection,
    source: &str,
    (keys, args): (Vec<Vec<u8>>, Vec<Vec<u8>>),
) -> T {
    let source = source.replace(
        "redis.call('TIME')",
        &format!("redis.call('HMGET', '{CLOCK_KEY}', 's', 'u')"),
    );
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(source).arg(keys.len());
    for k in keys {
        cmd.arg(k);
    }
    for a in args {
        cmd.arg(a);
    }
    cmd.query(con).unwrap()
}

impl Lockstep<'_> {
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

    fn slot(&self, n: usize, run: &str) -> slots::Slot {
        let (jid, limit, _) = job(n);
        slots::Slot {
            scope: self.scope.clone(),
            jid: jid.into_bytes(),
            run: run.as_bytes().to_vec(),
            lease_ms: LEASE_MS,
            default_limit: limit,
        }
    }

    fn step(&mut self, op: &Op) -> Result<String, String> {
        let now = self.now;
        let reply = match *op {
            Op::Acquire {
                job: n,
                resend,
                carry,
            } => {
                // The carried release names a run issued before this call.
                let carried = carry.and_then(|(c, pick)| {
                    let (run, _) = self.runs.get(&c).and_then(|r| r.get(pick)).cloned()?;
                    Some((c, run))
                });
                let last = self.runs.get(&n).and_then(|r| r.last()).cloned();
                let (run, score) = match (resend, last) {
                    (true, Some(last)) => last,
                    _ => {
                        self.next_run += 1;
                        self.next_score += 1.0;
                        let fresh = (format!("r{}", self.next_run), self.next_score + 0.25);
                        self.runs.entry(n).or_default().push(fresh.clone());
                        fresh
                    }
                };
                let (jid, limit, payload) = job(n);
                let slot = self.slot(n, &run);
                let previous = carried.as_ref().map(|(c, run)| self.slot(*c, run));
                let call = slots::acquire_call(
                    &slot.request(),
                    payload.as_bytes(),
                    score,
                    previous.as_ref().map(|p| p.request()).as_ref(),
                );
                let lua: (i64, u64) = eval(self.con, "acquire", call);
                let handed = match &carried {
                    Some((c, run)) => {
                        let (c_jid, c_limit, _) = job(*c);
                        self.model
                            .release(&c_jid, run, None, (c_limit, LEASE_MS), now)
                            .0
                    }
                    None => 0,
                };
                let ask = Ask {
                    jid: &jid,
                    run: &run,
                    limit,
                    lease: LEASE_MS,
                    payload: &payload,
                    score: slots::enqueue_score_ms(score),
                };
                let model = (self.model.acquire(&ask, now), handed);
                if model.0 == 1 {
                    // A plain run of a jid a fair copy holds shares its slot (one slot per jid): either frees it.
                    self.fair_held.remove(&n);
                }
                (format!("{lua:?}"), format!("{model:?}"))
            }
            Op::Release { job: n, pick } | Op::Forget { job: n, pick } => {
                let Some((run, _)) = self.runs.get(&n).and_then(|r| r.get(pick)).cloned() else {
                    return Ok("no such run".into());
                };
                let (jid, limit, payload) = job(n);
                let slot = self.slot(n, &run);
                let forget = matches!(op, Op::Forget { .. });
                let req: Request<'_> = slot.request();
                let call = if forget {
                    slots::forget_call(&req, payload.as_bytes(), b"default")
                } else {
                    slots::release_call(&req)
                };
                let lua: (u64, u64) = eval(self.con, "release", call);
                let given = forget.then_some(payload.as_str());
                let model = self
                    .model
                    .release(&jid, &run, given, (limit, LEASE_MS), now);
                (format!("{lua:?}"), format!("{model:?}"))
            }
            Op::FairTake { job: n } | Op::FairAck { job: n } => {
                let (jid, limit, _) = job(n);
                let take = matches!(op, Op::FairTake { .. });
                let args = [
                    self.scope.tag().to_vec(),
                    self.scope.sub().to_vec(),
                    jid.clone().into_bytes(),
                    limit.to_string().into_bytes(),
                    LEASE_MS.to_string().into_bytes(),
                    (if take { "take" } else { "ack" }).as_bytes().to_vec(),
                ];
                let lua: i64 = eval_source(self.con, &fair_source(), (vec![], args.to_vec()));
                let model = if take {
                    self.model.fair_take(&jid, limit, LEASE_MS, now)
                } else {
                    self.model.fair_ack(&jid)
                };
                if take && model {
                    self.fair_held.insert(n, now + LEASE_MS);
                } else if !take {
                    self.fair_held.remove(&n);
                }
                (format!("{lua:?}"), format!("{:?}", i64::from(model)))
            }
            Op::Fetch => {
                let lua: Option<String> = redis::cmd("RPOP")
                    .arg("queue:default")
                    .query(self.con)
                    .unwrap();
                (format!("{lua:?}"), format!("{:?}", self.model.queue.pop()))
            }
            Op::Limit(value) => {
                let call = slots::set_limit_call(self.scope.tag(), ALL, value);
                let lua: (u64, u64) = eval(self.con, "set_limit", call);
                (
                    format!("{lua:?}"),
                    format!("{:?}", self.model.set_limit(value, now)),
                )
            }
            Op::Sweep => {
                let call = slots::sweep_call(self.scope.tag());
                let lua: (u64, u64, u64) = eval(self.con, "sweep", call);
                (format!("{lua:?}"), format!("{:?}", self.model.sweep(now)))
            }
            Op::Clock(ms) => {
                self.now += ms;
                self.set_clock();
                (String::new(), String::new())
            }
        };
        if reply.0 != reply.1 {
            return Err(format!("replies differ: lua {} model {}", reply.0, reply.1));
        }
        let (lua, model) = (self.lua_state(), self.model_state());
        if lua != model {
            return Err(format!("state differs:\n  lua   {lua}\n  model {model}"));
        }
        self.fair_held.retain(|_, until| *until > self.now);
        let holders: Vec<(String, u64)> = zrange(self.con, &self.scope.holders());
        for n in self.fair_held.keys() {
            let (jid, _, _) = job(*n);
            if !holders.iter().any(|(held, _)| *held == jid) {
                return Err(format!(
                    "{jid}, served by a fair fetch and not acknowledged, lost its slot: {lua}"
                ));
            }
        }
        Ok(reply.0)
    }

    fn lua_state(&mut self) -> String {
        let s = &self.scope;
        let mut holders: Vec<(String, u64)> = zrange(self.con, &s.holders());
        holders.sort();
        let parked: Vec<(String, f64)> = zrange(self.con, &s.parked());
        let parked: Vec<String> = parked.into_iter().map(|(p, _)| jid_of(&p)).collect();
        let runs: BTreeMap<String, String> = hgetall(self.con, &s.runs());
        let waits: BTreeMap<String, String> = hgetall(self.con, &s.waits());
        let gone: BTreeMap<String, String> = hgetall(self.con, &s.gone());
        let queue: Vec<String> = redis::cmd("LRANGE")
            .arg("queue:default")
            .arg(0)
            .arg(-1)
            .query(self.con)
            .unwrap();
        let queue: Vec<String> = queue.iter().map(|p| jid_of(p)).collect();
        let gone: Vec<&String> = gone.keys().collect();
        format!("holders {holders:?} runs {runs:?} parked {parked:?} waits {waits:?} gone {gone:?} queue {queue:?}")
    }

    fn model_state(&self) -> String {
        let m = &self.model;
        let holders: Vec<(String, u64)> = m.holders.iter().map(|(j, &u)| (j.clone(), u)).collect();
        let runs: BTreeMap<String, String> = m
            .runs
            .iter()
            .map(|(j, o)| (j.clone(), o.stored()))
            .collect();
        let parked: Vec<String> = m.parked.iter().map(|(_, _, j)| j.clone()).collect();
        let waits: BTreeMap<String, String> = m
            .waits
            .iter()
            .map(|(j, Terms { run, limit, lease })| (j.clone(), format!("{run} {limit} {lease}")))
            .collect();
        let gone: Vec<&String> = m.gone.iter().collect();
        let queue: Vec<String> = m.queue.iter().map(|p| jid_of(p)).collect();
        format!("holders {holders:?} runs {runs:?} parked {parked:?} waits {waits:?} gone {gone:?} queue {queue:?}")
    }
}

fn zrange<T: redis::FromRedisValue>(con: &mut Connection, key: &[u8]) -> Vec<(String, T)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(con)
        .unwrap()
}

fn hgetall(con: &mut Connection, key: &[u8]) -> BTreeMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(con).unwrap()
}

fn jid_of(payload: &str) -> String {
    payload
        .split("\"jid\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or(payload)
        .to_string()
}

/// Runs a sequence from an empty Redis; Err: the failing step and a trace of the sequence up to it.
fn run(con: &mut Connection, ops: &[Op]) -> Result<(), String> {
    let _: () = redis::cmd("FLUSHALL").query(con).unwrap();
    let start = now_ms();
    let mut ls = Lockstep {
        con,
        scope: Scope::tenant_queue(b"acme", b"default"),
        model: PlainSlots::default(),
        now: start,
        runs: BTreeMap::new(),
        next_run: 0,
        next_score: 1_000_000.0,
        fair_held: BTreeMap::new(),
    };
    ls.set_clock();
    let mut trace = String::new();
    for (i, op) in ops.iter().enumerate() {
        match ls.step(op) {
            Ok(reply) => trace.push_str(&format!("  {i:3} {op:?} -> {reply}\n")),
            Err(e) => return Err(format!("{trace}  {i:3} {op:?}: {e}")),
        }
    }
    Ok(())
}

#[test]
fn the_slot_scripts_and_the_model_agree() {
    let server = Server::start();
    let mut con = server.connect();
    let seed = seed("SLOTS_LOCKSTEP_SEED");
    let mut rng = Rng(seed);
    let steps = env("SLOTS_LOCKSTEP_STEPS", 60) as usize;
    for sequence in 0..env("SLOTS_LOCKSTEP_SEQUENCES", 200) {
        let ops: Vec<Op> = (0..steps).map(|_| random_op(&mut rng)).collect();
        if let Err(e) = run(&mut con, &ops) {
            panic!(
                "slots lockstep: SLOTS_LOCKSTEP_SEED={seed}: sequence {sequence} diverged:\n{e}"
            );
        }
    }
}

/// The divergences the issue named, as fixed sequences: a limit-1 job parked behind limit-3 holders is handed
/// a slot only under its own limit; a stale run's release frees nothing; a re-sent acquire parks once; a lost
/// reply's give-back before and after the call.
#[test]
fn the_issues_cases_stay_fixed() {
    let server = Server::start();
    let mut con = server.connect();
    let acquire = |job| Op::Acquire {
        job,
        resend: false,
        carry: None,
    };
    let cases = [
        vec![acquire(1), acquire(3), acquire(5), acquire(0), acquire(2)]
            .into_iter()
            .chain([
                Op::Release { job: 1, pick: 0 },
                Op::Release { job: 3, pick: 0 },
            ])
            .collect::<Vec<_>>(),
        vec![
            acquire(0),
            acquire(0),
            Op::Release { job: 0, pick: 1 },
            acquire(2),
        ],
        vec![
            acquire(0),
            acquire(2),
            Op::Acquire {
                job: 2,
                resend: true,
                carry: None,
            },
            Op::Limit(Some(3)),
        ],
        vec![
            Op::Forget { job: 0, pick: 0 },
            acquire(0),
            Op::Forget { job: 0, pick: 0 },
        ],
        vec![
            acquire(0),
            acquire(2),
            Op::Release { job: 0, pick: 0 },
            Op::Fetch,
            Op::Forget { job: 2, pick: 0 },
            acquire(2),
        ],
    ];
    for ops in cases.into_iter().chain(fair_copy_cases()) {
        if let Err(e) = run(&mut con, &ops) {
            panic!("slots lockstep, fixed case {ops:?}:\n{e}");
        }
    }
}

/// A plain run of job 0 whose lease ran out and was reclaimed, then a copy of job 0 served by a fair queue's fetch:
/// the plain run's late release (alone, or carried by its thread's next acquire) must not free the fair copy's
/// slot, whether the fetch itself dropped the expired lease (leaving the run recorded) or an acquire's reclaim did
/// (dropping the run too). The copy's acknowledgement frees it.
fn fair_copy_cases() -> Vec<Vec<Op>> {
    let acquire = |job| Op::Acquire {
        job,
        resend: false,
        carry: None,
    };
    let lease_ends = [Op::Clock(3_000), Op::Clock(3_000)];
    let reclaimed_by_the_fetch = lease_ends.iter().cloned().chain([Op::FairTake { job: 0 }]);
    let reclaimed_by_an_acquire = lease_ends.iter().cloned().chain([
        acquire(2),
        Op::Release { job: 2, pick: 0 },
        Op::FairTake { job: 0 },
    ]);
    vec![
        [acquire(0)]
            .into_iter()
            .chain(reclaimed_by_the_fetch.clone())
            .chain([Op::Release { job: 0, pick: 0 }, acquire(4)])
            .collect(),
        [acquire(0)]
            .into_iter()
            .chain(reclaimed_by_an_acquire)
            .chain([Op::Release { job: 0, pick: 0 }, acquire(4)])
            .collect(),
        [acquire(0)]
            .into_iter()
            .chain(reclaimed_by_the_fetch)
            .chain([
                Op::Acquire {
                    job: 4,
                    resend: false,
                    carry: Some((0, 0)),
                },
                Op::FairAck { job: 0 },
                acquire(4),
            ])
            .collect(),
    ]
}
