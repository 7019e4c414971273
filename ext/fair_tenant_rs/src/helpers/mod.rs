pub mod errors;
pub mod gvl;
