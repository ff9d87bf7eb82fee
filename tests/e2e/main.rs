//! End-to-end tests against the real control plane started by `hack/control-plane.sh up`
//! (`hack/test.sh` starts and stops it around the suite). Each test works in a namespace of
//! its own, so they run in parallel.

mod apf;
mod backups;
mod bad_input;
mod buckets;
mod common;
mod data;
mod data_faults;
mod engines;
mod fence;
mod leader;
mod limits;
mod monitoring;
mod operator;
mod plane;
mod plugin;
mod priority;
mod protection;
mod rbac;
mod shutdown;
mod throttling;
mod upgrades;
mod verify;
