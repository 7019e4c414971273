//! Mapping of the core's errors onto the Ruby hierarchy defined in
//! `lib/sidekiq/fair_tenant/errors.rb` (`Sidekiq::FairTenant::Error` and subclasses).

use std::sync::OnceLock;

use magnus::value::{InnerValue, Opaque};
use magnus::{prelude::*, ExceptionClass, RModule, Ruby};

use crate::error::Error;

struct Classes {
    error: Opaque<ExceptionClass>,
    connection: Opaque<ExceptionClass>,
    timeout: Opaque<ExceptionClass>,
    command: Opaque<ExceptionClass>,
    configuration: Opaque<ExceptionClass>,
}

static CLASSES: OnceLock<Classes> = OnceLock::new();

/// Looks the classes up once, at extension load (errors.rb is required first).
pub fn init(ruby: &Ruby, namespace: RModule) -> Result<(), magnus::Error> {
    let get = |name: &str| -> Result<Opaque<ExceptionClass>, magnus::Error> {
        let value: magnus::Value = namespace.const_get(name)?;
        ExceptionClass::from_value(value)
            .map(Opaque::from)
            .ok_or_else(|| {
                exception(
                    ruby.exception_type_error(),
                    format!("Sidekiq::FairTenant::{name} is not an exception class"),
                )
            })
    };
    let classes = Classes {
        error: get("Error")?,
        connection: get("ConnectionError")?,
        timeout: get("TimeoutError")?,
        command: get("CommandError")?,
        configuration: get("ConfigurationError")?,
    };
    let _ = CLASSES.set(classes);
    Ok(())
}

fn classes() -> &'static Classes {
    CLASSES
        .get()
        .expect("fair_tenant_rs errors initialised at load")
}

fn get(class: Opaque<ExceptionClass>) -> ExceptionClass {
    let ruby = Ruby::get().expect("called from a Ruby thread");
    class.get_inner_with(&ruby)
}

pub fn error_class() -> ExceptionClass {
    get(classes().error)
}

/// Converts a core error into the matching Ruby exception.
pub fn to_ruby(err: Error) -> magnus::Error {
    let c = classes();
    let class = match &err {
        Error::Connection(_) => c.connection,
        Error::Timeout(_) => c.timeout,
        Error::Command(_) => c.command,
        Error::Configuration(_) => c.configuration,
    };
    exception(get(class), err.message().to_string())
}

/// `ArgumentError` with `msg`.
pub fn argument_error(ruby: &Ruby, msg: impl Into<String>) -> magnus::Error {
    exception(ruby.exception_arg_error(), msg.into())
}

/// An error of `class` with `msg`, its exception built now, while the caller holds no Rust value that needs
/// dropping. Every error this extension raises is built here, never with `magnus::Error::new`.
///
/// Building an exception calls Ruby (`new`, `initialize`), where a pending `Thread#kill` arrives as a jump
/// that is no exception. `magnus::Error::new` builds the exception only while raising it, and panics on
/// that jump: the panic cannot unwind into Ruby, so the whole process aborted when a thread was killed as
/// a call of ours failed (a Redis that refuses connections, and `Thread#kill` or a heartbeat's stop).
/// Built here, the jump is returned as the error, and magnus resumes it: the thread just ends.
pub fn exception(class: ExceptionClass, msg: String) -> magnus::Error {
    let ruby = Ruby::get().expect("called from a Ruby thread");
    match class.new_instance((ruby.str_new(&msg),)) {
        Ok(exception) => exception.into(),
        Err(jump_or_exception) => jump_or_exception,
    }
}
