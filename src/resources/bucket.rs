//! The container that moves a dump to or from a bucket (`database-operator bucket put|get`,
//! [`crate::bucket`]), as the backup Job and the restoring pod carry it: the operator's own
//! image, the bucket's keys from its Secret (environment variables: never a command line), its
//! CA bundle from a Secret volume, and an `emptyDir` at [`BACKUP_DIR`] that the engine's
//! container dumps into or restores from in place of a backup's claim.

use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, KeyToPath, SecretVolumeSource, Volume, VolumeMount};

use crate::api::{ACCESS_KEY_ID_KEY, Bucket, CA_KEY, SECRET_ACCESS_KEY_KEY};
use crate::bucket::{ACCESS_KEY_ID_VARIABLE, SECRET_ACCESS_KEY_VARIABLE};
use crate::engine::{self, BACKUP_DIR, from_secret};

/// Where the CA bundle is mounted.
const CA_DIR: &str = "/etc/bucket-ca";

/// The dump's file in [`BACKUP_DIR`].
pub(crate) const DUMP_FILE: &str = "/backup/dump";

/// A backup in a bucket: the bucket, and the backup's folder in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    /// The bucket.
    pub(crate) bucket: Bucket,
    /// The backup's folder ([`Bucket::folder`]).
    pub(crate) folder: String,
}

/// The `emptyDir` the engine's container and the transfer share at [`BACKUP_DIR`].
pub(crate) fn scratch_volume() -> (Volume, VolumeMount) {
    (
        Volume { name: "backup".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() },
        VolumeMount { name: "backup".into(), mount_path: BACKUP_DIR.into(), ..Default::default() },
    )
}

/// The volumes a transfer of `stored` needs besides the scratch one: the CA bundle's, if any.
pub(crate) fn ca_volume(stored: &Stored) -> Option<Volume> {
    let secret = stored.bucket.ca_secret.clone()?;
    Some(Volume {
        name: "bucket-ca".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret),
            items: Some(vec![KeyToPath { key: CA_KEY.into(), path: CA_KEY.into(), mode: None }]),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The container `name` that runs `database-operator bucket VERB` for `stored` from `image`,
/// with `extra` arguments after the location's.
pub(crate) fn transfer(name: &str, image: &str, verb: &str, stored: &Stored, extra: &[&str]) -> Container {
    let bucket = &stored.bucket;
    let mut args: Vec<String> = vec!["bucket".into(), verb.into()];
    let mut flag = |name: &str, value: &str| args.extend([format!("--{name}"), value.to_string()]);
    flag("endpoint", &bucket.endpoint);
    flag("bucket", &bucket.name);
    flag("folder", &stored.folder);
    flag("region", bucket.region.as_deref().unwrap_or("us-east-1"));
    // A put or a get moves the dump in the scratch volume; a delete touches no file.
    let mut mounts = Vec::new();
    if verb != "delete" {
        flag("file", DUMP_FILE);
        mounts.push(scratch_volume().1);
    }
    if bucket.ca_secret.is_some() {
        flag("ca-file", &format!("{CA_DIR}/{CA_KEY}"));
        mounts.push(VolumeMount {
            name: "bucket-ca".into(),
            mount_path: CA_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    Container {
        name: name.into(),
        image: Some(image.into()),
        args: Some(args),
        env: Some(vec![
            from_secret(ACCESS_KEY_ID_VARIABLE, &bucket.credentials_secret, ACCESS_KEY_ID_KEY),
            from_secret(SECRET_ACCESS_KEY_VARIABLE, &bucket.credentials_secret, SECRET_ACCESS_KEY_KEY),
        ]),
        volume_mounts: Some(mounts),
        security_context: Some(engine::container_security()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_reads_its_keys_from_the_secret_and_names_none_on_its_command_line() {
        let bucket = Bucket {
            endpoint: "https://s3.example".into(),
            name: "backups".into(),
            credentials_secret: "s3-keys".into(),
            ca_secret: Some("s3-ca".into()),
            ..Default::default()
        };
        let stored = Stored { bucket, folder: "shop/nightly".into() };
        let container = transfer("upload", "operator:1", "put", &stored, &["--engine", "postgres"]);
        let args = container.args.unwrap().join(" ");
        assert!(args.starts_with("bucket put --endpoint https://s3.example --bucket backups --folder shop/nightly"));
        assert!(args.contains("--ca-file /etc/bucket-ca/ca.crt") && args.ends_with("--engine postgres"), "{args}");
        let env = container.env.unwrap();
        assert!(env.iter().all(|v| v.value.is_none() && v.value_from.is_some()), "{env:?}");
        assert_eq!(ca_volume(&stored).unwrap().secret.unwrap().secret_name.as_deref(), Some("s3-ca"));
    }
}
