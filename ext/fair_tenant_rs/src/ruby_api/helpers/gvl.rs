//! Running blocking work with the GVL released.
//!
//! Ruby checks pending interrupts (`Timeout.timeout`, `Thread#raise`, `Thread#kill`) as soon as
//! the no-GVL function returns, and raising there longjmps straight through our Rust frames:
//! destructors would not run. So the whole blocking unit (pool checkout, Redis call, checkin)
//! runs *inside* the closure, the raw call is wrapped in `rb_protect`, and the caught
//! exception is re-raised only after every Rust value on this stack has been dropped.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;

struct Call<F, T> {
    func: Option<F>,
    result: Option<std::thread::Result<T>>,
}

unsafe extern "C" fn trampoline<F, T>(data: *mut c_void) -> *mut c_void
where
    F: FnOnce() -> T,
{
    // SAFETY: `data` is the `Call` owned by `without_gvl`, alive for the whole call.
    let call = unsafe { &mut *(data as *mut Call<F, T>) };
    if let Some(func) = call.func.take() {
        call.result = Some(catch_unwind(AssertUnwindSafe(func)));
    }
    null_mut()
}

/// Runs `func` without the GVL. `func` must not touch Ruby objects.
pub fn without_gvl<F, T>(func: F) -> Result<T, magnus::Error>
where
    F: FnOnce() -> T,
{
    let mut call = Call {
        func: Some(func),
        result: None,
    };
    let data = &mut call as *mut Call<F, T> as *mut c_void;
    let protected = magnus::rb_sys::protect(|| {
        // SAFETY: the trampoline only touches `call`, which outlives this call; no unblock
        // function is given, so the work always runs to completion (bounded by timeouts).
        unsafe {
            rb_sys::rb_thread_call_without_gvl(Some(trampoline::<F, T>), data, None, null_mut());
        }
        rb_sys::Qnil as rb_sys::VALUE
    });
    let result = call.result.take();
    drop(call);
    // An interrupt that fired meanwhile wins: the work finished and cleaned up after itself.
    protected?;
    match result {
        Some(Ok(value)) => Ok(value),
        Some(Err(panic)) => Err(super::errors::exception(
            super::errors::error_class(),
            format!(
                "internal error in fair_tenant_rs: {}",
                panic_message(&panic)
            ),
        )),
        None => Err(super::errors::exception(
            super::errors::error_class(),
            "internal error in fair_tenant_rs: blocking call did not run".to_string(),
        )),
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}
