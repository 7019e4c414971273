pub mod connect;
pub mod outage;
pub mod pool;
pub mod sentinel;
pub mod server;
pub mod server_check;
#[cfg(test)]
pub(crate) mod test_server;
pub mod tls;
