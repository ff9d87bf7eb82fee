//! What running in production needs around the controller: the metrics and health-probe
//! HTTP endpoints (the metrics one over TLS to authorized callers), and leader election.

pub mod auth;
pub mod leader;
mod server;
pub mod tls;

pub use server::{ConnectionLimits, Health, Secure, serve, serve_limited};
