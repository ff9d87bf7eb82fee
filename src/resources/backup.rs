//! What a DatabaseBackup owns: a claim that keeps the dump, and a Job that writes it.
//!
//! The claim is the backup's to delete with it, unless `spec.storage.reclaimPolicy` is
//! `Retain`: then it has no owner, and outlives the DatabaseBackup. Its labels say what a
//! restore needs to know once the DatabaseBackup is gone ([`KeptDump`]): the backup's name and
//! uid, the engine dumped and the major version of the image that dumped it.
//!
//! The Job runs the engine's logical dump tool from the Database's own image (the client tools
//! come with the server), against the Database's Service, with the credentials of its Secret,
//! into the claim: `pg_dump`, `mysqldump`, `mariadb-dump`, or `redis-cli --rdb`. It runs as
//! the image's non-root user, so it is admitted where the "restricted" Pod Security level is
//! enforced, with no service account token, and writes the dump readable by its owner alone.
//! The dump is checked with the engine's own means before it is renamed into place (see
//! [`Engine::dump_script`]): a dump that does not read back never looks complete. One
//! attempt and two retries; then the backup has failed.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, Volume, VolumeMount,
};
use kube_core::ObjectMeta;

use super::bucket::{self, Stored};
use super::claim::{claim_spec, default_size};
use super::meta::{BACKUP_LABEL, MANAGED_BY_LABEL, MANAGER, controller_reference, is_controlled_by};
use super::secret;
use super::view::PersistentVolumeClaimView;
use crate::api::{Database, DatabaseBackup, EngineKind, ReclaimPolicy};
use crate::engine::{self, BACKUP_DIR, Engine, container_security, pod_security, value};

/// The label of a backup's claim holding its DatabaseBackup's uid: a kept claim is told from
/// one a later DatabaseBackup of the same name would make.
pub(crate) const BACKUP_UID_LABEL: &str = "example.com/backup-uid";

/// The label of a backup's claim naming the engine dumped.
pub(crate) const ENGINE_LABEL: &str = "example.com/engine";

/// The label of a backup's claim holding the major version of the image that dumped, when its
/// tag names one.
pub(crate) const DUMP_MAJOR_LABEL: &str = "example.com/dump-major";

fn metadata(backup: &DatabaseBackup) -> ObjectMeta {
    let name = backup.metadata.name.clone().unwrap_or_default();
    ObjectMeta {
        name: Some(name.clone()),
        namespace: backup.metadata.namespace.clone(),
        labels: Some(BTreeMap::from([
            (MANAGED_BY_LABEL.to_string(), MANAGER.to_string()),
            ("app.kubernetes.io/component".to_string(), "backup".to_string()),
            (BACKUP_LABEL.to_string(), name),
        ])),
        owner_references: Some(vec![controller_reference(backup)]),
        ..Default::default()
    }
}

/// The claim that keeps `backup`'s dump of `db` (whose engine is `engine`, running `image`):
/// `spec.storage`, else as large as `db`'s volume; owned by the backup unless retained.
pub(crate) fn claim(backup: &DatabaseBackup, db: &Database, engine: &dyn Engine, image: &str) -> PersistentVolumeClaim {
    let storage = backup.spec.storage.clone().unwrap_or_default();
    let size = storage.size.unwrap_or_else(|| {
        db.spec.storage.as_ref().and_then(|s| s.size.clone()).unwrap_or_else(|| default_size(db.spec.size).to_string())
    });
    let mut metadata = metadata(backup);
    if storage.reclaim_policy == Some(ReclaimPolicy::Retain) {
        // No owner: the garbage collector leaves it when the backup goes.
        metadata.owner_references = Some(Vec::new());
    }
    let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(BACKUP_UID_LABEL.into(), backup.metadata.uid.clone().unwrap_or_default());
    labels.insert(ENGINE_LABEL.into(), engine.name().into());
    if let Some(major) = engine::major(engine, image) {
        labels.insert(DUMP_MAJOR_LABEL.into(), major);
    }
    PersistentVolumeClaim { metadata, spec: Some(claim_spec(size, storage.storage_class_name)), status: None }
}

/// What a kept claim (one of `reclaimPolicy: Retain`, owned by nobody) says of the dump in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeptDump {
    /// The engine dumped (its name: `postgres`, `mariadb`, ...).
    pub(crate) engine: String,
    /// The major version of the image that dumped, when its tag named one.
    pub(crate) major: Option<String>,
}

