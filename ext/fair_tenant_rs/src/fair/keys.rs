//! Fair-queue key names, the in-flight entry format and weights: built from [`crate::names`].

use crate::names;

/// Prefix of every fair-queue key.
pub const PREFIX: &str = names::FAIR_PREFIX;
/// The tenant of jobs that name none.
pub const SHARED_TENANT: &str = "";

/// The key prefix of a fair queue's keys; `{queue}` is its Redis Cluster hash tag.
pub fn base(queue: &str) -> String {
    names::FAIR_BASE.replacen(names::QUEUE_PLACEHOLDER, queue, 1)
}

/// The weights hash: `tenant` and `tenant \n queue` fields.
pub fn weights_key() -> String {
    names::FAIR_WEIGHTS_KEY.to_string()
}

/// A weight field: the tenant's, or the tenant's in one queue.
pub fn weight_field(tenant: &str, queue: Option<&str>) -> String {
    match queue {
        Some(q) => format!("{tenant}{}{q}", names::WEIGHT_SEPARATOR),
        None => tenant.to_string(),
    }
}

/// A tenant that can be given a weight of its own: its (stored) name holds no [`names::WEIGHT_SEPARATOR`],
/// so a field reads back as one tenant and at most one queue (queue names hold no control characters).
pub fn check_weight_tenant(tenant: &str) -> Result<(), String> {
    if tenant.contains(names::WEIGHT_SEPARATOR) {
        return Err(format!(
            "weights: a tenant name that holds a newline can't be given a weight (the newline separates tenant \
             and queue in the weights hash; its jobs run at weight 1), got {tenant:?}"
        ));
    }
    Ok(())
}

/// The in-flight hash of one Sidekiq process (its identity): field [`inflight_field`], value the job.
pub fn inflight_key(identity: &str) -> String {
    format!("{}{identity}", names::INFLIGHT_PREFIX)
}

/// The set of process identities that have an in-flight list (for orphan recovery).
pub fn registry_key() -> String {
    names::INFLIGHT_OWNERS_KEY.to_string()
}

/// Registered processes whose Sidekiq heartbeat a recovery sweep found gone: identity -> when first seen
/// gone (Redis time, seconds). Cleared when the heartbeat is back or the process's jobs were recovered.
pub fn recovery_suspects_key() -> String {
    names::INFLIGHT_SUSPECTS_KEY.to_string()
}

/// Processes whose recovery started and has not finished: the first recovery call moves a process here from
/// the registry, the call that empties its in-flight list removes it. Every sweep finishes what is here, so a
/// recovery cut short (its sweeper killed, a call refused or timed out) strands nothing; a process that comes
/// back (it had stalled) leaves it when it registers again, and keeps the rest of its list.
pub fn recovering_key() -> String {
    names::INFLIGHT_RECOVERING_KEY.to_string()
}

/// Seconds a process's heartbeat key must stay gone, after a sweep first found it gone, before its
/// in-flight jobs are recovered: longer than one Sidekiq heartbeat interval (5 s in 6.x/7.x, 10 s in
/// 8.x), so a live process whose key was deleted or evicted has beaten again by then.
pub const RECOVERY_LAPSE_SECONDS: u64 = 11;

/// The copies a recovery made of one process's in-flight jobs: original entry -> the copy's entry (its
/// queue, tenant and payload as put back). A process that comes back (it had stalled) takes the copies
/// still waiting back into its in-flight list, as they were, before it fetches anything, so it neither
/// fetches them again nor leaves them to run after it finished them.
pub fn recovered_key(identity: &str) -> String {
    format!("{}{identity}", names::RECOVERED_PREFIX)
}

/// How long a recovery's copies are remembered for their process to come back: a process stalled
/// longer than this runs them again (at least once).
pub const RECOVERED_KEEP_SECONDS: u64 = 3600;

/// Held (SET NX, with a TTL) by the process recovering orphaned in-flight jobs.
pub fn recovery_lock_key() -> String {
    names::RECOVERY_LOCK_KEY.to_string()
}

/// The fleet's turn to sweep: taken (SET NX PX [`crate::fair::RECOVERY_LEASE_MS`]) by the first process
/// due, left to expire, so one sweep runs per interval whatever the number of processes.
pub fn recovery_lease_key() -> String {
    names::RECOVERY_LEASE_KEY.to_string()
}

/// An in-flight job and where it goes back to: `<len>:<queue><len>:<tenant><job>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub queue: String,
    pub tenant: String,
    pub job: String,
}

impl Entry {
    pub fn encode(&self) -> String {
        format!(
            "{}:{}{}:{}{}",
            self.queue.len(),
            self.queue,
            self.tenant.len(),
            self.tenant,
            self.job
        )
    }

