//! The fair-queue scripts: [`SCRIPTS`] lists them, each with its own part (`lua/fair/<name>.lua`); each
//! one's source is the shared Lua it uses ([`crate::lua_pieces`]) and its own
//! part, with its SHA1. Everything that names the scripts (their loading, the library, the tests, Ruby's
//! `Native::Fair.script_names`) reads this one list.

use std::sync::LazyLock;

use redis::Script;

use crate::lua_pieces;

/// Every fair-queue script: its name and its own part, in the library's order.
pub const SCRIPTS: [(&str, &str); 16] = [
    ("push", include_str!("../lua/fair/push.lua")),
    ("fetch", include_str!("../lua/fair/fetch.lua")),
    ("adopt", include_str!("../lua/fair/adopt.lua")),
    ("ack", include_str!("../lua/fair/ack.lua")),
    ("clear", include_str!("../lua/fair/clear.lua")),
    ("weight", include_str!("../lua/fair/weight.lua")),
    ("drain", include_str!("../lua/fair/drain.lua")),
    ("stats", include_str!("../lua/fair/stats.lua")),
    ("jobs", include_str!("../lua/fair/jobs.lua")),
    ("delete", include_str!("../lua/fair/delete.lua")),
    ("latency", include_str!("../lua/fair/latency.lua")),
    ("held", include_str!("../lua/fair/held.lua")),
    ("liveness", include_str!("../lua/fair/liveness.lua")),
    ("find", include_str!("../lua/fair/find.lua")),
    ("why", include_str!("../lua/fair/why.lua")),
    ("set_rate", include_str!("../lua/fair/set_rate.lua")),
];

/// The scripts' names, in [`SCRIPTS`]' order.
pub fn script_names() -> impl Iterator<Item = &'static str> {
    SCRIPTS.iter().map(|(name, _)| *name)
}

/// A script's source (the shared Lua it uses included, the shared names' values in place) and its SHA1, for
/// callers that run it on Sidekiq's own connections (EVALSHA, then EVAL on NOSCRIPT).
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

static BUILT: LazyLock<Vec<FairScript>> = LazyLock::new(|| {
    SCRIPTS
        .iter()
        .map(|(_, own)| FairScript::new(crate::names::script(&[&with_shared(own)])))
        .collect()
});

/// What every script runs first: the state a call keeps for itself (fair/common.lua's `begin_call`) starts
/// empty, whatever a call before it on this server left (a function library's locals outlive a call).
const CALL_BEGINS: &str = "begin_call()\n";

/// The shared Lua a script may use, in the order it is defined.
const SHARED: [&str; 4] = [
    include_str!("../lua/slots/common.lua"),
    include_str!("../lua/fair/common.lua"),
    include_str!("../lua/fair/time.lua"),
    include_str!("../lua/fair/serve.lua"),
];

/// A script's own part, after the call's beginning and the shared definitions it uses.
fn with_shared(own: &str) -> String {
    let own = format!("{CALL_BEGINS}{own}");
    let mut parts = SHARED.to_vec();
    parts.push(&own);
    lua_pieces::only_used(&parts)
}

/// The fair-queue scripts as one Redis 7 function library (`FUNCTION LOAD`, `FCALL`): each script is a
/// function whose body is its own part. The shared definitions two or more scripts use come once, at the
/// library's top level; each function is registered in a `do ... end` block after the definitions only it
/// uses (the block keeps them out of the others' count of locals). All run once, when the library is
/// loaded ([`lua_pieces::shared_by_several`]). Library and functions are named after the library's content
/// (`fair_tenant_<8 hex>`), so two versions of the gem on one Redis never replace each other's.
pub struct FairLibrary {
    pub name: String,
    pub source: String,
}

impl FairLibrary {
    fn build() -> FairLibrary {
        const PLACEHOLDER: &str = "@LIBRARY@";
        let callbacks: Vec<String> = SCRIPTS
            .iter()
            .map(|(name, own)| format!(
                "redis.register_function{{function_name = '{PLACEHOLDER}_{name}', callback = function(KEYS, ARGV)\n{CALL_BEGINS}{own}\nend}}\n"
            ))
            .collect();
        let (mut code, each) = lua_pieces::shared_by_several(&SHARED, &callbacks);
        for own in each {
            code.push_str(&format!("do\n{own}end\n"));
        }
        let code = crate::names::script(&[&code]);
        let hash = Script::new(&code).get_hash().to_string();
        let name = format!("fair_tenant_{}", &hash[..8]);
        let source = format!("#!lua name={name}\n{}", code.replace(PLACEHOLDER, &name));
        FairLibrary { name, source }
    }

