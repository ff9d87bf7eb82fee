//! What the operator caches of its children: a Deployment or Service reduced to the fields the
//! operator sets or reads, decoded straight from the apiserver's JSON.
//!
//! The informers watch every Deployment and Service in scope that carries the operator's
//! label, and a Deployment changes a few times while it rolls out. Decoded as k8s-openapi's
//! `Deployment`, each cached one costs several times its JSON in heap (a large struct of inline
//! `Option`s, six `BTreeMap`s, dozens of strings: docs/benchmarks.md, "Memory per cached
//! object", has the figures) and every watch event allocates all of that again.
//! A view keeps what [`operator_runtime::drift`] compares (everything the builders of
//! [`super`] set), what the controllers read (replica counts, conditions) and the metadata; serde skips the rest
//! of the JSON without allocating it, including the metadata's annotations and managedFields.
//! Small string maps (selectors, template labels, resource quantities) are vectors of pairs
//! instead of B-trees, and every list holds exactly its elements. The machinery is the
//! informer's ([`operator_runtime::informer::view`]).
//!
//! Strings most children hold alike (condition types and reasons, protocols, label keys, the
//! operator's container and port names, the sizes' quantities) are [`Text`]s: shared words,
//! not one allocation per object, once [`WORDS`] are added at start.
//!
//! The contract with the builders: a field the operator sets must exist in the view, or drift
//! detection cannot see it change. `every_field_the_operator_sets_survives_the_view` pins it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, PersistentVolumeClaim, PodSecurityContext, Probe, Secret, SecurityContext, Service, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

use operator_runtime::informer::view::{SmallMap, Text, exact, exact_optional, read_metadata, unless_empty};
use operator_runtime::view_of;

/// The values the operator writes into its children alike, beyond Kubernetes' own words:
/// what a [`Text`] of a view shares instead of allocating ([`share_words`], called once when
/// the controllers are built). A test keeps it in step with the sizes and engines.
pub(crate) const WORDS: &[&str] = &[
    super::meta::MANAGER,
    // The container's name (`workload::CONTAINER_NAME`, which imports this module).
    "database",
    "http",
    "postgres",
    "mysql",
    "mariadb",
    "redis",
    "250m",
    "256Mi",
    "500m",
    "512Mi",
    "1Gi",
    "1",
    "2",
    "2Gi",
    "4Gi",
    "8Gi",
];

/// Adds the operator's words to those a view's [`Text`] shares; once per process, before the
/// informers decode anything (a later call changes nothing).
pub fn share_words() {
    operator_runtime::informer::view::share_words(WORDS);
}

/// A Deployment as the operator caches it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct DeploymentView {
    /// The object's metadata, without annotations and managedFields.
    #[serde(default, deserialize_with = "read_metadata")]
    pub metadata: ObjectMeta,
    /// What the operator sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<DeploymentSpecView>,
    /// What the Deployment controller reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeploymentStatusView>,
}

/// `spec` of a [`DeploymentView`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpecView {
    /// Wanted replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// How a new template replaces the pods (`Recreate` for a Database with a volume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<StrategyView>,
    /// The pod selector (`matchLabels` only: the operator sets no expressions).
    #[serde(default)]
    pub selector: SelectorView,
    /// The pod template.
    #[serde(default)]
    pub template: PodTemplateView,
}

/// A Deployment's strategy type (the operator sets no rolling-update parameters).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct StrategyView {
    /// `Recreate` or `RollingUpdate`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<Text>,
}

/// A label selector's `matchLabels`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectorView {
    /// The labels a pod must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<SmallMap>,
}

/// A pod template: its labels and containers.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct PodTemplateView {
    /// The template's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetaView>,
    /// The template's pod spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpecView>,
}

/// A pod template's labels.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct TemplateMetaView {
    /// The pods' labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<SmallMap>,
}

/// A pod spec: its containers, and for a Database with an engine its security context and
/// volumes. The parts only engines set are boxed: a generic Database's view pays a pointer
/// for each, not the whole structure.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecView {
    /// The containers.
    #[serde(default, deserialize_with = "exact")]
    pub containers: Vec<ContainerView>,
    /// The init containers (a restore's).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub init_containers: Option<Vec<ContainerView>>,
    /// The pod's security context; an empty one (which the apiserver defaults on every pod
    /// template) is read as none, so a generic Database's view allocates nothing for it.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "unless_empty")]
    pub security_context: Option<Box<PodSecurityContext>>,
    /// The pod's volumes.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub volumes: Option<Vec<Volume>>,
    /// Whether the pod gets a service account token (a database's never needs one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    /// The pod's affinity: the instances of a Database of several keep off each other's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<Affinity>>,
}

