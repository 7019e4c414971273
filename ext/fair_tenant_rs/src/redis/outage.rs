//! Fail fast while the Redis server is known to be unreachable.
//!
//! After a call fails to connect, times out or loses its connection, the pool refuses every call for
//! `backoff` (with the error that started it), so a dead or stalled Redis costs one wait, not one per
//! push. When the backoff is over, the next caller is told to start a probe ([`Admission::Probe`]); the
//! pool runs it on a thread of its own, and every caller, that one included, keeps failing fast until
//! the probe answers. Its success ends the outage, its failure starts the next backoff. One probe at a
//! time; no timer: the clock is read by the callers.
//!
//! A probe in flight does not survive `fork`: the child calls [`Outage::forget_probe`], or it would
//! wait forever for an answer.

use std::time::{Duration, Instant};

use crate::error::Error;

#[derive(Debug, Default)]
pub struct Outage {
    until: Option<Instant>,
    cause: Option<Error>,
    /// A probe was started and has not answered yet.
    probing: bool,
}

/// What a caller does, from [`Outage::admit`].
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// All is well: go ahead.
    Proceed,
    /// The backoff is over and no probe runs: start one (the caller then asks again).
    Probe,
    /// Fail at once with this error.
    Refuse(Error),
}

impl Outage {
    /// Before a call.
    pub fn admit(&mut self, now: Instant) -> Admission {
        match self.until {
            None => Admission::Proceed,
            Some(until) if self.probing || now < until => {
                Admission::Refuse(self.fast_error(until.checked_duration_since(now)))
            }
            Some(_) => {
                self.probing = true;
                Admission::Probe
            }
        }
    }

    /// A call found the server unreachable: fail fast for `backoff` from now. A probe in flight goes
    /// on; its answer decides.
    pub fn failed(&mut self, now: Instant, backoff: Duration, cause: &Error) {
        self.until = Some(now + backoff);
        self.cause = Some(cause.clone());
    }

    /// A call went through: the server is back.
    pub fn succeeded(&mut self) {
        self.until = None;
        self.cause = None;
    }

    /// The probe answered: `Ok` ends the outage, an error starts the next backoff.
    pub fn probe_done(&mut self, now: Instant, backoff: Duration, result: Result<(), &Error>) {
        self.probing = false;
        match result {
            Ok(()) => self.succeeded(),
            Err(cause) => self.failed(now, backoff, cause),
        }
    }

    /// In a forked child: the probe thread stayed in the parent, so none is in flight here.
    pub fn forget_probe(&mut self) {
        self.probing = false;
    }

    pub fn is_down(&self) -> bool {
        self.until.is_some()
    }

    pub fn is_probing(&self) -> bool {
        self.probing
    }

