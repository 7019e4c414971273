pub mod keys;
pub mod queues;
pub mod router;
pub mod rules;
pub mod stats;
