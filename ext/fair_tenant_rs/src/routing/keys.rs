//! Redis key naming from the `enqueues_key` format.
//!
//! The format uses Ruby's named references, as the original gem passed it to `Kernel#format`:
//! `%<name>s` and `%{name}`, with `%%` for a literal percent. Names: `queue`, `job_class`,
//! `fair_tenant`. Values are raw bytes, so any tenant string (invalid UTF-8, newlines,
//! `{`, 10 KB) yields a valid, distinct key.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Queue,
    JobClass,
    FairTenant,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Lit(Vec<u8>),
    Field(Field),
}

/// A parsed key format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFormat {
    parts: Vec<Part>,
    /// The format's Redis Cluster hash tag (`{...}`), when it does not depend on the tenant:
    /// the per-class tenant index reuses it so the enqueue script's two keys share a slot.
    tag: Option<Vec<Part>>,
}

/// Prefix of the per-class tenant index (a hash: tenant -> newest enqueue time, packed).
pub const INDEX_PREFIX: &str = "sidekiq-fair_tenant:tenants:";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFormatError(pub String);

impl fmt::Display for KeyFormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KeyFormatError {}

/// An unusable `enqueues_key` is a configuration error (`Sidekiq::FairTenant::ConfigurationError`).
impl From<KeyFormatError> for crate::error::Error {
    fn from(e: KeyFormatError) -> Self {
        crate::error::Error::Configuration(e.0)
    }
}

pub const DEFAULT_ENQUEUES_KEY: &str =
    "sidekiq-fair_tenant:enqueued:%<job_class>s:tenant:%<fair_tenant>s";

impl KeyFormat {
    pub fn parse(format: &str) -> Result<Self, KeyFormatError> {
        let bytes = format.as_bytes();
        let mut parts = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'%' {
                lit.push(bytes[i]);
                i += 1;
                continue;
            }
            let rest = &format[i + 1..];
            let (name, consumed) = if rest.starts_with('%') {
                lit.push(b'%');
                i += 2;
                continue;
            } else if let Some(body) = rest.strip_prefix('<') {
                let end = body.find('>').ok_or_else(|| unterminated(format))?;
                if !body[end + 1..].starts_with('s') {
                    return Err(KeyFormatError(format!(
                        "enqueues_key {format:?}: only %<name>s references are supported"
                    )));
                }
                (&body[..end], end + 3)
            } else if let Some(body) = rest.strip_prefix('{') {
                let end = body.find('}').ok_or_else(|| unterminated(format))?;
                (&body[..end], end + 2)
            } else {
                return Err(KeyFormatError(format!(
                    "enqueues_key {format:?}: use %<name>s or %{{name}} references, %% for a percent sign"
                )));
            };
            let field = match name {
                "queue" => Field::Queue,
                "job_class" => Field::JobClass,
                "fair_tenant" => Field::FairTenant,
                other => {
                    return Err(KeyFormatError(format!(
                        "enqueues_key {format:?}: unknown reference {other:?} (allowed: queue, job_class, fair_tenant)"
                    )))
                }
            };
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            parts.push(Part::Field(field));
            i += 1 + consumed;
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        if !parts.contains(&Part::Field(Field::FairTenant)) {
            return Err(KeyFormatError(format!(
                "enqueues_key {format:?} must contain %<fair_tenant>s: otherwise every tenant shares one counter"
            )));
        }
        let tag = hash_tag(&parts);
        Ok(KeyFormat { parts, tag })
    }

    /// The per-class tenant index written by the enqueue script next to the tenant's key:
    /// `sidekiq-fair_tenant:tenants:[{tag}:]<job_class>[:<queue>]` (the queue only when the
    /// format uses it, the tag only when the format has one that does not contain the tenant).
    pub fn index_key(&self, queue: &[u8], job_class: &[u8]) -> Vec<u8> {
        let mut out = INDEX_PREFIX.as_bytes().to_vec();
        if let Some(tag) = &self.tag {
            out.push(b'{');
            render_parts(&mut out, tag, queue, job_class, b"");
            out.extend_from_slice(b"}:");
        }
        out.extend_from_slice(job_class);
        if self.uses(Field::Queue) {
            out.push(b':');
            out.extend_from_slice(queue);
        }
        out
    }

    /// Whether the enqueue script's two keys share a Redis Cluster slot.
    pub fn cluster_safe(&self) -> bool {
        self.tag.is_some()
    }

    pub fn uses(&self, field: Field) -> bool {
        self.parts.contains(&Part::Field(field))
    }

    pub fn render(&self, queue: &[u8], job_class: &[u8], tenant: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + tenant.len());
        render_parts(&mut out, &self.parts, queue, job_class, tenant);
        out
    }
}

fn render_parts(out: &mut Vec<u8>, parts: &[Part], queue: &[u8], job_class: &[u8], tenant: &[u8]) {
    for p in parts {
        match p {
            Part::Lit(b) => out.extend_from_slice(b),
            Part::Field(Field::Queue) => out.extend_from_slice(queue),
            Part::Field(Field::JobClass) => out.extend_from_slice(job_class),
            Part::Field(Field::FairTenant) => out.extend_from_slice(tenant),
        }
    }
}