/// A container: what the operator sets.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView {
    /// The container's name.
    pub name: Text,
    /// Its image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Its ports.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub ports: Option<Vec<ContainerPortView>>,
    /// Its resource requests and limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesView>,
    /// Its environment.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub env: Option<Vec<EnvVar>>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub args: Option<Vec<String>>,
    /// Its command (an init container's).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub command: Option<Vec<String>>,
    /// Where its volumes are mounted.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// Its readiness probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Box<Probe>>,
    /// Its liveness probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Box<Probe>>,
    /// Its startup probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<Box<Probe>>,
    /// Its security context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<Box<SecurityContext>>,
    /// Where the kubelet takes its termination message from (`FallbackToLogsOnError`: the
    /// log's end, when it fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_message_policy: Option<Text>,
}

/// A container port.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPortView {
    /// The port's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Text>,
    /// The port number.
    pub container_port: i32,
    /// TCP, UDP or SCTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Text>,
}

/// Resource requests and limits, as the apiserver spells the quantities.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ResourcesView {
    /// Requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<SmallMap>,
    /// Limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<SmallMap>,
}

/// `status` of a [`DeploymentView`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStatusView {
    /// The generation the Deployment controller last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods, of any revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Pods of the current revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    /// Ready pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// The Deployment's conditions.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub conditions: Option<Vec<DeploymentConditionView>>,
}

/// A Deployment condition, without its timestamps.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct DeploymentConditionView {
    /// `Available`, `Progressing` or `ReplicaFailure`.
    #[serde(rename = "type")]
    pub type_: Text,
    /// `True`, `False` or `Unknown`.
    pub status: Text,
    /// A machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Text>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Text>,
}

/// A Service as the operator caches it: metadata and what the operator sets.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ServiceView {
    /// The object's metadata, without annotations and managedFields.
    #[serde(default, deserialize_with = "read_metadata")]
    pub metadata: ObjectMeta,
    /// What the operator sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ServiceSpecView>,
}

/// `spec` of a [`ServiceView`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ServiceSpecView {
    /// The pods the Service sends traffic to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<SmallMap>,
    /// Its ports.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub ports: Option<Vec<ServicePortView>>,
}

/// A Service port.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePortView {
    /// The port's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Text>,
    /// The Service's port.
    pub port: i32,
    /// The pods' port, by number or name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<IntOrString>,
    /// TCP, UDP or SCTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Text>,
}

/// A PersistentVolumeClaim as the operator caches it: metadata, what the operator sets, and
/// whether it is bound.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct PersistentVolumeClaimView {
    /// The object's metadata, without annotations and managedFields.
    #[serde(default, deserialize_with = "read_metadata")]
    pub metadata: ObjectMeta,
    /// What the operator sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ClaimSpecView>,
    /// Whether the claim is bound, and to how much.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ClaimStatusView>,
}

impl PersistentVolumeClaimView {
    /// The storage the claim requests, as written (`"10Gi"`).
    pub fn requested_storage(&self) -> Option<&str> {
        self.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?.get("storage")
    }

    /// Sets the storage the claim requests.
    pub fn set_requested_storage(&mut self, quantity: &str) {
        let spec = self.spec.get_or_insert_with(Default::default);
        let resources = spec.resources.get_or_insert_with(Default::default);
        resources.requests = Some(SmallMap(vec![("storage".into(), quantity.into())]));
    }

    /// `Pending`, `Bound` or `Lost`.
    pub fn phase(&self) -> Option<&str> {
        self.status.as_ref()?.phase.as_deref()
    }
}

/// `spec` of a [`PersistentVolumeClaimView`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSpecView {
    /// `ReadWriteOnce`, ...
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "exact_optional")]
    pub access_modes: Option<Vec<Text>>,
    /// The storage requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesView>,
    /// The StorageClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// `status` of a [`PersistentVolumeClaimView`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ClaimStatusView {
    /// `Pending`, `Bound` or `Lost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Text>,
    /// The size of the bound volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<SmallMap>,
}

