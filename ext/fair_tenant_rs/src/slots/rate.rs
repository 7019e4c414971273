//! `fair_tenant_rate` options: `[{ limit: 2, per: 1 }, { limit: 10_000, per: 86_400 }]` (per in seconds or
//! anything with `to_f`, such as an ActiveSupport::Duration), or `{ windows: [...], key: :method_name }`,
//! or one window `{ limit: 2, per: 1, key: :method_name }`. Each window of an Array may name its own `key:`
//! (`[{ limit: 5, per: 1 }, { limit: 100, per: 1, key: :api_scope }]`): windows are grouped by key into rate
//! scopes ([`Rate::parse_all`]), a window without one is the tenant's. Acts on fair queues only.

use crate::names::{
    MAX_CONCURRENCY_SCOPES, MAX_RATE_WINDOWS, RATE_LIMITS_PREFIX, RATE_OVERRIDE_SEPARATOR,
};
use crate::routing::rules::{numbers, RawValue, RuleError};

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
    /// The window's own key (Missing: the option's, else the tenant's).
    pub key: RawValue,
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

/// A key as an option names it: None (the tenant's), or a class method's name.
fn key_method(key: &RawValue) -> Result<Option<String>, ()> {
    match key {
        RawValue::Missing | RawValue::Nil => Ok(None),
        RawValue::Str(s) if super::concurrency::is_method_name(s) => Ok(Some(s.clone())),
        _ => Err(()),
    }
}

impl Rate {
    /// One rate scope: an option whose windows name at most one key.
    pub fn parse(job_class: &str, raw: &RawRate) -> Result<Self, RuleError> {
        let mut all = Self::parse_all(job_class, raw)?;
        if all.len() > 1 {
            return Err(RuleError {
                job_class: job_class.to_string(),
                position: None,
                rule: format!("fair_tenant_rate {}", raw.inspect),
                reason: "windows of one scope only here (no key: per window)".into(),
            });
        }
        Ok(all.remove(0))
    }

    /// Every rate scope the option names: its windows grouped by key, in the order each key first appears (a
    /// window without `key:` takes the option's, else the tenant's). 1 to [`MAX_RATE_WINDOWS`] windows in all,
    /// at most [`MAX_CONCURRENCY_SCOPES`] keys.
    pub fn parse_all(job_class: &str, raw: &RawRate) -> Result<Vec<Self>, RuleError> {
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
                return Err(at(&format!("unknown key {k:?} (allowed: limit, per, key)")));
            }
            let limit = match numbers::count(&w.limit) {
                Some(Ok(n)) if n >= 1.0 && n.fract() == 0.0 && n <= MAX_LIMIT as f64 => n as u64,
                _ => return Err(at("limit must be an Integer >= 1")),
            };
            let per_ms = match numbers::seconds(&w.per) {
                Some(Ok(n)) if n.is_finite() && n * 1000.0 >= 1.0 && n * 1000.0 <= MAX_PER_MS as f64 => {
                    (n * 1000.0).round() as u64
                }
                _ => {
                    return Err(at(
                        "per must be a number of seconds (at least 0.001, at most a year) or an ActiveSupport::Duration",
                    ))
                }
            };
            let own = key_method(&w.key).map_err(|()| {
                at("key must name a class method (Symbol or String), e.g. key: :api_scope")
            })?;
            windows.push((own, Window { limit, per_ms }));
        }
        let option_key = key_method(&raw.key).map_err(|()| {
            fail("key must name a class method (Symbol or String), e.g. key: :shop_id".into())
        })?;
        if option_key.is_some() && windows.iter().any(|(own, _)| own.is_some()) {
            return Err(fail(
                "a key for all windows and a key in a window: give one or the other".into(),
            ));
        }
        let mut scopes: Vec<Rate> = Vec::new();
        for (own, window) in windows {
            let key = own.or_else(|| option_key.clone());
            match scopes.iter_mut().find(|r| r.key_method == key) {
                Some(rate) => rate.windows.push(window),
                None => scopes.push(Rate {
                    windows: vec![window],
                    key_method: key,
                }),
            }
        }
        if scopes.len() as u64 > MAX_CONCURRENCY_SCOPES {
            return Err(fail(format!(
                "windows name at most {MAX_CONCURRENCY_SCOPES} scopes (keys, the tenant's included)"
            )));
        }
        Ok(scopes)
    }

    /// The windows as a job carries them after its scope: limit, per (ms), limit, per (ms), ...
    pub fn flat(&self) -> Vec<u64> {
        self.windows
            .iter()
            .flat_map(|w| [w.limit, w.per_ms])
            .collect()
    }
}

impl Rate {
    /// Windows as an override stores them: "limit:per ms,limit:per ms".
    pub fn encode(&self) -> String {
        self.windows
            .iter()
            .map(|w| format!("{}:{}", w.limit, w.per_ms))
            .collect::<Vec<_>>()
            .join(RATE_OVERRIDE_SEPARATOR)
    }

    /// Windows written as on the command line, "5/1,10000/86400" (limit/seconds), checked as the option is.
    pub fn parse_text(label: &str, text: &str) -> Result<Self, RuleError> {
        let windows = text
            .split(RATE_OVERRIDE_SEPARATOR)
            .map(|part| {
                let (limit, per) = part.split_once('/').unwrap_or((part, ""));
                let value = |s: &str| {
                    if s.trim().is_empty() {
                        RawValue::Missing
                    } else {
                        RawValue::Str(s.trim().to_string())
                    }
                };
                RawWindow {
                    limit: value(limit),
                    per: value(per),
                    key: RawValue::Missing,
                    unknown_keys: vec![],
                }
            })
            .collect();
        Rate::parse(
            label,
            &RawRate {
                windows,
                key: RawValue::Missing,
                shape_error: None,
                inspect: text.to_string(),
            },
        )
    }
}

