//! `Sidekiq::FairTenant::Native::Names`: the names the gem's data in Redis shares with the scripts, as
//! frozen constants (`Names::HEADS`, `Names::TOKEN_CAP`, `Names::SLOT_FIELDS`, ...). Binding only: the names
//! are spelled in [`crate::names`].

use magnus::{prelude::*, Error, RModule, Ruby};

use crate::names::{self, Value};

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let module = native.define_module("Names")?;
    for name in names::NAMES {
        match name.value {
            Value::Str(s) => {
                let value = ruby.str_new(s);
                value.freeze();
                module.const_set(name.name, value)?;
            }
            Value::Int(i) => module.const_set(name.name, i)?,
        }
    }
    let fields = ruby.ary_new();
    for field in names::SLOT_FIELDS {
        let value = ruby.str_new(field);
        value.freeze();
        fields.push(value)?;
    }
    fields.freeze();
    module.const_set("SLOT_FIELDS", fields)?;
    Ok(())
}
