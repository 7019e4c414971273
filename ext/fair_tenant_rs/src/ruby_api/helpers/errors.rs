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
                magnus::Error::new(
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
    magnus::Error::new(get(class), err.message().to_string())
}

/// `ArgumentError` with `msg`.
pub fn argument_error(ruby: &Ruby, msg: impl Into<String>) -> magnus::Error {
    magnus::Error::new(ruby.exception_arg_error(), msg.into())
}
