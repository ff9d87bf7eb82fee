//! The objects a Database owns, as the operator wants them: a Deployment running the
//! database container and a Service in front of it.
//!
//! These are the seed's `deploymentForDatabase`, plus what it left out: labels that say who
//! manages the objects, resources from the size, a Service, and a controller ownerReference
//! so that deleting the Database garbage-collects them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, PodTemplateSpec, ResourceRequirements, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_core::{ObjectMeta, Resource};

use super::Database;

/// The field manager of every write, and the `app.kubernetes.io/managed-by` label.
pub const MANAGER: &str = "database-operator";
/// The name of the database container.
pub const CONTAINER_NAME: &str = "database";
/// The port the database serves, named `http`.
pub const PORT: i32 = 8080;

/// The labels of the children and their pods. `app` is the selector (immutable in a
/// Deployment, so it never changes); the `app.kubernetes.io` ones are the recommended labels.
pub fn labels(db: &Database) -> BTreeMap<String, String> {
    let name = db.metadata.name.clone().unwrap_or_default();
    BTreeMap::from([
        ("app".to_string(), name.clone()),
        ("app.kubernetes.io/name".to_string(), "database".to_string()),
        ("app.kubernetes.io/instance".to_string(), name),
        ("app.kubernetes.io/component".to_string(), "database".to_string()),
        ("app.kubernetes.io/managed-by".to_string(), MANAGER.to_string()),
    ])
}

fn selector(db: &Database) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), db.metadata.name.clone().unwrap_or_default())])
}

/// The controller ownerReference to `db`, which lets the garbage collector delete the child
/// with it and tells any controller that `db` manages the child.
pub fn owner_reference(db: &Database) -> OwnerReference {
    OwnerReference {
        api_version: Database::api_version(&()).to_string(),
        kind: Database::kind(&()).to_string(),
        name: db.metadata.name.clone().unwrap_or_default(),
        uid: db.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn metadata(db: &Database) -> ObjectMeta {
    ObjectMeta {
        name: db.metadata.name.clone(),
        namespace: db.metadata.namespace.clone(),
        labels: Some(labels(db)),
        owner_references: Some(vec![owner_reference(db)]),
        ..Default::default()
    }
}

/// The Deployment `db` wants: one replica of its image, resources from its size.
pub fn deployment(db: &Database) -> Deployment {
    let size = db.spec.size.resources();
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([("cpu".to_string(), Quantity(cpu.into())), ("memory".to_string(), Quantity(memory.into()))])
    };
    Deployment {
        metadata: metadata(db),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector { match_labels: Some(selector(db)), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels(db)), ..Default::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: CONTAINER_NAME.into(),
                        image: Some(db.spec.image.clone()),
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

/// The Service `db` wants: port 8080 (`http`) in front of its pods.
pub fn service(db: &Database) -> Service {
    Service {
        metadata: metadata(db),
        spec: Some(ServiceSpec {
            selector: Some(selector(db)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: PORT,
                target_port: Some(IntOrString::String("http".into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// Whether `live` is controlled by `db` (its controller ownerReference carries `db`'s uid).
pub fn is_controlled_by<R: Resource>(live: &R, db: &Database) -> bool {
    let uid = db.metadata.uid.as_deref();
    live.meta().owner_references.iter().flatten().any(|r| r.controller == Some(true) && Some(r.uid.as_str()) == uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::{DatabaseSpec, Size};

    pub(crate) fn database(size: Size) -> Database {
        let mut db = Database::new("orders", DatabaseSpec { size, image: "postgres:17".into() });
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
        assert!(!is_controlled_by(&foreign, &db));
        assert!(is_controlled_by(&deployment(&db), &db));
    }
}
