//! When the fleet looks for dead processes, and what it concludes of each registered one. The rule is
//! [`judge`]; `lua/fair/liveness.lua` applies it in Redis to a batch of the registry per call (the test
//! below runs both on a real redis-server).
//!
//! One sweep per interval for the whole fleet: every process tries the fleet's lease
//! ([`super::recovery_lease_key`]) once per [`RECOVERY_INTERVAL_SECONDS`], the first one due takes it and
//! sweeps; the others find it taken (one command each). While a process is suspected, the sweeper shortens
//! the lease to the moment the first suspect is due and sweeps again then.

use super::keys::RECOVERY_LAPSE_SECONDS;

/// How often each process tries the fleet's lease (and so how often the fleet sweeps).
pub const RECOVERY_INTERVAL_SECONDS: u64 = 15;
/// The lease's time to live: a second less than the interval, so the process that took it finds it free
/// at its next try (its own clock starts the interval before the lease is set).
pub const RECOVERY_LEASE_MS: u64 = RECOVERY_INTERVAL_SECONDS * 1000 - 1000;
/// Registered processes one call of the liveness script judges (SSCAN's COUNT: about that many).
pub const RECOVERY_BATCH: u64 = 1000;
/// How often each fetching process audits its own in-flight hash (`fetch/audit.rb`): a field no thread
/// of the process runs and no pending acknowledgement names (a fetch whose reply was lost and re-sent, a job
/// never acknowledged) is a candidate at one audit and goes back to the front of its tenant at the next, once
/// every call that started before the first one's read has ended: within two intervals.
pub const INFLIGHT_AUDIT_SECONDS: u64 = 15;

/// What a sweep concludes of a registered process (not the sweeping one) at `now` (Redis's clock).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Its Sidekiq heartbeat key exists: it is not, or no longer, a suspect.
    Alive,
    /// Its key is gone, first found gone at `since` (now, if it was not suspected): due in `due_in` s.
    Suspect { since: f64, due_in: f64 },
    /// Its key has been gone for the lapse since it was first found gone, and nothing cleared the
    /// suspicion meanwhile: its in-flight jobs are taken back.
    Dead,
}