/// The parts between the format's first literal `{` and the next literal `}` (Redis's hash tag
/// rule, assuming class names and queues hold no braces); `None` without a non-empty tag or when
/// the tag contains the tenant.
fn hash_tag(parts: &[Part]) -> Option<Vec<Part>> {
    let mut tag: Option<Vec<Part>> = None;
    for p in parts {
        match (p, tag.as_mut()) {
            (Part::Lit(b), None) => {
                if let Some(open) = b.iter().position(|&c| c == b'{') {
                    let rest = &b[open + 1..];
                    if let Some(close) = rest.iter().position(|&c| c == b'}') {
                        return (close > 0).then(|| vec![Part::Lit(rest[..close].to_vec())]);
                    }
                    tag = Some(if rest.is_empty() {
                        vec![]
                    } else {
                        vec![Part::Lit(rest.to_vec())]
                    });
                }
            }
            (Part::Field(_), None) => {}
            (Part::Lit(b), Some(t)) => {
                if let Some(close) = b.iter().position(|&c| c == b'}') {
                    if close > 0 {
                        t.push(Part::Lit(b[..close].to_vec()));
                    }
                    break;
                }
                t.push(Part::Lit(b.clone()));
            }
            (Part::Field(Field::FairTenant), Some(_)) => return None,
            (Part::Field(f), Some(t)) => t.push(Part::Field(*f)),
        }
    }
    tag.filter(|t| !t.is_empty() && parts_closed(parts))
}

/// Whether some literal after the first `{` closes it.
fn parts_closed(parts: &[Part]) -> bool {
    let mut open = false;
    for p in parts {
        if let Part::Lit(b) = p {
            for &c in b {
                if !open && c == b'{' {
                    open = true;
                } else if open && c == b'}' {
                    return true;
                }
            }
        }
    }
    false
}

fn unterminated(format: &str) -> KeyFormatError {
    KeyFormatError(format!("enqueues_key {format:?}: unterminated reference"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_default_format_like_ruby_format() {
        let f = KeyFormat::parse(DEFAULT_ENQUEUES_KEY).unwrap();
        assert_eq!(
            f.render(b"default", b"BillingJob", b"acme"),
            b"sidekiq-fair_tenant:enqueued:BillingJob:tenant:acme".to_vec()
        );
        assert!(!f.uses(Field::Queue));
    }

    #[test]
    fn a_bad_format_is_a_configuration_error() {
        let e = crate::error::Error::from(KeyFormat::parse("%<nope>s").unwrap_err());
        assert!(matches!(e, crate::error::Error::Configuration(m) if m.contains("nope")));
    }

    #[test]
    fn supports_brace_references_percent_escapes_and_hash_tags() {
        let f = KeyFormat::parse("ft:%{queue}:100%%:{%<fair_tenant>s}:%<job_class>s").unwrap();
        assert_eq!(f.render(b"q", b"J", b"t"), b"ft:q:100%:{t}:J".to_vec());
        assert!(f.uses(Field::Queue));
    }

    #[test]
    fn hostile_tenants_stay_distinct_and_verbatim() {
        let f = KeyFormat::parse(DEFAULT_ENQUEUES_KEY).unwrap();
        let tenants: Vec<Vec<u8>> = vec![
            b"{".to_vec(),
            b"*".to_vec(),
            b"a b".to_vec(),
            b"line\nbreak".to_vec(),
            vec![0xff, 0xfe, 0x00],
            vec![b'x'; 10_240],
        ];
        let keys: Vec<Vec<u8>> = tenants.iter().map(|t| f.render(b"", b"J", t)).collect();
        for (t, k) in tenants.iter().zip(&keys) {
            assert!(k.ends_with(t));
        }
        let mut dedup = keys.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), keys.len());
    }

    #[test]
    fn index_key_is_per_class_and_shares_a_tenant_independent_hash_tag() {
        let default = KeyFormat::parse(DEFAULT_ENQUEUES_KEY).unwrap();
        assert_eq!(
            default.index_key(b"default", b"BillingJob"),
            b"sidekiq-fair_tenant:tenants:BillingJob".to_vec()
        );
        assert!(!default.cluster_safe());

        let cluster = KeyFormat::parse("ft:{%<job_class>s}:%<fair_tenant>s").unwrap();
        assert!(cluster.cluster_safe());
        assert_eq!(
            cluster.index_key(b"q", b"BillingJob"),
            b"sidekiq-fair_tenant:tenants:{BillingJob}:BillingJob".to_vec()
        );
        let literal = KeyFormat::parse("{ft}:%<queue>s:%<job_class>s:%<fair_tenant>s").unwrap();
        assert_eq!(
            literal.index_key(b"q", b"J"),
            b"sidekiq-fair_tenant:tenants:{ft}:J:q".to_vec()
        );
        let mixed = KeyFormat::parse("ft:{x-%<job_class>s-y}:%<fair_tenant>s").unwrap();
        assert_eq!(
            mixed.index_key(b"q", b"J"),
            b"sidekiq-fair_tenant:tenants:{x-J-y}:J".to_vec()
        );

        for per_tenant in [
            "ft:{%<fair_tenant>s}:%<job_class>s",
            "ft:{}:%<fair_tenant>s",
            "ft:{%<job_class>s:%<fair_tenant>s",
        ] {
            assert!(
                !KeyFormat::parse(per_tenant).unwrap().cluster_safe(),
                "{per_tenant}"
            );
        }
    }

    #[test]
    fn rejects_unknown_references_and_formats_without_tenant() {
        for bad in [
            "x:%<tenant>s",
            "x:%<fair_tenant>d",
            "x:%s",
            "x:%<fair_tenant",
            "x:%<job_class>s",
        ] {
            assert!(KeyFormat::parse(bad).is_err(), "{bad} should be rejected");
        }
    }
}
