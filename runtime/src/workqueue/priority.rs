//! Two priorities and the rule that shares the workers between them.
//!
//! A key is added at [`Priority::Normal`] (users' changes: a new object, a new spec, a deleted
//! child) or [`Priority::Low`] (work nobody is waiting for: the initial list after a start, a
//! resync, the follow-ups of a fleet-wide change the controller made itself). The queue keeps one
//! FIFO per priority and hands out normal keys first, so a user's new object is reconciled next
//! even while ten thousand keys from a restart wait.
//!
//! Low keys are never starved: while both FIFOs hold keys, every [`LOW_SHARE`]-th key handed
//! out is a low one. A low key's wait is therefore bounded by its place in its FIFO, whatever
//! the rate of normal adds; under a steady stream of normal work the low FIFO still gets a
//! fixed share of the workers. (controller-runtime's priority queue has no such floor, and its
//! users saw initial-list keys wait forever behind frequent requeues: controller-runtime issue
//! #3496.) The share is by count, not by a clock: ageing a low key to normal after a fixed wait
//! would, in a storm longer than that wait, promote the whole storm ahead of new users' keys,
//! which is the FIFO behaviour the priorities exist to avoid.
//!
//! A key that waits at low priority and is added again at normal priority moves to the normal
//! FIFO (it keeps the highest priority it was added with); a key added at low priority while it
//! waits at normal stays normal.

/// How urgently a key wants a worker. Ordered: `Low < Normal`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Work nobody waits for: handed out when no normal key waits, and as every
    /// [`LOW_SHARE`]-th key while normal keys do.
    Low,
    /// The default: what `add` uses.
    #[default]
    Normal,
}

impl Priority {
    /// The `priority` label of `workqueue_depth`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
        }
    }
}

/// While keys of both priorities wait, one key in this many handed out is a low one.
pub const LOW_SHARE: u32 = 5;

/// Which FIFO the next `get` takes from, given how many live keys each holds and how many
/// normal keys were handed out in a row while low keys waited.
pub(crate) fn next_lane(normal: usize, low: usize, normal_streak: u32) -> Option<Priority> {
    match (normal, low) {
        (0, 0) => None,
        (0, _) => Some(Priority::Low),
        (_, 0) => Some(Priority::Normal),
        _ if normal_streak + 1 >= LOW_SHARE => Some(Priority::Low),
        _ => Some(Priority::Normal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_keys_go_first_and_every_fifth_key_is_low_while_both_wait() {
        let mut streak = 0;
        let mut order = String::new();
        for _ in 0..10 {
            let lane = next_lane(100, 100, streak).expect("keys wait");
            order.push(if lane == Priority::Low { 'L' } else { 'N' });
            streak = if lane == Priority::Low { 0 } else { streak + 1 };
        }
        assert_eq!(order, "NNNNLNNNNL");
    }

    #[test]
    fn either_lane_alone_is_served_and_an_empty_queue_has_no_lane() {
        assert_eq!(next_lane(0, 3, 0), Some(Priority::Low));
        assert_eq!(next_lane(3, 0, 9), Some(Priority::Normal));
        assert_eq!(next_lane(0, 0, 0), None);
    }

    #[test]
    fn low_is_below_normal_and_normal_is_the_default() {
        assert!(Priority::Low < Priority::Normal);
        assert_eq!(Priority::default(), Priority::Normal);
    }
}
