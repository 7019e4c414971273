//! The version of the fair state's format in Redis (`names::FAIR_FORMAT_KEY`), and the rule a process
//! applies to it before it fetches from a fair queue: a gem must never serve from a state whose format is
//! newer than the one it knows (it would ignore keys it does not know of: a recovery under way, queues
//! switched off), so it refuses loudly instead; a state without a version is this format's, or older.

use crate::names;

/// The format this gem reads and writes. 1: before the version was kept (up to issue 30). 2: a recovery
/// cut short waits in `inflight-recovering`, queues switched off in `off`, paused queues in `paused-queues`,
/// clears under way in `clearing`, and each concurrency scope's waiting tenants are indexed (`<waiting>:index`).
/// 3: a process's in-flight jobs are a hash of short fields (`names::INFLIGHT_PREFIX`), acknowledged by field;
/// a format-2 list of a dead process is turned into one by its recovery.
pub const FAIR_FORMAT: u64 = 3;

/// Where the format's version is kept.
pub fn format_key() -> String {
    names::FAIR_FORMAT_KEY.to_string()
}

/// What a process does with the version it found (`None`: no version written yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatVerdict {
    /// The state is this format: serve.
    Same,
    /// No version, or an older one this gem upgrades to its own by writing it: serve.
    Upgrade,
    /// A newer gem wrote the state: refuse, and say which version it found.
    Newer(u64),
    /// Not a version at all (written by hand): refuse.
    Unreadable,
}

pub fn format_verdict(stored: Option<&str>) -> FormatVerdict {
    let Some(text) = stored else {
        return FormatVerdict::Upgrade;
    };
    match text.trim().parse::<u64>() {
        Ok(v) if v == FAIR_FORMAT => FormatVerdict::Same,
        Ok(v) if v < FAIR_FORMAT => FormatVerdict::Upgrade,
        Ok(v) => FormatVerdict::Newer(v),
        Err(_) => FormatVerdict::Unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_is_served_only_in_a_format_this_gem_knows() {
        assert_eq!(format_verdict(None), FormatVerdict::Upgrade);
        assert_eq!(format_verdict(Some("1")), FormatVerdict::Upgrade);
        assert_eq!(format_verdict(Some("2")), FormatVerdict::Upgrade);
        assert_eq!(format_verdict(Some("3")), FormatVerdict::Same);
        assert_eq!(format_verdict(Some(" 3\n")), FormatVerdict::Same);
        assert_eq!(format_verdict(Some("4")), FormatVerdict::Newer(4));
        assert_eq!(format_verdict(Some("two")), FormatVerdict::Unreadable);
        assert_eq!(format_verdict(Some("-1")), FormatVerdict::Unreadable);
        assert!(format_key().starts_with(names::ROOT));
    }
}
