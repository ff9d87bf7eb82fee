//! The workload of a Database, as the operator wants it: a Deployment running the database
//! container and a Service in front of it (with an engine, the claim of [`super::claim`] and
//! the Secret of [`super::secret`] come first).
//!
//! These are the `deploymentForDatabase` of the Go sample this project grew from (docs/design.md
//! names its article), plus what it left out: labels that say who manages the objects,
//! resources from the size, a Service, and a controller ownerReference so that deleting the
//! Database garbage-collects them.
//!
//! A generic Database (no engine) gets exactly the Go sample's contract: container `database`
//! running the image as given, port 8080 `http`. A Database with an engine gets what the
//! engine's official image needs ([`super::engine`]): its port named after it, its data
//! directory on the claim, its credentials from the Secret, probes with its own tools, the
//! "restricted" Pod Security level (its non-root uid, `fsGroup` for the volume, no
//! capabilities, no privilege escalation, seccomp RuntimeDefault), and the `Recreate`
//! strategy, so that two pods never share a ReadWriteOnce volume.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec,
    ResourceRequirements, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_core::ObjectMeta;

use super::meta::{child_of, instance_selector, labels, selector};
use super::{claim, secret};
use crate::api::Database;
use crate::engine::{self, Engine};

/// The name of the database container.
pub(crate) const CONTAINER_NAME: &str = "database";
/// The port the database serves, named `http`.
pub(crate) const PORT: i32 = 8080;

/// The name of the volume that holds the data, in the pod.
pub(crate) const DATA_VOLUME: &str = "data";

/// The label of the rollout benchmark's marker (hack/bench/rollout.sh): an operator started
/// with one (`--bench-rollout-marker`, hidden) puts it on every Deployment and its pod
/// template, so a start with a new marker changes every Deployment at once, as an upgrade of
/// the operator that changes the pod template would. Without one (always, outside the
/// benchmark), nothing changes.
pub const ROLLOUT_LABEL: &str = "bench.example.com/rollout";

/// The Deployment `db` wants: one replica of its image, resources from its size; for an
/// engine, everything its image needs (see the module's documentation).
#[cfg(test)]
pub(crate) fn deployment(db: &Database) -> Deployment {
    deployment_running(db, &db.spec.image, None)
}

/// The Deployment `db` wants, running `image` (which the upgrade plan decides: `spec.image`,
/// or the image that was Ready before a refused or rolled-back upgrade), with the rollout
/// benchmark's `marker` when it has one.
pub(crate) fn deployment_running(db: &Database, image: &str, marker: Option<&str>) -> Deployment {
    let mut deployment = generic_deployment(db, image, marker);
    if let Some(engine) = engine::of_database(db) {
        with_engine(&mut deployment, db, engine);
    }
    deployment
}

