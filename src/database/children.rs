//! The phases that write a Database's children: its Secret, its claim, its Deployment and
//! Service, each written only where it differs from what the Database wants, through the
//! runtime's [`Writer`].
//!
//! - Every child kind is cached only as far as it carries the operator's label, so the
//!   operator's memory grows with its Databases, not with the cluster's objects. A same-named
//!   object of someone else's is then invisible to the cache: the writer creates a missing
//!   child create-only and reports a name held by another object as foreign, which blocks the
//!   Database (`NotOwned`); it is never adopted or overwritten.
//! - The Secret is created once and never written again (a password the database was
//!   initialised with must not change under it); a Secret of the user's own is not written.
//! - A child the apiserver refuses for good (invalid, or over a quota) blocks the Database
//!   with the apiserver's own words; any other failure is an error to retry.
//! - What was written is told in the Database's events: one `Created` or `Updated` per phase,
//!   naming every child it wrote ([`Report::writes`]).

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use kube_client::api::Api;
use kube_core::Resource;
use operator_runtime::informer::key_of;
use operator_runtime::write::{self, Created, Ensured, Object, Refusal, Wrote};
use serde::Serialize;
use tracing::info;

use super::reconcile::{DatabaseReconciler, Error, Halt, Pass, Step};
use super::restore::Restore;
use super::status::Blocker;
use crate::api::{Database, Role};
use crate::engine::Engine;
use crate::resources::meta::{is_controlled_by, is_ours};
use crate::resources::restore::with_restore;
use crate::resources::view::{DeploymentView, PersistentVolumeClaimView, ServiceView};
use crate::resources::{claim, replication, secret, workload};

impl DatabaseReconciler {
    /// The generated Secret: created when missing, never written again. A Secret of that name
    /// that is not the Database's blocks it. A Secret that is gone while the Database's claim
    /// exists is not made again: the data on the claim was initialised with the password it
    /// held, and a new password would lock every client out while the probes (which need no
    /// password) said Ready; the Database says `CredentialsLost` instead.
    pub(super) async fn credentials(&self, pass: &mut Pass<'_>, engine: &dyn Engine) -> Step {
        let db = pass.db;
        if !secret::generated(db) {
            return Ok(());
        }
        let name = secret::secret_name(db);
        match self.stores.secrets.get(&pass.key(&name)) {
            Some(live) if is_ours(&live.metadata, db) => return Ok(()),
            Some(_) => return Err(Blocker::NotOwned { kind: "Secret", name }.into()),
            None => {}
        }
        let claim = claim::claim_name(db);
        if self.stores.claims.get(&pass.key(&claim)).is_some_and(|c| claim::is_ours(&c, db)) {
            // The cache may lag behind a Secret just created: the apiserver decides.
            return match self.uncached::<Secret>(db, &name).await? {
                Some(live) if is_ours(&live, db) => Ok(()),
                Some(_) => Err(Blocker::NotOwned { kind: "Secret", name }.into()),
                None => Err(Blocker::CredentialsLost { secret: name, claim }.into()),
            };
        }
        let secret = secret::new_secret(db, engine).map_err(|e| Error::Random(e.to_string()))?;
        self.create_secret(pass, &secret).await
    }

    /// Creates `secret`, a generated one of `pass`'s Database, once: one of that name found
    /// there is used if it is the Database's and blocks it otherwise.
    pub(super) async fn create_secret(&self, pass: &mut Pass<'_>, secret: &Secret) -> Step {
        let (db, name) = (pass.db, secret.metadata.name.clone().unwrap_or_default());
        match self.writer.create(secret).await {
            Ok(Created::New) => {
                info!(child = %key_of(secret), reason = "Created", "wrote Secret");
                pass.report.writes("Database", &[("Secret", &name, &Wrote::Created)]);
                Ok(())
            }
            Ok(Created::Existed(meta)) if is_ours(&meta, db) => Ok(()),
            Ok(Created::Existed(_)) => Err(Blocker::NotOwned { kind: "Secret", name }.into()),
            Err(error) => Err(refused(db, "Secret", &key_of(secret), error)),
        }
    }

