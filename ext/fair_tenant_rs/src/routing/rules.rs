//! `fair_tenant_queues` rules: parsing, coercion and validation.
//!
//! Rules arrive either straight from `sidekiq_options` (integers, floats, ActiveSupport
//! durations already turned into floats by the binding) or from a JSON round-tripped
//! payload re-pushed by Sidekiq's scheduler or retry poller (strings such as `"3600"`).
//! Both shapes are coerced into the same [`RuleSet`].

use std::fmt;

/// One value read from a rule hash, as the binding layer found it.
#[derive(Debug, Clone, PartialEq)]
pub enum RawValue {
    Missing,
    Nil,
    Int(i64),
    Float(f64),
    Str(String),
    /// Anything else, described by its `inspect`.
    Other(String),
}

/// One element of the `fair_tenant_queues` array.
#[derive(Debug, Clone, PartialEq)]
pub enum RawRule {
    Hash {
        queue: RawValue,
        threshold: RawValue,
        per: RawValue,
        from_fair_queue: RawValue,
        /// Keys other than the known ones ([`RULE_KEYS`]), as written.
        unknown_keys: Vec<String>,
        inspect: String,
    },
    NotAHash(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub queue: String,
    pub threshold: u64,
    /// Window length in seconds.
    pub per: f64,
    /// Whether the rule also re-routes jobs whose queue is a fair queue (off by default).
    pub from_fair_queue: bool,
}

/// The keys of one rule, as written in `fair_tenant_queues`.
pub const RULE_KEYS: [&str; 4] = ["queue", "threshold", "per", FROM_FAIR_QUEUE];

/// The rule key that lets a rule re-route jobs whose queue is a fair queue.
pub const FROM_FAIR_QUEUE: &str = "from_fair_queue";

/// A validated list of rules plus the numbers the enqueue script needs.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSet {
    rules: Vec<Rule>,
    window: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleError {
    pub job_class: String,
    /// 1-based position of the offending rule, `None` when the whole value is wrong.
    pub position: Option<usize>,
    pub rule: String,
    pub reason: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some(n) => write!(
                f,
                "{}: invalid fair_tenant_queues rule #{} {}: {}",
                self.job_class, n, self.rule, self.reason
            ),
            None => write!(
                f,
                "{}: invalid {}: {}",
                self.job_class, self.rule, self.reason
            ),
        }
    }
}

impl std::error::Error for RuleError {}

/// Upper bound on a threshold: beyond this the per-tenant key would stop being "a few KB".
pub const MAX_THRESHOLD: u64 = 1_000_000;

impl RuleSet {
    /// Parses and validates `raw`. `max_window` is the configured `max_throttling_window`:
    /// the default `per` and the upper bound of every `per`.
    pub fn parse(job_class: &str, raw: &[RawRule], max_window: f64) -> Result<Self, RuleError> {
        let mut rules = Vec::with_capacity(raw.len());
        for (i, r) in raw.iter().enumerate() {
            rules.push(parse_rule(job_class, i + 1, r, max_window)?);
        }
        // Entries older than the longest rule's window never decide anything.
        let window = rules.iter().map(|r| r.per).fold(0.0, f64::max);
        Ok(RuleSet {
            rules,
            window: if window > 0.0 { window } else { max_window },
        })
    }