/// The rule: `beating` tells whether the process's heartbeat key exists, `since` when a sweep first found
/// it gone (cleared by a sweep that finds it back, and by the process's own liveness beat).
pub fn judge(beating: bool, since: Option<f64>, now: f64) -> Verdict {
    let lapse = RECOVERY_LAPSE_SECONDS as f64;
    match since {
        _ if beating => Verdict::Alive,
        Some(since) if now - since >= lapse => Verdict::Dead,
        since => {
            let since = since.unwrap_or(now);
            Verdict::Suspect {
                since,
                due_in: since + lapse - now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair::{self, script};
    use redis::Value;

    #[test]
    fn judges_as_the_lapse_rule_says() {
        let lapse = RECOVERY_LAPSE_SECONDS as f64;
        assert_eq!(judge(true, None, 100.0), Verdict::Alive);
        assert_eq!(judge(true, Some(0.0), 100.0), Verdict::Alive);
        assert_eq!(
            judge(false, None, 100.0),
            Verdict::Suspect {
                since: 100.0,
                due_in: lapse
            }
        );
        assert_eq!(
            judge(false, Some(95.0), 100.0),
            Verdict::Suspect {
                since: 95.0,
                due_in: lapse - 5.0
            }
        );
        assert_eq!(judge(false, Some(100.0 - lapse), 100.0), Verdict::Dead);
        const { assert!(RECOVERY_LEASE_MS < RECOVERY_INTERVAL_SECONDS * 1000) };
        const { assert!(RECOVERY_LAPSE_SECONDS < RECOVERY_INTERVAL_SECONDS) };
    }

    fn text(v: &Value) -> String {
        match v {
            Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
            Value::Int(i) => i.to_string(),
            other => panic!("{other:?}"),
        }
    }

    /// Every case of the rule, over a registry read a few identities per call: the script leaves each
    /// process as `judge` says, and the sweeping process alone is never judged.
    #[test]
    fn the_liveness_script_applies_the_rule_batch_by_batch() {
        let server = super::super::lockstep::Server::start();
        let mut con = server.connect();
        let lapse = RECOVERY_LAPSE_SECONDS as f64;
        let (registry, suspects) = (fair::registry_key(), fair::recovery_suspects_key());
        let time: Vec<String> = redis::cmd("TIME").query(&mut con).unwrap();
        let start = time[0].parse::<f64>().unwrap() + time[1].parse::<f64>().unwrap() / 1e6;
        // (identity, beating, suspected since)
        let mut cases = Vec::new();
        for i in 0..200 {
            let since = match i % 4 {
                0 => None,
                1 => Some(start - 2.0),
                2 => Some(start - lapse - 1.0),
                _ => Some(start - 1000.0),
            };
            cases.push((format!("host-{i}:1:{i:x}"), i % 5 == 0, since));
        }
        let own = "sweeper:1:a";
        cases.push((own.to_string(), false, Some(start - 1000.0)));
        for (identity, beating, since) in &cases {
            let _: () = redis::cmd("SADD")
                .arg(&registry)
                .arg(identity)
                .query(&mut con)
                .unwrap();
            if *beating {
                let _: () = redis::cmd("SET")
                    .arg(identity)
                    .arg("beat")
                    .query(&mut con)
                    .unwrap();
            }
            if let Some(since) = since {
                let _: () = redis::cmd("HSET")
                    .arg(&suspects)
                    .arg(identity)
                    .arg(since.to_string())
                    .query(&mut con)
                    .unwrap();
            }
        }

        let liveness = script("liveness").unwrap();
        let empty: Vec<Value> = redis::cmd("EVAL")
            .arg(&liveness.source)
            .arg(2)
            .arg("no-registry")
            .arg(&suspects)
            .arg("0")
            .arg(25)
            .arg(RECOVERY_LAPSE_SECONDS)
            .arg(own)
            .query(&mut con)
            .unwrap();
        assert_eq!(empty.iter().map(text).collect::<Vec<_>>(), ["0", "0", ""]);
        let (mut cursor, mut calls) = ("0".to_string(), 0);
        let (mut dead, mut suspected, mut soonest) = (Vec::new(), 0, f64::INFINITY);
        loop {
            let reply: Vec<Value> = redis::cmd("EVAL")
                .arg(&liveness.source)
                .arg(2)
                .arg(&registry)
                .arg(&suspects)
                .arg(&cursor)
                .arg(25)
                .arg(RECOVERY_LAPSE_SECONDS)
                .arg(own)
                .query(&mut con)
                .unwrap();
            calls += 1;
            cursor = text(&reply[0]);
            suspected += text(&reply[1]).parse::<u64>().unwrap();
            if let Ok(due) = text(&reply[2]).parse::<f64>() {
                soonest = soonest.min(due);
            }
            dead.extend(reply[3..].iter().map(text));
            if cursor == "0" {
                break;
            }
        }
        // More than a small set's encoding holds, so SSCAN honours the count (about).
        assert!(calls > 2, "{calls} calls: the registry is read in batches");

        let left: std::collections::HashMap<String, f64> = redis::cmd("HGETALL")
            .arg(&suspects)
            .query(&mut con)
            .unwrap();
        let mut want_suspected = 0;
        let mut want_soonest = f64::INFINITY;
        for (identity, beating, since) in &cases {
            if identity == own {
                assert_eq!(left.get(identity), Some(&(start - 1000.0)), "never judged");
                assert!(!dead.contains(identity));
                continue;
            }
            match judge(*beating, *since, start) {
                Verdict::Alive => assert!(!left.contains_key(identity), "{identity}"),
                Verdict::Dead => assert!(dead.contains(identity), "{identity}"),
                Verdict::Suspect { since, due_in } => {
                    want_suspected += 1;
                    want_soonest = want_soonest.min(due_in);
                    assert!(!dead.contains(identity), "{identity}");
                    // Suspected from the script's clock when newly gone (a moment after `start`).
                    assert!((left[identity] - since).abs() < 1.0, "{identity}");
                }
            }
        }
        assert_eq!(suspected, want_suspected);
        assert!(
            (soonest - want_soonest).abs() < 1.0,
            "{soonest} {want_soonest}"
        );
        assert_eq!(
            dead.len(),
            cases
                .iter()
                .filter(|c| c.2.is_some_and(|s| start - s >= lapse) && !c.1)
                .count()
                - 1
        );
    }
}
