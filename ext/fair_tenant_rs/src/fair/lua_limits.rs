//! Lua's per-function limits, checked on every script exactly as it is sent to Redis: each fair-queue
//! script, the Redis 7 function library, and each slot script.
//!
//! Redis runs Lua 5.1, which refuses to compile a function with more than 200 active locals
//! (`LUAI_MAXVARS`), 60 upvalues (`LUAI_MAXUPVALUES`) or 250 registers (`MAXSTACK`). The scripts share
//! helper files, so one more helper or one more line in a shared part can push every script that carries
//! it over a limit, and the error only shows when Redis compiles it. This test keeps a stated margin: it
//! fails once any function of any script uses more than 75% of any of the three limits.
//!
//! How: a redis-server of the test's own compiles each source (`loadstring`, as Redis compiles a script's
//! body: a function of its own) and returns it as bytecode (`string.dump`); the Lua 5.1 bytecode is read
//! here, function by function: its upvalue count and register count are in its header, and its most
//! locals active at once are counted from its debug information (each local's first and last
//! instruction). The numbers are exact, not an estimate from the source text.

use crate::redis::test_server::Server;

/// Lua 5.1's limits (`luaconf.h`, `llimits.h`) and the share of each a script may use.
const MAX_LOCALS: usize = 200;
const MAX_UPVALUES: usize = 60;
const MAX_REGISTERS: usize = 250;
const ALLOWED_PERCENT: usize = 75;

/// One compiled function's use of the limits.
#[derive(Debug, Default, Clone, Copy)]
struct Use {
    line: u32,
    locals: usize,
    upvalues: usize,
    registers: usize,
}

/// Reads a Lua 5.1 bytecode dump (`ldump.c`), as the 64-bit little-endian build Redis runs writes it.
struct Dump<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Dump<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        out
    }

    fn byte(&mut self) -> u8 {
        self.take(1)[0]
    }

    fn int(&mut self) -> usize {
        u32::from_le_bytes(self.take(4).try_into().unwrap()) as usize
    }

    fn string(&mut self) {
        let len = u64::from_le_bytes(self.take(8).try_into().unwrap()) as usize;
        self.take(len);
    }

    fn header(&mut self) {
        let header = self.take(12);
        assert_eq!(&header[..5], b"\x1bLua\x51", "a Lua 5.1 dump");
        assert_eq!(
            &header[6..],
            &[1, 4, 8, 4, 8, 0],
            "little-endian, 8-byte size_t and numbers"
        );
    }

    /// One function and, after it, the functions defined inside it (`DumpFunction`).
    fn function(&mut self, out: &mut Vec<Use>) {
        self.string(); // source
        let line = self.int() as u32;
        self.int(); // last line
        let upvalues = self.byte() as usize;
        self.take(2); // parameters, vararg flag
        let registers = self.byte() as usize;
        let code = self.int();
        self.take(code * 4);
        for _ in 0..self.int() {
            match self.byte() {
                0 => {}
                1 => {
                    self.byte();
                }
                3 => {
                    self.take(8);
                }
                4 => self.string(),
                t => panic!("constant of unknown type {t}"),
            }
        }
        let mut inner = Vec::new();
        for _ in 0..self.int() {
            self.function(&mut inner);
        }
        let lines = self.int();
        self.take(lines * 4);
        let mut ranges = Vec::new();
        for _ in 0..self.int() {
            self.string();
            ranges.push((self.int(), self.int()));
        }
        for _ in 0..self.int() {
            self.string();
        }
        out.push(Use {
            line,
            locals: most_active(&ranges),
            upvalues,
            registers,
        });
        out.extend(inner);
    }
}

