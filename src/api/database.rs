//! The `Database` custom resource types: `example.com/v1`, kind `Database`.
//!
//! These types are the single source of the CRD: [`crate::api::crd`] generates the
//! CustomResourceDefinition (schema, printer columns, short names, status subresource) from them,
//! and `manifests/crd/example.com_databases.yaml` is that output, checked by `tests/crd_drift.rs`.
//!
//! The `///` comments on the spec and status fields become the schema's `description`s, which is
//! what `kubectl explain database.spec` shows: they are written for a kubectl user, not a Rust
//! reader, so they carry no intra-doc links. Their lines are joined into paragraphs on the way
//! (`rewrap_descriptions` in `crd.rs`); a line starting with `- ` stays a list item.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube_derive::CustomResource;

use super::UpgradeSpec;
use super::instances::{InstanceStatus, Replication};
use super::{BackupSchedule, Credentials, EngineKind, RestoreFrom, Storage, UpgradeStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of a Database: how big it is and which container image it runs.
#[derive(CustomResource, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[allow(
    clippy::duplicated_attributes,
    reason = "clippy reads the repeated `type_ = \"string\"` of the printer columns as duplicates"
)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Database",
    plural = "databases",
    shortname = "db",
    category = "database-operator",
    namespaced,
    status = "DatabaseStatus",
    derive = "PartialEq",
    doc = "A Database runs one database server (a Deployment and a Service) of the chosen size and image.",
    printcolumn(
        name = "SIZE",
        type_ = "string",
        json_path = ".spec.size",
        description = "The size class: small, medium or large."
    ),
    printcolumn(
        name = "IMAGE",
        type_ = "string",
        json_path = ".spec.image",
        description = "The container image the database runs."
    ),
    printcolumn(
        name = "READY",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Replicas of the database Deployment that are ready."
    ),
    printcolumn(
        name = "PHASE",
        type_ = "string",
        json_path = ".status.phase",
        description = "Pending, Ready or Degraded."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "ENGINE",
        type_ = "string",
        json_path = ".spec.engine",
        description = "The database engine: postgres, mysql, mariadb or redis; empty for a generic Database.",
        priority = 1
    ),
    printcolumn(
        name = "ENDPOINT",
        type_ = "string",
        json_path = ".status.endpoint",
        description = "Where clients connect: host:port.",
        priority = 1
    ),
    // kube-derive defaults to the `kube` facade crate (`::kube::core`); this crate depends on
    // kube-core directly.
    crates(kube_core = "::kube_core")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.storage) || has(self.engine)",
     "message": "spec.storage needs spec.engine: a generic Database has no volume"},
    {"rule": "!has(self.credentials) || has(self.engine)",
     "message": "spec.credentials needs spec.engine: a generic Database has no credentials"},
    {"rule": "has(self.engine) == has(oldSelf.engine) && (!has(self.engine) || self.engine == oldSelf.engine)",
     "message": "spec.engine cannot change once the Database exists: create a new Database for another engine"},
    {"rule": "!has(self.restoreFrom) || has(self.engine)",
     "message": "spec.restoreFrom needs spec.engine: only a Database with an engine is restored from a backup"},
    {"rule": "!has(self.backup) || has(self.engine)",
     "message": "spec.backup needs spec.engine: only a Database with an engine can be backed up"},
    {"rule": "has(self.restoreFrom) == has(oldSelf.restoreFrom) && (!has(self.restoreFrom) || self.restoreFrom == oldSelf.restoreFrom)",
     "message": "spec.restoreFrom cannot change: a Database is restored once, before it first starts"},
    {"rule": "!has(self.instances) || self.instances == 1 || (has(self.engine) && self.engine == 'postgres')",
     "message": "spec.instances above 1 needs spec.engine postgres: only postgres runs streaming replicas"},
    {"rule": "!has(self.instances) || self.instances == 1 || !has(self.restoreFrom)",
     "message": "spec.instances above 1 cannot be set with spec.restoreFrom: restore into one instance"},
    {"rule": "(has(self.instances) && self.instances > 1) == (has(oldSelf.instances) && oldSelf.instances > 1)",
     "message": "spec.instances cannot change between 1 and more than 1: a Database is created with one instance or with replicas"},
    {"rule": "!has(self.instances) || !has(oldSelf.instances) || self.instances >= oldSelf.instances",
     "message": "spec.instances cannot be lowered: replicas are added, not removed (create a new Database with fewer)"},
    {"rule": "!has(self.replication) || (has(self.instances) && self.instances > 1)",
     "message": "spec.replication needs spec.instances above 1: a Database of one instance has no replica to wait for"},
]))]
pub struct DatabaseSpec {
    /// Size class of the database; it sets the CPU and memory of the database container. One of:
    /// - small: requests 250m CPU and 256Mi memory, limits 500m CPU and 512Mi memory.
    /// - medium: requests 500m CPU and 1Gi memory, limits 1 CPU and 2Gi memory.
    /// - large: requests 1 CPU and 4Gi memory, limits 2 CPU and 8Gi memory.
    pub size: Size,

