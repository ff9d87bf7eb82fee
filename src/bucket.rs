//! A dump's trip to and from an S3-compatible bucket: `database-operator bucket put` and `get`,
//! which the backup Job and the restore's init container run from the operator's own image.
//!
//! A backup in a bucket is a folder of two objects: `dump.gz`, the engine's dump compressed
//! with gzip, and `backup.json`, its [`Manifest`] (the engine and image that dumped it, the
//! compressed size and its SHA-256). The manifest is written last, once the dump's upload has
//! completed, so a backup is listed (by a restore, by a person) only when it is whole:
//!
//! - `put` streams the file through gzip into a multipart upload (5 MiB parts, a few in
//!   flight), counting and hashing the compressed bytes on the way; S3 shows a multipart
//!   object only once it is completed, and a failed upload is aborted. It refuses a folder
//!   that holds a manifest already: a backup is never written over. On success it prints its
//!   [`Receipt`] (where, how large, which checksum) to the receipt file, the container's
//!   termination message, where the backup controller reads it.
//! - `get` reads the manifest, checks the engine, streams the dump back through gunzip into a
//!   file aside, checks the size and checksum the manifest recorded, then renames it into
//!   place: a dump that does not match is never restored.
//!
//! The keys come from the environment ([`ACCESS_KEY_ID_VARIABLE`],
//! [`SECRET_ACCESS_KEY_VARIABLE`]), which the pods fill from a Secret: never a flag, so never on
//! a command line. A CA bundle (`--ca-file`) is trusted beside none other when given; without
//! one, the certificate authorities Mozilla trusts are (never the machine's: the operator's
//! image has none).
//!
//! Errors say the server's reason (its S3 error code and message, or the transport's), and
//! the exit code says whether trying again can help: [`EXIT_REFUSED`] for a refusal (a wrong
//! key, a missing bucket, a backup there already, a checksum that does not match), 1 for the
//! rest (a server away, a connection cut). The Job fails at once on the first ([`EXIT_REFUSED`]
//! is its pod failure policy's) and retries the second.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use flate2::write::{GzDecoder, GzEncoder};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{Certificate, ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig, WriteMultipart};
use ring::digest;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

/// The variable holding the access key id.
pub(crate) const ACCESS_KEY_ID_VARIABLE: &str = "AWS_ACCESS_KEY_ID";
/// The variable holding the secret access key.
pub(crate) const SECRET_ACCESS_KEY_VARIABLE: &str = "AWS_SECRET_ACCESS_KEY";
/// The exit code of a refusal: trying again cannot help.
pub(crate) const EXIT_REFUSED: u8 = 2;
/// The dump's object in a backup's folder.
pub(crate) const DUMP_OBJECT: &str = "dump.gz";
/// The manifest's object in a backup's folder.
pub(crate) const MANIFEST_OBJECT: &str = "backup.json";

/// Where a backup is in its bucket.
#[derive(Debug, Clone, Args)]
pub struct Location {
    /// The S3 endpoint, such as https://s3.example.com:9000.
    #[arg(long)]
    pub endpoint: String,
    /// The bucket.
    #[arg(long)]
    pub bucket: String,
    /// The backup's folder in the bucket, such as shop/nightly/.
    #[arg(long)]
    pub folder: String,
    /// The region the endpoint signs for.
    #[arg(long, default_value = "us-east-1")]
    pub region: String,
    /// A PEM bundle of the certificate authorities to trust for an https endpoint.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
}

/// `database-operator bucket`'s verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Upload a dump (gzip-compressed) and its manifest into a backup's folder.
    Put {
        /// Where to.
        #[command(flatten)]
        location: Location,
        /// The dump.
        #[arg(long)]
        file: PathBuf,
        /// The engine that dumped (recorded in the manifest; a restore checks it).
        #[arg(long)]
        engine: String,
        /// The image that dumped (recorded in the manifest).
        #[arg(long)]
        image: String,
        /// The major version of the image that dumped, when its tag names one (recorded in the
        /// manifest; a restore by an older major version is refused).
        #[arg(long)]
        major: Option<String>,
        /// Where the receipt goes (the container's termination message).
        #[arg(long, default_value = "/dev/termination-log")]
        receipt: PathBuf,
    },
    /// Download a backup's dump, checked against its manifest, into a file.
    Get {
        /// Where from.
        #[command(flatten)]
        location: Location,
        /// The file to write (written aside, renamed once it matches the manifest).
        #[arg(long)]
        file: PathBuf,
        /// The engine the dump must be of.
        #[arg(long)]
        engine: String,
        /// The major version of the image that will load the dump: a dump made by a newer major
        /// version is refused.
        #[arg(long)]
        major: Option<String>,
    },
    /// Delete a backup's folder: its manifest first (it is no longer listed as a backup), then
    /// the rest. A folder already gone is fine.
    Delete {
        /// Which folder.
        #[command(flatten)]
        location: Location,
    },
}