/// The most locals active at once: at each local's first instruction, the locals whose scope covers it.
fn most_active(ranges: &[(usize, usize)]) -> usize {
    ranges
        .iter()
        .map(|&(start, _)| {
            ranges
                .iter()
                .filter(|&&(s, e)| s <= start && (start < e || (s, e) == (start, start)))
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Every function of `source` once compiled by Redis's Lua, the chunk itself first.
fn functions(con: &mut redis::Connection, source: &str) -> Vec<Use> {
    let dump: Vec<u8> = redis::cmd("EVAL")
        .arg(
            "local f, err = loadstring(ARGV[1]) \
             if not f then return redis.error_reply(err) end return string.dump(f)",
        )
        .arg(0)
        .arg(source)
        .query(con)
        .unwrap_or_else(|e| panic!("does not compile: {e}"));
    let mut reader = Dump {
        bytes: &dump,
        at: 0,
    };
    reader.header();
    let mut out = Vec::new();
    reader.function(&mut out);
    assert_eq!(reader.at, dump.len(), "the whole dump read");
    out
}

/// Every script as sent to Redis, by name.
fn sources() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = super::scripts::script_names()
        .map(|n| {
            (
                format!("fair {n}"),
                super::script(n).unwrap().source.clone(),
            )
        })
        .collect();
    let library = &super::library().source;
    let code = library.split_once('\n').unwrap().1; // the `#!lua name=` line is Redis's, not Lua's
    out.push(("fair library".to_string(), code.to_string()));
    for name in [
        "acquire",
        "release",
        "acquire_all",
        "release_all",
        "renew",
        "sweep",
        "set_limit",
        "details",
    ] {
        let (_, source) = crate::slots::script(name).unwrap();
        out.push((format!("slot {name}"), source.to_string()));
    }
    out
}

#[test]
fn every_function_of_every_script_keeps_a_quarter_of_each_lua_limit() {
    let server = Server::start();
    let mut con = server.connect();
    let allowed = |limit: usize| limit * ALLOWED_PERCENT / 100;
    let mut over = Vec::new();
    for (name, source) in sources() {
        let uses = functions(&mut con, &source);
        let most = |f: fn(&Use) -> usize| uses.iter().map(f).max().unwrap();
        eprintln!(
            "{name:<20} most locals {:>3}/{MAX_LOCALS}, upvalues {:>2}/{MAX_UPVALUES}, registers {:>3}/{MAX_REGISTERS} ({} functions)",
            most(|u| u.locals),
            most(|u| u.upvalues),
            most(|u| u.registers),
            uses.len()
        );
        for u in &uses {
            if u.locals > allowed(MAX_LOCALS)
                || u.upvalues > allowed(MAX_UPVALUES)
                || u.registers > allowed(MAX_REGISTERS)
            {
                over.push(format!(
                    "{name}: the function at line {} uses {u:?}",
                    u.line
                ));
            }
        }
    }
    assert!(
        over.is_empty(),
        "over {ALLOWED_PERCENT}% of a Lua limit (locals {MAX_LOCALS}, upvalues {MAX_UPVALUES}, registers {MAX_REGISTERS}):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_count_matches_what_lua_compiles() {
    let server = Server::start();
    let mut con = server.connect();
    let locals: Vec<String> = (0..120).map(|i| format!("l{i}")).collect();
    let source = format!(
        "local {} = 1\nlocal function f() return l1, l2, l3 end\ndo local a, b = 1, 2 end\nreturn f",
        locals.join(", ")
    );
    let uses = functions(&mut con, &source);
    assert_eq!(uses.len(), 2);
    assert_eq!((uses[0].locals, uses[0].upvalues), (123, 0));
    assert!(uses[0].registers >= 123, "{:?}", uses[0]);
    assert_eq!((uses[1].locals, uses[1].upvalues), (0, 3));
    let too_many: Vec<String> = (0..201).map(|i| format!("l{i}")).collect();
    let err = redis::cmd("EVAL")
        .arg("return loadstring(ARGV[1]) and 'compiled' or 'refused'")
        .arg(0)
        .arg(format!("local {} = 1", too_many.join(", ")))
        .query::<String>(&mut con)
        .unwrap();
    assert_eq!(err, "refused", "Lua's own limit is {MAX_LOCALS} locals");
}