/// What `claim` keeps, when it is a backup's claim that outlived its DatabaseBackup (owned by
/// nobody, labelled by the operator as backup `name`'s); none for any other claim.
pub(crate) fn kept_dump(claim: &PersistentVolumeClaimView, name: &str) -> Option<KeptDump> {
    let labels = claim.metadata.labels.as_ref()?;
    let owned = claim.metadata.owner_references.as_ref().is_some_and(|o| !o.is_empty());
    let ours = labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGER)
        && labels.get(BACKUP_LABEL).map(String::as_str) == Some(name);
    (ours && !owned).then(|| KeptDump {
        engine: labels.get(ENGINE_LABEL).cloned().unwrap_or_default(),
        major: labels.get(DUMP_MAJOR_LABEL).cloned(),
    })
}

/// The engine `claim` (a backup's) was labelled with when it was made; none for a claim
/// without the label or with an engine this operator does not know.
pub(crate) fn dumped_engine(claim: &PersistentVolumeClaimView) -> Option<EngineKind> {
    let name = claim.metadata.labels.as_ref()?.get(ENGINE_LABEL)?;
    EngineKind::ALL.into_iter().find(|kind| engine::of(*kind).name() == name)
}

/// Whether the child with metadata `live` (its claim or Job) is `backup`'s: controlled by it,
/// or (a retained claim) owned by nobody and labelled with its uid. A claim kept by an earlier
/// DatabaseBackup of the same name is not.
pub(crate) fn is_backup_child(live: &ObjectMeta, backup: &DatabaseBackup) -> bool {
    let uid = live.labels.as_ref().and_then(|l| l.get(BACKUP_UID_LABEL));
    let unowned = live.owner_references.as_ref().is_none_or(Vec::is_empty);
    is_controlled_by(live, backup) || (unowned && uid.is_some() && uid == backup.metadata.uid.as_ref())
}

/// The volume of a backup's claim, and where the containers mount it.
pub(crate) fn backup_volume(claim: &str, read_only: bool) -> (Volume, VolumeMount) {
    (
        Volume {
            name: "backup".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: read_only.then_some(true),
            }),
            ..Default::default()
        },
        VolumeMount {
            name: "backup".into(),
            mount_path: BACKUP_DIR.into(),
            read_only: read_only.then_some(true),
            ..Default::default()
        },
    )
}

/// The Job that dumps `db` (whose engine is `engine`, running `image`) into `backup`'s claim.
pub(crate) fn job(backup: &DatabaseBackup, db: &Database, engine: &dyn Engine, image: &str) -> Job {
    let claim = backup.metadata.name.clone().unwrap_or_default();
    let (volume, mount) = backup_volume(&claim, false);
    let pod = PodSpec {
        containers: vec![dump_container(db, engine, image, mount)],
        volumes: Some(vec![volume]),
        ..pod_spec(engine)
    };
    dump_job(backup, pod, None)
}

/// The Job that dumps `db` (whose engine is `engine`, running `image`) into the bucket of
/// `stored`: the dump into an `emptyDir` (an init container), then its upload from
/// `tools_image`, the operator's own, whose receipt (or error) is its termination message. A
/// refusal fails the Job at once (a wrong key, a missing bucket: trying again cannot help);
/// anything else (a server away) is tried again as a failed dump is.
pub(crate) fn bucket_job(
    backup: &DatabaseBackup,
    stored: &Stored,
    db: &Database,
    engine: &dyn Engine,
    image: &str,
    tools_image: &str,
) -> Job {
    let (volume, mount) = bucket::scratch_volume();
    let major = engine::major(engine, image);
    let mut args = vec!["--engine", engine.name(), "--image", image];
    args.extend(major.as_deref().map(|major| ["--major", major]).into_iter().flatten());
    let upload = bucket::transfer(UPLOAD_CONTAINER, tools_image, "put", stored, &args);
    let pod = PodSpec {
        init_containers: Some(vec![dump_container(db, engine, image, mount)]),
        containers: vec![upload],
        volumes: Some([Some(volume), bucket::ca_volume(stored)].into_iter().flatten().collect()),
        ..pod_spec(engine)
    };
    dump_job(backup, pod, Some(refused(UPLOAD_CONTAINER)))
}

/// The label of a DatabaseBackup in a bucket that its schedule's `keep` let go: the backup
/// controller deletes its folder in the bucket, then the DatabaseBackup.
pub(crate) const EXPIRED_LABEL: &str = "example.com/expired";

/// The container of an expiry Job.
pub(crate) const EXPIRE_CONTAINER: &str = "expire";

/// The name of `backup`'s expiry Job.
pub(crate) fn expire_job_name(backup: &DatabaseBackup) -> String {
    super::meta::derived_name(backup.metadata.name.as_deref().unwrap_or_default(), "expire")
}

