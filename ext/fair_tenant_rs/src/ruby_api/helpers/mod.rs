pub mod convert;
pub mod errors;
pub mod gvl;
pub mod memo;
pub mod values;
