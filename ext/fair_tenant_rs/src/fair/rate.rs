//! Rate caps inside fair queues: the window rule of `lua/fair/serve.lua` (`rate_check`, `rate_record`) as a
//! plain model, with an explicit clock (ms).
//!
//! A scope (a tenant's jobs in a queue, or a key) has windows `limit per per_ms`: never more than `limit`
//! starts in any sliding window `(t - per_ms, t]`. Per window length the scope keeps its live buckets, not a
//! log: a bucket is `per_ms / RATE_BUCKETS` wide and holds (its number, starts in it, time of its last
//! start). A start is counted while its bucket's last start is inside the window: at most one bucket width
//! too long (exact-conservative: never over; a paced backlog gets at least B / (B + 1) of the limit), and a
//! bucket of one start expires exactly at start + per. Buckets whose last start left the window are dropped,
//! so a window length holds at most B + 1 buckets. The clock never goes back in a scope's view: its greatest
//! time seen is kept and max(now, seen) used.

use std::collections::BTreeMap;

use crate::names::RATE_BUCKETS;
pub use crate::slots::rate::Window;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    number: u64,
    count: u64,
    last: u64,
}

/// A scope's rate state: its clock and, per window length, its live buckets.
#[derive(Debug, Clone, Default)]
pub struct RateState {
    seen: u64,
    buckets: BTreeMap<u64, Vec<Bucket>>,
}

impl RateState {
    /// The scope's time: max(now, the greatest time it has seen).
    pub fn clock(&self, now: u64) -> u64 {
        now.max(self.seen)
    }

    /// Starts counted in the window of length `per_ms` at `now` (the scope's time).
    pub fn counted(&self, per_ms: u64, now: u64) -> u64 {
        self.live(per_ms, now).map(|b| b.count).sum()
    }

    fn live(&self, per_ms: u64, now: u64) -> impl Iterator<Item = &Bucket> {
        self.buckets
            .get(&per_ms)
            .into_iter()
            .flatten()
            .filter(move |b| b.last + per_ms > now)
    }

    /// None when a start fits every window at `now` (the scope's time); else the earliest instant one
    /// does (with no start meanwhile).
    pub fn due(&self, windows: &[Window], now: u64) -> Option<u64> {
        let mut due: Option<u64> = None;
        for w in windows {
            let mut live: Vec<&Bucket> = self.live(w.per_ms, now).collect();
            let mut count: u64 = live.iter().map(|b| b.count).sum();
            if count < w.limit {
                continue;
            }
            live.sort_by_key(|b| b.last);
            let mut at = u64::MAX; // a limit of 0: never
            for b in live {
                if count < w.limit {
                    break;
                }
                count -= b.count;
                at = b.last + w.per_ms;
            }
            if count >= w.limit {
                at = u64::MAX;
            }
            due = Some(due.map_or(at, |d| d.max(at)));
        }
        due
    }

    /// A start at `now` (the scope's time) counted in every window (once per window length: windows of
    /// one length share their buckets).
    pub fn record(&mut self, windows: &[Window], now: u64) {
        self.seen = self.seen.max(now);
        let mut lengths: Vec<u64> = windows.iter().map(|w| w.per_ms).collect();
        lengths.sort_unstable();
        lengths.dedup();
        for per_ms in lengths {
            let list = self.buckets.entry(per_ms).or_default();
            list.retain(|b| b.last + per_ms > now);
            let number = now * RATE_BUCKETS / per_ms;
            match list.iter_mut().find(|b| b.number == number) {
                Some(b) => {
                    b.count += 1;
                    b.last = now;
                }
                None => list.push(Bucket {
                    number,
                    count: 1,
                    last: now,
                }),
            }
        }
    }

    /// Buckets kept for a window length (bounded: at most RATE_BUCKETS + 1).
    pub fn kept(&self, per_ms: u64) -> usize {
        self.buckets.get(&per_ms).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64: a small deterministic generator.
    struct Rng(u64);

    impl Rng {
        fn range(&mut self, lo: u64, hi: u64) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            lo + (z ^ (z >> 31)) % (hi - lo + 1)
        }
    }

    fn w(limit: u64, per_ms: u64) -> Window {
        Window { limit, per_ms }
    }

    /// Every start's window `(t - per, t]` holds at most `limit` starts.
    fn check_log(starts: &[u64], windows: &[Window]) {
        for (i, &t) in starts.iter().enumerate() {
            for win in windows {
                let inside = starts[..=i].iter().filter(|&&s| s + win.per_ms > t).count() as u64;
                assert!(
                    inside <= win.limit,
                    "{inside} starts in ({}, {t}] over {win:?}",
                    t.saturating_sub(win.per_ms)
                );
            }
        }
    }

