//! The certificate the metrics endpoint serves over HTTPS.
//!
//! Either files in a directory (`--metrics-cert-path`, typically a Secret that cert-manager
//! fills and rotates) or, without one, a self-signed certificate generated at start, as
//! controller-runtime's metrics server does. Files are looked at again on every TLS handshake
//! (a `stat` of each, at scrape rate) and re-read when they changed, so a rotated certificate
//! takes effect without a restart; a rotation caught half-written keeps the previous pair and
//! is retried at the next handshake.
//!
//! Only HTTP/1.1 is offered (ALPN), as controller-runtime disables HTTP/2 on its metrics
//! server by default since the HTTP/2 "rapid reset" attack.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

/// Where the certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Generated at start, valid for `localhost` and `127.0.0.1`; scrapers skip verification
    /// (`insecureSkipVerify`, as kubebuilder's ServiceMonitor does) or pin it.
    SelfSigned,
    /// A PEM certificate chain and its private key, re-read when they change.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key (PKCS#8, PKCS#1 or SEC1).
        key: PathBuf,
    },
}

/// Why no TLS configuration could be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A certificate or key file could not be read or parsed.
    #[error("cannot load {}: {reason}; check --metrics-cert-path, --metrics-cert-name and --metrics-cert-key", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The self-signed certificate could not be generated.
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the key or the configuration.
    #[error("cannot set up TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A TLS acceptor serving the certificate of `source`.
///
/// # Errors
///
/// [`Error`] when the files cannot be read or parsed, or a certificate cannot be generated.
pub fn acceptor(source: &Source) -> Result<TlsAcceptor, Error> {
    let resolver: Arc<dyn ResolvesServerCert> = match source {
        Source::SelfSigned => Arc::new(Fixed(Arc::new(self_signed()?))),
        Source::Files { cert, key } => Arc::new(Files::load(cert.clone(), key.clone())?),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn self_signed() -> Result<CertifiedKey, Error> {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()));
    let signing_key = any_supported_type(&key)?;
    info!("serving metrics with a self-signed certificate (pass --metrics-cert-path to use your own)");
    Ok(CertifiedKey::new(vec![generated.cert.der().clone()], signing_key))
}

/// One certificate for every handshake.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// A certificate from files, re-read when their modification time or size changes.
#[derive(Debug)]
struct Files {
    cert: PathBuf,
    key: PathBuf,
    loaded: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    stamp: (Stamp, Stamp),
    certified: Arc<CertifiedKey>,
}

/// What tells that a file changed: its modification time and length.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

impl Files {
    fn load(cert: PathBuf, key: PathBuf) -> Result<Self, Error> {
        let stamp = (stamp(&cert), stamp(&key));
        let certified = Arc::new(read_pair(&cert, &key)?);
        info!(cert = %cert.display(), key = %key.display(), "serving metrics with a certificate from files");
        Ok(Self { cert, key, loaded: Mutex::new(Loaded { stamp, certified }) })
    }
}

impl ResolvesServerCert for Files {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl Files {
    /// The pair to serve: the loaded one, re-read first if the files changed.
    fn current(&self) -> Arc<CertifiedKey> {
        let now = (stamp(&self.cert), stamp(&self.key));
        let mut loaded = self.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if now != loaded.stamp {
            match read_pair(&self.cert, &self.key) {
                Ok(certified) => {
                    info!(cert = %self.cert.display(), "the metrics certificate changed; serving the new one");
                    *loaded = Loaded { stamp: now, certified: Arc::new(certified) };
                }
                // Half-way through a rotation the pair may not match: keep serving the old one
                // and look again at the next handshake.
                Err(err) => {
                    warn!(error = %err, "reloading the metrics certificate failed; still serving the previous one")
                }
            }
        }
        loaded.certified.clone()
    }
}

fn read_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, Error> {
    let file_error = |path: &Path, reason: String| Error::File { path: path.to_path_buf(), reason };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| file_error(cert, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(file_error(cert, "no PEM certificate in it".to_string()));
    }
    let private_key = PrivateKeyDer::from_pem_file(key).map_err(|e| file_error(key, e.to_string()))?;
    let signing_key = any_supported_type(&private_key).map_err(|e| file_error(key, e.to_string()))?;
    let certified = CertifiedKey::new(chain, signing_key);
    // A certificate whose key is another one's fails every handshake; say so now instead.
    certified.keys_match().map_err(|e| file_error(key, format!("it does not match the certificate: {e}")))?;
    Ok(certified)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, names: &[&str]) -> rcgen::CertifiedKey<rcgen::KeyPair> {
        let generated =
            rcgen::generate_simple_self_signed(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        std::fs::write(dir.join("tls.crt"), generated.cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), generated.signing_key.serialize_pem()).unwrap();
        generated
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("database-operator-tls-{name}-{:08x}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_self_signed_certificate_is_generated() {
        let certified = self_signed().unwrap();
        assert_eq!(certified.cert.len(), 1);
        certified.keys_match().unwrap();
    }

    #[test]
    fn a_certificate_from_files_is_served_and_reloaded_when_the_files_change() {
        let dir = temp_dir("reload");
        let first = write_pair(&dir, &["first.example"]);
        let files = Files::load(dir.join("tls.crt"), dir.join("tls.key")).unwrap();
        let served = || files.loaded.lock().unwrap().certified.cert[0].clone();
        assert_eq!(served().as_ref(), first.cert.der().as_ref());

        // A rotation: new files with another length (a different name), so the stamp moves
        // even where the file system's clock is coarse.
        let second = write_pair(&dir, &["second.example.with.a.longer.name"]);
        let _ = files.current();
        assert_eq!(served().as_ref(), second.cert.der().as_ref());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_half_written_rotation_keeps_the_previous_certificate() {
        let dir = temp_dir("half");
        let first = write_pair(&dir, &["first.example"]);
        let files = Files::load(dir.join("tls.crt"), dir.join("tls.key")).unwrap();
        // The certificate is replaced, its key not yet: the pair does not match.
        let other = rcgen::generate_simple_self_signed(vec!["other.example.with.a.longer.name".to_string()]).unwrap();
        std::fs::write(dir.join("tls.crt"), other.cert.pem()).unwrap();
        let _ = files.current();
        assert_eq!(files.loaded.lock().unwrap().certified.cert[0].as_ref(), first.cert.der().as_ref());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_or_mismatched_file_is_an_error_naming_it() {
        let dir = temp_dir("missing");
        let err = Files::load(dir.join("tls.crt"), dir.join("tls.key")).unwrap_err();
        assert!(err.to_string().contains("tls.crt"), "{err}");
        write_pair(&dir, &["a.example"]);
        let other = rcgen::generate_simple_self_signed(vec!["b.example".to_string()]).unwrap();
        std::fs::write(dir.join("tls.key"), other.signing_key.serialize_pem()).unwrap();
        let err = Files::load(dir.join("tls.crt"), dir.join("tls.key")).unwrap_err();
        assert!(err.to_string().contains("does not match"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
