//! The "ideal" schedule of a workload, for `bin/demo`: the same jobs (tenant, arrival, duration) run on
//! the same number of non-preemptive threads under start-time fair queueing ([`Sfq`], weights 1),
//! simulated event by event. Work-conserving: whenever a thread is free and a job has arrived, the next
//! job in fair order starts. A measured run is judged against this schedule (GUIDE §10), never against a
//! closed formula, which a real run can beat. Rate caps (`fair_tenant_rate`, [`simulate_rated`]): a tenant whose
//! next start would exceed a window leaves the rotation until its instant ([`RateState`], the scripts' rule), then
//! comes back at max(its tag, V).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::fair::rate::{RateState, Window};
use crate::fair::{Sfq, Tag};

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
    simulate_rated::<T, &str>(jobs, threads, time, &[])
}

/// [`simulate_by`], the tenants in `rates` held to their windows (scope: the tenant; times in seconds, the
/// windows in ms): a tenant whose next start would exceed a window is skipped, out of the rotation, until
/// the earliest instant it may start, and rejoins at max(its start tag, V) with its activation.
pub fn simulate_rated<T: AsRef<str>, R: AsRef<str>>(
    jobs: &[(T, f64, f64)],
    threads: usize,
    time: bool,
    rates: &[(R, Vec<Window>)],
) -> Result<Vec<f64>, String> {
    if let Some((t, _)) = (rates.iter())
        .find(|(_, ws)| ws.is_empty() || ws.iter().any(|w| w.limit == 0 || w.per_ms == 0))
    {
        return Err(format!(
            "rate of {}: at least one window, each limit and per at least 1",
            t.as_ref()
        ));
    }
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
    let rates: HashMap<&str, &[Window]> = (rates.iter())
        .map(|(t, ws)| (t.as_ref(), ws.as_slice()))
        .collect();
    // With rate windows, times relative to the first arrival: whole ms stay exact in f64.
    let origin = match jobs.iter().map(|j| j.1).reduce(f64::min) {
        Some(first) if !rates.is_empty() => first,
        _ => 0.0,
    };
    let shifted: Vec<(&str, f64, f64)> = (jobs.iter())
        .map(|(t, a, d)| (t.as_ref(), a - origin, *d))
        .collect();
    let starts = serve(&shifted, threads, time, &rates);
    Ok(starts.into_iter().map(|s| s + origin).collect())
}