    /// The data claim: written where it differs (it grows, never shrinks). A claim of that name
    /// that is not the Database's blocks it, and so does one that waits for a StorageClass
    /// that does not exist. Once its uid is recorded (`status.claimUID`), a claim that is gone
    /// is not made again and one with another uid is not adopted: both block the Database.
    pub(super) async fn volume(&self, pass: &mut Pass<'_>) -> Step {
        let db = pass.db;
        let name = claim::claim_name(db);
        let live = self.stores.claims.get(&pass.key(&name));
        if live.as_deref().is_some_and(|claim| !claim::is_ours(claim, db)) {
            return Err(Blocker::NotOwned { kind: "PersistentVolumeClaim", name }.into());
        }
        // The claim the data lives on, once recorded, is the only one: never a new, empty one
        // in its place, nor another that carries its name and labels.
        if let Some(uid) = db.status.as_ref().and_then(|s| s.claim_uid.clone()) {
            let found = match &live {
                Some(claim) => claim.metadata.uid.clone(),
                // The cache may lag behind the claim just created: the apiserver decides.
                None => self
                    .uncached::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(db, &name)
                    .await?
                    .and_then(|claim| claim.uid),
            };
            let database = pass.name();
            match found {
                None => return Err(Blocker::ClaimLost { database, claim: name, uid }.into()),
                Some(found) if found != uid => {
                    return Err(Blocker::ClaimReplaced { database, claim: name, uid, found }.into());
                }
                Some(_) => {}
            }
        }
        let desired = claim::claim(db, live.as_deref());
        let step = self.ensure(db, desired, live, |claim: &PersistentVolumeClaimView| claim::is_ours(claim, db)).await;
        pass.report.writes("Database", &[("PersistentVolumeClaim", &name, &wrote(&step))]);
        let (written, _) = step?;
        pass.claim_uid = written.metadata.uid.clone();
        match self.missing_storage_class(db, &written).await? {
            Some(blocker) => Err(blocker.into()),
            None => Ok(()),
        }
    }

    /// The Deployment (running the image the plan chose, with a restore's init container while
    /// there is one) and the Service. Both are written concurrently when the Deployment is
    /// cached; a Deployment the cache cannot show may be foreign, and then no Service of ours
    /// may front its pods, so it goes first.
    pub(super) async fn workload(&self, pass: &mut Pass<'_>) -> Step {
        let db = pass.db;
        let key = key_of(db);
        let (live_deployment, live_service) = (self.stores.deployments.get(&key), self.stores.services.get(&key));
        let mut desired = workload::deployment_running(db, &pass.plan.image, self.rollout_marker.as_deref());
        if crate::api::replicated(db) {
            let role = if pass.primary == Some(1) { Role::Primary } else { Role::Replica };
            replication::as_instance(&mut desired, db, 1, role);
        }
        if let (Restore::From { source, .. }, Some(engine)) = (&pass.restore, pass.engine) {
            with_restore(&mut desired, engine, source);
        }
        let deployment_ours = |d: &DeploymentView| is_controlled_by(&d.metadata, db);
        let service_ours = |s: &ServiceView| is_controlled_by(&s.metadata, db);
        let (deployment, service) = if live_deployment.is_some() {
            let (deployment, service) = futures::join!(
                self.ensure(db, desired, live_deployment, deployment_ours),
                self.ensure(db, workload::service(db), live_service, service_ours),
            );
            (deployment, Some(service))
        } else {
            let deployment = self.ensure(db, desired, None, deployment_ours).await;
            let service = match deployment {
                Ok(_) => Some(self.ensure(db, workload::service(db), live_service, service_ours).await),
                Err(_) => None,
            };
            (deployment, service)
        };
        let name = pass.name();
        let service_wrote = service.as_ref().map_or(Wrote::Nothing, wrote);
        pass.report
            .writes("Database", &[("Deployment", &name, &wrote(&deployment)), ("Service", &name, &service_wrote)]);
        let (deployment, _) = deployment?;
        pass.deployment = Some(deployment);
        service.transpose()?;
        Ok(())
    }

    /// The metadata of `db`'s sibling `name` of kind `K` as the apiserver has it now, for a
    /// child the cache does not show (it may lag behind one just created).
    async fn uncached<K>(&self, db: &Database, name: &str) -> Result<Option<kube_core::ObjectMeta>, Error>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + k8s_openapi::Resource
            + Clone
            + serde::de::DeserializeOwned
            + Debug,
    {
        let api: Api<K> =
            Api::namespaced(self.writer.client().clone(), db.metadata.namespace.as_deref().unwrap_or_default());
        let live = api.get_metadata_opt(name).await;
        let what = format!("{} {name}", <K as k8s_openapi::Resource>::KIND);
        Ok(live.map_err(|source| Error::Read { what, source })?.map(|live| live.metadata))
    }

