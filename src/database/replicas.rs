//! The replicas phase: a Database of several instances (`spec.instances`, postgres) gets its
//! replication Secret, one claim and one Deployment per replica, its -rw and -ro Services
//! and its PodDisruptionBudget; the pass records each instance's role and readiness for the status.
//!
//! - Instance 1 is the Database's own Deployment (the workload phase wrote it, in its role:
//!   [`replication::as_instance`]); the others are this phase's, each in its role
//!   ([`super::failover`] says which is the primary). All run the image the plan chose, so an
//!   upgrade rolls them together. The Database's readiness is its primary's.
//! - The replication Secret is created once and never written again, like the credentials:
//!   a replica with a new password could no longer follow its primary.
//! - Each child is written only where it differs ([`DatabaseReconciler::ensure`]); a
//!   same-named object of someone else's blocks the Database (`NotOwned`), never adopted.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::children::wrote;
use super::reconcile::{DatabaseReconciler, Error, Pass, Step};
use super::status::Blocker;
use crate::api::{InstanceStatus, Role, instance_name, instances, replicated};
use crate::resources::claim;
use crate::resources::meta::{is_controlled_by, is_ours};
use crate::resources::replication;
use crate::resources::view::{DeploymentView, PersistentVolumeClaimView, ServiceView};

impl DatabaseReconciler {
    /// The replicas of a Database of several instances, and its -rw and -ro Services.
    pub(super) async fn replicas(&self, pass: &mut Pass<'_>) -> Step {
        let db = pass.db;
        if !replicated(db) {
            return Ok(());
        }
        self.replication_secret(pass).await?;
        let image = pass.plan.image.clone();
        let role = |ordinal| if pass.primary == Some(ordinal) { Role::Primary } else { Role::Replica };
        let first = pass.deployment.as_deref().is_some_and(|d| d.runs_ready(&image));
        let mut seen = vec![InstanceStatus {
            name: instance_name(db, 1),
            role: Some(role(1)),
            ready: first,
            ..Default::default()
        }];
        for ordinal in 2..=instances(db) {
            let name = instance_name(db, ordinal);
            let claim_name = replication::claim_name(&name);
            let live_claim = self.stores.claims.get(&pass.key(&claim_name));
            let desired_claim = replication::replica_claim(db, ordinal, live_claim.as_deref());
            let claim =
                self.ensure(db, desired_claim, live_claim, |c: &PersistentVolumeClaimView| claim::is_ours(c, db)).await;
            pass.report.writes("Database", &[("PersistentVolumeClaim", &claim_name, &wrote(&claim))]);
            claim?;
            let live = self.stores.deployments.get(&pass.key(&name));
            let marker = self.rollout_marker.as_deref();
            let desired = replication::instance_deployment(db, ordinal, role(ordinal), &image, marker);
            let deployment =
                self.ensure(db, desired, live, |d: &DeploymentView| is_controlled_by(&d.metadata, db)).await;
            pass.report.writes("Database", &[("Deployment", &name, &wrote(&deployment))]);
            let (deployment, _) = deployment?;
            let ready = deployment.runs_ready(&image);
            seen.push(InstanceStatus { name, role: Some(role(ordinal)), ready, ..Default::default() });
            // The Database's readiness and health are its primary's.
            if pass.primary == Some(ordinal) {
                pass.deployment = Some(deployment);
            }
        }
        for service in replication::services(db) {
            let name = service.metadata.name.clone().unwrap_or_default();
            let live = self.stores.services.get(&pass.key(&name));
            let step = self.ensure(db, service, live, |s: &ServiceView| is_controlled_by(&s.metadata, db)).await;
            pass.report.writes("Database", &[("Service", &name, &wrote(&step))]);
            step?;
        }
        let budget = replication::disruption_budget(db);
        let name = budget.metadata.name.clone().unwrap_or_default();
        let live = self.stores.disruption_budgets.get(&pass.key(&name));
        let step = self.ensure(db, budget, live, |b: &PodDisruptionBudget| is_controlled_by(&b.metadata, db)).await;
        pass.report.writes("Database", &[("PodDisruptionBudget", &name, &wrote(&step))]);
        step?;
        pass.instances = seen;
        Ok(())
    }

    /// The replication Secret: created when missing, never written again; one of that name
    /// that is not the Database's blocks it.
    async fn replication_secret(&self, pass: &mut Pass<'_>) -> Step {
        let db = pass.db;
        let name = replication::secret_name(db);
        match self.stores.secrets.get(&pass.key(&name)) {
            Some(live) if is_ours(&live.metadata, db) => return Ok(()),
            Some(_) => return Err(Blocker::NotOwned { kind: "Secret", name }.into()),
            None => {}
        }
        let secret = replication::new_secret(db).map_err(|e| Error::Random(e.to_string()))?;
        self.create_secret(pass, &secret).await
    }
}