    /// Container image of the database server, for example "postgres:17". Must not be empty;
    /// at most 1024 characters.
    #[schemars(length(min = 1, max = 1024))]
    pub image: String,

    /// The database engine the image runs: postgres, mysql, mariadb or redis. With an engine
    /// the operator gives the server what its official image needs: its port, a volume for
    /// its data (spec.storage), credentials in a Secret (spec.credentials), probes and a
    /// non-root security context. Without one the Database is generic: the image runs as
    /// given, on port 8080. It cannot change once the Database exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineKind>,

    /// How many instances of the database run, each its own pod and volume on its own node:
    /// one primary, which accepts writes, and streaming replicas, which serve reads (the
    /// Services "<name>-rw" and "<name>-ro"). Default 1. Above 1 needs engine postgres; it is
    /// fixed at 1 or above 1 when the Database is created, and above 1 it may grow up to 9,
    /// never shrink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 9))]
    pub instances: Option<i32>,

    /// How the replicas follow the primary (needs spec.instances above 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<Box<Replication>>,

    /// The volume of the database's data (needs spec.engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Box<Storage>>,

    /// Where the database's credentials are (needs spec.engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<Box<Credentials>>,

    /// How a change of spec.image is rolled out: a timeout, what a failed upgrade does, and
    /// whether a new major version of the engine may be rolled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<Box<UpgradeSpec>>,

    /// Backups on a schedule (needs spec.engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<Box<BackupSchedule>>,

    /// A DatabaseBackup to restore before the database first serves (needs spec.engine; set
    /// at creation, it cannot change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_from: Option<Box<RestoreFrom>>,

    /// When true, the Database cannot be deleted: the admission policy installed with the
    /// operator refuses the delete, naming this field, until it is set to false. A deleted
    /// Database takes its volume and data with it (unless spec.storage.reclaimPolicy is
    /// Retain), and a deleted namespace deletes its Databases: this guards both. It does not
    /// guard against deleting the CustomResourceDefinition, which removes every Database
    /// without asking each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_protection: Option<bool>,
}

impl DatabaseSpec {
    /// A generic Database's spec: `size` and `image`, no engine.
    ///
    /// ```
    /// use database_operator::api::{DatabaseSpec, Size};
    ///
    /// let spec = DatabaseSpec::new(Size::Small, "postgres:17");
    /// assert!(spec.engine.is_none());
    /// ```
    pub fn new(size: Size, image: &str) -> Self {
        Self {
            size,
            image: image.to_string(),
            engine: None,
            instances: None,
            replication: None,
            storage: None,
            credentials: None,
            upgrade: None,
            backup: None,
            restore_from: None,
            deletion_protection: None,
        }
    }

    /// This spec with `engine`.
    pub fn with_engine(mut self, engine: EngineKind) -> Self {
        self.engine = Some(engine);
        self
    }
}

/// The size class of a Database: small, medium or large. It sets the CPU and memory of the
/// database container (see [`Size::resources`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// `small`: requests 250m CPU and 256Mi memory, limits 500m CPU and 512Mi memory.
    Small,
    /// `medium`: requests 500m CPU and 1Gi memory, limits 1 CPU and 2Gi memory.
    Medium,
    /// `large`: requests 1 CPU and 4Gi memory, limits 2 CPU and 8Gi memory.
    Large,
}

impl Size {
    /// Every size, smallest first.
    pub const ALL: [Size; 3] = [Size::Small, Size::Medium, Size::Large];