    /// The error for a `fair_tenant_queues` value that is not an Array at all.
    pub fn not_an_array(job_class: &str, inspect: &str) -> RuleError {
        RuleError {
            job_class: job_class.to_string(),
            position: None,
            rule: format!("fair_tenant_queues {inspect}"),
            reason: "must be an Array of Hashes with queue:, threshold: and optional per:".into(),
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The TTL and trim horizon of the per-tenant key: the longest rule window.
    pub fn window(&self) -> f64 {
        self.window
    }

    /// How many newest entries decide every rule exactly: a rule with threshold T only
    /// asks whether the (T+1)-th newest entry lies inside its window.
    pub fn keep(&self) -> u64 {
        self.rules
            .iter()
            .map(|r| r.threshold + 1)
            .max()
            .unwrap_or(0)
    }

    /// Whether a push to a queue (fair or not) goes through routing at all. A fair queue already
    /// serves tenants in fair order: re-routing its jobs would spread a greedy tenant over several
    /// queues that Sidekiq's queue weights pick from, so only rules with `from_fair_queue: true`
    /// apply there, and without any the push is neither counted nor routed (no round trip).
    pub fn routes(&self, fair_queue: bool) -> bool {
        !fair_queue || self.rules.iter().any(|r| r.from_fair_queue)
    }

    /// Whether the rule at `index` may fire for a push to a fair queue or not.
    pub fn applies(&self, index: usize, fair_queue: bool) -> bool {
        self.rules
            .get(index)
            .is_some_and(|r| !fair_queue || r.from_fair_queue)
    }

    /// The queues the rules can send a job of a fair queue or not to.
    pub fn queues(&self, fair_queue: bool) -> Vec<String> {
        (0..self.rules.len())
            .filter(|&i| self.applies(i, fair_queue))
            .map(|i| self.rules[i].queue.clone())
            .collect()
    }

    /// Queue of the rule at `index` (as returned by the enqueue script).
    pub fn queue_at(&self, index: i64) -> Option<&str> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.rules.get(i))
            .map(|r| r.queue.as_str())
    }

    /// Which rule fires given the timestamps of the newest entries (newest first),
    /// mirroring the Lua script; used by tests and by stats.
    pub fn decide(&self, newest_first: &[f64], now: f64) -> Option<usize> {
        self.decide_for(newest_first, now, false)
    }

    /// [`RuleSet::decide`] for a push to a fair queue or not: only the rules that apply there fire.
    pub fn decide_for(&self, newest_first: &[f64], now: f64, fair_queue: bool) -> Option<usize> {
        let mut chosen = None;
        for (i, r) in self.rules.iter().enumerate() {
            if !self.applies(i, fair_queue) {
                continue;
            }
            let idx = r.threshold as usize;
            if let Some(ts) = newest_first.get(idx) {
                if *ts >= now - r.per {
                    chosen = Some(i);
                }
            }
        }
        chosen
    }
}

/// Seconds as short decimal text, for messages.
pub fn format_seconds(s: f64) -> String {
    if s.fract() == 0.0 && s.abs() < 1e15 {
        format!("{}", s as i64)
    } else {
        format!("{s}")
    }
}

fn parse_rule(
    job_class: &str,
    position: usize,
    raw: &RawRule,
    max_window: f64,
) -> Result<Rule, RuleError> {
    let (queue, threshold, per, from_fair_queue, unknown_keys, inspect) = match raw {
        RawRule::NotAHash(inspect) => {
            return Err(err(job_class, position, inspect, "must be a Hash"));
        }
        RawRule::Hash {
            queue,
            threshold,
            per,
            from_fair_queue,
            unknown_keys,
            inspect,
        } => (
            queue,
            threshold,
            per,
            from_fair_queue,
            unknown_keys,
            inspect,
        ),
    };
    let fail = |reason: String| err(job_class, position, inspect, &reason);

    if let Some(k) = unknown_keys.first() {
        return Err(fail(format!(
            "unknown key {k:?} (allowed: {})",
            RULE_KEYS.join(", ")
        )));
    }

    let queue = match queue {
        RawValue::Str(s) if !s.trim().is_empty() => s.clone(),
        RawValue::Missing => return Err(fail("queue is missing".into())),
        _ => return Err(fail("queue must be a non-blank String or Symbol".into())),
    };

    let threshold = match coerce_number(numbers::count(threshold)) {
        Coerced::Missing => return Err(fail("threshold is missing".into())),
        Coerced::Number(n) if n >= 0.0 && n.fract() == 0.0 && n <= MAX_THRESHOLD as f64 => n as u64,
        Coerced::Number(n) if n < 0.0 => {
            return Err(fail(format!("threshold must not be negative, got {n}")))
        }
        Coerced::Number(n) if n > MAX_THRESHOLD as f64 => {
            return Err(fail(format!(
                "threshold must be at most {MAX_THRESHOLD}, got {n}"
            )))
        }
        _ => return Err(fail("threshold must be a non-negative Integer".into())),
    };

    let per = match coerce_number(numbers::seconds(per)) {
        Coerced::Missing => max_window,
        Coerced::Number(n) if n > 0.0 && n <= max_window => n,
        Coerced::Number(n) if n <= 0.0 => {
            return Err(fail(format!("per must be positive, got {n}")))
        }
        Coerced::Number(n) if n.is_finite() => {
            return Err(fail(format!(
                "per ({n}s) exceeds max_throttling_window ({}s)",
                format_seconds(max_window)
            )))
        }
        _ => {
            return Err(fail(
                "per must be a number of seconds or an ActiveSupport::Duration".into(),
            ))
        }
    };

    let from_fair_queue = match from_fair_queue {
        RawValue::Missing | RawValue::Nil => false,
        RawValue::Other(v) | RawValue::Str(v) if v == "true" || v == "false" => v == "true",
        _ => return Err(fail(format!("{FROM_FAIR_QUEUE} must be true or false"))),
    };

    Ok(Rule {
        queue,
        threshold,
        per,
        from_fair_queue,
    })
}

