//! What only `bin/demo` and `bin/bench` use, built with the cargo feature `bench` (and in tests).

pub mod ideal;
pub mod noop;