    pub fn decode(entry: &str) -> Option<Entry> {
        let (queue, tenant, job) = split_entry(entry.as_bytes())?;
        Some(Entry {
            queue: String::from_utf8(queue.to_vec()).ok()?,
            tenant: String::from_utf8(tenant.to_vec()).ok()?,
            job: String::from_utf8(job.to_vec()).ok()?,
        })
    }
}

/// An in-flight entry's queue, tenant and job as bytes: a job is moved as it was pushed, whatever its
/// bytes (not UTF-8, or read back under another default encoding); lengths count bytes, as Lua's `#`.
pub fn split_entry(entry: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (queue, rest) = take_counted(entry)?;
    let (tenant, job) = take_counted(rest)?;
    Some((queue, tenant, job))
}

fn take_counted(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = s.iter().take(21).position(|&b| b == b':')?;
    let digits = &s[..colon];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let len: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let rest = &s[colon + 1..];
    if rest.len() < len {
        return None;
    }
    Some(rest.split_at(len))
}

/// What an acknowledgement tells the scripts of a job's run on a queue fair by worker time (serve.lua's
/// `parse_timing`): "<charged ms> <ran ms> <len>:<queue><member>", `member` the one its tenant had when served
/// (the fetch reply's, [`served_extras`]), `charged` as that reply gave it.
pub fn timing(charged: &[u8], ran_ms: i64, queue: &[u8], member: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(charged.len() + queue.len() + member.len() + 32);
    out.extend_from_slice(charged);
    out.extend_from_slice(format!(" {ran_ms} {}:", queue.len()).as_bytes());
    out.extend_from_slice(queue);
    out.extend_from_slice(member);
    out
}

/// A fair job's extras in the fetch reply (fetch.lua's `served_extras`): "F<len>:<held jid><len>:<charge,
/// ms><member>" read back to (held jid, charge, member), each possibly empty; None for extras in no such form
/// ("" when the job took no slot and its queue is not fair by worker time).
pub fn served_extras(extras: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let (held, rest) = take_counted(extras.strip_prefix(b"F")?)?;
    let (charged, member) = take_counted(rest)?;
    Some((held, charged, member))
}

/// Largest weight accepted.
pub const MAX_WEIGHT: f64 = 1_000_000.0;

/// A weight to store: a number from 0 (pauses the tenant) to [`MAX_WEIGHT`].
pub fn check_weight(weight: f64) -> Result<f64, String> {
    if weight.is_finite() && (0.0..=MAX_WEIGHT).contains(&weight) {
        Ok(weight)
    } else {
        Err(format!(
            "weight must be a number from 0 to {MAX_WEIGHT} (0 pauses the tenant), got {weight}"
        ))
    }
}

/// An in-flight job's field: its queue and tenant (where it goes back to), then its id (unique in the hash,
/// growing with each fetch: a recovery gives a tenant its jobs back in the order it was served them), then
/// [`names::INFLIGHT_SLOT_MARK`] when it took a concurrency slot. An [`Entry`] whose job part is the id.
pub fn inflight_field(queue: &str, tenant: &str, id: u64, slotted: bool) -> String {
    let mark = if slotted {
        names::INFLIGHT_SLOT_MARK
    } else {
        ""
    };
    Entry {
        queue: queue.into(),
        tenant: tenant.into(),
        job: format!("{id}{mark}"),
    }
    .encode()
}

/// An in-flight field's id and whether its job took a slot; None for bytes that are no field (a format-2 list
/// entry turned into a field keeps its queue and tenant but may hold anything after them).
pub fn field_id(field: &[u8]) -> Option<(u64, bool)> {
    let (_, _, rest) = split_entry(field)?;
    let mark = names::INFLIGHT_SLOT_MARK.as_bytes();
    let (digits, slotted) = match rest.strip_suffix(mark) {
        Some(d) => (d, true),
        None => (rest, false),
    };
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let id = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((id, slotted))
}

/// A weight field back to (tenant, queue).
pub fn parse_weight_field(field: &str) -> (String, Option<String>) {
    match field.split_once(names::WEIGHT_SEPARATOR) {
        Some((tenant, queue)) => (tenant.to_string(), Some(queue.to_string())),
        None => (field.to_string(), None),
    }
}

