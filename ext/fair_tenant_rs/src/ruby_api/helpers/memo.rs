//! A Ruby object that a wrapped Rust object creates on first use and then keeps: `Native::Client`
//! hands out one `Native::Router` (`Slots`, `Stats`, `Limits`) for its whole life.
//!
//! The owner stores the object's handle, so Ruby must learn from the owner that the object is
//! still in use: the owner is wrapped with `mark` and calls [`Memo::mark`] from its
//! `DataTypeFunctions::mark`. `Marker::mark` pins the object (it never moves under compaction).
//! The owner is not write-barrier protected (no `wb_protected`), so Ruby re-marks it at every GC
//! and storing the handle later needs no write barrier.

use std::sync::OnceLock;

use magnus::gc::Marker;
use magnus::typed_data::Obj;
use magnus::value::Opaque;
use magnus::{Ruby, TypedData};

pub struct Memo<T: TypedData>(OnceLock<Opaque<Obj<T>>>);

impl<T: TypedData> Default for Memo<T> {
    fn default() -> Self {
        Memo(OnceLock::new())
    }
}

impl<T: TypedData> Memo<T> {
    /// The object, wrapping `make()` on the first call.
    pub fn get_or_wrap(&self, ruby: &Ruby, make: impl FnOnce() -> T) -> Obj<T> {
        if let Some(obj) = self.0.get() {
            return ruby.get_inner(*obj);
        }
        // Wrapped before it is stored: until then it lives on this stack, where Ruby's GC finds it.
        let obj = ruby.obj_wrap(make());
        match self.0.set(Opaque::from(obj)) {
            Ok(()) => obj,
            // Another thread stored one first (impossible while we hold the GVL, but harmless).
            Err(_) => ruby.get_inner(*self.0.get().expect("set by the other caller")),
        }
    }

    pub fn mark(&self, marker: &Marker) {
        if let Some(obj) = self.0.get() {
            marker.mark(*obj);
        }
    }
}
