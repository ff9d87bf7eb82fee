//! The restore of a Database from a DatabaseBackup, as its first pod carries it: an init
//! container that runs the engine's restore script
//! ([`restore_script`](crate::engine::Engine::restore_script)) in the Database's own image,
//! with the backup's claim (read-only) and the data volume, and readies the dump in the
//! initialisation directory the server reads at its first start. A backup in a bucket is
//! fetched first, by an init container of the operator's image ([`super::bucket`]) that checks
//! it against its manifest, into an `emptyDir` in the claim's place. When to add them, and when
//! they leave, is the Database controller's (`crate::database::restore`).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, VolumeMount};

use super::backup::backup_volume;
use super::bucket::{self, Stored};
use super::view::DeploymentView;
use super::workload::{DATA_VOLUME, initdb_mount, with_initdb_dir};
use crate::engine::{self, Engine};

/// The name of the init container that readies a restore.
pub(crate) const RESTORE_CONTAINER: &str = "restore";

/// The restore's first check: the dump is there. A dump Job renames its dump into place only
/// once it reads back, so a claim without one (kept by a backup whose dump failed) holds nothing
/// whole, and the pod says so in its last words.
const WHOLE_DUMP: &str = "[ -f /backup/dump ] || { echo 'the backup claim holds no completed dump (/backup/dump): \
                          its dump did not complete, and nothing was restored' >&2; exit 1; }";

/// The name of the init container that fetches a dump from a bucket.
pub(crate) const FETCH_CONTAINER: &str = "fetch";

/// Where a restore reads its dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A backup's claim, by name.
    Claim(String),
    /// A backup in a bucket, fetched with the operator's image (`tools_image`).
    Bucket {
        /// The bucket and the backup's folder.
        stored: Stored,
        /// The operator's image.
        tools_image: String,
    },
}

/// Adds the restore to `deployment`: an init container, running the engine's restore script
/// in the Database's image, with the backup's claim (read-only) or the `emptyDir` a fetch from
/// a bucket fills, the data volume, and the initialisation directory the server reads at its
/// first start (shared with the server).
pub(crate) fn with_restore(deployment: &mut Deployment, engine: &dyn Engine, source: &Source) {
    let pod = deployment.spec.as_mut().and_then(|s| s.template.spec.as_mut()).expect("a Deployment has a pod spec");
    let mut fetch = None;
    let (backup_volume, backup_mount) = match source {
        Source::Claim(claim) => backup_volume(claim, true),
        Source::Bucket { stored, tools_image } => {
            // The server's major version, against the dump's (the manifest's).
            let image = pod.containers[0].image.clone().unwrap_or_default();
            let major = engine::major(engine, &image);
            let mut args = vec!["--engine", engine.name()];
            args.extend(major.as_deref().map(|major| ["--major", major]).into_iter().flatten());
            let container = bucket::transfer(FETCH_CONTAINER, tools_image, "get", stored, &args);
            fetch = Some(Container { termination_message_policy: Some(engine::LAST_WORDS.into()), ..container });
            pod.volumes.get_or_insert_with(Vec::new).extend(bucket::ca_volume(stored));
            bucket::scratch_volume()
        }
    };
    with_initdb_dir(pod);
    let initdb = initdb_mount();
    let data = VolumeMount { name: DATA_VOLUME.into(), mount_path: engine.data_dir().into(), ..Default::default() };
    let image = pod.containers[0].image.clone();
    pod.init_containers = Some(
        fetch
            .into_iter()
            .chain([Container {
                name: RESTORE_CONTAINER.into(),
                image,
                // It writes into the data volume (redis's restore does): under the volume's lock.
                command: Some(engine::fence::fenced(
                    engine.data_dir(),
                    &format!("{WHOLE_DUMP} && {}", engine.restore_script()),
                )),
                volume_mounts: Some(vec![backup_mount, data.clone(), initdb]),
                security_context: Some(engine::container_security()),
                termination_message_policy: Some(engine::LAST_WORDS.into()),
                ..Default::default()
            }])
            .collect(),
    );
    pod.volumes.get_or_insert_with(Vec::new).push(backup_volume);
}

/// Whether `deployment` runs `image`, Ready, with the restore init container: the restored
/// server has started.
pub(crate) fn restored(deployment: &DeploymentView, image: &str) -> bool {
    let has_restore = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.init_containers.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.name == RESTORE_CONTAINER));
    has_restore && deployment.runs_ready(image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Database, DatabaseSpec, EngineKind, Size};
    use crate::resources::workload;

    /// The restore's dump and the engine's own first-start script share one directory.
    #[test]
    fn a_restore_shares_the_initialisation_directory_of_the_engine() {
        for kind in [EngineKind::Postgres, EngineKind::Mariadb, EngineKind::Redis] {
            let db = Database::new("orders", DatabaseSpec::new(Size::Small, "image:1").with_engine(kind));
            let mut deployment = workload::deployment(&db);
            with_restore(&mut deployment, engine::of(kind), &Source::Claim("orders-1".into()));
            let pod = deployment.spec.unwrap().template.spec.unwrap();
            let count = |names: Vec<&str>| names.into_iter().filter(|n| *n == "initdb").count();
            assert_eq!(count(pod.volumes.as_ref().unwrap().iter().map(|v| v.name.as_str()).collect()), 1, "{kind:?}");
            let mounts = pod.containers[0].volume_mounts.as_ref().unwrap();
            assert_eq!(count(mounts.iter().map(|m| m.name.as_str()).collect()), 1, "{kind:?}");
            let init = &pod.init_containers.as_ref().unwrap()[0];
            assert!(init.volume_mounts.as_ref().unwrap().iter().any(|m| m.mount_path == engine::INITDB_DIR));
        }
    }
}