/// A Secret as the operator caches it: its metadata, and never its data. The operator only
/// needs to know that a Database's Secret exists and whose it is; a password it does not
/// hold cannot leak from its memory, its logs or a heap dump.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct SecretView {
    /// The object's metadata, without annotations and managedFields.
    #[serde(default, deserialize_with = "read_metadata")]
    pub metadata: ObjectMeta,
}

impl DeploymentView {
    /// Whether the Deployment controller has acted on the Deployment's latest spec and every
    /// replica runs it.
    pub(crate) fn rolled_out(&self) -> bool {
        let Some(status) = &self.status else { return false };
        let wanted = self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        status.observed_generation >= self.metadata.generation
            && status.updated_replicas.unwrap_or(0) >= wanted
            && status.replicas.unwrap_or(0) <= wanted
    }

    /// Whether the Deployment is replacing its pods with a new revision of its template: its
    /// controller has not rolled the latest spec out to every replica yet, or its `Progressing`
    /// condition says a rollout is under way (`NewReplicaSetCreated`, `FoundNewReplicaSet`,
    /// `ReplicaSetUpdated`). A Deployment whose rollout completed (`NewReplicaSetAvailable`) and
    /// then lost its pod is not, and neither is one past its progress deadline
    /// (`ProgressDeadlineExceeded`): those are faults, not rollouts.
    pub(crate) fn replacing_pods(&self) -> bool {
        const ROLLING: [&str; 3] = ["NewReplicaSetCreated", "FoundNewReplicaSet", "ReplicaSetUpdated"];
        let conditions = self.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
        let progressing = conditions.iter().find(|c| &*c.type_ == "Progressing");
        match progressing {
            Some(c) if &*c.status == "False" => false,
            Some(c) if ROLLING.contains(&c.reason.as_deref().unwrap_or_default()) => true,
            _ => !self.rolled_out(),
        }
    }

    /// Whether the Deployment has rolled out `image` and its replica is Ready.
    pub(crate) fn runs_ready(&self, image: &str) -> bool {
        let runs = self
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.containers.first())
            .is_some_and(|c| c.image.as_deref() == Some(image));
        let Some(status) = &self.status else { return false };
        runs && status.observed_generation >= self.metadata.generation
            && status.updated_replicas.unwrap_or(0) >= 1
            && status.ready_replicas.unwrap_or(0) >= 1
            && status.replicas.unwrap_or(0) <= 1
    }
}

