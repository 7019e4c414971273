//! Fail fast while the Redis server is known to be unreachable.
//!
//! After a call fails to connect, times out or loses its connection, the pool refuses every call for
//! `backoff` (with the error that started it), so a dead or stalled Redis costs one wait, not one per
//! push. When the backoff is over, one caller goes ahead as the probe while the others keep failing
//! fast for another `backoff`; the probe's success ends the outage, its failure starts a new backoff.
//! No thread, no timer: the clock is read by the callers.

use std::time::{Duration, Instant};

use crate::error::Error;

#[derive(Debug, Default)]
pub struct Outage {
    until: Option<Instant>,
    cause: Option<Error>,
}

impl Outage {
    /// Before a call: `Ok(())` to go ahead (all is well, or this caller is the probe), else the
    /// error to fail with at once.
    pub fn admit(&mut self, now: Instant, backoff: Duration) -> Result<(), Error> {
        match self.until {
            None => Ok(()),
            Some(until) if now < until => Err(self.fast_error(until - now)),
            Some(_) => {
                self.until = Some(now + backoff);
                Ok(())
            }
        }
    }

    /// A call found the server unreachable: fail fast for `backoff` from now.
    pub fn failed(&mut self, now: Instant, backoff: Duration, cause: &Error) {
        self.until = Some(now + backoff);
        self.cause = Some(cause.clone());
    }

    /// A call went through: the server is back.
    pub fn succeeded(&mut self) {
        self.until = None;
        self.cause = None;
    }

    pub fn is_down(&self) -> bool {
        self.until.is_some()
    }

    fn fast_error(&self, left: Duration) -> Error {
        let note = format!(
            "; failing fast for {} ms more before the next attempt",
            left.as_millis().max(1)
        );
        match &self.cause {
            Some(Error::Timeout(m)) => Error::Timeout(format!("{m}{note}")),
            Some(Error::Configuration(m)) => Error::Configuration(format!("{m}{note}")),
            Some(Error::Connection(m)) | Some(Error::Command(m)) => {
                Error::Connection(format!("{m}{note}"))
            }
            None => Error::Connection(format!("Redis unreachable{note}")),
        }
    }
}

/// Whether an error says the server cannot be reached (as opposed to a command it refused).
pub fn marks_down(err: &Error) -> bool {
    matches!(err, Error::Connection(_) | Error::Timeout(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BACKOFF: Duration = Duration::from_millis(1000);

    fn refused() -> Error {
        Error::Connection("Connection refused (redis://127.0.0.1:1/0)".into())
    }

    #[test]
    fn admits_everyone_until_a_failure() {
        let mut o = Outage::default();
        let t = Instant::now();
        assert!(o.admit(t, BACKOFF).is_ok());
        assert!(o.admit(t, BACKOFF).is_ok());
        assert!(!o.is_down());
    }

    #[test]
    fn fails_fast_with_the_cause_during_the_backoff() {
        let mut o = Outage::default();
        let t = Instant::now();
        o.failed(t, BACKOFF, &refused());
        let err = o
            .admit(t + Duration::from_millis(400), BACKOFF)
            .unwrap_err();
        assert!(matches!(err, Error::Connection(_)), "{err:?}");
        assert!(err.message().contains("Connection refused"), "{err}");
        assert!(err.message().contains("600 ms more"), "{err}");

        let timeout = Error::Timeout("timed out (redis://127.0.0.1:2/0)".into());
        o.failed(t, BACKOFF, &timeout);
        assert!(matches!(o.admit(t, BACKOFF), Err(Error::Timeout(_))));
    }

    #[test]
    fn lets_exactly_one_probe_through_after_the_backoff() {
        let mut o = Outage::default();
        let t = Instant::now();
        o.failed(t, BACKOFF, &refused());
        let later = t + BACKOFF;
        assert!(o.admit(later, BACKOFF).is_ok(), "the probe goes ahead");
        assert!(
            o.admit(later, BACKOFF).is_err(),
            "the others keep failing fast"
        );
        assert!(o
            .admit(later + Duration::from_millis(999), BACKOFF)
            .is_err());
    }

    #[test]
    fn a_probe_that_succeeds_ends_the_outage_and_one_that_fails_starts_another() {
        let mut o = Outage::default();
        let t = Instant::now();
        o.failed(t, BACKOFF, &refused());
        let probe = t + BACKOFF;
        o.admit(probe, BACKOFF).unwrap();
        o.failed(probe, BACKOFF, &refused());
        assert!(o
            .admit(probe + Duration::from_millis(500), BACKOFF)
            .is_err());

        let probe = probe + BACKOFF;
        o.admit(probe, BACKOFF).unwrap();
        o.succeeded();
        assert!(!o.is_down());
        assert!(o.admit(probe, BACKOFF).is_ok());
        assert!(o.admit(probe, BACKOFF).is_ok());
    }

    #[test]
    fn only_unreachable_servers_count() {
        assert!(marks_down(&refused()));
        assert!(marks_down(&Error::Timeout("t".into())));
        assert!(!marks_down(&Error::Command("WRONGTYPE".into())));
        assert!(!marks_down(&Error::Configuration("bad".into())));
    }
}