/// Stored override windows (as [`Rate::encode`] wrote them); `None` for anything else.
pub fn stored_windows(stored: &[u8]) -> Option<Vec<Window>> {
    let text = std::str::from_utf8(stored).ok()?;
    let windows: Option<Vec<Window>> = text
        .split(RATE_OVERRIDE_SEPARATOR)
        .map(|part| {
            let (limit, per) = part.split_once(':')?;
            Some(Window {
                limit: limit.parse().ok()?,
                per_ms: per.parse().ok()?,
            })
        })
        .collect();
    windows.filter(|w| !w.is_empty() && w.iter().all(|w| w.limit >= 1 && w.per_ms >= 1))
}

/// The hash of a tag's runtime rate overrides (field -> windows).
pub fn overrides_key(tag: &[u8]) -> Vec<u8> {
    [
        RATE_LIMITS_PREFIX.as_bytes(),
        tag.len().to_string().as_bytes(),
        b":",
        tag,
    ]
    .concat()
}

/// An override's recheck under way (a member of [`crate::names::RATE_RECHECKS_KEY`]): its tag, length-prefixed, then its field.
pub fn recheck_member(tag: &[u8], field: &[u8]) -> Vec<u8> {
    [tag.len().to_string().as_bytes(), b":", tag, field].concat()
}

/// The (tag, field) of a [`recheck_member`]; None for bytes it could not have written.
pub fn recheck_target(member: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let colon = member.iter().position(|&b| b == b':')?;
    let digits = std::str::from_utf8(&member[..colon]).ok()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let len: usize = digits.parse().ok()?;
    let rest = &member[colon + 1..];
    (len <= rest.len()).then(|| (rest[..len].to_vec(), rest[len..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(limit: RawValue, per: RawValue) -> RawWindow {
        RawWindow {
            limit,
            per,
            key: RawValue::Missing,
            unknown_keys: vec![],
        }
    }

    fn keyed(limit: i64, per: i64, key: &str) -> RawWindow {
        RawWindow {
            key: RawValue::Str(key.into()),
            ..window(RawValue::Int(limit), RawValue::Int(per))
        }
    }

    #[test]
    fn windows_with_their_own_keys_are_grouped_into_scopes_in_order() {
        let r = raw(vec![
            window(RawValue::Int(5), RawValue::Int(1)),
            keyed(100, 1, "api_scope"),
            window(RawValue::Int(50), RawValue::Int(60)),
            keyed(1000, 60, "api_scope"),
        ]);
        let all = Rate::parse_all("J", &r).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].key_method, None);
        assert_eq!(all[0].flat(), vec![5, 1000, 50, 60_000]);
        assert_eq!(all[1].key_method.as_deref(), Some("api_scope"));
        assert_eq!(all[1].flat(), vec![100, 1000, 1000, 60_000]);
        // One scope only where one is read (an override): refused with the reason.
        let msg = Rate::parse("J", &r).unwrap_err().to_string();
        assert!(msg.contains("windows of one scope only here"), "{msg}");
    }

    #[test]
    fn keyed_windows_are_bounded_and_not_mixed_with_an_option_key() {
        let many = raw((0..5).map(|i| keyed(1, 1, &format!("k{i}"))).collect());
        let msg = Rate::parse_all("J", &many).unwrap_err().to_string();
        assert!(msg.contains("at most 4 scopes"), "{msg}");
        let mut both = raw(vec![keyed(1, 1, "a")]);
        both.key = RawValue::Str("b".into());
        let msg = Rate::parse_all("J", &both).unwrap_err().to_string();
        assert!(msg.contains("give one or the other"), "{msg}");
        let bad = raw(vec![keyed(1, 1, "not a method!")]);
        let msg = Rate::parse_all("J", &bad).unwrap_err().to_string();
        assert!(
            msg.contains("window 1: key must name a class method"),
            "{msg}"
        );
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
    fn recheck_members_name_their_tag_and_field() {
        for (tag, field) in [
            (&b"t:acme"[..], &b"default"[..]),
            (b"k:a:b", b""),
            (b"t:12:x", b"3:y"),
            (b"t:\xff", b"\x00"),
        ] {
            let member = recheck_member(tag, field);
            assert_eq!(
                recheck_target(&member),
                Some((tag.to_vec(), field.to_vec()))
            );
        }
        for bad in [&b""[..], b"x:t:a", b":t", b"9:short", b"-1:t"] {
            assert_eq!(
                recheck_target(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn overrides_read_from_text_encode_and_decode() {
        let rate =
            Rate::parse_text("Sidekiq::FairTenant.rates", "5/1, 10000/86400,3/0.25").unwrap();
        assert_eq!(rate.encode(), "5:1000,10000:86400000,3:250");
        assert_eq!(
            stored_windows(rate.encode().as_bytes()),
            Some(rate.windows.clone())
        );
        assert_eq!(stored_windows(b"5:0"), None);
        assert_eq!(stored_windows(b"five"), None);
        assert_eq!(
            overrides_key(b"t:acme"),
            format!("{RATE_LIMITS_PREFIX}6:t:acme").into_bytes()
        );
        for (text, reason) in [
            ("5", "window 1: per"),
            ("0/1", "window 1: limit"),
            ("5/1,x/2", "window 2: limit"),
            ("", "window 1: limit"),
        ] {
            let msg = Rate::parse_text("Sidekiq::FairTenant.rates", text)
                .unwrap_err()
                .to_string();
            assert!(
                msg.starts_with("Sidekiq::FairTenant.rates: invalid fair_tenant_rate"),
                "{msg}"
            );
            assert!(msg.contains(reason), "{reason}: {msg}");
        }
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
