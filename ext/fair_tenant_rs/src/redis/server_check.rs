//! What the gem's scripts need from the server, and the boot check against `INFO server`.
//!
//! A server lacking a command option a script uses fails only when that line runs (a fair queue's
//! first fetch: `ERR syntax error`); a Sidekiq server process checks at boot instead and refuses to
//! start, naming the server, its version and what is missing. Valkey reports the Redis version it
//! forked from (`redis_version:7.2.4`) besides its own (`valkey_version`): the Redis version decides
//! the commands, the server's own names it in messages.

/// A `major.minor.patch` version; missing parts are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// `"7.0.15"`, `"6.2"`, `"255.255.255"`; `None` unless it starts with a number.
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text.trim().split('.').map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        });
        let major = parts.next().flatten()?;
        let minor = parts.next().flatten().unwrap_or(0);
        let patch = parts.next().flatten().unwrap_or(0);
        Some(Version(major, minor, patch))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Which part of the gem a need belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Every script that reads the clock and then writes (routing, slots, fair queues).
    Scripts,
    /// Fair queues (the serving rule), only when a process has some.
    FairQueues,
}

/// One server feature a script relies on, the Redis version that brought it, and who uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub feature: &'static str,
    pub since: Version,
    pub part: Part,
    pub used_by: &'static str,
}

/// Everything the scripts need that some Redis still in use lacks. Routing's `HRANDFIELD` (6.2) is not
/// here: route.lua calls it with `pcall` and skips its housekeeping without it.
pub const NEEDS: &[Need] = &[
    Need {
        feature: "effects replication of scripts (a write after TIME)",
        since: Version(5, 0, 0),
        part: Part::Scripts,
        used_by: "the slot and fair-queue scripts (lua/slots/common.lua, lua/fair/common.lua)",
    },
    Need {
        feature: "ZPOPMIN",
        since: Version(5, 0, 0),
        part: Part::Scripts,
        used_by:
            "concurrency slots (lua/slots/common.lua) and fair queues' caps (lua/fair/serve.lua)",
    },
    Need {
        feature: "ZADD with LT",
        since: Version(6, 2, 0),
        part: Part::FairQueues,
        used_by: "fair queues (lua/fair/serve.lua)",
    },
];

/// The server as `INFO server` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// `redis`, `valkey`, ... (`server_name`; Redis itself has none).
    pub name: String,
    /// The server's own version (`valkey_version` on Valkey).
    pub version: Option<Version>,
    /// The Redis version whose commands it has (`redis_version`).
    pub redis_version: Option<Version>,
}

