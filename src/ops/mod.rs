//! What running in production needs around the controller: the metrics and health-probe
//! HTTP endpoints.

mod server;

pub use server::{Health, serve};
