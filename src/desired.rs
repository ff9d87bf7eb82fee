//! What the operator wants a Database's children and status to be, as public functions: the
//! benchmarks' bare writer writes exactly these, and their probe reads the views, so that a
//! comparison with the operator is a comparison of equal work.
//!
//! These are the operator's own builders, not copies: a generic Database (no engine, no
//! upgrade, no restore) gets from here exactly what the Database controller writes for it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;

use crate::api::{Database, DatabaseStatus};
use crate::database::{status, upgrade};
use crate::resources::workload;

pub use crate::resources::meta::MANAGER as FIELD_MANAGER;
pub use crate::resources::view::{
    ClaimSpecView, ClaimStatusView, ContainerPortView, ContainerView, DeploymentConditionView, DeploymentSpecView,
    DeploymentStatusView, DeploymentView, PersistentVolumeClaimView, PodSpecView, PodTemplateView, ResourcesView,
    SecretView, SelectorView, ServicePortView, ServiceSpecView, ServiceView, StrategyView, TemplateMetaView,
    share_words,
};
pub use crate::resources::workload::ROLLOUT_LABEL;

/// The Deployment `db` wants, running `spec.image`.
pub fn deployment(db: &Database) -> Deployment {
    workload::deployment_running(db, &db.spec.image, None)
}

/// The Service `db` wants.
pub fn service(db: &Database) -> Service {
    workload::service(db)
}

/// The status `db` should have when its Deployment is `deployment` (as last seen, if any) and
/// nothing blocks it.
pub fn status(db: &Database, deployment: Option<&DeploymentView>) -> DatabaseStatus {
    let plan = upgrade::Plan::steady(&db.spec.image);
    let seen = status::Seen { deployment, ..Default::default() };
    status::desired(db, &seen, &plan, &crate::database::now())
}