impl ServerInfo {
    pub fn parse(info: &str) -> ServerInfo {
        let field = |name: &str| {
            info.lines().find_map(|line| {
                let (key, value) = line.trim_end_matches('\r').split_once(':')?;
                (key == name).then(|| value.trim().to_string())
            })
        };
        let name = field("server_name")
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "redis".to_string());
        let redis_version = field("redis_version").and_then(|v| Version::parse(&v));
        let version = field(&format!("{name}_version"))
            .and_then(|v| Version::parse(&v))
            .or(redis_version);
        ServerInfo {
            name,
            version,
            redis_version,
        }
    }

    /// `redis 7.0.15`, `valkey 9.1.2 (Redis 7.2.4 commands)`, `redis (version unknown)`.
    pub fn describe(&self) -> String {
        match (self.version, self.redis_version) {
            (Some(own), Some(redis)) if own != redis => {
                format!("{} {own} (Redis {redis} commands)", self.name)
            }
            (Some(own), _) => format!("{} {own}", self.name),
            (None, _) => format!("{} (version unknown)", self.name),
        }
    }

    /// The needs of the parts in use that this server lacks. A server whose Redis version is unknown
    /// (a proxy hiding it) is given the benefit of the doubt.
    pub fn missing(&self, fair_queues: bool) -> Vec<&'static Need> {
        let Some(redis) = self.redis_version else {
            return Vec::new();
        };
        NEEDS
            .iter()
            .filter(|need| fair_queues || need.part == Part::Scripts)
            .filter(|need| redis < need.since)
            .collect()
    }

    /// The boot error for what is missing, or `None` when nothing is.
    pub fn problem(&self, fair_queues: bool) -> Option<String> {
        let missing = self.missing(fair_queues);
        if missing.is_empty() {
            return None;
        }
        let needs: Vec<String> = missing
            .iter()
            .map(|n| format!("{} (Redis {}+) for {}", n.feature, n.since, n.used_by))
            .collect();
        let least = missing
            .iter()
            .map(|n| n.since)
            .max()
            .unwrap_or(Version(0, 0, 0));
        Some(format!(
            "the Redis server is {}, which lacks {}: use Redis {least} or later (or Valkey)",
            self.describe(),
            needs.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REDIS_6_0: &str =
        "# Server\r\nredis_version:6.0.16\r\nredis_git_sha1:00000000\r\nredis_mode:standalone\r\n";
    const REDIS_4_0: &str = "# Server\r\nredis_version:4.0.9\r\n";
    const REDIS_6_2: &str = "# Server\r\nredis_version:6.2.0\r\n";
    const REDIS_7_0: &str = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
    const REDIS_8_0: &str = "# Server\r\nredis_version:8.0.6\r\n";
    const VALKEY_9_1: &str =
        "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n";

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(Version::parse("7.0.15"), Some(Version(7, 0, 15)));
        assert_eq!(Version::parse("6.2"), Some(Version(6, 2, 0)));
        assert_eq!(Version::parse("8.0.6-rc1"), Some(Version(8, 0, 6)));
        assert_eq!(Version::parse("x"), None);
        assert!(Version(6, 2, 0) > Version(6, 0, 16));
        assert!(Version(10, 0, 0) > Version(9, 1, 2));
    }

    #[test]
    fn info_names_redis_and_valkey() {
        let redis = ServerInfo::parse(REDIS_7_0);
        assert_eq!(redis.describe(), "redis 7.0.15");
        let valkey = ServerInfo::parse(VALKEY_9_1);
        assert_eq!(valkey.name, "valkey");
        assert_eq!(valkey.version, Some(Version(9, 1, 2)));
        assert_eq!(valkey.redis_version, Some(Version(7, 2, 4)));
        assert_eq!(valkey.describe(), "valkey 9.1.2 (Redis 7.2.4 commands)");
        assert_eq!(
            ServerInfo::parse("# Server\r\n").describe(),
            "redis (version unknown)"
        );
    }

    #[test]
    fn servers_tested_lack_nothing() {
        for info in [REDIS_6_2, REDIS_7_0, REDIS_8_0, VALKEY_9_1] {
            assert_eq!(ServerInfo::parse(info).problem(true), None, "{info}");
        }
    }

    #[test]
    fn redis_6_0_runs_slots_and_routing_but_not_fair_queues() {
        let server = ServerInfo::parse(REDIS_6_0);
        assert_eq!(server.problem(false), None);
        let problem = server.problem(true).expect("fair queues need 6.2");
        assert_eq!(
            problem,
            "the Redis server is redis 6.0.16, which lacks ZADD with LT (Redis 6.2.0+) for fair queues \
             (lua/fair/serve.lua): use Redis 6.2.0 or later (or Valkey)"
        );
    }

    #[test]
    fn redis_4_0_lacks_what_every_script_needs() {
        let server = ServerInfo::parse(REDIS_4_0);
        let without_fair = server.problem(false).expect("scripts need 5.0");
        assert!(without_fair.contains("redis 4.0.9"), "{without_fair}");
        assert!(
            without_fair.contains("ZPOPMIN (Redis 5.0.0+)"),
            "{without_fair}"
        );
        assert!(without_fair.ends_with("use Redis 5.0.0 or later (or Valkey)"));
        assert_eq!(server.missing(true).len(), NEEDS.len());
    }

    #[test]
    fn an_unknown_version_is_not_refused() {
        assert_eq!(ServerInfo::parse("").problem(true), None);
    }

    #[test]
    fn every_fair_queue_need_is_in_the_scripts() {
        let caps = include_str!("../lua/fair/serve.lua");
        assert!(caps.contains("redis.call('ZADD', k.heads, 'LT',"));
        assert!(caps.contains("redis.call('ZPOPMIN'"));
        let route = include_str!("../lua/routing/route.lua");
        assert!(
            route.contains("redis.pcall('HRANDFIELD'"),
            "routing must stay usable without HRANDFIELD"
        );
    }
}