view_of!(DeploymentView, Deployment);
view_of!(ServiceView, Service);
view_of!(PersistentVolumeClaimView, PersistentVolumeClaim);
view_of!(SecretView, Secret);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Database, DatabaseSpec, EngineKind, Size};
    use crate::engine;
    use crate::resources::{claim, replication, restore, workload};
    use kube_core::Resource;
    use operator_runtime::drift::differs;

    fn database() -> Database {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Large, "postgres:17"));
        db.metadata.namespace = Some("shop".into());
        db.metadata.uid = Some("uid-1".into());
        db
    }

    /// The desired child through JSON into its view: what the cache would hold if the
    /// apiserver stored it unchanged.
    fn through<V: serde::de::DeserializeOwned, T: Serialize>(child: &T) -> V {
        serde_json::from_value(serde_json::to_value(child).unwrap()).unwrap()
    }

    #[test]
    fn the_empty_pod_security_context_the_apiserver_defaults_is_read_as_none() {
        let deployment = |context: &str| {
            format!(
                r#"{{"metadata":{{"name":"a"}},"spec":{{"selector":{{"matchLabels":{{"app":"a"}}}},"template":{{"spec":{{"containers":[],"securityContext":{context}}}}}}}}}"#
            )
        };
        let pod =
            |json: String| serde_json::from_str::<DeploymentView>(&json).unwrap().spec.unwrap().template.spec.unwrap();
        assert_eq!(pod(deployment("{}")).security_context, None);
        let restricted = pod(deployment(r#"{"runAsNonRoot":true,"fsGroup":999}"#)).security_context.unwrap();
        assert_eq!((restricted.run_as_non_root, restricted.fs_group), (Some(true), Some(999)));
    }

    #[test]
    fn every_field_the_operator_sets_survives_the_view() {
        let engines = [
            None,
            Some(EngineKind::Postgres),
            Some(EngineKind::Mysql),
            Some(EngineKind::Mariadb),
            Some(EngineKind::Redis),
        ];
        for engine in engines {
            let mut db = database();
            db.spec.engine = engine;
            let mut deployment = workload::deployment(&db);
            if let Some(engine) = engine::of_database(&db) {
                restore::with_restore(&mut deployment, engine, &restore::Source::Claim("orders-1".into()));
            }
            let service = workload::service(&db);
            let claim = claim::claim(&db, None);
            assert_survives(&deployment, &service, &claim, engine);
        }
        // A Database of several instances: its primary, a replica, the -rw Service.
        let mut db = database();
        (db.spec.engine, db.spec.instances) = (Some(EngineKind::Postgres), Some(3));
        let mut primary = workload::deployment(&db);
        replication::as_instance(&mut primary, &db, 1, crate::api::Role::Primary);
        let [rw, _] = replication::services(&db);
        assert_survives(&primary, &rw, &replication::replica_claim(&db, 2, None), Some(EngineKind::Postgres));
        let replica = replication::instance_deployment(&db, 2, crate::api::Role::Replica, "postgres:17", None);
        assert_survives(&replica, &workload::service(&db), &claim::claim(&db, None), Some(EngineKind::Postgres));
    }

    /// Inclusion both ways: each view holds exactly what the operator sets.
    fn assert_survives(
        deployment: &Deployment,
        service: &Service,
        claim: &PersistentVolumeClaim,
        engine: Option<EngineKind>,
    ) {
        let deployment_view: DeploymentView = through(deployment);
        let service_view: ServiceView = through(service);
        let claim_view: PersistentVolumeClaimView = through(claim);
        assert!(!differs(deployment, &deployment_view) && !differs(&deployment_view, deployment), "{engine:?}");
        assert!(!differs(service, &service_view) && !differs(&service_view, service), "{engine:?}");
        assert!(!differs(claim, &claim_view) && !differs(&claim_view, claim), "{engine:?}");
    }

    #[test]
    fn a_cached_child_shares_every_string_but_its_databases_own() {
        share_words();
        let status = serde_json::json!({"observedGeneration": 1, "replicas": 1, "readyReplicas": 1, "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability."},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
             "message": "ReplicaSet \"orders-7fd476f9df\" has successfully progressed."}]});
        let own = |text: &Text| ["orders", "orders-0"].contains(&text.as_str()) || text.contains('"');
        for size in [Size::Small, Size::Medium, Size::Large] {
            for engine in [
                None,
                Some(EngineKind::Postgres),
                Some(EngineKind::Mysql),
                Some(EngineKind::Mariadb),
                Some(EngineKind::Redis),
            ] {
                let mut db = database();
                (db.spec.size, db.spec.engine) = (size, engine);
                let mut json = serde_json::to_value(workload::deployment(&db)).unwrap();
                json["status"] = status.clone();
                let deployment: DeploymentView = serde_json::from_str(&json.to_string()).unwrap();
                let service: ServiceView = through(&workload::service(&db));
                let spec = deployment.spec.as_ref().unwrap();
                let container = &spec.template.spec.as_ref().unwrap().containers[0];
                let resources = container.resources.as_ref().unwrap();
                let port = &container.ports.as_ref().unwrap()[0];
                let service_spec = service.spec.as_ref().unwrap();
                let service_port = &service_spec.ports.as_ref().unwrap()[0];
                let mut texts: Vec<&Text> = vec![&container.name];
                texts.extend(spec.strategy.as_ref().and_then(|s| s.type_.as_ref()));
                texts.extend(container.termination_message_policy.as_ref());
                texts.extend(
                    [&port.name, &port.protocol, &service_port.name, &service_port.protocol].into_iter().flatten(),
                );
                let maps = [
                    &spec.template.metadata.as_ref().unwrap().labels,
                    &spec.selector.match_labels,
                    &resources.requests,
                    &resources.limits,
                    &service_spec.selector,
                ];
                texts.extend(maps.into_iter().flatten().flat_map(|map| map.0.iter().flat_map(|(k, v)| [k, v])));
                for condition in deployment.status.as_ref().unwrap().conditions.iter().flatten() {
                    texts.extend(
                        [
                            Some(&condition.type_),
                            Some(&condition.status),
                            condition.reason.as_ref(),
                            condition.message.as_ref(),
                        ]
                        .into_iter()
                        .flatten(),
                    );
                }
                for text in texts {
                    assert_eq!(text.is_shared(), !own(text), "{text} ({size:?}, {engine:?})");
                }
            }
        }
    }

    #[test]
    fn a_cached_deployment_keeps_no_room_for_list_elements_it_does_not_have() {
        let mut db = database();
        db.spec.engine = Some(EngineKind::Postgres);
        let mut json = serde_json::to_value(workload::deployment(&db)).unwrap();
        json["status"] = serde_json::json!({"conditions": [{"type": "Available", "status": "True"}]});
        // From text, as the informer decodes: a JSON value would tell serde each list's length.
        let view: DeploymentView = serde_json::from_str(&json.to_string()).unwrap();
        let spec = view.spec.as_ref().unwrap();
        let pod = spec.template.spec.as_ref().unwrap();
        let container = &pod.containers[0];
        let conditions = view.status.as_ref().unwrap().conditions.as_ref().unwrap();
        let lists = [
            ("ownerReferences", view.metadata.owner_references.as_ref().map(|l| (l.len(), l.capacity()))),
            ("containers", Some((pod.containers.len(), pod.containers.capacity()))),
            ("volumes", pod.volumes.as_ref().map(|l| (l.len(), l.capacity()))),
            ("ports", container.ports.as_ref().map(|l| (l.len(), l.capacity()))),
            ("env", container.env.as_ref().map(|l| (l.len(), l.capacity()))),
            ("volumeMounts", container.volume_mounts.as_ref().map(|l| (l.len(), l.capacity()))),
            ("conditions", Some((conditions.len(), conditions.capacity()))),
        ];
        for (name, list) in lists {
            let (len, capacity) = list.unwrap_or_else(|| panic!("{name} is missing"));
            assert!(len > 0 && capacity == len, "{name}: {len} elements, room for {capacity}");
        }
    }

    #[test]
    fn a_secret_view_holds_no_data() {
        let json = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "orders-credentials"},
            "data": {"password": "czNjcmV0"}, "stringData": {"password": "s3cret"}});
        let view: SecretView = serde_json::from_value(json).unwrap();
        let back = serde_json::to_string(&view).unwrap();
        assert!(!back.contains("czNjcmV0") && !back.contains("s3cret"), "{back}");
        assert_eq!(view.metadata.name.as_deref(), Some("orders-credentials"));
    }

    #[test]
    fn a_change_to_a_field_the_operator_sets_is_seen_through_the_view() {
        let db = database();
        let mut live = workload::deployment(&db);
        let container = &mut live.spec.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0];
        container.image = Some("postgres:16".into());
        container.resources.as_mut().unwrap().limits.as_mut().unwrap().remove("memory");
        let view: DeploymentView = through(&live);
        assert!(differs(&workload::deployment(&db), &view));
    }

    #[test]
    fn a_view_is_the_same_resource_as_the_full_type() {
        assert_eq!(DeploymentView::kind(&()), "Deployment");
        assert_eq!(DeploymentView::api_version(&()), "apps/v1");
        assert_eq!(DeploymentView::plural(&()), "deployments");
        assert_eq!(ServiceView::api_version(&()), "v1");
        assert_eq!(ServiceView::plural(&()), "services");
    }

    #[test]
    fn fields_the_operator_never_reads_are_not_kept() {
        let json = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "orders", "namespace": "shop"},
            "spec": {"replicas": 1, "revisionHistoryLimit": 10, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"spec": {"dnsPolicy": "ClusterFirst", "containers": [
                        {"name": "database", "image": "postgres:17", "imagePullPolicy": "IfNotPresent"}]}}},
            "status": {"readyReplicas": 1, "conditions": [
                {"type": "Available", "status": "True", "lastUpdateTime": "2026-11-29T00:00:00Z"}]}
        });
        let view: DeploymentView = serde_json::from_value(json).unwrap();
        let back = serde_json::to_value(&view).unwrap();
        assert_eq!(back["spec"]["selector"]["matchLabels"]["a"], "b");
        assert_eq!(back["status"]["readyReplicas"], 1);
        assert!(back["spec"].get("revisionHistoryLimit").is_none());
        assert!(back["spec"]["template"]["spec"].get("dnsPolicy").is_none());
        assert!(back["status"]["conditions"][0].get("lastUpdateTime").is_none());
    }
}