/// What a backup's folder says of it, written once its dump is whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The engine that dumped.
    pub engine: String,
    /// The image that dumped.
    pub image: String,
    /// The major version of the image that dumped, when its tag names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major: Option<String>,
    /// The size of `dump.gz`, in bytes.
    pub size: u64,
    /// The SHA-256 of `dump.gz`, in hex.
    pub sha256: String,
}

/// What `put` reports: where the backup is, its compressed size and its checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// `s3://bucket/folder/`.
    pub location: String,
    /// The size of `dump.gz`, in bytes.
    pub size: u64,
    /// The SHA-256 of `dump.gz`, in hex.
    pub sha256: String,
}

/// Why a transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server (or the data) refused: trying again cannot help.
    #[error("{0}")]
    Refused(String),
    /// Anything else (a server away, a connection cut, a local file).
    #[error("{0}")]
    Failed(String),
}

impl Error {
    /// The exit code: [`EXIT_REFUSED`] for a refusal, else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Refused(_) => EXIT_REFUSED,
            Error::Failed(_) => 1,
        }
    }
}

/// Runs `command`.
///
/// # Errors
/// The server's reason, or the local one (see [`Error`]).
pub async fn run(command: Command) -> Result<(), Error> {
    // The TLS of the HTTP client: ring, the crypto the rest of the binary uses.
    let _ = rustls::crypto::CryptoProvider::install_default(rustls::crypto::ring::default_provider());
    match command {
        Command::Put { location, file, engine, image, major, receipt } => {
            // The receipt file holds the error when there is one: the pod's last words.
            let written = match put(&location, &file, &engine, &image, major).await {
                Ok(done) => serde_json::to_string(&done).map_err(|e| Error::Failed(e.to_string())),
                Err(e) => Err(e),
            };
            let text = match &written {
                Ok(json) => json.clone(),
                Err(e) => e.to_string(),
            };
            std::fs::write(&receipt, &text)
                .map_err(|e| Error::Failed(format!("writing the receipt to {}: {e}", receipt.display())))?;
            println!("{}", written?);
            Ok(())
        }
        Command::Get { location, file, engine, major } => get(&location, &file, &engine, major.as_deref()).await,
        Command::Delete { location } => delete(&location).await,
    }
}

fn store(location: &Location) -> Result<AmazonS3, Error> {
    let read = |name: &str| {
        std::env::var(name).map_err(|_| Error::Refused(format!("{name} is not set: the bucket's keys come from it")))
    };
    // The roots of trust are the CA bundle when given, else Mozilla's: never the machine's, of
    // which the operator's image has none.
    let mut options = ClientOptions::new()
        .with_allow_http(true)
        .with_timeout(Duration::from_secs(120))
        .with_connect_timeout(Duration::from_secs(10))
        .with_no_system_certificates(true);
    let roots = match &location.ca_file {
        Some(ca) => {
            let pem = std::fs::read(ca)
                .map_err(|e| Error::Refused(format!("reading the CA bundle {}: {e}", ca.display())))?;
            Certificate::from_pem_bundle(&pem)
                .map_err(|e| Error::Refused(format!("the CA bundle {} is not PEM: {e}", ca.display())))?
        }
        None => webpki_root_certs::TLS_SERVER_ROOT_CERTS
            .iter()
            .map(|der| Certificate::from_der(der.as_ref()))
            .collect::<Result<_, _>>()
            .map_err(|e| Error::Failed(format!("Mozilla's certificate authorities: {e}")))?,
    };
    for certificate in roots {
        options = options.with_root_certificate(certificate);
    }
    // A few quick retries here; the Job retries the pod after that.
    let retry = RetryConfig { max_retries: 2, retry_timeout: Duration::from_secs(20), ..Default::default() };
    AmazonS3Builder::new()
        .with_endpoint(&location.endpoint)
        .with_bucket_name(&location.bucket)
        .with_region(&location.region)
        .with_access_key_id(read(ACCESS_KEY_ID_VARIABLE)?)
        .with_secret_access_key(read(SECRET_ACCESS_KEY_VARIABLE)?)
        .with_virtual_hosted_style_request(false)
        .with_client_options(options)
        .with_retry(retry)
        .build()
        .map_err(|e| Error::Refused(format!("the bucket's settings: {e}")))
}

fn object(location: &Location, name: &str) -> ObjectPath {
    ObjectPath::from(format!("{}/{name}", location.folder.trim_matches('/')))
}

/// `s3://bucket/folder/`.
pub(crate) fn url(bucket: &str, folder: &str) -> String {
    format!("s3://{bucket}/{}/", folder.trim_matches('/'))
}

