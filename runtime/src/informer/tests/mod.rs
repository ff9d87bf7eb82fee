//! The informer's test support and its scenario tests, against a fake apiserver seam.
//!
//! - [`fake`]: a scriptable [`ListWatch`](super::ListWatch) and helpers (ConfigMaps, statuses,
//!   a recording handler);
//! - [`harness`]: an informer run against the fake, with its calls and events observed;
//! - `scenarios`, `streaming_scenarios`: the reflector's contract, scenario by scenario
//!   (relists, 410 Gone, backoff, bookmarks, undecodable objects), for paginated and
//!   streaming lists.

pub(crate) mod fake;
pub(crate) mod harness;
mod scenarios;
mod streaming_scenarios;
