//! The `Native::Slots` instances only specs and `bin/bench` use, defined with the cargo feature `bench`:
//! `client.slots` (the client's one, made on first use) and `Native::Slots.new(client)`, whose
//! `acquire`, `release`, `renew`, `sweep` and `sweep_details` run the slot scripts on the client's
//! pool. The gem runs them on Sidekiq's connection instead, through the class's functions
//! (`ruby_api/slots.rs`).

use magnus::{prelude::*, Error, RArray, RModule, RString, Ruby, Symbol, TypedData};

use crate::ruby_api::client::RbClient;
use crate::ruby_api::helpers::convert::bytes;
use crate::ruby_api::helpers::errors::to_ruby;
use crate::ruby_api::helpers::gvl::without_gvl;
use crate::ruby_api::slots::{running_slots, slot, RbSlots};
use crate::slots;

impl RbSlots {
    /// `:acquired`, `:held` (run the job) or `:parked`.
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        ruby: &Ruby,
        rb_self: &Self,
        tag: RString,
        sub: RString,
        jid: RString,
        lease_ms: u64,
        default_limit: u64,
        payload: RString,
        enqueued_at: f64,
    ) -> Result<Symbol, Error> {
        let slot = slot(tag, sub, (jid, None), lease_ms, default_limit);
        let (req, payload) = (slot.request(), bytes(payload));
        let pool = &rb_self.0.pool;
        let outcome =
            without_gvl(|| slots::acquire(pool, &req, &payload, enqueued_at))?.map_err(to_ruby)?;
        Ok(ruby.to_symbol(outcome.name()))
    }

    /// Frees the job's slot; returns how many parked jobs were handed a slot.
    fn release(
        &self,
        tag: RString,
        sub: RString,
        jid: RString,
        lease_ms: u64,
        default_limit: u64,
    ) -> Result<u64, Error> {
        let any = Some(slots::ANY_RUN.to_vec());
        let slot = slot(tag, sub, (jid, any), lease_ms, default_limit);
        let req = slot.request();
        without_gvl(|| slots::release(&self.0.pool, &req))?.map_err(to_ruby)
    }

    /// `running`: an Array of `[tag, sub, jid, run, lease_ms]` (run: see `slot`; "" for any run).
    fn renew(&self, running: RArray) -> Result<u64, Error> {
        let entries = running_slots(running)?;
        without_gvl(|| slots::renew(&self.0.pool, &entries))?.map_err(to_ruby)
    }

    fn sweep(&self, max_tags: usize) -> Result<u64, Error> {
        Ok(self.sweep_details(max_tags)?.0)
    }

    /// `[jobs handed a slot, expired leases reclaimed]`
    fn sweep_details(&self, max_tags: usize) -> Result<(u64, u64), Error> {
        let swept = without_gvl(|| slots::sweep(&self.0.pool, max_tags))?.map_err(to_ruby)?;
        Ok((swept.handed, swept.reclaimed))
    }
}

pub fn init(ruby: &Ruby, _native: RModule) -> Result<(), Error> {
    let class = RbSlots::class(ruby);
    class.define_singleton_method(
        "new",
        magnus::function!(|c: &RbClient| RbSlots(c.handle()), 1),
    )?;
    class.define_method("acquire", magnus::method!(RbSlots::acquire, 7))?;
    class.define_method("release", magnus::method!(RbSlots::release, 5))?;
    class.define_method("renew", magnus::method!(RbSlots::renew, 1))?;
    class.define_method("sweep", magnus::method!(RbSlots::sweep, 1))?;
    class.define_method("sweep_details", magnus::method!(RbSlots::sweep_details, 1))?;
    RbClient::class(ruby).define_method("slots", magnus::method!(RbClient::slots, 0))?;
    Ok(())
}
