//! What running in production needs around the controller: the metrics and health-probe
//! HTTP endpoints, and leader election.

pub mod leader;
mod server;

pub use server::{Health, serve};