/// The Job that deletes `backup`'s folder of `stored` (`bucket delete`, from `tools_image`, the
/// operator's own), run as `engine`'s user as the backup's Job was. A refusal (a key that may
/// no longer delete) fails it at once.
pub(crate) fn expire_job(backup: &DatabaseBackup, stored: &Stored, engine: &dyn Engine, tools_image: &str) -> Job {
    let pod = PodSpec {
        containers: vec![bucket::transfer(EXPIRE_CONTAINER, tools_image, "delete", stored, &[])],
        volumes: Some(bucket::ca_volume(stored).into_iter().collect()),
        ..pod_spec(engine)
    };
    let mut job = dump_job(backup, pod, Some(refused(EXPIRE_CONTAINER)));
    job.metadata.name = Some(expire_job_name(backup));
    job
}

/// The pod failure policy that fails a Job at once when `container` exits with a refusal.
fn refused(container: &str) -> PodFailurePolicy {
    PodFailurePolicy {
        rules: vec![PodFailurePolicyRule {
            action: "FailJob".into(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                container_name: Some(container.into()),
                operator: "In".into(),
                values: vec![i32::from(crate::bucket::EXIT_REFUSED)],
            }),
            on_pod_conditions: None,
        }],
    }
}

/// The container of a dump Job that dumps.
pub(crate) const DUMP_CONTAINER: &str = "dump";

/// The container of a bucket Job that uploads the dump.
pub(crate) const UPLOAD_CONTAINER: &str = "upload";

/// The pod of a dump Job, without its containers and volumes: the engine's non-root user, no
/// service account token, never restarted in place (the Job makes a new pod).
fn pod_spec(engine: &dyn Engine) -> PodSpec {
    PodSpec {
        restart_policy: Some("Never".into()),
        security_context: Some(pod_security(engine)),
        automount_service_account_token: Some(false),
        ..Default::default()
    }
}

