//! `fair_tenant_rate` options: `[{ limit: 2, per: 1 }, { limit: 10_000, per: 86_400 }]` (per in seconds or
//! anything with `to_f`, such as an ActiveSupport::Duration), or `{ windows: [...], key: :method_name }`,
//! or one window `{ limit: 2, per: 1, key: :method_name }`. Acts on fair queues only.

use crate::names::MAX_RATE_WINDOWS;
use crate::routing::rules::{RawValue, RuleError};

/// Largest limit accepted per window.
pub const MAX_LIMIT: u64 = 1_000_000_000;
/// Longest window accepted: a year, in ms.
pub const MAX_PER_MS: u64 = 366 * 86_400_000;

/// One window: at most `limit` starts in any `per_ms` (sliding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub limit: u64,
    pub per_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    pub windows: Vec<Window>,
    /// Class method computing the scope key from the perform arguments, if any.
    pub key_method: Option<String>,
}

/// One window hash as the binding read it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawWindow {
    pub limit: RawValue,
    pub per: RawValue,
    pub unknown_keys: Vec<String>,
}

/// The option as the binding read it: its windows, its key, or what made its shape wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRate {
    pub windows: Vec<RawWindow>,
    pub key: RawValue,
    pub shape_error: Option<String>,
    pub inspect: String,
}

impl Rate {
    pub fn parse(job_class: &str, raw: &RawRate) -> Result<Self, RuleError> {
        let fail = |reason: String| RuleError {
            job_class: job_class.to_string(),
            position: None,
            rule: format!("fair_tenant_rate {}", raw.inspect),
            reason,
        };
        if let Some(reason) = &raw.shape_error {
            return Err(fail(reason.clone()));
        }
        if raw.windows.is_empty() || raw.windows.len() as u64 > MAX_RATE_WINDOWS {
            return Err(fail(format!(
                "must hold 1 to {MAX_RATE_WINDOWS} windows like {{ limit: 2, per: 1 }}"
            )));
        }
        let mut windows = Vec::with_capacity(raw.windows.len());
        for (i, w) in raw.windows.iter().enumerate() {
            let at = |reason: &str| fail(format!("window {}: {reason}", i + 1));
            if let Some(k) = w.unknown_keys.first() {
                return Err(at(&format!("unknown key {k:?} (allowed: limit, per)")));
            }
            let limit = match number(&w.limit) {
                Some(Ok(n)) if n >= 1.0 && n.fract() == 0.0 && n <= MAX_LIMIT as f64 => n as u64,
                _ => return Err(at("limit must be an Integer >= 1")),
            };
            let per_ms = match number(&w.per) {
                Some(Ok(n)) if n.is_finite() && n * 1000.0 >= 1.0 && n * 1000.0 <= MAX_PER_MS as f64 => {
                    (n * 1000.0).round() as u64
                }
                _ => {
                    return Err(at(
                        "per must be a number of seconds (at least 0.001, at most a year) or an ActiveSupport::Duration",
                    ))
                }
            };
            windows.push(Window { limit, per_ms });
        }
        let key_method = match &raw.key {
            RawValue::Missing | RawValue::Nil => None,
            RawValue::Str(s) if super::concurrency::is_method_name(s) => Some(s.clone()),
            _ => {
                return Err(fail(
                    "key must name a class method (Symbol or String), e.g. key: :shop_id".into(),
                ))
            }
        };
        Ok(Rate {
            windows,
            key_method,
        })
    }

    /// The windows as a job carries them after its scope: limit, per (ms), limit, per (ms), ...
    pub fn flat(&self) -> Vec<u64> {
        self.windows
            .iter()
            .flat_map(|w| [w.limit, w.per_ms])
            .collect()
    }
}

fn number(v: &RawValue) -> Option<Result<f64, ()>> {
    match v {
        RawValue::Missing | RawValue::Nil => None,
        RawValue::Int(i) => Some(Ok(*i as f64)),
        RawValue::Float(f) => Some(Ok(*f)),
        RawValue::Str(s) => Some(s.trim().parse::<f64>().map_err(|_| ())),
        RawValue::Other(_) => Some(Err(())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(limit: RawValue, per: RawValue) -> RawWindow {
        RawWindow {
            limit,
            per,
            unknown_keys: vec![],
        }
    }

    fn raw(windows: Vec<RawWindow>) -> RawRate {
        RawRate {
            windows,
            key: RawValue::Missing,
            shape_error: None,
            inspect: "[...]".into(),
        }
    }

    #[test]
    fn reads_windows_in_ms_and_a_key() {
        let mut r = raw(vec![
            window(RawValue::Int(2), RawValue::Int(1)),
            window(RawValue::Str("10000".into()), RawValue::Float(86_400.0)),
            window(RawValue::Int(3), RawValue::Float(0.25)),
        ]);
        r.key = RawValue::Str("shop_id".into());
        let rate = Rate::parse("J", &r).unwrap();
        assert_eq!(rate.flat(), vec![2, 1000, 10_000, 86_400_000, 3, 250]);
        assert_eq!(rate.key_method.as_deref(), Some("shop_id"));
    }

    #[test]
    fn rejects_bad_values_naming_the_class_and_the_rule() {
        let ok = || window(RawValue::Int(2), RawValue::Int(1));
        let mut unknown = ok();
        unknown.unknown_keys.push("every".into());
        let mut bad_key = raw(vec![ok()]);
        bad_key.key = RawValue::Int(3);
        let mut shape = raw(vec![]);
        shape.shape_error = Some("must be an Array of windows".into());
        for (r, reason) in [
            (raw(vec![]), "1 to 8 windows"),
            (raw(vec![ok(); 9]), "1 to 8 windows"),
            (
                raw(vec![ok(), window(RawValue::Int(-1), RawValue::Int(1))]),
                "window 2: limit",
            ),
            (
                raw(vec![window(RawValue::Float(1.5), RawValue::Int(1))]),
                "limit",
            ),
            (
                raw(vec![window(RawValue::Int(0), RawValue::Int(1))]),
                "limit",
            ),
            (
                raw(vec![window(RawValue::Missing, RawValue::Int(1))]),
                "limit",
            ),
            (raw(vec![window(RawValue::Int(1), RawValue::Int(0))]), "per"),
            (
                raw(vec![window(RawValue::Int(1), RawValue::Missing)]),
                "per",
            ),
            (
                raw(vec![window(RawValue::Int(1), RawValue::Str("soon".into()))]),
                "per",
            ),
            (raw(vec![unknown]), "unknown key \"every\""),
            (bad_key, "key must name"),
            (shape, "must be an Array"),
        ] {
            let msg = Rate::parse("ShopSyncJob", &r).unwrap_err().to_string();
            assert!(
                msg.starts_with("ShopSyncJob: invalid fair_tenant_rate"),
                "{msg}"
            );
            assert!(msg.contains(reason), "{reason}: {msg}");
        }
    }
}
