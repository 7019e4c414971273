//! How a fair queue shares its workers: by job count (`jobs`, the default) or by worker time (`time`), and
//! the parsing of `fair_queues` entries that say so (`imports:time` in the environment form).

use crate::names::{FAIR_MODE_JOBS, FAIR_MODE_SEPARATOR, FAIR_MODE_TIME};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairMode {
    Jobs,
    Time,
}

impl FairMode {
    pub fn name(self) -> &'static str {
        match self {
            FairMode::Jobs => FAIR_MODE_JOBS,
            FairMode::Time => FAIR_MODE_TIME,
        }
    }
}

/// A mode by its name (`jobs` or `time`).
pub fn fair_mode(name: &str) -> Result<FairMode, String> {
    match name.trim() {
        FAIR_MODE_JOBS => Ok(FairMode::Jobs),
        FAIR_MODE_TIME => Ok(FairMode::Time),
        other => Err(format!(
            "fair_queues: a queue's mode is {FAIR_MODE_JOBS:?} or {FAIR_MODE_TIME:?}, got {other:?}"
        )),
    }
}

/// One entry of the environment form: `queue` (by job count) or `queue:mode`. The text after the last
/// separator must name a mode (a queue whose name holds the separator is configured with a Hash entry).
pub fn parse_fair_queue(entry: &str) -> Result<(String, FairMode), String> {
    let entry = entry.trim();
    check_queue(entry)?;
    let (queue, mode) = match entry.rsplit_once(FAIR_MODE_SEPARATOR) {
        Some((queue, mode)) => (queue.trim(), fair_mode(mode)?),
        None => (entry, FairMode::Jobs),
    };
    check_queue(queue)?;
    Ok((queue.to_string(), mode))
}

/// A fair queue's name: not empty, without Sidekiq's `queue:` prefix.
pub fn check_queue(queue: &str) -> Result<(), String> {
    if queue.trim().is_empty() {
        return Err("fair_queues: a queue name is empty".into());
    }
    if queue.starts_with("queue:") {
        return Err(format!(
            "fair_queues takes queue names without the queue: prefix, got {queue:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_by_job_count_unless_it_says_time() {
        assert_eq!(
            parse_fair_queue("default"),
            Ok(("default".into(), FairMode::Jobs))
        );
        assert_eq!(
            parse_fair_queue(" imports:time "),
            Ok(("imports".into(), FairMode::Time))
        );
        assert_eq!(
            parse_fair_queue("imports:jobs"),
            Ok(("imports".into(), FairMode::Jobs))
        );
        assert_eq!(fair_mode("time").map(FairMode::name), Ok("time"));
    }

    #[test]
    fn anything_else_is_refused_with_the_rule() {
        let err = parse_fair_queue("imports:bytes").unwrap_err();
        assert!(err.contains("\"jobs\" or \"time\""), "{err}");
        assert!(parse_fair_queue(":time").is_err());
        let err = parse_fair_queue("queue:imports:time").unwrap_err();
        assert!(err.contains("without the queue: prefix"), "{err}");
        assert!(fair_mode("Time").is_err());
    }
}
