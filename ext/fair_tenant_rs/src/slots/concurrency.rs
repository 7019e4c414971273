//! `fair_tenant_concurrency` options: `{ limit: 1, lease: 60, key: :method_name, elastic: false }`.

use crate::names::MAX_CONCURRENCY_SCOPES;
use crate::routing::rules::{numbers, RawValue, RuleError};

pub const DEFAULT_LIMIT: u64 = crate::names::DEFAULT_LIMIT;
pub const DEFAULT_LEASE: f64 = crate::names::DEFAULT_LEASE_MS as f64 / 1000.0;
/// Largest limit accepted, far above any sane number of concurrent jobs per tenant.
pub const MAX_LIMIT: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Concurrency {
    pub limit: u64,
    /// Lease in seconds: how long a slot survives a worker that died without releasing it.
    pub lease: f64,
    /// Class method computing the scope key from the perform arguments, if any.
    pub key_method: Option<String>,
    /// On a fair queue: the limit is what the scope is guaranteed, and threads no job under its limit can
    /// use go past it (work-conserving). Off: the limit is a wall.
    pub elastic: bool,
}

/// The option hash as the binding read it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawConcurrency {
    pub limit: RawValue,
    pub lease: RawValue,
    pub key: RawValue,
    pub elastic: RawValue,
    pub unknown_keys: Vec<String>,
    pub inspect: String,
}

impl Concurrency {
    pub fn parse(job_class: &str, raw: &RawConcurrency) -> Result<Self, RuleError> {
        let fail = |reason: String| RuleError {
            job_class: job_class.to_string(),
            position: None,
            rule: format!("fair_tenant_concurrency {}", raw.inspect),
            reason,
        };
        if let Some(k) = raw.unknown_keys.first() {
            return Err(fail(format!(
                "unknown key {k:?} (allowed: limit, lease, key, elastic)"
            )));
        }
        let limit = match numbers::count(&raw.limit) {
            None => DEFAULT_LIMIT,
            Some(Ok(n)) if n >= 0.0 && n.fract() == 0.0 && n <= MAX_LIMIT as f64 => n as u64,
            _ => return Err(fail("limit must be an Integer >= 0".into())),
        };
        let lease = match numbers::seconds(&raw.lease) {
            None => DEFAULT_LEASE,
            Some(Ok(n)) if n > 0.0 && n.is_finite() => n,
            _ => {
                return Err(fail(
                    "lease must be a positive number of seconds or an ActiveSupport::Duration"
                        .into(),
                ))
            }
        };
        let key_method = match &raw.key {
            RawValue::Missing | RawValue::Nil => None,
            RawValue::Str(s) if is_method_name(s) => Some(s.clone()),
            _ => {
                return Err(fail(
                    "key must name a class method (Symbol or String), e.g. key: :webhook_key"
                        .into(),
                ))
            }
        };
        let elastic = match &raw.elastic {
            RawValue::Missing | RawValue::Nil => false,
            RawValue::Other(v) | RawValue::Str(v) if v == "true" || v == "false" => v == "true",
            _ => return Err(fail("elastic must be true or false".into())),
        };
        Ok(Concurrency {
            limit,
            lease,
            key_method,
            elastic,
        })
    }

