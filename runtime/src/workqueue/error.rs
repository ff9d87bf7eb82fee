//! Errors of the work queue module.
//!
//! Queue operations cannot fail; only building a rate limiter from numbers can.

/// An error building a work queue part.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A token bucket rate was zero, negative, or not a number.
    #[error(
        "a rate of {qps} items per second is not usable: give a positive, finite number (client-go's default is 10)"
    )]
    InvalidRate {
        /// The rate that was given.
        qps: f64,
    },
    /// A token bucket burst was zero.
    #[error("a burst of 0 would let no item through: give a burst of at least 1 (client-go's default is 100)")]
    ZeroBurst,
}
