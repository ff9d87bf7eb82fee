{{/*
The operator's rules: the same as manifests/rbac/role.yaml and manifests/rbac/namespaced/role.yaml
(tests/chart.rs compares them), rendered into a ClusterRole, or into a Role in each of watchNamespaces.
*/}}
{{- define "database-operator.rules" -}}
# Exactly what the operator uses (checked by tests/e2e/rbac.rs, which runs it with these rules).
# Databases: read through the informer (list, watch); their status is written with
# server-side apply (patch); a backup's verification creates a throwaway Database (labelled,
# owned by the backup) and deletes it when it is done; a failover names the new primary in
# a Database's annotation example.com/primary (a merge patch of its metadata).
- apiGroups: ["example.com"]
  resources: ["databases"]
  verbs: ["list", "watch", "create", "delete", "patch"]
- apiGroups: ["example.com"]
  resources: ["databases/status"]
  verbs: ["patch"]
# The children's ownerReferences set blockOwnerDeletion: on clusters that enforce
# OwnerReferencesPermissionEnforcement, creating such a child needs `update` on the owner's
# finalizers.
- apiGroups: ["example.com"]
  resources: ["databases/finalizers", "databasebackups/finalizers"]
  verbs: ["update"]
# DatabaseBackups: read through the informer; created by the Database controller (schedules,
# a backup before an upgrade) and deleted beyond spec.backup.keep (one in a bucket is labelled
# expired, a patch, and deleted by the backup controller once its copy is); their status is
# written by the backup controller.
- apiGroups: ["example.com"]
  resources: ["databasebackups"]
  verbs: ["list", "watch", "create", "delete", "patch"]
- apiGroups: ["example.com"]
  resources: ["databasebackups/status"]
  verbs: ["patch"]
# A claim that waits to be bound: does its StorageClass exist? (In a namespaced Role this
# rule grants nothing, StorageClasses being cluster-scoped; the operator then does not tell.)
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["get"]
# The dump Jobs of DatabaseBackups: cached only when labelled, created once; the count Job
# of a verification is deleted with its throwaway.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["list", "watch", "create", "delete"]
# The children: read through informers that cache only those with the operator's label,
# written with server-side apply (patch; an apply that creates the object is also authorized
# as create). One missing from the cache is applied create-only; `get` reads the object a
# create-only apply found already there, to tell a foreign one from our own.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["list", "watch", "create", "patch", "get"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["list", "watch", "create", "patch", "get"]
# A Database of several instances: the PodDisruptionBudget of its pods, cached and written
# as the Deployments and Services are.
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["list", "watch", "create", "patch", "get"]
# A Database with an engine: its data claim (cached when it carries the operator's label,
# applied create-only when absent, then applied), and its credentials Secret (cached as
# metadata when it carries the label, created once). `get` reads a claim or Secret that a
# create found already there, to tell a foreign one from our own, and the replication
# Secret's password, with which the operator asks each instance of a Database of several
# where it stands in the WAL.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "watch", "create", "patch", "get"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list", "watch", "create", "get"]
# Pods of a Database with an engine that has not been ready for a while: listed (never
# watched or cached) to report why they do not run, in the kubelet's words; and those of a
# Database of several instances at each pass, for their addresses.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
# Events about Databases (events.k8s.io/v1): created, then patched to count repeats.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