/// `backup`'s Job, running `pod`: one attempt and two retries.
fn dump_job(backup: &DatabaseBackup, pod: PodSpec, failure_policy: Option<PodFailurePolicy>) -> Job {
    Job {
        metadata: metadata(backup),
        spec: Some(JobSpec {
            backoff_limit: Some(2),
            pod_failure_policy: failure_policy,
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: metadata(backup).labels, ..Default::default() }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// The dump container's script: the engine's dump, then its count of the dump's rows or keys
/// as the container's termination message, which the backup reconcile reads (an empty count is
/// a failed dump: the dump did not read back).
fn dump_command(engine: &dyn Engine) -> String {
    format!(
        "umask 077 && {} && count=$({}) && [ -n \"$count\" ] && echo \"$count\" > /dev/termination-log",
        engine.dump_script(),
        engine.dump_count_script()
    )
}

/// The container that dumps `db` with the engine's tool from `image` into the volume at `mount`.
fn dump_container(db: &Database, engine: &dyn Engine, image: &str, mount: VolumeMount) -> Container {
    let mut env = engine.client_env(&secret::secret_name(db));
    env.push(value("DATABASE_HOST", &secret::host(db)));
    Container {
        name: DUMP_CONTAINER.into(),
        image: Some(image.into()),
        // The dump is the data: readable by its owner alone.
        command: Some(vec!["sh".into(), "-c".into(), dump_command(engine)]),
        env: Some(env),
        volume_mounts: Some(vec![mount]),
        security_context: Some(container_security()),
        ..Default::default()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::{BackupStorage, DatabaseSpec, EngineKind, Size};

    /// Backup `nightly` of Database `orders` in `shop`, with uid `uid`.
    pub(crate) fn backup(uid: &str, policy: Option<ReclaimPolicy>) -> DatabaseBackup {
        let mut backup = crate::api::backup("nightly", "orders");
        backup.metadata.namespace = Some("shop".into());
        backup.metadata.uid = Some(uid.into());
        backup.spec.storage = Some(BackupStorage { reclaim_policy: policy, ..Default::default() });
        backup
    }

    /// The claim of [`backup`] `uid`, of a dump of `kind` by `image`, as the cache holds it.
    pub(crate) fn cached_claim(
        uid: &str,
        policy: Option<ReclaimPolicy>,
        kind: EngineKind,
        image: &str,
    ) -> PersistentVolumeClaimView {
        let db = Database::new("orders", DatabaseSpec::new(Size::Small, image).with_engine(kind));
        let made = claim(&backup(uid, policy), &db, engine::of(kind), image);
        PersistentVolumeClaimView { metadata: made.metadata, ..Default::default() }
    }

    #[test]
    fn an_expiry_job_deletes_the_backup_s_folder_with_the_bucket_s_keys_and_touches_no_file() {
        let bucket = crate::api::Bucket {
            endpoint: "http://s3.example".into(),
            name: "backups".into(),
            credentials_secret: "s3-keys".into(),
            ..Default::default()
        };
        let stored = Stored { bucket, folder: "shop/nightly".into() };
        let job = expire_job(&backup("uid-1", None), &stored, engine::of(EngineKind::Postgres), "operator:1");
        assert_eq!(job.metadata.name.as_deref(), Some("nightly-expire"));
        assert_eq!(job.metadata.owner_references.as_ref().unwrap()[0].uid, "uid-1", "gone with its backup");
        let spec = job.spec.unwrap();
        let rule = &spec.pod_failure_policy.unwrap().rules[0];
        assert_eq!(rule.on_exit_codes.as_ref().unwrap().container_name.as_deref(), Some(EXPIRE_CONTAINER));
        let pod = spec.template.spec.unwrap();
        let container = &pod.containers[0];
        let args = container.args.as_ref().unwrap().join(" ");
        assert!(args.starts_with("bucket delete --endpoint http://s3.example --bucket backups --folder shop/nightly"));
        assert!(!args.contains("--file"), "{args}");
        assert_eq!(container.volume_mounts.as_deref(), Some(&[][..]), "no scratch volume");
        assert_eq!(pod.volumes.as_deref(), Some(&[][..]));
    }

    #[test]
    fn a_retained_backup_claim_has_no_owner_and_says_what_it_keeps() {
        let (pg, retain) = (EngineKind::Postgres, Some(ReclaimPolicy::Retain));
        let owned = cached_claim("uid-1", None, pg, "postgres:17.2");
        assert_eq!(owned.metadata.owner_references.as_ref().unwrap()[0].uid, "uid-1", "the backup's to delete");
        assert_eq!(kept_dump(&owned, "nightly"), None, "it goes with its backup");

        let kept = cached_claim("uid-1", retain, pg, "postgres:17.2");
        assert_eq!(kept.metadata.owner_references, Some(Vec::new()), "no owner: it outlives the backup");
        assert!(is_backup_child(&kept.metadata, &backup("uid-1", retain)));
        assert!(!is_backup_child(&kept.metadata, &backup("uid-2", retain)), "a later backup of the name is refused it");
        let dump = KeptDump { engine: "postgres".into(), major: Some("17".into()) };
        assert_eq!(kept_dump(&kept, "nightly"), Some(dump));
        assert_eq!(kept_dump(&kept, "weekly"), None, "another backup's name");
        let untagged = cached_claim("uid-1", retain, EngineKind::Mariadb, "mariadb:latest");
        assert_eq!(kept_dump(&untagged, "nightly"), Some(KeptDump { engine: "mariadb".into(), major: None }));
    }

    #[test]
    fn a_bucket_job_dumps_first_uploads_with_the_operator_s_image_and_fails_at_once_on_a_refusal() {
        let db =
            Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
        let bucket = crate::api::Bucket {
            endpoint: "https://s3.example".into(),
            name: "backups".into(),
            credentials_secret: "keys".into(),
            ..Default::default()
        };
        let stored = Stored { bucket, folder: "shop/nightly".into() };
        let pg = engine::of(EngineKind::Postgres);
        let job = bucket_job(&backup("uid-1", None), &stored, &db, pg, "postgres:17", "operator:1");
        let spec = job.spec.unwrap();
        let pod = spec.template.spec.unwrap();
        let dump = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!((dump.name.as_str(), dump.image.as_deref()), (DUMP_CONTAINER, Some("postgres:17")));
        let upload = &pod.containers[0];
        assert_eq!((upload.name.as_str(), upload.image.as_deref()), (UPLOAD_CONTAINER, Some("operator:1")));
        let volumes = pod.volumes.unwrap();
        assert!(volumes.iter().all(|v| v.persistent_volume_claim.is_none()), "no claim: {volumes:?}");
        assert!(volumes[0].empty_dir.is_some());
        let rule = &spec.pod_failure_policy.unwrap().rules[0];
        assert_eq!(rule.action, "FailJob");
        assert_eq!(rule.on_exit_codes.as_ref().unwrap().values, [i32::from(crate::bucket::EXIT_REFUSED)]);
    }

    #[test]
    fn a_backup_claim_names_the_engine_dumped_for_every_engine() {
        for kind in EngineKind::ALL {
            assert_eq!(dumped_engine(&cached_claim("uid-1", None, kind, "image:1")), Some(kind));
        }
        assert_eq!(dumped_engine(&PersistentVolumeClaimView::default()), None, "no labels");
    }
}
