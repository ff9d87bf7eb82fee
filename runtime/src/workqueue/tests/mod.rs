//! Property tests of the work queue's invariants (proptest).

mod properties;