enum Coerced {
    Missing,
    Number(f64),
    Invalid,
}

/// [`crate::options`]'s rule for what a number option accepts.
fn coerce_number(v: Option<Result<f64, ()>>) -> Coerced {
    match v {
        None => Coerced::Missing,
        Some(Ok(n)) => Coerced::Number(n),
        Some(Err(())) => Coerced::Invalid,
    }
}

fn err(job_class: &str, position: usize, inspect: &str, reason: &str) -> RuleError {
    RuleError {
        job_class: job_class.to_string(),
        position: Some(position),
        rule: inspect.to_string(),
        reason: reason.to_string(),
    }
}

/// The one rule for what a number in a class's options (`fair_tenant_concurrency`, `fair_tenant_rate`,
/// `fair_tenant_queues`) accepts besides a Ruby number. A String is taken on purpose: values often come
/// from the environment (`limit: ENV["SHOP_SLOTS"]`) and a JSON round trip (a re-pushed payload) turns
/// Durations and Symbols into Strings. Only plain decimal text is taken: `"2"`, `" 2 "`, and for seconds
/// `"1.5"`; `""`, `"abc"`, `"-1"`, `"1e3"`, `"0x10"`, `"inf"` and `true`/`false` are refused, and a count
/// (`limit`, `threshold`) refuses a fraction (`2.5`, `"2.5"`, `"2.0"`; a Float with none, `2.0`, is taken).
/// The caller checks the range and names the option, the class and the rule in its error.
pub mod numbers {
    use super::RawValue;

    /// A whole number: an Integer, a Float with no fraction, or a String of decimal digits. `None` when absent
    /// (missing or nil), `Err` when given but not one of those. The sign and range are the caller's to check.
    pub fn count(v: &RawValue) -> Option<Result<f64, ()>> {
        match v {
            RawValue::Missing | RawValue::Nil => None,
            RawValue::Int(i) => Some(Ok(*i as f64)),
            RawValue::Float(f) if f.is_finite() && f.fract() == 0.0 => Some(Ok(*f)),
            RawValue::Str(s) if is_digits(s.trim()) => {
                Some(s.trim().parse::<f64>().map_err(|_| ()))
            }
            _ => Some(Err(())),
        }
    }

    /// A number of seconds: an Integer, a finite Float (an ActiveSupport::Duration arrives as one), or a String
    /// of decimal digits with at most one `.` between digits (`"90"`, `"0.5"`).
    pub fn seconds(v: &RawValue) -> Option<Result<f64, ()>> {
        match v {
            RawValue::Missing | RawValue::Nil => None,
            RawValue::Int(i) => Some(Ok(*i as f64)),
            RawValue::Float(f) if f.is_finite() => Some(Ok(*f)),
            RawValue::Str(s) if is_decimal(s.trim()) => {
                Some(s.trim().parse::<f64>().map_err(|_| ()))
            }
            _ => Some(Err(())),
        }
    }

