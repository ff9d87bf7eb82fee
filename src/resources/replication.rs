//! A Database of several instances (`spec.instances`, postgres): the replicas' Deployments
//! and claims, the replication Secret, the -rw and -ro Services, and what the primary's own
//! Deployment adds. Pure functions, as the rest of [`super`].
//!
//! - **One Deployment and one claim per instance**, as CloudNativePG manages one pod and one
//!   claim per instance rather than a StatefulSet (docs/design.md says why): instance 1 is the
//!   Database's own Deployment and claim, unchanged; instance `i` is `<name>-instance-<i>`.
//! - **Roles are labels** (`example.com/role: primary|replica`, on the pods): the Database's
//!   Service and `<name>-rw` select the primary, `<name>-ro` the replicas. Every pod also
//!   carries its instance's name (`example.com/database-instance`). Any instance may be the
//!   primary ([`crate::api::PRIMARY_ANNOTATION`]); a change of role is a change of its
//!   Deployment's pod template, so the instance restarts in its new role.
//! - **One node each**: a required pod anti-affinity on the Database's pods by hostname, so
//!   that losing a node loses one instance; an instance the nodes cannot place stays Pending,
//!   and the Database says so in the pod's words ([`crate::database`]'s pods phase).
//! - **Voluntary disruptions one at a time**: a PodDisruptionBudget `<name>` over the
//!   Database's pods, `maxUnavailable: 1`, so that a node drain (an eviction) takes at most
//!   one instance away at once; a pod that fails or a node that is lost is no eviction and
//!   is not held back.
//! - **Credentials**: the replication role's password is in a Secret of its own,
//!   `<name>-replication` (key `password`), generated once like the credentials, read by
//!   every instance through `secretKeyRef`.
//! - **Synchronous commits** (`spec.replication.synchronous`): the primary's environment
//!   names the replicas a commit waits for (any one), which its start passes to postgres.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Affinity, PersistentVolumeClaim, PodAffinityTerm, PodAntiAffinity, PodSpec, Secret, Service,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::meta::{ROLE_LABEL, child_of, instance_selector, role_selector};
use super::view::PersistentVolumeClaimView;
use super::{claim, secret, workload};
use crate::api::{Database, Role, instance_name, synchronous};
use crate::engine::{
    self, ANY_ONE_REPLICA, REPLICATION_PASSWORD_VARIABLE, SYNCHRONOUS_STANDBYS_VARIABLE, WAL_KEEP_VARIABLE, WAL_KEPT,
    from_secret,
};

/// The label of an instance's pods (and its Deployment's selector) that names the instance.
pub(crate) const INSTANCE_NAME_LABEL: &str = "example.com/database-instance";
/// The key of the replication Secret that holds the password.
const PASSWORD_KEY: &str = "password";

/// The name of the Secret of the replication role's password: `<name>-replication`.
pub(crate) fn secret_name(db: &Database) -> String {
    format!("{}-replication", db.metadata.name.as_deref().unwrap_or_default())
}

/// A new replication Secret for `db`, with a fresh password.
///
/// # Errors
///
/// When the operating system's random generator fails (it never should).
pub(crate) fn new_secret(db: &Database) -> Result<Secret, rand::rand_core::OsError> {
    let mut metadata = child_of(db, secret_name(db));
    if claim::retained(db) {
        metadata.owner_references = Some(Vec::new());
    }
    Ok(Secret {
        metadata,
        type_: Some("Opaque".into()),
        string_data: Some(BTreeMap::from([(PASSWORD_KEY.to_string(), secret::password()?)])),
        ..Default::default()
    })
}

/// The name of the Service of the primary: `<name>-rw`.
pub(crate) fn primary_service_name(db: &Database) -> String {
    format!("{}-rw", db.metadata.name.as_deref().unwrap_or_default())
}