    /// The CPU and memory requests and limits of the database container for this size.
    ///
    /// | size     | cpu request | memory request | cpu limit | memory limit |
    /// |----------|-------------|----------------|-----------|--------------|
    /// | `small`  | `250m`      | `256Mi`        | `500m`    | `512Mi`      |
    /// | `medium` | `500m`      | `1Gi`          | `1`       | `2Gi`        |
    /// | `large`  | `1`         | `4Gi`          | `2`       | `8Gi`        |
    ///
    /// Limits are twice the requests: a database gets headroom for bursts (vacuum, checkpoints)
    /// without the scheduler reserving it. The values are Kubernetes quantities, ready to be
    /// wrapped in `k8s_openapi::apimachinery::pkg::api::resource::Quantity`.
    ///
    /// ```
    /// use database_operator::api::Size;
    ///
    /// let resources = Size::Medium.resources();
    /// assert_eq!(resources.memory_limit, "2Gi");
    /// ```
    pub fn resources(self) -> SizeResources {
        match self {
            Size::Small => {
                SizeResources { cpu_request: "250m", memory_request: "256Mi", cpu_limit: "500m", memory_limit: "512Mi" }
            }
            Size::Medium => {
                SizeResources { cpu_request: "500m", memory_request: "1Gi", cpu_limit: "1", memory_limit: "2Gi" }
            }
            Size::Large => {
                SizeResources { cpu_request: "1", memory_request: "4Gi", cpu_limit: "2", memory_limit: "8Gi" }
            }
        }
    }

    /// The name of the size as it is written in a manifest: `small`, `medium` or `large`.
    pub fn as_str(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Large => "large",
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The CPU and memory requests and limits that a [`Size`] gives the database container, as
/// Kubernetes quantity strings (`"250m"`, `"1Gi"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SizeResources {
    /// CPU request, e.g. `"250m"`.
    pub cpu_request: &'static str,
    /// Memory request, e.g. `"256Mi"`.
    pub memory_request: &'static str,
    /// CPU limit, e.g. `"500m"`.
    pub cpu_limit: &'static str,
    /// Memory limit, e.g. `"512Mi"`.
    pub memory_limit: &'static str,
}

/// The observed state of a Database, written by the operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct DatabaseStatus {
    /// The metadata.generation of the Database that this status describes. When it is lower
    /// than metadata.generation, the operator has not yet acted on the latest spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Number of replicas of the database Deployment that are ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,

    /// A one-word summary of the Database's state.
    //
    // The schema's description of this field is `Phase`'s own doc: kube-core's `OptionalEnum`
    // transform, which turns `Option<Phase>` into a nullable enum, replaces the field's
    // description with the enum's. So the text a kubectl user reads lives on `Phase`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,

    /// The Secret holding the credentials (Databases with an engine): the generated
    /// "<name>-credentials", or spec.credentials.secretName.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub secret_name: Option<String>,

    /// Where clients connect, as host:port: the Service's name in the cluster and the engine's
    /// port (Databases with an engine).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub endpoint: Option<String>,

    /// The image that last became Ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub current_image: Option<String>,

    /// The upgrade from currentImage to spec.image, while they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<Box<UpgradeStatus>>,

    /// The DatabaseBackup this Database was restored from, once its restored server was Ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub restored_from: Option<String>,

    /// The uid of the claim that holds this Database's data (Databases with an engine),
    /// recorded when the Database first has it: a claim of that name with another uid is never
    /// adopted, and a lost one is not made again empty. Removing this field accepts the claim
    /// there now (or a new, empty one).
    #[serde(rename = "claimUID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub claim_uid: Option<String>,

    /// The instance that accepts writes, when the Database has several (spec.instances).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub current_primary: Option<String>,

