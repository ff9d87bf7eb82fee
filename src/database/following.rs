//! Whether each replica follows its primary: a replica behind whose received position has not
//! moved for [`STALLED_AFTER`] does not, whatever its readiness probe says (a hot standby
//! serves reads, and passes `pg_isready`, without a connection to its primary).
//!
//! A replica that follows may lag under a write load, but what it has received moves on; one
//! that lags and stands still has lost its primary (a refused password, a network that no
//! longer carries its connection, a primary that no longer has the WAL it needs). The memory
//! is the reconciler's, in this process: an entry per replica found behind, dropped when it is
//! no longer behind or can no longer be asked, so an operator that restarts starts the wait
//! again, and a Database whose replicas all follow costs nothing here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// How long a replica behind may receive nothing before it is told not to follow.
pub(crate) const STALLED_AFTER: Duration = Duration::from_secs(30);

/// Where each replica found behind stood, and since when (key: namespace/instance).
#[derive(Clone, Debug, Default)]
pub(crate) struct Following {
    behind: Arc<Mutex<HashMap<String, (u64, Timestamp)>>>,
}

impl Following {
    /// Records that replica `key` stands at `received`, `behind` bytes behind its primary
    /// (`None`: it or its primary could not be asked), at `now`; returns how long it has been
    /// behind without receiving anything, once that is [`STALLED_AFTER`] or more.
    pub(crate) fn observe(&self, key: &str, received: u64, behind: Option<i64>, now: Timestamp) -> Option<Duration> {
        let mut map = self.behind.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if behind.is_none_or(|bytes| bytes <= 0) {
            map.remove(key);
            return None;
        }
        let (at, since) = map.entry(key.to_string()).or_insert((received, now));
        if *at != received {
            (*at, *since) = (received, now);
            return None;
        }
        let stalled: Duration = now.duration_since(*since).try_into().unwrap_or_default();
        (stalled >= STALLED_AFTER).then_some(stalled)
    }

    /// How many replicas are remembered behind.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.behind.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn a_replica_behind_that_receives_nothing_for_thirty_seconds_does_not_follow() {
        let following = Following::default();
        let key = "shop/orders-instance-2";
        assert_eq!(following.observe(key, 100, Some(48), at(0)), None);
        assert_eq!(following.observe(key, 100, Some(48), at(29)), None);
        assert_eq!(following.observe(key, 100, Some(96), at(30)), Some(Duration::from_secs(30)));
        assert_eq!(following.observe(key, 100, Some(96), at(45)), Some(Duration::from_secs(45)));
        // It receives again: the wait starts over; caught up, it is forgotten.
        assert_eq!(following.observe(key, 148, Some(48), at(50)), None);
        assert_eq!(following.observe(key, 148, Some(48), at(79)), None);
        assert_eq!(following.observe(key, 196, Some(0), at(80)), None);
        assert_eq!(following.len(), 0);
    }

    #[test]
    fn a_replica_that_follows_under_load_is_never_told_and_one_that_cannot_be_asked_is_forgotten() {
        let following = Following::default();
        let key = "shop/orders-instance-3";
        for second in 0..120 {
            let received = 1_000 * u64::try_from(second).unwrap();
            assert_eq!(following.observe(key, received, Some(500), at(second)), None, "at {second} s");
        }
        assert_eq!(following.observe(key, 119_000, None, at(200)), None);
        assert_eq!(following.len(), 0);
        following.observe(key, 5, Some(5), at(0));
        following.observe(key, 5, None, at(10));
        assert_eq!(following.observe(key, 5, Some(5), at(40)), None, "the wait starts over");
    }
}