    fn is_digits(s: &str) -> bool {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    }

    fn is_decimal(s: &str) -> bool {
        match s.split_once('.') {
            Some((whole, fraction)) => is_digits(whole) && is_digits(fraction),
            None => is_digits(s),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn s(v: &str) -> RawValue {
            RawValue::Str(v.into())
        }

        #[test]
        fn a_count_is_an_integer_or_decimal_digits() {
            assert_eq!(count(&RawValue::Int(2)), Some(Ok(2.0)));
            assert_eq!(count(&RawValue::Float(2.0)), Some(Ok(2.0)));
            assert_eq!(count(&s("2")), Some(Ok(2.0)));
            assert_eq!(count(&s(" 12 ")), Some(Ok(12.0)));
            assert_eq!(
                count(&RawValue::Int(-1)),
                Some(Ok(-1.0)),
                "the caller says why not"
            );
            assert_eq!(count(&RawValue::Missing), None);
            assert_eq!(count(&RawValue::Nil), None);
            for refused in [
                RawValue::Float(2.5),
                RawValue::Float(f64::INFINITY),
                s("2.5"),
                s("2.0"),
                s(""),
                s("  "),
                s("abc"),
                s("-1"),
                s("+1"),
                s("1e3"),
                s("0x10"),
                s("inf"),
                RawValue::Other("true".into()),
                RawValue::Other("false".into()),
            ] {
                assert_eq!(count(&refused), Some(Err(())), "{refused:?}");
            }
        }

        #[test]
        fn seconds_take_a_decimal_fraction() {
            assert_eq!(seconds(&RawValue::Float(0.5)), Some(Ok(0.5)));
            assert_eq!(seconds(&s("0.5")), Some(Ok(0.5)));
            assert_eq!(seconds(&s("3600.0")), Some(Ok(3600.0)));
            assert_eq!(seconds(&s("90")), Some(Ok(90.0)));
            for refused in [
                s(""),
                s("."),
                s("1."),
                s(".5"),
                s("1.2.3"),
                s("abc"),
                s("-1"),
                s("1e3"),
                s("NaN"),
            ] {
                assert_eq!(seconds(&refused), Some(Err(())), "{refused:?}");
            }
            assert_eq!(seconds(&RawValue::Float(f64::NAN)), Some(Err(())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(queue: RawValue, threshold: RawValue, per: RawValue) -> RawRule {
        RawRule::Hash {
            queue,
            threshold,
            per,
            from_fair_queue: RawValue::Missing,
            unknown_keys: vec![],
            inspect: "{...}".into(),
        }
    }

    fn s(v: &str) -> RawValue {
        RawValue::Str(v.into())
    }

    #[test]
    fn parses_integers_floats_and_json_strings_alike() {
        let native = [hash(s("slow"), RawValue::Int(10), RawValue::Float(3600.0))];
        let json = [hash(s("slow"), s("10"), s("3600"))];
        let a = RuleSet::parse("Job", &native, 86_400.0).unwrap();
        let b = RuleSet::parse("Job", &json, 86_400.0).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.rules()[0].per, 3600.0);
    }

    #[test]
    fn per_defaults_to_the_max_window() {
        let set = RuleSet::parse(
            "Job",
            &[hash(s("q"), RawValue::Int(1), RawValue::Missing)],
            500.0,
        )
        .unwrap();
        assert_eq!(set.rules()[0].per, 500.0);
        assert_eq!(set.window(), 500.0);
    }

    #[test]
    fn keep_is_the_largest_threshold_plus_one() {
        let set = RuleSet::parse(
            "Job",
            &[
                hash(s("a"), RawValue::Int(100), RawValue::Int(60)),
                hash(s("b"), RawValue::Int(5), RawValue::Int(1)),
            ],
            86_400.0,
        )
        .unwrap();
        assert_eq!(set.keep(), 101);
        assert_eq!(set.queue_at(1), Some("b"));
        assert_eq!(set.queue_at(-1), None);
        assert_eq!(set.queue_at(2), None);
    }

    #[test]
    fn rejects_bad_rules_naming_class_and_rule() {
        let cases: Vec<(RawRule, &str)> = vec![
            (
                hash(s("q"), RawValue::Missing, RawValue::Missing),
                "threshold is missing",
            ),
            (
                hash(s("q"), RawValue::Int(-1), RawValue::Missing),
                "must not be negative",
            ),
            (
                hash(s("q"), RawValue::Float(1.5), RawValue::Missing),
                "non-negative Integer",
            ),
            (
                hash(s("q"), s("lots"), RawValue::Missing),
                "non-negative Integer",
            ),
            (
                hash(s("q"), RawValue::Int(1), RawValue::Int(0)),
                "per must be positive",
            ),
            (
                hash(s("q"), RawValue::Int(1), RawValue::Int(-5)),
                "per must be positive",
            ),
            (
                hash(s("q"), RawValue::Int(1), RawValue::Int(90_000)),
                "exceeds max_throttling_window",
            ),
            (
                hash(s("q"), RawValue::Int(1), s("soon")),
                "number of seconds",
            ),
            (
                hash(s("  "), RawValue::Int(1), RawValue::Missing),
                "non-blank",
            ),
            (
                hash(RawValue::Missing, RawValue::Int(1), RawValue::Missing),
                "queue is missing",
            ),
            (
                hash(RawValue::Int(3), RawValue::Int(1), RawValue::Missing),
                "non-blank",
            ),
            (RawRule::NotAHash("\"slow\"".into()), "must be a Hash"),
        ];
        for (rule, reason) in cases {
            let e = RuleSet::parse("BillingJob", &[rule], 86_400.0).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.starts_with("BillingJob: invalid fair_tenant_queues rule #1"),
                "{msg}"
            );
            assert!(msg.contains(reason), "{msg} should mention {reason}");
        }
    }

    #[test]
    fn rejects_unknown_keys() {
        let rule = RawRule::Hash {
            queue: s("q"),
            threshold: RawValue::Int(1),
            per: RawValue::Missing,
            from_fair_queue: RawValue::Missing,
            unknown_keys: vec!["pre".into()],
            inspect: "{queue: \"q\", threshold: 1, pre: 60}".into(),
        };
        let msg = RuleSet::parse("Job", &[rule], 10.0)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("unknown key \"pre\""), "{msg}");
        assert!(
            msg.contains("allowed: queue, threshold, per, from_fair_queue"),
            "{msg}"
        );
        assert!(msg.contains("pre: 60"), "{msg}");
    }

    #[test]
    fn position_points_at_the_bad_rule() {
        let rules = [
            hash(s("a"), RawValue::Int(1), RawValue::Missing),
            hash(s("b"), RawValue::Int(-3), RawValue::Missing),
        ];
        let e = RuleSet::parse("Job", &rules, 10.0).unwrap_err();
        assert_eq!(e.position, Some(2));
    }

    #[test]
    fn decide_picks_the_last_rule_whose_window_count_exceeds_threshold() {
        let set = RuleSet::parse(
            "Job",
            &[
                hash(s("slow"), RawValue::Int(2), RawValue::Int(100)),
                hash(s("slower"), RawValue::Int(0), RawValue::Int(1)),
            ],
            1000.0,
        )
        .unwrap();
        let now = 1000.0;
        // Three jobs in the last 100 s, newest 5 s ago: only the first rule fires.
        assert_eq!(set.decide(&[995.0, 990.0, 950.0], now), Some(0));
        // Newest inside 1 s: the second rule fires too, and the last one wins.
        assert_eq!(set.decide(&[999.5, 990.0, 950.0], now), Some(1));
        // Two jobs only: threshold 2 not exceeded.
        assert_eq!(set.decide(&[995.0, 990.0], now), None);
        // Third newest outside the 100 s window.
        assert_eq!(set.decide(&[995.0, 990.0, 850.0], now), None);
    }

    fn fair(rule: RawRule, value: RawValue) -> RawRule {
        match rule {
            RawRule::Hash {
                queue,
                threshold,
                per,
                unknown_keys,
                inspect,
                ..
            } => RawRule::Hash {
                queue,
                threshold,
                per,
                from_fair_queue: value,
                unknown_keys,
                inspect,
            },
            other => other,
        }
    }

    #[test]
    fn a_fair_queue_is_routed_only_by_rules_that_ask_for_it() {
        let throttle = hash(s("slow"), RawValue::Int(2), RawValue::Int(100));
        let own = hash(s("own_processes"), RawValue::Int(0), RawValue::Int(1));
        let plain = RuleSet::parse("Job", &[throttle.clone(), own.clone()], 1000.0).unwrap();
        assert!(plain.routes(false));
        assert!(
            !plain.routes(true),
            "no rule asked: a fair queue's push is not routed"
        );
        assert_eq!(plain.queues(false), vec!["slow", "own_processes"]);
        assert!(plain.queues(true).is_empty());

        let mixed = RuleSet::parse(
            "Job",
            &[throttle, fair(own, RawValue::Other("true".into()))],
            1000.0,
        )
        .unwrap();
        assert!(mixed.routes(true));
        assert_eq!(mixed.queues(true), vec!["own_processes"]);
        assert!(!mixed.applies(0, true) && mixed.applies(1, true) && mixed.applies(0, false));
        assert!(!mixed.applies(2, false));
        let now = 1000.0;
        // Three in 100 s, newest 5 s ago: the throttle fires, except on a fair queue.
        assert_eq!(
            mixed.decide_for(&[995.0, 990.0, 950.0], now, false),
            Some(0)
        );
        assert_eq!(mixed.decide_for(&[995.0, 990.0, 950.0], now, true), None);
        // Newest inside 1 s: the rule that asked fires on a fair queue too.
        assert_eq!(mixed.decide_for(&[999.5, 990.0, 950.0], now, true), Some(1));
        assert_eq!(mixed.decide(&[999.5, 990.0, 950.0], now), Some(1));
        // Counting is the same either way: the key keeps what every rule needs.
        assert_eq!(mixed.keep(), 3);
        assert_eq!(mixed.window(), 100.0);
    }

    #[test]
    fn from_fair_queue_takes_true_or_false_and_names_class_and_rule_otherwise() {
        let rule = |v: RawValue| fair(hash(s("q"), RawValue::Int(1), RawValue::Missing), v);
        for (value, expected) in [
            (RawValue::Missing, false),
            (RawValue::Nil, false),
            (RawValue::Other("true".into()), true),
            (RawValue::Other("false".into()), false),
            (s("true"), true),
        ] {
            let set = RuleSet::parse("Job", &[rule(value)], 10.0).unwrap();
            assert_eq!(set.rules()[0].from_fair_queue, expected);
        }
        for value in [
            RawValue::Int(1),
            s("yes"),
            RawValue::Other(":always".into()),
        ] {
            let msg = RuleSet::parse("BillingJob", &[rule(value)], 10.0)
                .unwrap_err()
                .to_string();
            assert!(
                msg.starts_with("BillingJob: invalid fair_tenant_queues rule #1 {...}"),
                "{msg}"
            );
            assert!(
                msg.contains("from_fair_queue must be true or false"),
                "{msg}"
            );
        }
    }

    #[test]
    fn formats_seconds_for_lua() {
        assert_eq!(format_seconds(60.0), "60");
        assert_eq!(format_seconds(0.25), "0.25");
        assert_eq!(format_seconds(1_700_000_000.123_456), "1700000000.123456");
    }
}