/// The -rw (the primary) and -ro (the replicas) Services of `db`.
pub(crate) fn services(db: &Database) -> [Service; 2] {
    let name = db.metadata.name.as_deref().unwrap_or_default();
    [(Role::Primary, primary_service_name(db)), (Role::Replica, format!("{name}-ro"))].map(|(role, name)| {
        let mut service = workload::service(db);
        service.metadata = child_of(db, name);
        service.spec.get_or_insert_with(Default::default).selector = Some(role_selector(db, role));
        service
    })
}

/// The PodDisruptionBudget of `db`'s instances, named as the Database: at most one of them
/// evicted at a time.
pub(crate) fn disruption_budget(db: &Database) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: child_of(db, db.metadata.name.clone().unwrap_or_default()),
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector { match_labels: Some(instance_selector(db)), ..Default::default() }),
            max_unavailable: Some(IntOrString::Int(1)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The Deployment of instance `ordinal` of `db` in `role`, running `image`.
pub(crate) fn instance_deployment(
    db: &Database,
    ordinal: i32,
    role: Role,
    image: &str,
    marker: Option<&str>,
) -> Deployment {
    let mut deployment = workload::deployment_running(db, image, marker);
    as_instance(&mut deployment, db, ordinal, role);
    deployment
}

/// What makes the Database's Deployment (`workload::deployment_running`) instance `ordinal`
/// in `role`: instance 1 keeps its name, selector and claim (a Deployment's selector cannot
/// change), another takes its own; each gets its labels, the anti-affinity and the replication
/// password; the primary starts the engine's server (and, synchronous, names the replicas a
/// commit waits for), a replica the engine's replica start, following the -rw Service.
pub(crate) fn as_instance(deployment: &mut Deployment, db: &Database, ordinal: i32, role: Role) {
    let name = instance_name(db, ordinal);
    if ordinal != 1 {
        deployment.metadata.name = Some(name.clone());
        let spec = deployment.spec.as_mut().expect("an engine's Deployment has a spec");
        spec.selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(INSTANCE_NAME_LABEL.into(), name.clone());
        for volume in pod_spec(deployment).volumes.iter_mut().flatten() {
            if let Some(claim) = &mut volume.persistent_volume_claim {
                claim.claim_name = claim_name(&name);
            }
        }
    }
    with_instance(deployment, db, &name, role);
    let container = &mut pod_spec(deployment).containers[0];
    match (role, engine::of_database(db)) {
        (Role::Primary, _) => {
            let env = container.env.get_or_insert_with(Vec::new);
            env.push(engine::value(WAL_KEEP_VARIABLE, WAL_KEPT));
            if synchronous(db) {
                env.push(engine::value(SYNCHRONOUS_STANDBYS_VARIABLE, ANY_ONE_REPLICA));
            }
        }
        (Role::Replica, Some(engine)) => {
            let script = engine.replica_script(&primary_service_name(db)).unwrap_or_else(|| engine.server_script());
            container.args = Some(engine::fence::fenced(engine.data_dir(), &script));
        }
        _ => {}
    }
}

/// The claim of replica `ordinal` of `db`, given the live one: as the Database's own claim.
pub(crate) fn replica_claim(
    db: &Database,
    ordinal: i32,
    live: Option<&PersistentVolumeClaimView>,
) -> PersistentVolumeClaim {
    claim::claim_named(db, claim_name(&instance_name(db, ordinal)), live)
}

/// The claim of instance `instance`: `<instance>-data`.
pub(crate) fn claim_name(instance: &str) -> String {
    format!("{instance}-data")
}

/// An instance's labels, anti-affinity and replication password.
fn with_instance(deployment: &mut Deployment, db: &Database, name: &str, role: Role) {
    let template = &mut deployment.spec.as_mut().expect("a Deployment has a spec").template;
    let labels = template.metadata.get_or_insert_with(Default::default).labels.get_or_insert_with(Default::default);
    labels.insert(ROLE_LABEL.into(), role.label().into());
    labels.insert(INSTANCE_NAME_LABEL.into(), name.into());
    let pod = pod_spec(deployment);
    pod.affinity = Some(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector { match_labels: Some(instance_selector(db)), ..Default::default() }),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    });
    let env = pod.containers[0].env.get_or_insert_with(Vec::new);
    env.push(from_secret(REPLICATION_PASSWORD_VARIABLE, &secret_name(db), PASSWORD_KEY));
}