/// What a Deployment with an engine adds to the generic one.
fn with_engine(deployment: &mut Deployment, db: &Database, engine: &dyn Engine) {
    let spec = deployment.spec.as_mut().expect("the generic Deployment has a spec");
    spec.strategy = Some(DeploymentStrategy { type_: Some("Recreate".into()), rolling_update: None });
    let pod = spec.template.spec.as_mut().expect("the generic Deployment has a pod spec");
    pod.security_context = Some(engine::pod_security(engine));
    // A database never calls the Kubernetes API: no token in its pod to steal.
    pod.automount_service_account_token = Some(false);
    // None, said explicitly: a restore's init container leaves once the Database is restored
    // (see `backups::with_restore`), and only a list the apply sets can say it left.
    pod.init_containers = Some(Vec::new());
    pod.volumes = Some(vec![Volume {
        name: DATA_VOLUME.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim::claim_name(db),
            read_only: None,
        }),
        ..Default::default()
    }]);
    let container = &mut pod.containers[0];
    container.ports = Some(vec![ContainerPort {
        name: Some(engine.name().into()),
        container_port: engine.port(),
        protocol: Some("TCP".into()),
        ..Default::default()
    }]);
    container.env = Some(engine.env(&secret::secret_name(db)));
    // The image's entrypoint runs `sh` as it is; the shell locks the data volume, then runs
    // the server.
    container.args = Some(engine::fence::fenced(engine.data_dir(), &engine::server_script(engine)));
    container.volume_mounts = Some(vec![VolumeMount {
        name: DATA_VOLUME.into(),
        mount_path: engine.data_dir().into(),
        ..Default::default()
    }]);
    container.readiness_probe = Some(engine::readiness_probe(engine));
    container.liveness_probe = Some(engine::liveness_probe(engine));
    container.startup_probe = Some(engine::startup_probe(engine));
    container.security_context = Some(engine::container_security());
    // A server that exits leaves its last words where the pod's status shows them
    // (`crate::database::pods` reads them for a full volume).
    container.termination_message_policy = Some(engine::LAST_WORDS.into());
    if let Some(script) = engine.initdb_script() {
        container.env.get_or_insert_with(Vec::new).push(engine::value(engine::INITDB_SCRIPT_VARIABLE, script));
        with_initdb_dir(pod);
    }
}

/// The name of the `emptyDir` volume at [`engine::INITDB_DIR`].
const INITDB_VOLUME: &str = "initdb";

/// Mounts an `emptyDir` at [`engine::INITDB_DIR`] in the database container, where the server
/// finds what its first start runs (the engine's script, a restore's dump), unless it is there.
pub(crate) fn with_initdb_dir(pod: &mut PodSpec) {
    let volumes = pod.volumes.get_or_insert_with(Vec::new);
    if volumes.iter().any(|v| v.name == INITDB_VOLUME) {
        return;
    }
    volumes.push(Volume {
        name: INITDB_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    });
    pod.containers[0].volume_mounts.get_or_insert_with(Vec::new).push(initdb_mount());
}

/// The mount of the [`INITDB_VOLUME`] volume.
pub(crate) fn initdb_mount() -> VolumeMount {
    VolumeMount { name: INITDB_VOLUME.into(), mount_path: engine::INITDB_DIR.into(), ..Default::default() }
}

/// [`labels`], plus the rollout benchmark's `marker` when there is one.
fn deployment_labels(db: &Database, marker: Option<&str>) -> BTreeMap<String, String> {
    let mut labels = labels(db);
    if let Some(marker) = marker {
        labels.insert(ROLLOUT_LABEL.to_string(), marker.to_string());
    }
    labels
}