    /// The option written as a list of scopes (`[{ limit: 2 }, { limit: 20, key: :api_scope }]`): 1 to
    /// MAX_CONCURRENCY_SCOPES of them, each checked as a single one is, no scope named twice (two without `key:`
    /// are both the tenant's; two with one `key:` method are one scope). `inspect`: the whole list as written.
    pub fn parse_all(
        job_class: &str,
        raws: &[RawConcurrency],
        inspect: &str,
    ) -> Result<Vec<Self>, RuleError> {
        let fail = |reason: String| RuleError {
            job_class: job_class.to_string(),
            position: None,
            rule: format!("fair_tenant_concurrency {inspect}"),
            reason,
        };
        if raws.is_empty() || raws.len() as u64 > MAX_CONCURRENCY_SCOPES {
            return Err(fail(format!(
                "must hold 1 to {MAX_CONCURRENCY_SCOPES} scopes like [{{ limit: 2 }}, {{ limit: 20, key: :api_scope }}]"
            )));
        }
        let mut scopes: Vec<Self> = Vec::with_capacity(raws.len());
        for (i, raw) in raws.iter().enumerate() {
            let scope = Self::parse(job_class, raw)
                .map_err(|e| fail(format!("scope {}: {}", i + 1, e.reason)))?;
            if let Some(j) = scopes.iter().position(|s| s.key_method == scope.key_method) {
                let named = match &scope.key_method {
                    Some(m) => format!("key: :{m}"),
                    None => "the tenant's, without key:".to_string(),
                };
                return Err(fail(format!(
                    "scope {} is scope {} again ({named}): name each scope once",
                    i + 1,
                    j + 1
                )));
            }
            scopes.push(scope);
        }
        Ok(scopes)
    }

    pub fn lease_ms(&self) -> u64 {
        (self.lease * 1000.0).ceil() as u64
    }
}

