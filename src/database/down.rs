//! What the failover phase ([`super::failover`]) remembers between passes of a Database of
//! several instances: since when its primary has been seen not ready, and each replica's
//! last measured lag (once the primary is lost no lag can be measured).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::api::InstanceStatus;

/// What this operator saw of each Database's primary (by Database key): which instance, when
/// it was first seen not ready, and each replica's lag at the last look while it was ready
/// (once the primary is lost no lag can be measured). In memory: an operator that restarts
/// counts the delay again, later rather than sooner, and knows no lag until the next look.
#[derive(Clone, Debug, Default)]
pub(crate) struct Down {
    seen: Arc<Mutex<HashMap<String, Seen>>>,
}

#[derive(Debug, Default)]
struct Seen {
    primary: String,
    down_since: Option<Instant>,
    lags: HashMap<String, i64>,
}

impl Down {
    fn with<T>(&self, key: &str, primary: &str, f: impl FnOnce(&mut Seen) -> T) -> T {
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = seen.entry(key.to_string()).or_default();
        if entry.primary != primary {
            *entry = Seen { primary: primary.to_string(), ..Seen::default() };
        }
        f(entry)
    }

    /// `primary` of Database `key` is ready, and `instances` lag as they say.
    pub(super) fn ready(&self, key: &str, primary: &str, instances: &[InstanceStatus]) {
        self.with(key, primary, |seen| {
            seen.down_since = None;
            // A lag that could not be measured (the primary may be lost already, not yet
            // marked not ready) leaves the last one measured.
            seen.lags.extend(instances.iter().filter_map(|i| Some((i.name.clone(), i.lag_bytes?))));
        });
    }

    /// How long `primary` of Database `key` has been seen not ready, and the lag of `replica`
    /// at the last look while it was.
    pub(super) fn down(&self, key: &str, primary: &str, replica: &str, now: Instant) -> (Duration, Option<i64>) {
        self.with(key, primary, |seen| {
            let since = *seen.down_since.get_or_insert(now);
            (now.duration_since(since), seen.lags.get(replica).copied())
        })
    }

    pub(super) fn forget(&self, key: &str) {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Role;

    fn instance(name: &str, role: Role, ready: bool) -> InstanceStatus {
        InstanceStatus { name: name.into(), role: Some(role), ready, ..Default::default() }
    }

    #[test]
    fn the_delay_is_counted_from_the_first_look_and_again_for_another_primary_and_the_lag_kept_is_the_last_seen() {
        let down = Down::default();
        let start = Instant::now();
        let mut replica = instance("orders-instance-2", Role::Replica, true);
        replica.lag_bytes = Some(512);
        down.ready("shop/orders", "orders", &[instance("orders", Role::Primary, true), replica.clone()]);
        replica.lag_bytes = None;
        down.ready("shop/orders", "orders", &[instance("orders", Role::Primary, true), replica]);
        let key = "shop/orders";
        assert_eq!(down.down(key, "orders", "orders-instance-2", start), (Duration::ZERO, Some(512)));
        let later = down.down(key, "orders", "orders-instance-2", start + Duration::from_secs(7));
        assert_eq!(later, (Duration::from_secs(7), Some(512)));
        let other = down.down(key, "orders-instance-2", "orders-instance-3", start + Duration::from_secs(9));
        assert_eq!(other, (Duration::ZERO, None));
        down.forget(key);
        assert_eq!(down.down(key, "orders", "x", start + Duration::from_secs(12)).0, Duration::ZERO);
    }
}