    /// Brings one child to `desired` ([`Writer::ensure`](operator_runtime::write::Writer::ensure)):
    /// the child as written and what was written, or what blocks the Database.
    pub(super) async fn ensure<T, V>(
        &self,
        db: &Database,
        desired: T,
        live: Option<Arc<V>>,
        ours: impl Fn(&V) -> bool,
    ) -> Step<(Arc<V>, Wrote)>
    where
        T: Resource<DynamicType = ()> + k8s_openapi::Resource + Debug + Serialize,
        V: Object,
    {
        let kind = <T as k8s_openapi::Resource>::KIND;
        let (key, name) = (key_of(&desired), desired.meta().name.clone().unwrap_or_default());
        match self.writer.ensure(desired, live, ours).await {
            Ok(Ensured::Written(child, wrote)) => Ok((child, wrote)),
            Ok(Ensured::Foreign) => Err(Blocker::NotOwned { kind, name }.into()),
            Err(error) => Err(refused(db, kind, &key, error)),
        }
    }

    /// Whether a claim that waits to be bound waits for a StorageClass that does not exist
    /// (the claim's own events say so too, but the Database is where a user looks). A read the
    /// operator may not make (the namespaced RBAC grants no cluster-scoped reads) tells nothing.
    async fn missing_storage_class(
        &self,
        db: &Database,
        claim: &PersistentVolumeClaimView,
    ) -> Result<Option<Blocker>, Error> {
        let wanted = db.spec.storage.as_ref().and_then(|s| s.storage_class_name.clone());
        let (Some(name), Some("Pending")) = (wanted, claim.phase()) else { return Ok(None) };
        let classes: Api<StorageClass> = Api::all(self.writer.client().clone());
        match classes.get_opt(&name).await {
            Ok(None) => Ok(Some(Blocker::MissingStorageClass { name })),
            Ok(Some(_)) => Ok(None),
            Err(kube_client::Error::Api(status)) if status.code == 403 => Ok(None),
            Err(source) => Err(Error::Read { what: format!("StorageClass {name}"), source }),
        }
    }
}

/// What a step that wrote a child wrote: nothing, when it stopped.
pub(super) fn wrote<V>(step: &Step<(Arc<V>, Wrote)>) -> Wrote {
    step.as_ref().map_or(Wrote::Nothing, |(_, wrote)| wrote.clone())
}

/// A failed write of a child of kind `kind`: the apiserver's refusal of the child itself
/// blocks the Database (retrying the same child cannot help); anything else is retried.
pub(super) fn refused(db: &Database, kind: &'static str, key: &str, error: kube_client::Error) -> Halt {
    match write::refusal(&error) {
        Some(Refusal::Quota(message)) => Blocker::QuotaExceeded { kind, message }.into(),
        Some(Refusal::Invalid(message)) => {
            // The apiserver quotes the refused value ("Invalid value: \"<name>\""); the object's
            // name alone is quoted in every refusal ("deployments.apps \"x\"").
            let name = db.metadata.name.as_deref().unwrap_or_default();
            let name_is_the_cause = message.contains(&format!("Invalid value: \"{name}\""));
            Blocker::Rejected { kind, message, name_is_the_cause }.into()
        }
        None => Error::Write { what: format!("{kind} {key}"), source: error }.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube_client::Error {
        kube_client::Error::Api(Box::new(kube_core::Status { code, message: message.into(), ..Default::default() }))
    }

    fn database(name: &str) -> Database {
        let mut db =
            Database::new(name, serde_json::from_value(serde_json::json!({"size": "small", "image": "x"})).unwrap());
        db.metadata.namespace = Some("ns".into());
        db
    }

    #[test]
    fn a_refused_child_blocks_with_the_apiservers_words_and_other_failures_are_retried() {
        let db = database("Orders");
        let quota = refused(&db, "PersistentVolumeClaim", "ns/orders-data", api_error(403, "exceeded quota: q"));
        assert!(matches!(quota, Halt::Blocked(Blocker::QuotaExceeded { kind: "PersistentVolumeClaim", .. })));
        let by_name = refused(&db, "Service", "ns/Orders", api_error(422, "metadata.name: Invalid value: \"Orders\""));
        assert!(matches!(by_name, Halt::Blocked(Blocker::Rejected { kind: "Service", name_is_the_cause: true, .. })));
        let by_spec = refused(&db, "Deployment", "ns/Orders", api_error(422, "image: Invalid value: \" x\""));
        assert!(matches!(by_spec, Halt::Blocked(Blocker::Rejected { name_is_the_cause: false, .. })));
        assert!(matches!(refused(&db, "Deployment", "ns/Orders", api_error(500, "")), Halt::Failed(_)));
    }

    #[test]
    fn a_step_that_stopped_wrote_nothing() {
        let stopped: Step<(Arc<ServiceView>, Wrote)> =
            Err(Blocker::NotOwned { kind: "Service", name: "x".into() }.into());
        assert_eq!(wrote(&stopped), Wrote::Nothing);
        assert_eq!(wrote(&Ok((Arc::new(ServiceView::default()), Wrote::Created))), Wrote::Created);
    }
}
