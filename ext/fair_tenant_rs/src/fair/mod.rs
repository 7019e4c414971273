//! Fair order inside a queue: the scheduling rule (`sfq.rs`, the model), its keys (`keys.rs`) and its
//! scripts (`scripts.rs`).
//!
//! The rule is start-time fair queueing (Goyal et al.) with one job as one unit of work:
//! - a tenant whose backlog was empty gets the start tag `S = max(V, F)` (`F`: the finish tag of its
//!   last job served, forgotten once `V` passes it), so a tenant back from idle cannot bank credit;
//! - the backlogged tenant with the smallest start tag is served; `V` becomes that tag, and the tenant's
//!   next job starts at `F = S + 1 / weight`;
//! - equal tags go to the tenant that became backlogged first (an activation counter), never by name;
//! - weight 0 pauses a tenant (its jobs stay, it leaves the rotation until its weight is raised);
//! - FIFO within a tenant; work-conserving: a lone tenant is served at every fetch.
//!
//! `Sfq` (`sfq.rs`, built for tests and the demo) is the rule as a plain model, unit-tested there; `lua/fair/common.lua` applies the same rule
//! in Redis (`push.lua`, `fetch.lua`, `ack.lua`). A change to the policy changes both;
//! the lockstep test (`fair/lockstep.rs`) runs random sequences through both and fails on any difference.
//! Concurrency caps inside fair queues (`lua/fair/serve.lua`) are modelled on top of it in
//! [`crate::fair::caps`].

#[cfg(test)]
pub mod caps;
#[cfg(test)]
mod formats;
#[cfg(test)]
mod lockstep;
#[cfg(test)]
mod lua_limits;
#[cfg(any(test, feature = "bench"))]
pub mod rate;
pub mod rules;

mod keys;
pub mod modes;
mod recovery;
pub(crate) mod scripts;
#[cfg(any(test, feature = "bench"))]
mod sfq;
mod version;

pub use keys::*;
pub use modes::{check_queue, fair_mode, parse_fair_queue, FairMode};
pub use recovery::*;
pub use scripts::{library, script, FairLibrary, FairScript};
#[cfg(test)]
pub(crate) use sfq::Place;
#[cfg(any(test, feature = "bench"))]
pub use sfq::Sfq;
#[cfg(any(test, feature = "bench"))]
pub(crate) use sfq::Tag;
pub use version::{format_key, format_verdict, FormatVerdict, FAIR_FORMAT};