fn pod_spec(deployment: &mut Deployment) -> &mut PodSpec {
    deployment.spec.as_mut().and_then(|s| s.template.spec.as_mut()).expect("a Deployment has a pod spec")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DatabaseSpec, EngineKind, Size};

    fn database() -> Database {
        let mut spec = DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres);
        spec.instances = Some(3);
        let mut db = Database::new("orders", spec);
        db.metadata.namespace = Some("shop".into());
        db.metadata.uid = Some("uid-1".into());
        db
    }

    fn labels(deployment: &Deployment) -> BTreeMap<String, String> {
        deployment.spec.clone().unwrap().template.metadata.unwrap().labels.unwrap()
    }

    #[test]
    fn a_replica_has_its_own_name_claim_selector_and_start_and_follows_the_rw_service() {
        let db = database();
        let replica = instance_deployment(&db, 2, Role::Replica, "postgres:17", None);
        assert_eq!(replica.metadata.name.as_deref(), Some("orders-instance-2"));
        let spec = replica.spec.clone().unwrap();
        assert_eq!(spec.selector.match_labels.unwrap()[INSTANCE_NAME_LABEL], "orders-instance-2");
        assert_eq!((labels(&replica)[ROLE_LABEL].as_str(), labels(&replica)["app"].as_str()), ("replica", "orders"));
        let pod = spec.template.spec.unwrap();
        let claim = pod.volumes.unwrap().into_iter().find_map(|v| v.persistent_volume_claim).unwrap();
        assert_eq!(claim.claim_name, "orders-instance-2-data");
        let args = pod.containers[0].args.clone().unwrap();
        assert!(args[2].contains("exec 9< '/var/lib/postgresql/data'"), "fenced: {}", args[2]);
        assert!(args[2].contains("primary='orders-rw'"), "{}", args[2]);
        let env = pod.containers[0].env.clone().unwrap();
        let password = env.iter().find(|e| e.name == "REPLICATION_PASSWORD").unwrap();
        let reference = password.value_from.clone().unwrap().secret_key_ref.unwrap();
        assert_eq!((reference.name.as_str(), reference.key.as_str()), ("orders-replication", "password"));
        assert_eq!(replica_claim(&db, 2, None).metadata.name.as_deref(), Some("orders-instance-2-data"));
    }

    #[test]
    fn any_instance_may_be_the_primary_and_the_first_keeps_its_name_selector_and_claim_as_a_replica() {
        let db = database();
        let pod = |d: &Deployment| d.spec.clone().unwrap().template.spec.unwrap();
        let script = |d: &Deployment| pod(d).containers[0].args.clone().unwrap()[2].clone();
        let claim = |d: &Deployment| pod(d).volumes.unwrap().into_iter().find_map(|v| v.persistent_volume_claim);
        let first = instance_deployment(&db, 1, Role::Replica, "postgres:17", None);
        assert_eq!(first.metadata.name.as_deref(), Some("orders"));
        assert_eq!(first.spec.clone().unwrap().selector, workload::deployment(&db).spec.unwrap().selector);
        assert_eq!(claim(&first).unwrap().claim_name, "orders-data");
        assert_eq!(labels(&first)[ROLE_LABEL], "replica");
        assert!(script(&first).contains("primary='orders-rw'"), "{}", script(&first));
        let third = instance_deployment(&db, 3, Role::Primary, "postgres:17", None);
        assert_eq!(
            (third.metadata.name.as_deref(), labels(&third)[ROLE_LABEL].as_str()),
            (Some("orders-instance-3"), "primary")
        );
        assert_eq!(claim(&third).unwrap().claim_name, "orders-instance-3-data");
        assert!(script(&third).contains("recovery.signal") && !script(&third).contains("primary_conninfo"));
        let env =
            |d: &Deployment, name: &str| pod(d).containers[0].env.clone().unwrap().into_iter().find(|e| e.name == name);
        assert_eq!(env(&third, "WAL_KEEP_SIZE").and_then(|e| e.value).as_deref(), Some("256MB"));
        assert_eq!(env(&first, "WAL_KEEP_SIZE"), None, "a replica keeps no WAL for others");
    }

    #[test]
    fn every_instance_keeps_off_the_nodes_of_the_others() {
        let db = database();
        let primary = instance_deployment(&db, 1, Role::Primary, "postgres:17", None);
        assert_eq!(labels(&primary)[ROLE_LABEL], "primary");
        for deployment in [primary, instance_deployment(&db, 3, Role::Replica, "postgres:17", None)] {
            let affinity = deployment.spec.unwrap().template.spec.unwrap().affinity.unwrap();
            let terms =
                affinity.pod_anti_affinity.unwrap().required_during_scheduling_ignored_during_execution.unwrap();
            assert_eq!(terms[0].topology_key, "kubernetes.io/hostname");
            assert_eq!(terms[0].label_selector.clone().unwrap().match_labels.unwrap(), instance_selector(&db));
        }
    }

    #[test]
    fn a_synchronous_primary_waits_for_any_one_replica_and_an_asynchronous_one_for_none() {
        let sync_env = |db: &Database| {
            let primary = instance_deployment(db, 1, Role::Primary, "postgres:17", None);
            let env = primary.spec.unwrap().template.spec.unwrap().containers[0].env.clone().unwrap_or_default();
            env.into_iter().find(|e| e.name == "SYNCHRONOUS_STANDBY_NAMES").and_then(|e| e.value)
        };
        let mut db = database();
        assert_eq!(sync_env(&db), None);
        db.spec.replication = Some(Box::new(crate::api::Replication { synchronous: Some(true), ..Default::default() }));
        assert_eq!(sync_env(&db).as_deref(), Some("ANY 1 (*)"));
        let replica = instance_deployment(&db, 2, Role::Replica, "postgres:17", None);
        let env = replica.spec.unwrap().template.spec.unwrap().containers[0].env.clone().unwrap();
        assert!(env.iter().all(|e| e.name != "SYNCHRONOUS_STANDBY_NAMES"), "a replica waits for nobody");
    }

    #[test]
    fn rw_selects_the_primary_and_ro_the_replicas() {
        let db = database();
        let [rw, ro] = services(&db);
        assert_eq!(rw.metadata.name.as_deref(), Some("orders-rw"));
        assert_eq!(rw.spec.unwrap().selector.unwrap()[ROLE_LABEL], "primary");
        assert_eq!(ro.metadata.name.as_deref(), Some("orders-ro"));
        assert_eq!(ro.spec.unwrap().selector.unwrap()[ROLE_LABEL], "replica");
        assert_eq!(workload::service(&db).spec.unwrap().selector.unwrap()[ROLE_LABEL], "primary");
    }

    #[test]
    fn a_drain_evicts_one_instance_at_a_time() {
        let db = database();
        let budget = disruption_budget(&db);
        assert_eq!(budget.metadata.name.as_deref(), Some("orders"));
        let spec = budget.spec.unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(spec.min_available, None);
        assert_eq!(spec.selector.unwrap().match_labels.unwrap(), instance_selector(&db));
    }

    #[test]
    fn the_replication_secret_holds_a_password_only() {
        let secret = new_secret(&database()).unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("orders-replication"));
        let data = secret.string_data.unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), ["password"]);
        assert_eq!(data["password"].len(), 32);
    }
}