    /// Each instance's role and readiness, when the Database has several (spec.instances).
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "::operator_runtime::informer::view::exact")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[schemars(length(max = 9))]
    pub instances: Vec<InstanceStatus>,

    /// The time of the last scheduled backup (spec.backup.schedule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_scheduled_backup: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,

    /// The latest observations of the Database's state, one per condition type (for example
    /// "Ready"), in the standard Kubernetes condition format.
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "::operator_runtime::informer::view::exact")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// A one-word summary of the Database's state. One of:
/// - Pending: the Database was created and its database server is not ready yet, or its pod is
///   being replaced to roll out a new spec (the Ready condition's reason is then Restarting).
/// - Ready: the database server is running and ready.
/// - Degraded: the database server was ready before and is not now (with no rollout under
///   way), or the operator cannot bring its Deployment or Service to the desired state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// The Database was created and its server is not ready yet, or its pod is being replaced
    /// to roll out a new spec.
    Pending,
    /// The database server is running and ready.
    Ready,
    /// The database server was ready before and is not now (with no rollout under way), or the
    /// operator cannot bring its Deployment or Service to the desired state.
    Degraded,
}

impl Phase {
    /// The phase as it is written in the status: `Pending`, `Ready` or `Degraded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Ready => "Ready",
            Phase::Degraded => "Degraded",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use kube_core::CustomResourceExt;
    use serde_json::{Value, json};

    use super::*;

    /// The `openAPIV3Schema` of the generated CRD, as JSON.
    fn schema() -> Value {
        let crd = serde_json::to_value(Database::crd()).unwrap();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
    }

    fn version() -> Value {
        serde_json::to_value(Database::crd()).unwrap()["spec"]["versions"][0].clone()
    }

    /// Calls `visit(path, node)` on every schema node below `node`: properties and array items.
    fn walk(path: &str, node: &Value, visit: &mut dyn FnMut(&str, &Value)) {
        visit(path, node);
        if let Some(properties) = node["properties"].as_object() {
            for (name, property) in properties {
                walk(&format!("{path}.{name}"), property, visit);
            }
        }
        if node["items"].is_object() {
            walk(&format!("{path}[]"), &node["items"], visit);
        }
    }

    #[test]
    fn size_schema_is_an_enum_of_small_medium_large() {
        let size = &schema()["properties"]["spec"]["properties"]["size"];
        assert_eq!(size["type"], "string");
        assert_eq!(size["enum"], json!(["small", "medium", "large"]));
    }

    #[test]
    fn image_schema_rejects_the_empty_string() {
        let image = &schema()["properties"]["spec"]["properties"]["image"];
        assert_eq!(image["type"], "string");
        assert_eq!(image["minLength"], 1);
    }

    #[test]
    fn spec_is_required_so_the_apiserver_rejects_a_database_without_one() {
        let schema = schema();
        assert_eq!(schema["required"], json!(["spec"]));
        assert_eq!(schema["properties"]["spec"]["required"], json!(["image", "size"]));
    }

    #[test]
    fn every_property_has_a_description_for_kubectl_explain() {
        let mut missing = Vec::new();
        walk("database", &schema(), &mut |path, node| {
            let described = node["description"].as_str().is_some_and(|d| !d.is_empty());
            if !described {
                missing.push(path.to_owned());
            }
        });
        assert!(missing.is_empty(), "no description on {missing:?}");
    }

    #[test]
    fn descriptions_break_lines_only_before_list_items_and_paragraphs() {
        walk("database", &schema(), &mut |path, node| {
            let description = node["description"].as_str().unwrap_or_default();
            for (i, _) in description.match_indices('\n') {
                let rest = &description[i + 1..];
                assert!(
                    rest.starts_with("- ") || rest.starts_with('\n') || description[..i].ends_with('\n'),
                    "line break inside a sentence at {path}: {description:?}"
                );
            }
        });
    }

    #[test]
    fn schema_is_structural() {
        // apiextensions.k8s.io/v1 rejects `$ref`, and a structural schema has no `type` or
        // `properties` under `anyOf`/`oneOf`/`allOf`; schemars' `const` is not in OpenAPI v3.0.
        walk("database", &schema(), &mut |path, node| {
            for keyword in ["$ref", "anyOf", "oneOf", "allOf", "not", "const", "$schema"] {
                assert!(node.get(keyword).is_none(), "{keyword} at {path}: {node}");
            }
            assert!(node["type"].is_string(), "no type at {path}: {node}");
        });
    }

