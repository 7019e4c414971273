//! The "ideal" schedule of a workload, for `bin/demo`: the same jobs (tenant, arrival, duration) run on
//! the same number of non-preemptive threads under start-time fair queueing ([`Sfq`], weights 1),
//! simulated event by event. Work-conserving: whenever a thread is free and a job has arrived, the next
//! job in fair order starts. A measured run is judged against this schedule (GUIDE §10), never against a
//! closed formula, which a real run can beat.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::fair::Sfq;

/// A time with a total order (simulated times are finite).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
struct At(f64);
impl Eq for At {}
#[allow(clippy::derive_ord_xor_partial_ord)]
impl Ord for At {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// A running job: its end, index, its tenant's activation and its charge (ms, as bits), earliest end first.
type Running = (At, usize, u64, Option<u64>);

/// Start times of `jobs` (tenant, arrival, duration), in the order given, when `threads` threads serve
/// them in SFQ order. Jobs arriving at the same instant join in the order given.
pub fn simulate<T: AsRef<str>>(jobs: &[(T, f64, f64)], threads: usize) -> Result<Vec<f64>, String> {
    simulate_by(jobs, threads, false)
}

/// [`simulate`], fair by worker time when `time` (a fair queue's `time` mode, `lua/fair/time.lua`): a job
/// served is charged its tenant's mean run time so far, corrected by its duration when it ends.
pub fn simulate_by<T: AsRef<str>>(
    jobs: &[(T, f64, f64)],
    threads: usize,
    time: bool,
) -> Result<Vec<f64>, String> {
    if threads == 0 {
        return Err("threads must be at least 1".into());
    }
    if let Some((i, _)) = jobs
        .iter()
        .enumerate()
        .find(|(_, (_, at, d))| !at.is_finite() || !d.is_finite() || *d < 0.0)
    {
        return Err(format!(
            "job {i}: the arrival must be a finite number and the duration a finite number >= 0"
        ));
    }
    let mut arrivals: Vec<usize> = (0..jobs.len()).collect();
    arrivals.sort_by(|&a, &b| jobs[a].1.total_cmp(&jobs[b].1).then(a.cmp(&b)));
    let mut arrivals = arrivals.into_iter().peekable();

    let mut sfq = if time { Sfq::by_time() } else { Sfq::new() };
    let mut starts = vec![f64::NAN; jobs.len()];
    let mut running: BinaryHeap<Reverse<Running>> = BinaryHeap::with_capacity(threads);
    let mut now = match arrivals.peek() {
        Some(&first) => jobs[first].1,
        None => return Ok(starts),
    };
    loop {
        while let Some(&i) = arrivals.peek() {
            if jobs[i].1 > now {
                break;
            }
            sfq.push(jobs[i].0.as_ref(), i as u64);
            arrivals.next();
        }
        while running
            .peek()
            .is_some_and(|Reverse((At(end), ..))| *end <= now)
        {
            let Some(Reverse((_, i, seq, charged))) = running.pop() else {
                break;
            };
            if let Some(charged) = charged {
                let ran = jobs[i].2 * 1000.0;
                sfq.charge_back(jobs[i].0.as_ref(), seq, f64::from_bits(charged), ran);
            }
        }
        while running.len() < threads {
            let Some((_, job, seq, charged)) = sfq.pop_charged() else {
                break;
            };
            let i = job as usize;
            starts[i] = now;
            let charged = charged.map(f64::to_bits);
            running.push(Reverse((At(now + jobs[i].2), i, seq, charged)));
        }
        let next_arrival = arrivals.peek().map(|&i| jobs[i].1);
        let next_end = running.peek().map(|Reverse((At(end), ..))| *end);
        now = match (next_arrival, next_end) {
            (Some(a), Some(e)) => a.min(e),
            (Some(a), None) => a,
            (None, Some(e)) => e,
            (None, None) => return Ok(starts),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(jobs: &[(&str, f64, f64)], threads: usize) -> Vec<f64> {
        let starts = simulate(jobs, threads).unwrap();
        assert_eq!(starts.len(), jobs.len());
        starts
    }

    /// Jobs running at `t` (started at or before, not yet finished).
    fn running_at(jobs: &[(&str, f64, f64)], starts: &[f64], t: f64) -> usize {
        jobs.iter()
            .zip(starts)
            .filter(|((_, _, d), &s)| s <= t && t < s + d)
            .count()
    }

    /// A deterministic mixed workload: a greedy burst, a second greedy tenant, small tenants trickling.
    fn mixed() -> Vec<(String, f64, f64)> {
        let mut seed: u64 = 42;
        let mut rand = move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut jobs = Vec::new();
        for _ in 0..300 {
            jobs.push(("greedy-a".to_string(), 0.0, 0.01 + 0.03 * rand()));
        }
        for _ in 0..200 {
            jobs.push(("greedy-b".to_string(), 0.2, 0.01 + 0.03 * rand()));
        }
        for k in 0..40 {
            jobs.push((format!("small-{}", k % 13), 2.0 * rand(), 0.02 * rand()));
        }
        jobs
    }

    #[test]
    fn one_thread_one_tenant_is_fifo_and_idles_until_the_next_arrival() {
        let jobs = [
            ("a", 0.0, 1.0),
            ("a", 0.0, 2.0),
            ("a", 0.5, 1.0),
            ("a", 10.0, 1.0),
        ];
        assert_eq!(run(&jobs, 1), vec![0.0, 1.0, 3.0, 10.0]);
    }

    #[test]
    fn two_backlogged_tenants_alternate() {
        let mut jobs = vec![("a", 0.0, 1.0); 4];
        jobs.extend(vec![("b", 0.0, 1.0); 4]);
        let starts = run(&jobs, 1);
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by(|&x, &y| starts[x].total_cmp(&starts[y]));
        let tenants: String = order.iter().map(|&i| jobs[i].0).collect();
        assert_eq!(tenants, "abababab");
        // Each tenant in its own order.
        assert!(starts[..4].windows(2).all(|w| w[0] < w[1]), "{starts:?}");
    }

    #[test]
    fn a_small_job_behind_a_big_backlog_waits_about_one_job_per_thread() {
        let threads = 4;
        let mut jobs = vec![("mega", 0.0, 1.0); 1000];
        jobs.push(("small", 10.5, 1.0));
        let starts = run(&jobs, threads);
        let wait = starts[1000] - 10.5;
        // The threads free up at 11.0 (jobs started at 10.0): the small job takes the first of them.
        assert!((wait - 0.5).abs() < 1e-9, "wait {wait}");
        // The mega tenant still finishes its backlog with no thread ever idle: 1,001 jobs on 4 threads.
        let makespan = jobs
            .iter()
            .zip(&starts)
            .map(|((_, _, d), s)| s + d)
            .fold(0.0, f64::max);
        assert!((makespan - 251.0).abs() < 1e-9, "{makespan}");
    }

    #[test]
    fn never_more_jobs_at_once_than_threads_and_never_a_free_thread_while_a_job_waits() {
        let owned = mixed();
        let jobs: Vec<(&str, f64, f64)> =
            owned.iter().map(|(t, a, d)| (t.as_str(), *a, *d)).collect();
        for threads in [1, 3, 10] {
            let starts = run(&jobs, threads);
            let mut events: Vec<f64> = jobs
                .iter()
                .zip(&starts)
                .flat_map(|((_, a, d), s)| [*a, *s, s + d])
                .collect();
            events.sort_by(f64::total_cmp);
            events.dedup();
            for w in events.windows(2) {
                let mid = (w[0] + w[1]) / 2.0;
                let busy = running_at(&jobs, &starts, mid);
                assert!(busy <= threads, "{busy} running at {mid} on {threads}");
                let waiting = jobs
                    .iter()
                    .zip(&starts)
                    .any(|((_, a, _), s)| *a <= mid && mid < *s);
                assert!(
                    !waiting || busy == threads,
                    "a job waits at {mid} with {busy}/{threads} busy"
                );
            }
        }
    }

    #[test]
    fn no_job_starts_before_it_arrives() {
        let owned = mixed();
        let jobs: Vec<(&str, f64, f64)> =
            owned.iter().map(|(t, a, d)| (t.as_str(), *a, *d)).collect();
        for threads in [1, 2, 7] {
            let starts = run(&jobs, threads);
            for (i, ((_, a, _), s)) in jobs.iter().zip(&starts).enumerate() {
                assert!(s >= a, "job {i} starts at {s}, arrives at {a}");
            }
        }
    }

    #[test]
    fn small_tenants_arriving_during_two_greedy_backlogs_wait_little() {
        let owned = mixed();
        let starts = simulate(&owned, 10).unwrap();
        let worst_small = owned
            .iter()
            .zip(&starts)
            .filter(|((t, _, _), _)| t.starts_with("small"))
            .map(|((_, a, _), s)| s - a)
            .fold(0.0, f64::max);
        // 40 small jobs of 13 tenants, at most 4 each, ~1 round per 10 threads of ≤ 40 ms jobs.
        assert!(worst_small < 0.25, "{worst_small}");
    }

    #[test]
    fn by_time_two_backlogged_tenants_share_the_threads_time_not_their_job_counts() {
        let mut jobs = vec![("slow", 0.0, 0.2); 400];
        jobs.extend(vec![("fast", 0.0, 0.02); 4000]);
        for (time, low, high) in [(true, 0.45, 0.55), (false, 0.85, 0.95)] {
            let starts = simulate_by(&jobs, 10, time).unwrap();
            // Worker time per tenant over the first 5 s, both backlogged throughout.
            let spent = |tenant: &str| -> f64 {
                (jobs.iter().zip(&starts))
                    .filter(|((t, _, _), s)| *t == tenant && **s < 5.0)
                    .map(|((_, _, d), _)| d)
                    .sum()
            };
            let share = spent("slow") / (spent("slow") + spent("fast"));
            assert!((low..=high).contains(&share), "time {time}: slow {share}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        assert!(simulate(&[("a", 0.0, 1.0)], 0)
            .unwrap_err()
            .contains("threads"));
        for bad in [
            ("a", f64::NAN, 1.0),
            ("a", 0.0, -1.0),
            ("a", 0.0, f64::INFINITY),
        ] {
            assert!(simulate(&[("a", 0.0, 1.0), bad], 2)
                .unwrap_err()
                .starts_with("job 1"));
        }
        assert_eq!(simulate::<&str>(&[], 3), Ok(vec![]));
    }
}
