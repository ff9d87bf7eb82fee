//! Conditions in the standard format (`type`, `status`, `reason`, `message`,
//! `lastTransitionTime`, `observedGeneration`), set in one place, as apimachinery's
//! `meta.SetStatusCondition` sets them.
//!
//! # Contract
//!
//! - `lastTransitionTime` moves only when a condition's status changes (`True` to `False`, or
//!   a condition that was absent): recomputing an unchanged state from the same stored
//!   conditions gives equal conditions, so a controller that writes only what differs writes
//!   nothing.
//! - A condition carries the generation of the spec it describes.
//! - [`reports`] tells whether stored conditions already say something (the condition of that
//!   type, with that status, reason and message): a controller publishes an event only for
//!   what its status does not say yet, so one cause gets one event, also after a restart.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// What a condition should say: its status, reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// `True` or `False`.
    pub status: bool,
    /// The reason, one CamelCase word.
    pub reason: String,
    /// For a kubectl user: what is true, and what to do when it is wrong.
    pub message: String,
}

impl State {
    /// A condition that is `True` for `reason`.
    pub fn yes(reason: &str, message: impl Into<String>) -> Self {
        Self { status: true, reason: reason.to_string(), message: message.into() }
    }

    /// A condition that is `False` for `reason`.
    pub fn no(reason: &str, message: impl Into<String>) -> Self {
        Self { status: false, reason: reason.to_string(), message: message.into() }
    }
}

/// The condition `type_` in `state`, its `lastTransitionTime` kept from `previous` (the stored
/// conditions) while its status is the same, else `now`; stamped with `generation`.
pub fn condition(previous: &[Condition], type_: &str, state: State, generation: Option<i64>, now: &Time) -> Condition {
    let status = if state.status { "True" } else { "False" }.to_string();
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_)
        .filter(|c| c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_string(),
        status,
        reason: state.reason,
        message: state.message,
        last_transition_time,
        observed_generation: generation,
    }
}

/// Sets the condition `type_` of `conditions` (replacing one of that type, or appending it),
/// as [`condition`] computes it.
pub fn set(
    conditions: &mut Vec<Condition>,
    previous: &[Condition],
    type_: &str,
    state: State,
    generation: Option<i64>,
    now: &Time,
) {
    let new = condition(previous, type_, state, generation, now);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => *existing = new,
        None => conditions.push(new),
    }
}

/// Whether `conditions` already say `state` in their condition `type_`.
pub fn reports(conditions: &[Condition], type_: &str, state: &State) -> bool {
    let status = if state.status { "True" } else { "False" };
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == status && c.reason == state.reason && c.message == state.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn time(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let first = condition(&[], "Ready", State::no("NotYet", "m"), Some(1), &time(10));
        assert_eq!(first.last_transition_time, time(10));
        let same = condition(std::slice::from_ref(&first), "Ready", State::no("Other", "n"), Some(2), &time(20));
        assert_eq!(same.last_transition_time, time(10), "another reason, the same status");
        assert_eq!((same.reason.as_str(), same.observed_generation), ("Other", Some(2)));
        let flipped = condition(&[first], "Ready", State::yes("Up", "m"), Some(2), &time(30));
        assert_eq!(flipped.last_transition_time, time(30));
    }

    #[test]
    fn set_replaces_the_condition_of_its_type_and_keeps_the_others() {
        let mut conditions = vec![
            condition(&[], "Ready", State::no("A", "a"), None, &time(1)),
            condition(&[], "Degraded", State::no("B", "b"), None, &time(1)),
        ];
        let previous = conditions.clone();
        set(&mut conditions, &previous, "Ready", State::yes("C", "c"), None, &time(2));
        set(&mut conditions, &previous, "BackupScheduled", State::yes("D", "d"), None, &time(2));
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Ready", "Degraded", "BackupScheduled"]);
        assert_eq!(conditions[0].reason, "C");
    }

    #[test]
    fn only_the_condition_of_that_type_status_reason_and_message_reports_it() {
        let conditions = [
            condition(&[], "Degraded", State::yes("Quota", "over"), None, &time(1)),
            condition(&[], "Ready", State::no("Quota", "over"), None, &time(1)),
        ];
        assert!(reports(&conditions, "Degraded", &State::yes("Quota", "over")));
        assert!(reports(&conditions, "Ready", &State::no("Quota", "over")));
        assert!(!reports(&conditions, "Degraded", &State::no("Quota", "over")), "another status");
        assert!(!reports(&conditions, "Degraded", &State::yes("Quota", "changed")), "another message");
        assert!(!reports(&conditions, "Progressing", &State::yes("Quota", "over")), "another type");
    }
}
