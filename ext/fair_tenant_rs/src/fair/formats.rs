//! The formats a script builds from the shared names (keys of a fair queue and of a concurrency scope, an
//! in-flight entry, a weight's field, a member's tenant) are Rust's: run on a real redis-server.

use crate::names;

#[test]
fn scripts_build_keys_and_entries_as_rust_does() {
    let server = super::lockstep::Server::start();
    let mut con = server.connect();
    let probe = names::script(&[
        include_str!("../lua/slots/common.lua"),
        include_str!("../lua/fair/common.lua"),
        include_str!("../lua/fair/serve.lua"),
        r"
        local queue, tenant, job, tag, sub = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
        local k = fair_keys(fair_base(queue), K_FAIR_WEIGHTS_KEY)
        local s = scope_keys(tag, sub)
        local entry = inflight_entry(queue, tenant, job)
        local q, t, j = parse_entry(ARGV[6])
        redis.call('HSET', k.weights, ARGV[7], 3)
        local member = string.format('%0' .. K_ACTIVATION_DIGITS .. 'x', 42) .. tenant
        return { k.ready, k.state, k.fin, k.paused, k.sig, k.heads, k.capped, k.over, k.prefix .. tenant,
                 k.weights, s.holders, s.waiting, s.meta, s.limits, entry, q, t, j,
                 tostring(weight(k.weights, tenant, queue)), member_tenant(member),
                 fair_base(queue), string.sub(member, 1, K_ACTIVATION_DIGITS) }
        ",
    ]);
    for (queue, tenant) in [
        ("imports", "acme"),
        ("q%Q%1:{x}", "a:b\n7:{x}"),
        ("é", "%%"),
    ] {
        let job = r#"{"jid":"j:1","args":["x"]}"#;
        let scope = crate::slots::Scope::tenant_queue(tenant.as_bytes(), queue.as_bytes());
        let entry = crate::fair::Entry {
            queue: queue.into(),
            tenant: tenant.into(),
            job: job.into(),
        };
        let got: Vec<Vec<u8>> = redis::cmd("EVAL")
            .arg(&probe)
            .arg(0)
            .arg(queue)
            .arg(tenant)
            .arg(job)
            .arg(scope.tag())
            .arg(scope.sub())
            .arg(entry.encode())
            .arg(crate::fair::weight_field(tenant, Some(queue)))
            .query(&mut con)
            .unwrap();
        let got: Vec<String> = got
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect();
        let base = crate::fair::base(queue);
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        let want = vec![
            format!("{base}{}", names::READY),
            format!("{base}{}", names::STATE),
            format!("{base}{}", names::FIN),
            format!("{base}{}", names::PAUSED),
            format!("{base}{}", names::SIG),
            format!("{base}{}", names::HEADS),
            format!("{base}{}", names::CAPPED),
            format!("{base}{}", names::OVER),
            format!("{base}{}{tenant}", names::TENANT_LIST),
            crate::fair::weights_key(),
            text(scope.holders()),
            text(scope.waiting()),
            text(crate::slots::meta(scope.tag())),
            text(crate::slots::limits_key(scope.tag())),
            entry.encode(),
            queue.into(),
            tenant.into(),
            job.into(),
            "3".into(),
            tenant.into(),
            base.clone(),
            format!("{:016x}", 42),
        ];
        assert_eq!(got, want, "{queue:?} {tenant:?}");
    }
}

/// The fetch reply's extras (fetch.lua's `served_extras`) and an acknowledgement's timing (serve.lua's
/// `charge_back`, through `parse_timing`) as Rust reads and writes them.
#[test]
fn scripts_read_and_write_timings_and_extras_as_rust_does() {
    let server = super::lockstep::Server::start();
    let mut con = server.connect();
    let probe = names::script(&[
        include_str!("../lua/slots/common.lua"),
        include_str!("../lua/fair/common.lua"),
        r"
        local charged, ran, queue, member = parse_timing(ARGV[1])
        return { served_extras(ARGV[2], ARGV[3], ARGV[4]), charged or false, ran or false, queue or false,
                 member or false, parse_timing('12 ran') or false }
        ",
    ]);
    let member = format!("{:016x}a:b\n7:{{x}}", 42).into_bytes();
    for (queue, held, charged) in [
        ("imports", "", "1000"),
        ("q%Q%1:{x}", "j:1", "0"),
        ("é", "jid", "0.5"),
    ] {
        let timing = crate::fair::timing(charged.as_bytes(), 7, queue.as_bytes(), &member);
        let got: Vec<redis::Value> = redis::cmd("EVAL")
            .arg(&probe)
            .arg(0)
            .arg(&timing)
            .arg(held)
            .arg(charged)
            .arg(&member)
            .query(&mut con)
            .unwrap();
        let bytes = |v: &redis::Value| match v {
            redis::Value::BulkString(b) => Some(b.clone()),
            _ => None,
        };
        let extras = bytes(&got[0]).unwrap();
        assert_eq!(
            crate::fair::served_extras(&extras),
            Some((held.as_bytes(), charged.as_bytes(), &member[..])),
            "{queue:?}"
        );
        let read: Vec<Option<Vec<u8>>> = got[1..].iter().map(bytes).collect();
        assert_eq!(
            read,
            vec![
                Some(charged.as_bytes().to_vec()),
                Some(b"7".to_vec()),
                Some(queue.as_bytes().to_vec()),
                Some(member.clone()),
                None,
            ],
            "{queue:?}"
        );
    }
}