    #[test]
    fn a_burst_up_to_the_limit_then_the_first_start_plus_per() {
        let windows = [w(2, 1000)];
        let mut s = RateState::default();
        assert_eq!(s.due(&windows, 100), None);
        s.record(&windows, 100);
        assert_eq!(s.due(&windows, 130), None);
        s.record(&windows, 130);
        // Both in one bucket (50 ms wide): counted until the last start leaves the window.
        assert_eq!(s.due(&windows, 140), Some(1130));
        assert_eq!(s.due(&windows, 1129), Some(1130));
        assert_eq!(s.due(&windows, 1130), None);
    }

    #[test]
    fn starts_in_separate_buckets_leave_one_by_one() {
        let windows = [w(2, 1000)];
        let mut s = RateState::default();
        s.record(&windows, 0);
        s.record(&windows, 500);
        assert_eq!(s.due(&windows, 600), Some(1000));
        s.record(&windows, 1000);
        assert_eq!(s.due(&windows, 1000), Some(1500));
    }

    #[test]
    fn the_strictest_window_decides_and_a_limit_of_zero_never_starts() {
        let windows = [w(3, 1000), w(5, 3000)];
        let mut s = RateState::default();
        for t in [0, 1, 2, 1002, 1003] {
            assert_eq!(s.due(&windows, t), None, "{t}");
            s.record(&windows, t);
        }
        // 0..2 share a bucket counted until 1002; then 1 s: 2 of 3, 3 s: 5 of 5 until 3002.
        assert_eq!(s.due(&windows, 1500), Some(3002));
        assert_eq!(s.due(&[w(0, 1000)], 0), Some(u64::MAX));
    }

    #[test]
    fn the_clock_never_goes_back() {
        let windows = [w(1, 1000)];
        let mut s = RateState::default();
        s.record(&windows, s.clock(5000));
        // Redis restarted with a clock 4 s behind: the scope still sees 5000 and counts the start.
        let now = s.clock(1000);
        assert_eq!(now, 5000);
        assert_eq!(s.due(&windows, now), Some(6000));
    }

    #[test]
    fn windows_of_one_length_share_buckets() {
        let windows = [w(2, 1000), w(3, 1000)];
        let mut s = RateState::default();
        s.record(&windows, 0);
        assert_eq!(s.counted(1000, 0), 1);
        s.record(&windows, 1);
        assert_eq!(s.due(&windows, 2), Some(1001));
    }

    /// Random arrivals and a random clock against a log of every start: no window is ever exceeded, the
    /// memory stays bounded, and a paced backlog gets at least 95% of every limit.
    #[test]
    fn random_never_over_and_nearly_exact() {
        let mut rng = Rng(23);
        for round in 0..300 {
            let mut windows: Vec<Window> = (0..rng.range(1, 3))
                .map(|_| w(rng.range(1, 12), rng.range(20, 5000)))
                .collect();
            windows.dedup_by_key(|x| x.per_ms);
            let mut s = RateState::default();
            let mut starts = Vec::new();
            let mut now: u64 = rng.range(0, 1_000_000 - 1);
            let begin = now;
            let backlogged = round % 2 == 0;
            // Fetches come at most 1% of the shortest window late.
            let jitter = windows.iter().map(|x| x.per_ms).min().unwrap() / 100;
            for _ in 0..600 {
                match s.due(&windows, s.clock(now)) {
                    None => {
                        let t = s.clock(now);
                        s.record(&windows, t);
                        starts.push(t);
                    }
                    Some(due) if backlogged && due != u64::MAX => {
                        // A paced backlog: the next fetch comes at the due instant, or a little later.
                        now = due + rng.range(0, jitter);
                        continue;
                    }
                    Some(_) => {}
                }
                now += if backlogged {
                    rng.range(0, jitter)
                } else {
                    rng.range(0, 400 - 1)
                };
                for win in &windows {
                    assert!(s.kept(win.per_ms) <= RATE_BUCKETS as usize + 1);
                }
            }
            check_log(&starts, &windows);
            if backlogged {
                let span = (now - begin) as f64;
                let allowed = windows
                    .iter()
                    .map(|x| x.limit as f64 * (span / x.per_ms as f64).floor())
                    .fold(f64::INFINITY, f64::min);
                let strict = windows
                    .iter()
                    .min_by(|a, b| {
                        (a.limit as f64 / a.per_ms as f64)
                            .total_cmp(&(b.limit as f64 / b.per_ms as f64))
                    })
                    .unwrap();
                if span >= 10.0 * strict.per_ms as f64 && windows.len() == 1 {
                    assert!(
                        starts.len() as f64 >= 0.95 * allowed,
                        "{} starts of {allowed} allowed, {windows:?}",
                        starts.len()
                    );
                }
            }
        }
    }
}
