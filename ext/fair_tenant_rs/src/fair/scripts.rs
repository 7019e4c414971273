//! The fair-queue scripts: each one's source (the shared names' prelude, the common rule and its own
//! part) and SHA1, by name.

use std::sync::LazyLock;

use redis::Script;

macro_rules! fair_script {
    ($name:literal) => {
        LazyLock::new(|| {
            let mut parts = COMMON.to_vec();
            parts.push(CALL_BEGINS);
            parts.push(body($name));
            FairScript::new(crate::names::script(&parts))
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

static PUSH: LazyLock<FairScript> = fair_script!("push");
static FETCH: LazyLock<FairScript> = fair_script!("fetch");
static ADOPT: LazyLock<FairScript> = fair_script!("adopt");
static ACK: LazyLock<FairScript> = fair_script!("ack");
static CLEAR: LazyLock<FairScript> = fair_script!("clear");
static WEIGHT: LazyLock<FairScript> = fair_script!("weight");
static DRAIN: LazyLock<FairScript> = fair_script!("drain");
static STATS: LazyLock<FairScript> = fair_script!("stats");
static JOBS: LazyLock<FairScript> = fair_script!("jobs");
static DELETE: LazyLock<FairScript> = fair_script!("delete");
static LATENCY: LazyLock<FairScript> = fair_script!("latency");
static HELD: LazyLock<FairScript> = fair_script!("held");
static LIVENESS: LazyLock<FairScript> = fair_script!("liveness");
static FIND: LazyLock<FairScript> = fair_script!("find");
static WHY: LazyLock<FairScript> = fair_script!("why");
static SET_RATE: LazyLock<FairScript> = fair_script!("set_rate");

/// The scripts' names, in the library's order.
pub const NAMES: [&str; 16] = [
    "push", "fetch", "adopt", "ack", "clear", "weight", "drain", "stats", "jobs", "delete",
    "latency", "held", "liveness", "find", "why", "set_rate",
];

/// What every script runs first: the state a call keeps for itself (fair/common.lua's `begin_call`) starts
/// empty, whatever a call before it on this server left (a function library's locals outlive a call).
const CALL_BEGINS: &str = "begin_call()\n";

const COMMON: [&str; 4] = [
    include_str!("../lua/slots/common.lua"),
    include_str!("../lua/fair/common.lua"),
    include_str!("../lua/fair/time.lua"),
    include_str!("../lua/fair/serve.lua"),
];

fn body(name: &str) -> &'static str {
    match name {
        "push" => include_str!("../lua/fair/push.lua"),
        "fetch" => include_str!("../lua/fair/fetch.lua"),
        "adopt" => include_str!("../lua/fair/adopt.lua"),
        "ack" => include_str!("../lua/fair/ack.lua"),
        "clear" => include_str!("../lua/fair/clear.lua"),
        "weight" => include_str!("../lua/fair/weight.lua"),
        "drain" => include_str!("../lua/fair/drain.lua"),
        "stats" => include_str!("../lua/fair/stats.lua"),
        "jobs" => include_str!("../lua/fair/jobs.lua"),
        "delete" => include_str!("../lua/fair/delete.lua"),
        "latency" => include_str!("../lua/fair/latency.lua"),
        "held" => include_str!("../lua/fair/held.lua"),
        "liveness" => include_str!("../lua/fair/liveness.lua"),
        "find" => include_str!("../lua/fair/find.lua"),
        "why" => include_str!("../lua/fair/why.lua"),
        "set_rate" => include_str!("../lua/fair/set_rate.lua"),
        _ => unreachable!("no fair-queue script named {name}"),
    }
}

/// The fair-queue scripts as one Redis 7 function library (`FUNCTION LOAD`, `FCALL`): the names' prelude
/// and the common parts run once, when the library is loaded; each script is a function whose body is its
/// file. Library and functions are named after the library's content (`fair_tenant_<8 hex>`), so two
/// versions of the gem on one Redis never replace each other's.
pub struct FairLibrary {
    pub name: String,
    pub source: String,
}

impl FairLibrary {
    fn build() -> FairLibrary {
        const PLACEHOLDER: &str = "@LIBRARY@";
        let mut parts: Vec<String> = COMMON.iter().map(|p| p.to_string()).collect();
        for name in NAMES {
            parts.push(format!(
                "redis.register_function{{function_name = '{PLACEHOLDER}_{name}', callback = function(KEYS, ARGV)\n{CALL_BEGINS}{}\nend}}\n",
                body(name)
            ));
        }
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        let code = crate::names::script(&refs);
        let hash = Script::new(&code).get_hash().to_string();
        let name = format!("fair_tenant_{}", &hash[..8]);
        let source = format!("#!lua name={name}\n{}", code.replace(PLACEHOLDER, &name));
        FairLibrary { name, source }
    }

    /// The function that runs script `name` (one of [`NAMES`]).
    pub fn function(&self, name: &str) -> String {
        format!("{}_{name}", self.name)
    }
}

static LIBRARY: LazyLock<FairLibrary> = LazyLock::new(FairLibrary::build);

/// The library of every fair-queue script (Redis >= 7; [`script`] is each one for `EVALSHA` on Redis 6.2).
pub fn library() -> &'static FairLibrary {
    &LIBRARY
}

/// A call of one of the library's functions (`FCALL`), loading the library when the server lacks it, as
/// Ruby's ScriptRunner does: what the tests run, so they run what production runs.
#[cfg(test)]
pub struct Function(String);

#[cfg(test)]
impl Function {
    pub fn new(name: &str) -> Function {
        assert!(script(name).is_some(), "no fair-queue script named {name}");
        Function(library().function(name))
    }

    pub fn prepare_invoke(&self) -> Invocation {
        Invocation {
            function: self.0.clone(),
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    pub fn key<T: redis::ToRedisArgs>(&self, key: T) -> Invocation {
        let mut inv = self.prepare_invoke();
        inv.key(key);
        inv
    }

    pub fn arg<T: redis::ToRedisArgs>(&self, arg: T) -> Invocation {
        let mut inv = self.prepare_invoke();
        inv.arg(arg);
        inv
    }
}

#[cfg(test)]
pub struct Invocation {
    function: String,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

#[cfg(test)]
impl Invocation {
    pub fn key<T: redis::ToRedisArgs>(&mut self, key: T) -> &mut Invocation {
        self.keys.extend(key.to_redis_args());
        self
    }

    pub fn arg<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Invocation {
        self.args.extend(arg.to_redis_args());
        self
    }

    pub fn invoke<T: redis::FromRedisValue>(
        &self,
        con: &mut dyn redis::ConnectionLike,
    ) -> redis::RedisResult<T> {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&self.function)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        match cmd.query(con) {
            Err(e) if e.to_string().contains("Function not found") => {
                let _: String = redis::cmd("FUNCTION")
                    .arg("LOAD")
                    .arg("REPLACE")
                    .arg(&library().source)
                    .query(con)?;
                cmd.query(con)
            }
            other => other,
        }
    }
}

/// The scripts by name: `push`, `fetch`, `adopt`, `ack`, `clear`, `weight`, `drain`, `stats`, and for
/// Sidekiq's API and Web UI `jobs`, `delete`, `latency`, `held`; `liveness` for recovery's sweep; `find`
/// and `why` for `FairTenant.why`.
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
        "find" => Some(&FIND),
        "why" => Some(&WHY),
        "set_rate" => Some(&SET_RATE),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair::{base, PREFIX};
    use crate::names;

    /// The gem's script runner keeps the fair-queue and the slot scripts in one table, by name.
    #[test]
    fn no_slot_script_has_a_fair_scripts_name() {
        for name in crate::slots::SCRIPT_NAMES {
            assert!(!NAMES.contains(&name), "{name}");
        }
    }

    #[test]
    fn scripts_carry_the_common_rule_and_their_sha() {
        for name in NAMES {
            let s = script(name).unwrap();
            assert!(s.source.contains("local function activate"), "{name}");
            assert_eq!(s.sha.len(), 40);
        }
        assert!(script("nope").is_none());
    }

    #[test]
    fn the_library_registers_every_script_once_under_its_content_hash() {
        let lib = library();
        assert!(lib.name.starts_with("fair_tenant_") && lib.name.len() == "fair_tenant_".len() + 8);
        assert!(lib
            .source
            .starts_with(&format!("#!lua name={}\n", lib.name)));
        for name in NAMES {
            let registered = format!("function_name = '{}',", lib.function(name));
            assert_eq!(lib.source.matches(&registered).count(), 1, "{name}");
        }
        assert_eq!(lib.source.matches("local function activate").count(), 1);
    }

    #[test]
    fn every_script_begins_its_call_with_the_call_state_emptied() {
        for name in NAMES {
            let s = &script(name).unwrap().source;
            assert!(
                s.contains(&format!("{CALL_BEGINS}{}", body(name))),
                "{name}"
            );
        }
        let callback = format!("callback = function(KEYS, ARGV)\n{CALL_BEGINS}");
        assert_eq!(library().source.matches(&callback).count(), NAMES.len());
        assert!(script("fetch")
            .unwrap()
            .source
            .contains("local function begin_call()"));
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