/// The event loop of [`simulate_rated`], on valid input.
fn serve(
    jobs: &[(&str, f64, f64)],
    threads: usize,
    time: bool,
    rates: &HashMap<&str, &[Window]>,
) -> Vec<f64> {
    let mut states: HashMap<String, RateState> = HashMap::new();
    // Tenants out of the rotation until their instant (ms): (instant, start tag, activation, tenant).
    let mut held: Vec<(u64, f64, u64, String)> = Vec::new();
    let mut arrivals: Vec<usize> = (0..jobs.len()).collect();
    arrivals.sort_by(|&a, &b| jobs[a].1.total_cmp(&jobs[b].1).then(a.cmp(&b)));
    let mut arrivals = arrivals.into_iter().peekable();

    let mut sfq = if time { Sfq::by_time() } else { Sfq::new() };
    let mut starts = vec![f64::NAN; jobs.len()];
    let mut running: BinaryHeap<Reverse<Running>> = BinaryHeap::with_capacity(threads);
    let mut now = match arrivals.peek() {
        Some(&first) => jobs[first].1,
        None => return starts,
    };
    loop {
        while let Some(&i) = arrivals.peek() {
            if jobs[i].1 > now {
                break;
            }
            sfq.push(jobs[i].0, i as u64);
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
                sfq.charge_back(jobs[i].0, seq, f64::from_bits(charged), ran);
            }
        }
        // Whole ms: a window is checked as of the ms begun, a start counted at the next (never earlier than made).
        let check_ms = (now * 1000.0 + 1e-6).floor() as u64;
        let record_ms = (now * 1000.0 - 1e-6).ceil() as u64;
        held.retain(|(due, tag, seq, tenant)| {
            let back = *due <= check_ms;
            if back {
                sfq.ready
                    .insert((Tag(tag.max(sfq.v)), *seq), tenant.clone());
            }
            !back
        });
        while running.len() < threads {
            if let Some((&at, tenant)) = sfq.ready.iter().next() {
                if let Some(windows) = rates.get(tenant.as_str()) {
                    let state = states.entry(tenant.clone()).or_default();
                    if let Some(due) = state.due(windows, check_ms) {
                        held.push((due, at.0 .0, at.1, tenant.clone()));
                        sfq.ready.remove(&at);
                        continue;
                    }
                    state.record(windows, record_ms);
                }
            }
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
        let next_due = held.iter().map(|h| h.0 as f64 / 1000.0).reduce(f64::min);
        now = match [next_arrival, next_end, next_due]
            .into_iter()
            .flatten()
            .reduce(f64::min)
        {
            Some(next) => next,
            None => return starts,
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
    fn a_rate_capped_tenant_never_exceeds_its_window_and_leaves_no_thread_idle_for_the_others() {
        // Capped at 5 a second with 60 jobs of 20 ms; a greedy tenant backlogged throughout; small ones late.
        let mut jobs = vec![("capped", 0.0, 0.02); 60];
        jobs.extend(vec![("greedy", 0.0, 0.05); 2000]);
        for k in 0..30 {
            jobs.push((["s1", "s2", "s3"][k % 3], 1.0 + k as f64 * 0.2, 0.02));
        }
        let rates = [(
            "capped",
            vec![Window {
                limit: 5,
                per_ms: 1000,
            }],
        )];
        let starts = simulate_rated(&jobs, 10, false, &rates).unwrap();
        let mut capped: Vec<f64> = (jobs.iter().zip(&starts))
            .filter(|((t, _, _), _)| *t == "capped")
            .map(|(_, s)| *s)
            .collect();
        capped.sort_by(f64::total_cmp);
        for (i, &t) in capped.iter().enumerate() {
            let inside = capped[..=i].iter().filter(|&&s| s > t - 1.0 + 1e-9).count();
            assert!(inside <= 5, "{inside} starts in the second before {t}");
        }
        // After the first burst of 5, at least 20/21 of the limit (buckets), at most the limit.
        let rate = (capped.len() - 5) as f64 / (capped[capped.len() - 1] - capped[0]);
        assert!((5.0 * 20.0 / 21.0..=5.0 + 1e-9).contains(&rate), "{rate}/s");
        // Uncapped jobs never wait while a thread is free.
        let mut events: Vec<f64> = (jobs.iter().zip(&starts))
            .flat_map(|((_, a, d), s)| [*a, *s, s + d])
            .collect();
        events.sort_by(f64::total_cmp);
        events.dedup();
        for w in events.windows(2) {
            let mid = (w[0] + w[1]) / 2.0;
            let waiting = (jobs.iter().zip(&starts))
                .any(|((t, a, _), s)| *t != "capped" && *a <= mid && mid < *s);
            assert!(
                !waiting || running_at(&jobs, &starts, mid) == 10,
                "idle at {mid}"
            );
        }
        // Uncapped, the same tenant runs its jobs at once.
        let free = simulate(&jobs, 10).unwrap();
        let last = |s: &[f64]| {
            (jobs.iter().zip(s))
                .filter(|((t, _, _), _)| *t == "capped")
                .map(|(_, s)| *s)
                .fold(0.0, f64::max)
        };
        assert!(
            last(&free) < 2.0 && last(&starts) > 11.0,
            "{} {}",
            last(&free),
            last(&starts)
        );
    }

    #[test]
    fn a_rate_capped_tenant_alone_waits_for_its_instant() {
        let jobs = vec![("r", 100.0, 0.01); 4];
        let rates = [(
            "r",
            vec![Window {
                limit: 2,
                per_ms: 1000,
            }],
        )];
        let starts = simulate_rated(&jobs, 2, true, &rates).unwrap();
        assert_eq!(starts, vec![100.0, 100.0, 101.0, 101.0]);
        let bad = [(
            "r",
            vec![Window {
                limit: 0,
                per_ms: 1000,
            }],
        )];
        assert!(simulate_rated(&jobs, 2, false, &bad)
            .unwrap_err()
            .contains("rate of r"));
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