/// The Go sample's Deployment: the image as given, port 8080 `http`, resources from the size.
fn generic_deployment(db: &Database, image: &str, marker: Option<&str>) -> Deployment {
    let size = db.spec.size.resources();
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([("cpu".to_string(), Quantity(cpu.into())), ("memory".to_string(), Quantity(memory.into()))])
    };
    Deployment {
        metadata: ObjectMeta { labels: Some(deployment_labels(db, marker)), ..child_of(db, name(db)) },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector { match_labels: Some(selector(db)), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(deployment_labels(db, marker)), ..Default::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: CONTAINER_NAME.into(),
                        image: Some(image.to_string()),
                        ports: Some(vec![ContainerPort {
                            name: Some("http".into()),
                            container_port: PORT,
                            protocol: Some("TCP".into()),
                            ..Default::default()
                        }]),
                        resources: Some(ResourceRequirements {
                            requests: Some(quantities(size.cpu_request, size.memory_request)),
                            limits: Some(quantities(size.cpu_limit, size.memory_limit)),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// The Service `db` wants: port 8080 (`http`) in front of its pods, or the engine's port
/// named after it; in front of the primary's pod only, when `db` has replicas.
pub(crate) fn service(db: &Database) -> Service {
    let selector = if crate::api::replicated(db) {
        super::meta::role_selector(db, crate::api::Role::Primary)
    } else {
        instance_selector(db)
    };
    let (port_name, port) = engine::of_database(db).map_or(("http", PORT), |engine| (engine.name(), engine.port()));
    Service {
        metadata: child_of(db, name(db)),
        spec: Some(ServiceSpec {
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some(port_name.into()),
                port,
                target_port: Some(IntOrString::String(port_name.into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// The Deployment's and the Service's name: the Database's.
fn name(db: &Database) -> String {
    db.metadata.name.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DatabaseSpec, Size};
    use crate::resources::meta::{MANAGER, is_controlled_by};

    pub(crate) fn database(size: Size) -> Database {
        let mut db = Database::new("orders", DatabaseSpec::new(size, "postgres:17"));
        db.metadata.namespace = Some("shop".into());
        db.metadata.uid = Some("uid-1".into());
        db
    }

    #[test]
    fn deployment_runs_the_image_on_port_8080_with_the_size_resources() {
        let deployment = deployment(&database(Size::Medium));
        let pod = deployment.spec.unwrap().template.spec.unwrap();
        let container = &pod.containers[0];
        assert_eq!(container.name, "database");
        assert_eq!(container.image.as_deref(), Some("postgres:17"));
        let port = &container.ports.as_ref().unwrap()[0];
        assert_eq!((port.container_port, port.name.as_deref()), (8080, Some("http")));
        let resources = container.resources.as_ref().unwrap();
        let size = Size::Medium.resources();
        assert_eq!(resources.limits.as_ref().unwrap()["memory"].0, size.memory_limit);
        assert_eq!(resources.requests.as_ref().unwrap()["cpu"].0, size.cpu_request);
    }

    #[test]
    fn children_carry_a_controller_owner_reference_and_the_managed_by_label() {
        let db = database(Size::Small);
        for meta in [deployment(&db).metadata, service(&db).metadata] {
            let owner = &meta.owner_references.unwrap()[0];
            assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("Database", "uid-1", Some(true)));
            assert_eq!(meta.labels.unwrap()["app.kubernetes.io/managed-by"], MANAGER);
        }
    }

    #[test]
    fn an_object_without_our_owner_reference_is_not_ours() {
        let db = database(Size::Small);
        let mut foreign = deployment(&db);
        foreign.metadata.owner_references = None;
        assert!(!is_controlled_by(&foreign.metadata, &db));
        assert!(is_controlled_by(&deployment(&db).metadata, &db));
    }

    #[test]
    fn a_generic_database_gets_exactly_the_seeds_deployment() {
        let deployment = serde_json::to_value(deployment(&database(Size::Small))).unwrap();
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod.as_object().unwrap().keys().collect::<Vec<_>>(), ["containers"]);
        let container = pod["containers"][0].as_object().unwrap();
        assert_eq!(container.keys().collect::<Vec<_>>(), ["image", "name", "ports", "resources"]);
        assert!(deployment["spec"].get("strategy").is_none());
    }

    #[test]
    fn a_database_with_an_engine_runs_restricted_with_its_volume_secret_probes_and_port() {
        use crate::api::EngineKind;
        let mut db = database(Size::Small);
        db.spec.engine = Some(EngineKind::Postgres);
        let deployment = deployment(&db);
        let spec = deployment.spec.unwrap();
        assert_eq!(spec.strategy.unwrap().type_.as_deref(), Some("Recreate"));
        let pod = spec.template.spec.unwrap();
        let context = pod.security_context.unwrap();
        assert_eq!(
            (context.run_as_user, context.fs_group, context.run_as_non_root),
            (Some(999), Some(999), Some(true))
        );
        assert_eq!(context.seccomp_profile.unwrap().type_, "RuntimeDefault");
        assert_eq!(
            pod.volumes.as_ref().unwrap()[0].persistent_volume_claim.as_ref().unwrap().claim_name,
            "orders-data"
        );
        let container = &pod.containers[0];
        assert_eq!(container.name, "database");
        let port = &container.ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.container_port), (Some("postgres"), 5432));
        assert_eq!(container.volume_mounts.as_ref().unwrap()[0].mount_path, "/var/lib/postgresql/data");
        // The server starts once it holds the data volume's lock (engine::fence).
        let args = container.args.as_ref().unwrap();
        assert_eq!(args[..2], ["sh", "-c"]);
        assert!(args[2].contains("exec 9< '/var/lib/postgresql/data'"), "{}", args[2]);
        let last = args[2].lines().last().unwrap();
        assert!(last.starts_with("exec docker-entrypoint.sh postgres"), "{}", args[2]);
        let env = |name: &str| container.env.as_ref().unwrap().iter().find(|e| e.name == name).cloned();
        let password = env("DATABASE_PASSWORD").unwrap();
        let reference = password.value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap();
        assert_eq!((reference.name.as_str(), reference.key.as_str()), ("orders-credentials", "password"));
        // The application's user is made by the first start's script, not as the superuser.
        assert_eq!(env("POSTGRES_USER").unwrap().value.as_deref(), Some("postgres"));
        assert!(env("POSTGRES_PASSWORD").is_none(), "the superuser's password is made in the container");
        assert!(env("DATABASE_INITDB_SCRIPT").unwrap().value.unwrap().contains("CREATE ROLE"));
        assert!(args[2].contains("> /docker-entrypoint-initdb.d/00-operator.sh"), "{}", args[2]);
        let initdb = container.volume_mounts.as_ref().unwrap().iter().find(|m| m.name == "initdb").unwrap();
        assert_eq!(initdb.mount_path, "/docker-entrypoint-initdb.d");
        assert!(pod.volumes.as_ref().unwrap().iter().any(|v| v.name == "initdb" && v.empty_dir.is_some()));
        assert!(container.readiness_probe.is_some() && container.liveness_probe.is_some());
        assert_eq!(pod.automount_service_account_token, Some(false), "no token in a database's pod");
        let startup = container.startup_probe.as_ref().expect("a startup probe");
        let budget = |p: &k8s_openapi::api::core::v1::Probe| p.period_seconds.unwrap() * p.failure_threshold.unwrap();
        assert!(budget(startup) >= 3600, "an hour for a first start, a restore or a crash recovery");
        let liveness = container.liveness_probe.as_ref().unwrap();
        assert_eq!(liveness.initial_delay_seconds, None, "the startup probe holds liveness back");
        let security = container.security_context.as_ref().unwrap();
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.capabilities.as_ref().unwrap().drop.as_deref(), Some(&["ALL".to_string()][..]));
        let service = service(&db).spec.unwrap().ports.unwrap().remove(0);
        assert_eq!((service.name.as_deref(), service.port), (Some("postgres"), 5432));
    }

    /// A Database without an engine is byte-for-byte what it was before engines existed: the
    /// JSON below was printed by the operator of that time (commit 8e2cebb) for this Database.
    /// But for the Service's selector: the operator's instance and managed-by labels, not the
    /// bare `app` any pod may carry (a Service's selector changes in place, and the pods have
    /// carried both labels since then).
    #[test]
    fn a_generic_database_s_children_are_byte_for_byte_those_from_before_engines() {
        let db = database(Size::Medium);
        assert_eq!(
            serde_json::to_string(&deployment(&db)).unwrap(),
            include_str!("testdata/generic-deployment.json").trim()
        );
        let selector =
            r#""selector":{"app.kubernetes.io/instance":"orders","app.kubernetes.io/managed-by":"database-operator"}"#;
        let before = include_str!("testdata/generic-service.json").trim();
        assert_eq!(
            serde_json::to_string(&service(&db)).unwrap(),
            before.replace(r#""selector":{"app":"orders"}"#, selector)
        );
    }
}
