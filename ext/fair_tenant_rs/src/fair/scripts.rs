//! The fair-queue scripts: each one's source (the shared names' prelude, the common rule and its own
//! part) and SHA1, by name.

use std::sync::LazyLock;

use redis::Script;

macro_rules! fair_script {
    ($file:literal) => {
        LazyLock::new(|| {
            FairScript::new(crate::names::script(&[
                include_str!("../lua/slots/common.lua"),
                include_str!("../lua/fair/common.lua"),
                include_str!("../lua/fair/serve.lua"),
                include_str!($file),
            ]))
        })
    };
}

/// A script's source (the shared names' prelude and the common part included) and its SHA1, for callers
/// that run it on Sidekiq's own connections (EVALSHA, then EVAL on NOSCRIPT).
pub struct FairScript {
    pub source: String,
    pub sha: String,
}

impl FairScript {
    fn new(source: String) -> FairScript {
        let sha = Script::new(&source).get_hash().to_string();
        FairScript { source, sha }
    }
}

static PUSH: LazyLock<FairScript> = fair_script!("../lua/fair/push.lua");
static FETCH: LazyLock<FairScript> = fair_script!("../lua/fair/fetch.lua");
static ADOPT: LazyLock<FairScript> = fair_script!("../lua/fair/adopt.lua");
static ACK: LazyLock<FairScript> = fair_script!("../lua/fair/ack.lua");
static CLEAR: LazyLock<FairScript> = fair_script!("../lua/fair/clear.lua");
static WEIGHT: LazyLock<FairScript> = fair_script!("../lua/fair/weight.lua");
static DRAIN: LazyLock<FairScript> = fair_script!("../lua/fair/drain.lua");
static STATS: LazyLock<FairScript> = fair_script!("../lua/fair/stats.lua");
static JOBS: LazyLock<FairScript> = fair_script!("../lua/fair/jobs.lua");
static DELETE: LazyLock<FairScript> = fair_script!("../lua/fair/delete.lua");
static LATENCY: LazyLock<FairScript> = fair_script!("../lua/fair/latency.lua");
static HELD: LazyLock<FairScript> = fair_script!("../lua/fair/held.lua");
static LIVENESS: LazyLock<FairScript> = fair_script!("../lua/fair/liveness.lua");

/// The scripts by name: `push`, `fetch`, `adopt`, `ack`, `clear`, `weight`, `drain`, `stats`, and for
/// Sidekiq's API and Web UI `jobs`, `delete`, `latency`, `held`; `liveness` for recovery's sweep.
pub fn script(name: &str) -> Option<&'static FairScript> {
    match name {
        "push" => Some(&PUSH),
        "fetch" => Some(&FETCH),
        "adopt" => Some(&ADOPT),
        "ack" => Some(&ACK),
        "clear" => Some(&CLEAR),
        "weight" => Some(&WEIGHT),
        "drain" => Some(&DRAIN),
        "stats" => Some(&STATS),
        "jobs" => Some(&JOBS),
        "delete" => Some(&DELETE),
        "latency" => Some(&LATENCY),
        "held" => Some(&HELD),
        "liveness" => Some(&LIVENESS),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair::{base, PREFIX};
    use crate::names;

    #[test]
    fn scripts_carry_the_common_rule_and_their_sha() {
        for name in [
            "push", "fetch", "adopt", "ack", "clear", "weight", "drain", "stats", "jobs", "delete",
            "latency", "held", "liveness",
        ] {
            let s = script(name).unwrap();
            assert!(s.source.contains("local function activate"), "{name}");
            assert_eq!(s.sha.len(), 40);
        }
        assert!(script("nope").is_none());
    }

    #[test]
    fn scripts_read_the_shared_names_from_their_prelude() {
        let push = &script("push").unwrap().source;
        let prelude = push.lines().next().unwrap();
        assert!(prelude.starts_with("local K_"), "{prelude}");
        assert!(prelude.contains(&format!("'{}'", names::FAIR_BASE)));
        assert!(prelude.contains("K_TOKEN_CAP"));
        assert_eq!(base("imports"), format!("{PREFIX}{{imports}}:"));
        let scope = crate::slots::Scope::tenant_queue(b"acme", b"imports");
        assert!(String::from_utf8(scope.waiting())
            .unwrap()
            .ends_with(":q:imports:waiting"));
    }
}