/// The server's reason for `error`, classified (see [`Error`]).
fn reason(doing: &str, error: object_store::Error) -> Error {
    use object_store::Error as E;
    let refused = matches!(
        error,
        E::NotFound { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
    );
    // The chain of causes, each once: "error sending request" alone does not say "connection
    // refused".
    let mut text = server_words(&error.to_string());
    let mut cause = std::error::Error::source(&error);
    while let Some(inner) = cause {
        let words = server_words(&inner.to_string());
        if !text.contains(&words) {
            text = format!("{text}: {words}");
        }
        cause = inner.source();
    }
    // A 4xx answer that object_store does not classify (a wrong signature: 403) is a refusal.
    // So is a certificate the CA bundle does not vouch for.
    let client_error = text.contains("status 4") || text.contains("invalid peer certificate");
    if refused || client_error {
        Error::Refused(format!("{doing}: {text}"))
    } else {
        Error::Failed(format!("{doing}: {text}"))
    }
}

/// An S3 error's `<Code>` and `<Message>` in place of its XML body, when it has them.
fn server_words(text: &str) -> String {
    let element = |name: &str| {
        let start = text.find(&format!("<{name}>"))? + name.len() + 2;
        let end = text[start..].find(&format!("</{name}>"))? + start;
        Some(text[start..end].to_string())
    };
    match (element("Code"), text.find("<?xml").or_else(|| text.find('<'))) {
        (Some(code), Some(xml)) => {
            let message = element("Message").map(|m| format!(": {m}")).unwrap_or_default();
            format!("{}{code}{message}", &text[..xml])
        }
        _ => text.to_string(),
    }
}

async fn put(
    location: &Location,
    file: &Path,
    engine: &str,
    image: &str,
    major: Option<String>,
) -> Result<Receipt, Error> {
    let store = Arc::new(store(location)?);
    let manifest_path = object(location, MANIFEST_OBJECT);
    // A GET, not a HEAD: a refusal's answer has a body that says why.
    match store.get(&manifest_path).await {
        Ok(_) => {
            return Err(Error::Refused(format!(
                "{} holds a backup already: a backup is never written over",
                url(&location.bucket, &location.folder)
            )));
        }
        Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(reason("reading the bucket", e)),
    }
    let upload =
        store.put_multipart(&object(location, DUMP_OBJECT)).await.map_err(|e| reason("starting the upload", e))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, 5 << 20);
    let streamed = stream(file, &mut writer).await;
    let (size, sha256) = match streamed {
        Ok(done) => done,
        Err(e) => {
            let _ = writer.abort().await;
            return Err(e);
        }
    };
    writer.finish().await.map_err(|e| reason("uploading the dump", e))?;
    let manifest = Manifest { engine: engine.into(), image: image.into(), major, size, sha256: sha256.clone() };
    let json = serde_json::to_vec(&manifest).map_err(|e| Error::Failed(e.to_string()))?;
    store.put(&manifest_path, PutPayload::from(json)).await.map_err(|e| reason("writing the manifest", e))?;
    Ok(Receipt { location: url(&location.bucket, &location.folder), size, sha256 })
}