pub(crate) fn is_method_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_alphabetic())
        && s.trim_end_matches(['?', '!'])
            .chars()
            .all(|c| c == '_' || c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(limit: RawValue, lease: RawValue, key: RawValue) -> RawConcurrency {
        RawConcurrency {
            limit,
            lease,
            key,
            elastic: RawValue::Missing,
            unknown_keys: vec![],
            inspect: "{...}".into(),
        }
    }

    #[test]
    fn defaults_to_one_slot_and_a_minute_lease() {
        let c = Concurrency::parse(
            "J",
            &raw(RawValue::Missing, RawValue::Missing, RawValue::Missing),
        )
        .unwrap();
        assert_eq!(c.limit, 1);
        assert_eq!(c.lease_ms(), 60_000);
        assert_eq!(c.key_method, None);
    }

    #[test]
    fn coerces_json_round_tripped_values() {
        let c = Concurrency::parse(
            "J",
            &raw(
                RawValue::Str("3".into()),
                RawValue::Str("90".into()),
                RawValue::Str("webhook_key".into()),
            ),
        )
        .unwrap();
        assert_eq!(
            c,
            Concurrency {
                limit: 3,
                lease: 90.0,
                key_method: Some("webhook_key".into()),
                elastic: false,
            }
        );
    }

    #[test]
    fn elastic_is_a_boolean_off_by_default() {
        let none = raw(RawValue::Int(2), RawValue::Missing, RawValue::Missing);
        assert!(!Concurrency::parse("J", &none).unwrap().elastic);
        for (value, elastic) in [
            (RawValue::Other("true".into()), true),
            (RawValue::Other("false".into()), false),
            (RawValue::Str("true".into()), true),
            (RawValue::Nil, false),
        ] {
            let r = RawConcurrency {
                elastic: value,
                ..none.clone()
            };
            assert_eq!(Concurrency::parse("J", &r).unwrap().elastic, elastic);
        }
        for bad in [RawValue::Int(1), RawValue::Str("yes".into())] {
            let r = RawConcurrency {
                elastic: bad,
                ..none.clone()
            };
            let msg = Concurrency::parse("WebhookJob", &r)
                .unwrap_err()
                .to_string();
            assert!(msg.contains("elastic must be true or false"), "{msg}");
            assert!(
                msg.starts_with("WebhookJob: invalid fair_tenant_concurrency"),
                "{msg}"
            );
        }
    }

    #[test]
    fn a_list_names_up_to_four_distinct_scopes() {
        let tenant = raw(RawValue::Int(2), RawValue::Missing, RawValue::Missing);
        let api = raw(
            RawValue::Int(20),
            RawValue::Missing,
            RawValue::Str("api_scope".into()),
        );
        let scopes = Concurrency::parse_all("J", &[tenant.clone(), api.clone()], "[...]").unwrap();
        assert_eq!(scopes.len(), 2);
        assert_eq!(
            (scopes[0].limit, scopes[0].key_method.as_deref()),
            (2, None)
        );
        assert_eq!(
            (scopes[1].limit, scopes[1].key_method.as_deref()),
            (20, Some("api_scope"))
        );
        let other = |name: &str| {
            raw(
                RawValue::Int(1),
                RawValue::Missing,
                RawValue::Str(name.into()),
            )
        };
        let four = [tenant.clone(), other("a"), other("b"), other("c")];
        assert_eq!(
            Concurrency::parse_all("J", &four, "[...]").unwrap().len(),
            4
        );
        let five = [
            tenant.clone(),
            other("a"),
            other("b"),
            other("c"),
            other("d"),
        ];
        for bad in [&five[..], &[][..]] {
            let msg = Concurrency::parse_all("WebhookJob", bad, "[...]")
                .unwrap_err()
                .to_string();
            assert!(
                msg.starts_with(
                    "WebhookJob: invalid fair_tenant_concurrency [...]: must hold 1 to 4 scopes"
                ),
                "{msg}"
            );
        }
    }

    #[test]
    fn a_list_refuses_a_scope_named_twice_and_says_which_scope_is_wrong() {
        let tenant = raw(RawValue::Int(2), RawValue::Missing, RawValue::Missing);
        let api = raw(
            RawValue::Int(20),
            RawValue::Missing,
            RawValue::Str("api_scope".into()),
        );
        let msg = Concurrency::parse_all("J", &[tenant.clone(), tenant.clone()], "[...]")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("scope 2 is scope 1 again (the tenant's, without key:)"),
            "{msg}"
        );
        let msg = Concurrency::parse_all("J", &[api.clone(), tenant.clone(), api.clone()], "[...]")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("scope 3 is scope 1 again (key: :api_scope)"),
            "{msg}"
        );
        let bad = raw(RawValue::Int(-1), RawValue::Missing, RawValue::Missing);
        let msg = Concurrency::parse_all("J", &[api, bad], "[...]")
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("J: invalid fair_tenant_concurrency [...]: scope 2: limit must be"),
            "{msg}"
        );
    }

    #[test]
    fn zero_limit_halts_and_is_valid() {
        let c = Concurrency::parse(
            "J",
            &raw(RawValue::Int(0), RawValue::Missing, RawValue::Missing),
        )
        .unwrap();
        assert_eq!(c.limit, 0);
    }

    #[test]
    fn rejects_bad_values_naming_the_class() {
        for (r, reason) in [
            (
                raw(RawValue::Int(-1), RawValue::Missing, RawValue::Missing),
                "limit",
            ),
            (
                raw(RawValue::Float(1.5), RawValue::Missing, RawValue::Missing),
                "limit",
            ),
            (
                raw(RawValue::Missing, RawValue::Int(0), RawValue::Missing),
                "lease",
            ),
            (
                raw(
                    RawValue::Missing,
                    RawValue::Str("soon".into()),
                    RawValue::Missing,
                ),
                "lease",
            ),
            (
                raw(
                    RawValue::Missing,
                    RawValue::Missing,
                    RawValue::Str("not a method".into()),
                ),
                "key",
            ),
            (
                raw(RawValue::Missing, RawValue::Missing, RawValue::Int(3)),
                "key",
            ),
        ] {
            let msg = Concurrency::parse("WebhookJob", &r)
                .unwrap_err()
                .to_string();
            assert!(
                msg.starts_with("WebhookJob: invalid fair_tenant_concurrency"),
                "{msg}"
            );
            assert!(msg.contains(reason), "{msg}");
        }
        let mut r = raw(RawValue::Missing, RawValue::Missing, RawValue::Missing);
        r.unknown_keys.push("limt".into());
        let msg = Concurrency::parse("J", &r).unwrap_err().to_string();
        assert!(msg.contains("unknown key \"limt\""), "{msg}");
    }
}