    #[test]
    fn size_description_matches_the_resource_table() {
        let schema = schema();
        let description = schema["properties"]["spec"]["properties"]["size"]["description"].as_str().unwrap();
        for size in Size::ALL {
            let r = size.resources();
            let line = format!(
                "- {size}: requests {} CPU and {} memory, limits {} CPU and {} memory.",
                r.cpu_request, r.memory_request, r.cpu_limit, r.memory_limit
            );
            assert!(description.contains(&line), "{line:?} not in {description:?}");
        }
    }

    #[test]
    fn phase_description_explains_every_phase() {
        let schema = schema();
        let phase = &schema["properties"]["status"]["properties"]["phase"];
        assert_eq!(phase["enum"], json!(["Pending", "Ready", "Degraded"]));
        assert_eq!(phase["nullable"], true);
        let description = phase["description"].as_str().unwrap();
        for value in ["Pending", "Ready", "Degraded"] {
            assert!(description.contains(&format!("- {value}: ")), "{description}");
        }
    }

    #[test]
    fn conditions_are_a_map_keyed_by_type() {
        let schema = schema();
        let conditions = &schema["properties"]["status"]["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map");
        assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
        // A map list's keys must be required (or defaulted) in the items.
        let required = conditions["items"]["required"].as_array().unwrap();
        assert!(required.contains(&json!("type")));
    }

    #[test]
    fn crd_has_printer_columns_short_name_category_and_status_subresource() {
        let crd = Database::crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("databases.example.com"));
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["db".to_owned()]));
        // Not "all": `kubectl delete all --all` must never take Databases (and their data) with it.
        assert_eq!(crd.spec.names.categories, Some(vec!["database-operator".to_owned()]));

        let version = version();
        let columns: Vec<(&str, &str, &str)> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let field = |k: &str| c[k].as_str().unwrap();
                (field("name"), field("type"), field("jsonPath"))
            })
            .collect();
        assert_eq!(
            columns,
            [
                ("SIZE", "string", ".spec.size"),
                ("IMAGE", "string", ".spec.image"),
                ("READY", "integer", ".status.readyReplicas"),
                ("PHASE", "string", ".status.phase"),
                ("AGE", "date", ".metadata.creationTimestamp"),
                ("ENGINE", "string", ".spec.engine"),
                ("ENDPOINT", "string", ".status.endpoint"),
            ]
        );
        // The engine and the endpoint show with `kubectl get db -o wide` only.
        let priorities: Vec<i64> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["priority"].as_i64().unwrap_or(0))
            .collect();
        assert_eq!(priorities, [0, 0, 0, 0, 0, 1, 1]);
        assert_eq!(version["subresources"]["status"], json!({}));
    }

    #[test]
    fn size_and_phase_serialize_as_the_schema_spells_them() {
        for size in Size::ALL {
            assert_eq!(serde_json::to_value(size).unwrap(), size.to_string());
        }
        for phase in [Phase::Pending, Phase::Ready, Phase::Degraded] {
            assert_eq!(serde_json::to_value(phase).unwrap(), phase.to_string());
        }
    }

    #[test]
    fn empty_status_serializes_to_an_empty_object_and_back() {
        assert_eq!(serde_json::to_value(DatabaseStatus::default()).unwrap(), json!({}));
        let status: DatabaseStatus = serde_json::from_value(json!({})).unwrap();
        assert_eq!(status, DatabaseStatus::default());
        let status: DatabaseStatus = serde_json::from_value(json!({"readyReplicas": 1, "phase": "Ready"})).unwrap();
        assert_eq!(status.ready_replicas, Some(1));
        assert_eq!(status.phase, Some(Phase::Ready));
    }

    #[test]
    fn database_round_trips_through_json_with_api_version_and_kind() {
        let db = Database::new("db1", DatabaseSpec::new(Size::Medium, "postgres:17"));
        let value = serde_json::to_value(&db).unwrap();
        assert_eq!(value["apiVersion"], "example.com/v1");
        assert_eq!(value["kind"], "Database");
        assert_eq!(value["spec"], json!({"size": "medium", "image": "postgres:17"}));
        assert!(value.get("status").is_none());
        assert_eq!(serde_json::from_value::<Database>(value).unwrap(), db);
    }

    #[test]
    fn a_database_without_spec_does_not_deserialize() {
        let value = json!({"apiVersion": "example.com/v1", "kind": "Database", "metadata": {"name": "x"}});
        assert!(serde_json::from_value::<Database>(value).is_err());
    }
}