/// A weight as the scripts read it: a number ≥ 0, 1 when unset or unreadable.
pub fn parse_weight(raw: Option<&str>) -> f64 {
    raw.and_then(|w| w.trim().parse::<f64>().ok())
        .filter(|w| w.is_finite())
        .map(|w| w.max(0.0))
        .unwrap_or(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_with_any_characters() {
        let e = Entry {
            queue: "imports".into(),
            tenant: "a:b\n7:{x}".into(),
            job: r#"{"jid":"1","args":["12:ab"]}"#.into(),
        };
        assert_eq!(Entry::decode(&e.encode()), Some(e.clone()));
        let shared = Entry {
            tenant: SHARED_TENANT.into(),
            ..e
        };
        assert_eq!(Entry::decode(&shared.encode()), Some(shared));
        assert_eq!(Entry::decode("x:y"), None);
        assert_eq!(Entry::decode("99:short"), None);
        assert_eq!(Entry::decode(":x0:"), None);
        assert_eq!(Entry::decode("-1:x0:"), None);
    }

    #[test]
    fn entries_split_as_bytes_whatever_the_job_holds() {
        let job: &[u8] = b"{\"args\":[\"caf\xe9 \xff\"]}";
        let mut entry = b"4:fair4:acme".to_vec();
        entry.extend_from_slice(job);
        assert_eq!(split_entry(&entry), Some((&b"fair"[..], &b"acme"[..], job)));
        let shop = "5:caf\u{e9}10:boutique\u{e9}{}".as_bytes();
        assert_eq!(
            split_entry(shop),
            Some((
                "caf\u{e9}".as_bytes(),
                "boutique\u{e9}".as_bytes(),
                &b"{}"[..]
            ))
        );
        assert_eq!(split_entry(b"not json"), None);
        assert_eq!(split_entry(b"4:fair9:acme{}"), None);
    }

    #[test]
    fn inflight_fields_name_queue_tenant_id_and_slot() {
        let f = inflight_field("imports", "a:b\n7:{x}", 42, false);
        assert_eq!(f, "7:imports9:a:b\n7:{x}42");
        assert_eq!(field_id(f.as_bytes()), Some((42, false)));
        let s = inflight_field("q", "", 7, true);
        assert_eq!(s, "1:q0:7s");
        assert_eq!(field_id(s.as_bytes()), Some((7, true)));
        let (queue, tenant, _) = split_entry(s.as_bytes()).unwrap();
        assert_eq!((queue, tenant), (&b"q"[..], &b""[..]));
        assert_eq!(field_id(b"1:q0:"), None);
        assert_eq!(field_id(b"1:q0:{\"jid\":1}"), None);
        assert_eq!(field_id(b"garbage"), None);
    }

    #[test]
    fn keys_share_the_queue_hash_tag() {
        assert_eq!(base("imports"), "sidekiq-fair_tenant:fair:{imports}:");
        assert_eq!(weight_field("acme", Some("imports")), "acme\nimports");
        assert!(inflight_key("host:1:abc").starts_with(PREFIX));
        assert_ne!(registry_key(), recovery_lock_key());
        assert_ne!(recovery_lease_key(), recovery_lock_key());
        assert_ne!(registry_key(), recovery_suspects_key());
        assert_ne!(registry_key(), recovering_key());
        assert!(recovering_key().starts_with(PREFIX));
        assert!(recovery_suspects_key().starts_with(PREFIX));
        assert_eq!(parse_weight(Some("3")), 3.0);
        assert_eq!(
            parse_weight_field(&weight_field("acme", Some("imports"))),
            ("acme".into(), Some("imports".into()))
        );
        assert_eq!(parse_weight_field("acme"), ("acme".into(), None));
        assert_eq!(check_weight_tenant("acme"), Ok(()));
        assert!(check_weight_tenant("a\nb")
            .unwrap_err()
            .contains("holds a newline"));
        assert_eq!(check_weight(0.0), Ok(0.0));
        assert_eq!(check_weight(2.5), Ok(2.5));
        for bad in [-1.0, f64::NAN, f64::INFINITY, 2e6] {
            assert!(check_weight(bad).unwrap_err().contains("0 pauses"), "{bad}");
        }
        assert_eq!(parse_weight(Some("-2")), 0.0);
        assert_eq!(parse_weight(Some("junk")), 1.0);
        assert_eq!(parse_weight(None), 1.0);
    }

    #[test]
    fn timings_and_served_extras_keep_any_bytes() {
        assert_eq!(
            timing(b"12.5", 40, "é:1".as_bytes(), b"0000000000000002a:b"),
            "12.5 40 4:\u{e9}:10000000000000002a:b".as_bytes()
        );
        assert_eq!(timing(b"", 0, b"", b""), b" 0 0:");
        assert_eq!(
            served_extras(b"F3:j:12:15a:b\xff"),
            Some((&b"j:1"[..], &b"15"[..], &b"a:b\xff"[..]))
        );
        assert_eq!(
            served_extras(b"F0:0:"),
            Some((&b""[..], &b""[..], &b""[..]))
        );
        for bad in [&b""[..], b"P", b"P3:j:10:", b"F", b"F9:j:1", b"Fx:"] {
            assert_eq!(served_extras(bad), None, "{bad:?}");
        }
    }
}