/// Streams `file` through gzip into `writer`; the compressed size and SHA-256.
async fn stream(file: &Path, writer: &mut WriteMultipart) -> Result<(u64, String), Error> {
    let local = |e: std::io::Error| Error::Failed(format!("reading the dump {}: {e}", file.display()));
    let mut input = tokio::fs::File::open(file).await.map_err(local)?;
    let mut gzip = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut hash = digest::Context::new(&digest::SHA256);
    let mut size = 0u64;
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = input.read(&mut buffer).await.map_err(local)?;
        if read == 0 {
            break;
        }
        gzip.write_all(&buffer[..read]).map_err(local)?;
        let compressed = std::mem::take(gzip.get_mut());
        size += compressed.len() as u64;
        hash.update(&compressed);
        writer.wait_for_capacity(4).await.map_err(|e| reason("uploading the dump", e))?;
        writer.write(&compressed);
    }
    let rest = gzip.finish().map_err(local)?;
    size += rest.len() as u64;
    hash.update(&rest);
    writer.write(&rest);
    Ok((size, hex(hash.finish().as_ref())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn get(location: &Location, file: &Path, engine: &str, major: Option<&str>) -> Result<(), Error> {
    let store = store(location)?;
    let at = url(&location.bucket, &location.folder);
    let bytes = store
        .get(&object(location, MANIFEST_OBJECT))
        .await
        .map_err(|e| match e {
            object_store::Error::NotFound { .. } => Error::Refused(format!(
                "{at} holds no backup (no {MANIFEST_OBJECT}: none was written there, or its upload did not complete)"
            )),
            e => reason("reading the manifest", e),
        })?
        .bytes()
        .await
        .map_err(|e| reason("reading the manifest", e))?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Refused(format!("{at}{MANIFEST_OBJECT} is not a manifest: {e}")))?;
    if manifest.engine != engine {
        return Err(Error::Refused(format!(
            "{at} holds a {} dump, and this Database's engine is {engine}: nothing was restored",
            manifest.engine
        )));
    }
    if let Some(refusal) = major.and_then(|major| too_new(&manifest, major)) {
        return Err(Error::Refused(format!("{at} holds {refusal}")));
    }
    let mut body =
        store.get(&object(location, DUMP_OBJECT)).await.map_err(|e| reason("reading the dump", e))?.into_stream();
    let aside = file.with_extension("partial");
    let local = |e: std::io::Error| Error::Failed(format!("writing {}: {e}", aside.display()));
    // The dump is the data: readable by its owner alone.
    let output = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&aside);
    let mut gunzip = GzDecoder::new(std::io::BufWriter::new(output.map_err(local)?));
    let mut hash = digest::Context::new(&digest::SHA256);
    let mut size = 0u64;
    while let Some(chunk) = futures::StreamExt::next(&mut body).await {
        let chunk = chunk.map_err(|e| reason("reading the dump", e))?;
        size += chunk.len() as u64;
        hash.update(&chunk);
        gunzip.write_all(&chunk).map_err(local)?;
    }
    gunzip.try_finish().map_err(local)?;
    let sha256 = hex(hash.finish().as_ref());
    if size != manifest.size || sha256 != manifest.sha256 {
        return Err(Error::Refused(format!(
            "{at}{DUMP_OBJECT} does not match its manifest ({size} bytes, SHA-256 {sha256}; the manifest says {} bytes, \
             {}): nothing was restored",
            manifest.size, manifest.sha256
        )));
    }
    gunzip.finish().map_err(local)?.flush().map_err(local)?;
    std::fs::rename(&aside, file).map_err(local)?;
    Ok(())
}

/// Why a dump of `manifest` cannot be loaded by a server of major version `serving`: made by a
/// newer one (an older server cannot load a newer one's dump); none when it can, or when the
/// manifest records no major version.
fn too_new(manifest: &Manifest, serving: &str) -> Option<String> {
    let dumped = manifest.major.as_deref()?;
    crate::api::newer_major(dumped, serving).then(|| {
        format!(
            "a dump of {} (major version {dumped}), and this Database runs major version {serving}: an older server \
             cannot load a newer one's dump, so nothing was restored. Set spec.image to major version {dumped} or later",
            manifest.image
        )
    })
}

async fn delete(location: &Location) -> Result<(), Error> {
    let store = store(location)?;
    let gone = |result: Result<(), object_store::Error>, doing: &str| match result {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(reason(doing, e)),
    };
    gone(store.delete(&object(location, MANIFEST_OBJECT)).await, "deleting the manifest")?;
    let folder = ObjectPath::from(location.folder.trim_matches('/'));
    let listed: Vec<_> = futures::TryStreamExt::try_collect(store.list(Some(&folder)))
        .await
        .map_err(|e| reason("listing the folder", e))?;
    for entry in listed {
        gone(store.delete(&entry.location).await, "deleting the folder")?;
    }
    println!("deleted {}", url(&location.bucket, &location.folder));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_of_a_newer_major_version_is_refused_and_an_older_one_loads() {
        let manifest = |image: &str, major: Option<&str>| Manifest {
            engine: "postgres".into(),
            image: image.into(),
            major: major.map(String::from),
            size: 1,
            sha256: String::new(),
        };
        let refusal = too_new(&manifest("postgres:17.2", Some("17")), "15").unwrap();
        assert!(refusal.contains("postgres:17.2 (major version 17)") && refusal.contains("runs major version 15"));
        assert_eq!(too_new(&manifest("postgres:15", Some("15")), "17"), None, "a newer server loads an older dump");
        assert_eq!(too_new(&manifest("postgres:latest", None), "15"), None, "a tag that named no version");
    }

    #[test]
    fn an_s3_error_says_its_code_and_message_not_its_xml() {
        let body = "Client error with status 403 Forbidden: <?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>\
                    <Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match \
                    the signature you provided.</Message><Resource>/b/x</Resource></Error>";
        assert_eq!(
            server_words(body),
            "Client error with status 403 Forbidden: SignatureDoesNotMatch: The request signature we calculated \
             does not match the signature you provided."
        );
        assert_eq!(server_words("connection refused"), "connection refused");
    }

    #[test]
    fn a_folder_is_one_url_however_its_slashes_fall() {
        assert_eq!(url("backups", "shop/nightly"), "s3://backups/shop/nightly/");
        assert_eq!(url("backups", "/shop/nightly/"), "s3://backups/shop/nightly/");
    }
}