    /// The function that runs script `name` (one of [`SCRIPTS`]).
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

/// The scripts by name (see [`SCRIPTS`]): `push`, `fetch`, `adopt`, `ack`, `clear`, `weight`, `drain`,
/// `stats`, and for Sidekiq's API and Web UI `jobs`, `delete`, `latency`, `held`; `liveness` for recovery's
/// sweep; `find` and `why` for `FairTenant.why`.
pub fn script(name: &str) -> Option<&'static FairScript> {
    script_names().position(|n| n == name).map(|i| &BUILT[i])
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
            assert!(!script_names().any(|n| n == name), "{name}");
        }
    }

    fn own(name: &str) -> &'static str {
        SCRIPTS.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn scripts_carry_the_common_rule_and_their_sha() {
        for name in script_names() {
            let s = script(name).unwrap();
            assert!(s.source.contains("local function begin_call"), "{name}");
            assert_eq!(s.sha.len(), 40);
        }
        assert!(script("nope").is_none());
        assert!(script("push")
            .unwrap()
            .source
            .contains("local function activate"));
        assert!(!script("liveness")
            .unwrap()
            .source
            .contains("local function activate"));
    }

    #[test]
    fn the_library_registers_every_script_once_under_its_content_hash() {
        let lib = library();
        assert!(lib.name.starts_with("fair_tenant_") && lib.name.len() == "fair_tenant_".len() + 8);
        assert!(lib
            .source
            .starts_with(&format!("#!lua name={}\n", lib.name)));
        for name in script_names() {
            let registered = format!("function_name = '{}',", lib.function(name));
            assert_eq!(lib.source.matches(&registered).count(), 1, "{name}");
        }
        assert_eq!(
            lib.source.lines().filter(|l| *l == "do").count(),
            SCRIPTS.len()
        );
        // activate (push, weight, ack, ...) is defined once, at the library's top level.
        assert_eq!(lib.source.matches("local function activate(").count(), 1);
        let top = lib.source.split("\ndo\n").next().unwrap();
        assert!(top.contains("local function activate("));
    }

    /// What FUNCTION LOAD sends carries no comment line and no blank line (`--nocapture` prints its size).
    #[test]
    fn the_library_carries_no_comment_line() {
        let source = &library().source;
        println!("fair library: {} bytes", source.len());
        assert!(!source
            .lines()
            .skip(1)
            .any(|l| l.trim_start().starts_with("--")));
        assert!(!source.lines().any(|l| l.trim().is_empty()));
    }

    #[test]
    fn every_script_begins_its_call_with_the_call_state_emptied() {
        for name in script_names() {
            let s = &script(name).unwrap().source;
            assert!(
                s.contains(&names::script(&[&lua_pieces::without_comments(&format!(
                    "{CALL_BEGINS}{}",
                    own(name)
                ))])),
                "{name}"
            );
        }
        let callback = format!("callback = function(KEYS, ARGV)\n{CALL_BEGINS}");
        assert_eq!(library().source.matches(&callback).count(), SCRIPTS.len());
        assert!(script("fetch")
            .unwrap()
            .source
            .contains("local function begin_call()"));
    }

    #[test]
    fn scripts_carry_the_shared_names_values() {
        let push = &script("push").unwrap().source;
        assert!(
            !push.contains("K_FAIR_BASE"),
            "every K_<NAME> replaced by its value"
        );
        assert!(push.contains(&format!("('{}')", names::FAIR_BASE)));
        assert_eq!(base("imports"), format!("{PREFIX}{{imports}}:"));
        let scope = crate::slots::Scope::tenant_queue(b"acme", b"imports");
        assert!(String::from_utf8(scope.waiting())
            .unwrap()
            .ends_with(":q:imports:waiting"));
    }
}
