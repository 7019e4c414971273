//! How a fair queue shares its workers: by job count (`jobs`, the default) or by worker time (`time`), and
//! the parsing of `fair_queues` entries that say so (`imports:time` in the environment form).

use crate::names::{FAIR_MODE_JOBS, FAIR_MODE_SEPARATOR, FAIR_MODE_TIME, FAIR_QUEUE_MAX_BYTES};

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

/// Characters a fair queue's name may not hold: `{` and `}` would break the hash tag of its keys
/// (`...:fair:{<queue>}:`), `,` separates the entries of the environment form.
const FORBIDDEN: [char; 3] = ['{', '}', ','];

/// A fair queue's name: not empty, without Sidekiq's `queue:` prefix, no control characters, none of
/// [`FORBIDDEN`], at most [`FAIR_QUEUE_MAX_BYTES`] bytes.
pub fn check_queue(queue: &str) -> Result<(), String> {
    if queue.trim().is_empty() {
        return Err(format!("fair_queues: a queue name is empty, got {queue:?}"));
    }
    if queue.starts_with("queue:") {
        return Err(format!(
            "fair_queues takes queue names without the queue: prefix, got {queue:?}"
        ));
    }
    if queue.chars().any(char::is_control) {
        return Err(format!(
            "fair_queues: a queue name has no control characters, got {queue:?}"
        ));
    }
    if let Some(c) = queue.chars().find(|c| FORBIDDEN.contains(c)) {
        return Err(format!(
            "fair_queues: a queue name has none of {}, got {c:?} in {queue:?}",
            FORBIDDEN.iter().collect::<String>()
        ));
    }
    if queue.trim().len() as u64 > FAIR_QUEUE_MAX_BYTES {
        return Err(format!(
            "fair_queues: a queue name is at most {FAIR_QUEUE_MAX_BYTES} bytes, got {} bytes",
            queue.trim().len()
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

    #[test]
    fn names_that_would_break_the_keys_are_refused_with_the_rule() {
        for name in ["", "  ", "\t"] {
            let err = check_queue(name).unwrap_err();
            assert!(err.contains("fair_queues: a queue name is empty"), "{err}");
        }
        assert!(parse_fair_queue("").is_err());
        let err = check_queue("imp\norts").unwrap_err();
        assert!(err.contains("no control characters"), "{err}");
        for name in ["a{b", "a}b", "a,b"] {
            let err = check_queue(name).unwrap_err();
            assert!(err.contains("has none of {},"), "{err}");
        }
        let long = "q".repeat(201);
        let err = check_queue(&long).unwrap_err();
        assert!(err.contains("at most 200 bytes, got 201 bytes"), "{err}");
        assert_eq!(check_queue(&"q".repeat(200)), Ok(()));
        assert_eq!(
            check_queue("imports:v2"),
            Ok(()),
            "a Hash entry may hold the separator"
        );
        assert_eq!(check_queue("files-é"), Ok(()));
    }
}
