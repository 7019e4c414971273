pub mod errors;
pub mod gvl;
pub mod values;
