//! An S3-compatible bucket that keeps backups: `spec.bucket` of a DatabaseBackup (where its
//! dump goes) and `spec.restoreFrom.bucket` of a Database (where a backup is found when its
//! DatabaseBackup is not in the namespace: a disaster recovery). How a dump gets there and
//! back is `crate::bucket`; the pods that move it are `crate::resources::backup` and
//! `crate::resources::restore`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An S3-compatible bucket (AWS S3, SeaweedFS, MinIO, Ceph's RGW, ...). A backup named
/// `nightly` is kept in the folder `<prefix>/nightly/` of the bucket: its dump (`dump.gz`) and,
/// once that is whole, its manifest (`backup.json`: the engine, the size, the SHA-256).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = ::operator_runtime::schema::rewrap_descriptions)]
pub struct Bucket {
    /// The endpoint's URL, such as https://s3.eu-west-1.amazonaws.com or
    /// http://seaweedfs.storage.svc:8333 (plain http only for a server in the cluster's own
    /// network: the keys sign each request, the data travels in the clear).
    #[schemars(length(min = 1, max = 2048))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.startsWith('https://') || self.startsWith('http://')",
         "message": "endpoint must be an http:// or https:// URL"},
    ]))]
    pub endpoint: String,

    /// The bucket's name. It must exist: the operator never creates one.
    #[schemars(length(min = 3, max = 63))]
    pub name: String,

    /// The folder of this namespace's backups in the bucket. Default: the namespace's name.
    /// A Database in another namespace restores from here by naming it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "!self.startsWith('/') && !self.endsWith('/') && !self.contains('//')",
         "message": "prefix is a folder such as team/shop: no leading, trailing or double slash"},
    ]))]
    pub prefix: Option<String>,

    /// The region the endpoint signs requests for. Default us-east-1 (what most S3-compatible
    /// servers accept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub region: Option<String>,

    /// The Secret in the namespace with the bucket's keys, under `access-key-id` and
    /// `secret-access-key`. The pods read them from it; they appear nowhere else.
    #[schemars(length(min = 1, max = 253))]
    pub credentials_secret: String,

    /// A Secret in the namespace whose `ca.crt` holds the certificate authorities (PEM) that
    /// sign the endpoint's certificate (a private CA), trusted instead of any other. Default:
    /// the certificate authorities Mozilla trusts (those of AWS S3 and the public clouds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub ca_secret: Option<String>,
}

impl Bucket {
    /// The folder of backup `backup` of namespace `namespace` in the bucket.
    pub fn folder(&self, namespace: &str, backup: &str) -> String {
        format!("{}/{backup}", self.prefix.as_deref().unwrap_or(namespace))
    }
}

/// The Secret key of the access key id.
pub const ACCESS_KEY_ID_KEY: &str = "access-key-id";
/// The Secret key of the secret access key.
pub const SECRET_ACCESS_KEY_KEY: &str = "secret-access-key";
/// The Secret key of the CA bundle.
pub const CA_KEY: &str = "ca.crt";