    /// `left`: the rest of the backoff, `None` once it is over (a probe is then in flight).
    fn fast_error(&self, left: Option<Duration>) -> Error {
        let note = match left {
            Some(left) if !left.is_zero() && !self.probing => format!(
                "; failing fast for {} ms more before the next attempt",
                left.as_millis().max(1)
            ),
            _ => "; failing fast until the probe under way answers".to_string(),
        };
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

    fn refusal(a: Admission) -> Error {
        match a {
            Admission::Refuse(e) => e,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn admits_everyone_until_a_failure() {
        let mut o = Outage::default();
        let t = Instant::now();
        assert_eq!(o.admit(t), Admission::Proceed);
        assert_eq!(o.admit(t), Admission::Proceed);
        assert!(!o.is_down());
    }

    #[test]
    fn fails_fast_with_the_cause_during_the_backoff() {
        let mut o = Outage::default();
        let t = Instant::now();
        o.failed(t, BACKOFF, &refused());
        let err = refusal(o.admit(t + Duration::from_millis(400)));
        assert!(matches!(err, Error::Connection(_)), "{err:?}");
        assert!(err.message().contains("Connection refused"), "{err}");
        assert!(err.message().contains("600 ms more"), "{err}");

        let timeout = Error::Timeout("timed out (redis://127.0.0.1:2/0)".into());
        o.failed(t, BACKOFF, &timeout);
        assert!(matches!(o.admit(t), Admission::Refuse(Error::Timeout(_))));
    }

    #[test]
    fn asks_for_exactly_one_probe_after_the_backoff_and_refuses_everyone_while_it_runs() {
        let mut o = Outage::default();
        let t = Instant::now();
        o.failed(t, BACKOFF, &refused());
        let later = t + BACKOFF;
        assert_eq!(o.admit(later), Admission::Probe);
        assert!(o.is_probing());
        // The caller that started it, and everyone after, fail fast however long the probe takes.
        for wait in [0, 1, 999, 5_000, 60_000] {
            let err = refusal(o.admit(later + Duration::from_millis(wait)));
            assert!(err.message().contains("probe under way"), "{err}");
            assert!(err.message().contains("Connection refused"), "{err}");
        }
        assert!(o.is_down());
    }

    #[test]
    fn a_probe_that_succeeds_ends_the_outage_and_one_that_fails_starts_the_next_backoff() {
        let mut o = Outage::default();
        let t = Instant::now();
        o.failed(t, BACKOFF, &refused());

        let probe = t + BACKOFF;
        assert_eq!(o.admit(probe), Admission::Probe);
        let done = probe + Duration::from_millis(500); // a stalled server: the read timeout
        let timeout = Error::Timeout("timed out (redis://127.0.0.1:2/0)".into());
        o.probe_done(done, BACKOFF, Err(&timeout));
        assert!(!o.is_probing());
        let err = refusal(o.admit(done + Duration::from_millis(999)));
        assert!(matches!(err, Error::Timeout(_)), "{err:?}");
        assert!(err.message().contains("1 ms more"), "{err}");

        let probe = done + BACKOFF;
        assert_eq!(o.admit(probe), Admission::Probe);
        o.probe_done(probe, BACKOFF, Ok(()));
        assert!(!o.is_down());
        assert_eq!(o.admit(probe), Admission::Proceed);
        assert_eq!(o.admit(probe), Admission::Proceed);
    }

    #[test]
    fn a_call_that_fails_while_the_probe_runs_leaves_the_probe_to_decide() {
        let mut o = Outage::default();
        let t = Instant::now();
        o.failed(t, BACKOFF, &refused());
        assert_eq!(o.admit(t + BACKOFF), Admission::Probe);
        // A call checked out before the outage times out now: no second probe.
        o.failed(t + BACKOFF, BACKOFF, &refused());
        assert!(matches!(
            o.admit(t + 3 * BACKOFF),
            Admission::Refuse(Error::Connection(_))
        ));
        o.probe_done(t + 3 * BACKOFF, BACKOFF, Ok(()));
        assert_eq!(o.admit(t + 3 * BACKOFF), Admission::Proceed);
    }

    #[test]
    fn a_call_that_succeeds_while_the_probe_runs_ends_the_outage_but_not_the_probe() {
        let mut o = Outage::default();
        let t = Instant::now();
        o.failed(t, BACKOFF, &refused());
        assert_eq!(o.admit(t + BACKOFF), Admission::Probe);
        o.succeeded();
        assert_eq!(o.admit(t + BACKOFF), Admission::Proceed);
        assert!(o.is_probing(), "its thread still runs and will answer");
        o.probe_done(t + BACKOFF, BACKOFF, Ok(()));
        assert!(!o.is_probing());
    }

    #[test]
    fn a_forked_child_forgets_the_parents_probe_and_starts_its_own() {
        let mut o = Outage::default();
        let t = Instant::now();
        o.failed(t, BACKOFF, &refused());
        assert_eq!(o.admit(t + BACKOFF), Admission::Probe);
        let mut child = std::mem::take(&mut o); // the child's copy of the state
        child.forget_probe();
        assert!(child.is_down());
        assert_eq!(child.admit(t + BACKOFF), Admission::Probe);
    }

    #[test]
    fn only_unreachable_servers_count() {
        assert!(marks_down(&refused()));
        assert!(marks_down(&Error::Timeout("t".into())));
        assert!(!marks_down(&Error::Command("WRONGTYPE".into())));
        assert!(!marks_down(&Error::Configuration("bad".into())));
    }
}
