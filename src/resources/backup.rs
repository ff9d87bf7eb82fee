//! What a DatabaseBackup owns: a claim that keeps the dump, and a Job that writes it.
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

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, Volume, VolumeMount,
};
use kube_core::ObjectMeta;

use super::claim::{claim_spec, default_size};
use super::meta::{BACKUP_LABEL, MANAGER, controller_reference};
use super::secret;
use crate::api::{Database, DatabaseBackup};
use crate::engine::{BACKUP_DIR, Engine, container_security, pod_security, value};

fn metadata(backup: &DatabaseBackup) -> ObjectMeta {
    let name = backup.metadata.name.clone().unwrap_or_default();
    ObjectMeta {
        name: Some(name.clone()),
        namespace: backup.metadata.namespace.clone(),
        labels: Some(BTreeMap::from([
            ("app.kubernetes.io/managed-by".to_string(), MANAGER.to_string()),
            ("app.kubernetes.io/component".to_string(), "backup".to_string()),
            (BACKUP_LABEL.to_string(), name),
        ])),
        owner_references: Some(vec![controller_reference(backup)]),
        ..Default::default()
    }
}

/// The claim that keeps `backup`'s dump: `spec.storage`, else as large as `db`'s volume.
pub(crate) fn claim(backup: &DatabaseBackup, db: &Database) -> PersistentVolumeClaim {
    let storage = backup.spec.storage.clone().unwrap_or_default();
    let size = storage.size.unwrap_or_else(|| {
        db.spec.storage.as_ref().and_then(|s| s.size.clone()).unwrap_or_else(|| default_size(db.spec.size).to_string())
    });
    PersistentVolumeClaim {
        metadata: metadata(backup),
        spec: Some(claim_spec(size, storage.storage_class_name)),
        status: None,
    }
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
    let mut env = engine.client_env(&secret::secret_name(db));
    env.push(value("DATABASE_HOST", &secret::host(db)));
    Job {
        metadata: metadata(backup),
        spec: Some(JobSpec {
            backoff_limit: Some(2),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: metadata(backup).labels, ..Default::default() }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    security_context: Some(pod_security(engine)),
                    automount_service_account_token: Some(false),
                    containers: vec![Container {
                        name: "dump".into(),
                        image: Some(image.into()),
                        // The dump is the data: readable by its owner alone.
                        command: Some(vec!["sh".into(), "-c".into(), format!("umask 077 && {}", engine.dump_script())]),
                        env: Some(env),
                        volume_mounts: Some(vec![mount]),
                        security_context: Some(container_security()),
                        ..Default::default()
                    }],
                    volumes: Some(vec![volume]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}
