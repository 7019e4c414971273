pub mod connect;
pub mod outage;
pub mod pool;
pub mod sentinel;
pub mod server;
pub mod server_check;
pub mod tls;
