//! A stand-in for the kubelet: runs a container of a Pod the control plane has scheduled (on a
//! kwok node, which only pretends to run it) for real, with podman, the way a kubelet would.
//! Shared by `cargo run --example kubelet` (hack/kubelet.sh, for a user of the local plane) and
//! the installation tests (tests/install/, which include this file as their module `kubelet`).
//!
//! What is carried over from the Pod, and how:
//! - the image, its entrypoint and the container's `args` (and `command`, if set);
//!   `imagePullPolicy` as podman's `--pull`;
//! - `env`, with `fieldRef`s resolved from the Pod (`metadata.name`, `metadata.namespace`, ...);
//! - the ServiceAccount: a token from the TokenRequest API bound to this Pod (valid only while
//!   the Pod exists, as the kubelet's projected token is), the plane's CA and the namespace, at
//!   `/var/run/secrets/kubernetes.io/serviceaccount`, read-only; `KUBERNETES_SERVICE_HOST` and
//!   `KUBERNETES_SERVICE_PORT` point at the apiserver, as the kubelet points them at the
//!   `kubernetes` Service;
//! - the securityContext: user and group, a read-only root file system, the dropped
//!   capabilities, no privilege escalation, seccomp (RuntimeDefault is podman's default
//!   profile); `runAsNonRoot` is checked against the user as the kubelet checks it;
//! - the CPU and memory limits, as cgroup limits;
//! - the host's network (the plane is on loopback), so the container's ports are the host's;
//! - a stop: SIGTERM, then SIGKILL after `terminationGracePeriodSeconds`.
//!
//! Not carried over: volumes other than the ServiceAccount's, probes, restarts, init containers.
//!
//! podman holds the only state. Each container is named `<namespace>_<pod>_<container>` and
//! carries the label [`LABEL`] with what another process needs to find, stop and clean up after
//! it (its Pod, grace period, ports, and the directory of its ServiceAccount files, under
//! [`state_dir`]). A container that [`RunningContainer::start`] returns is removed with its
//! directory when dropped, so a failing test leaves nothing behind, unless it is
//! [`RunningContainer::detach`]ed; one that [`RunningContainer::list`] finds never is.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Container, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use serde::{Deserialize, Serialize};

/// Where the kubelet mounts a Pod's ServiceAccount credentials.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The podman label on every container this stand-in starts; its value is a [`Record`] in JSON.
pub(crate) const LABEL: &str = "database-operator.kubelet";

/// What can go wrong running a Pod's container.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// podman is not on PATH.
    #[error(
        "podman is not installed (or not on PATH): install podman and runc; hack/image.sh installs them on Debian and Ubuntu"
    )]
    PodmanMissing,
    /// podman could not be started for another reason.
    #[error("cannot run podman")]
    PodmanIo(#[source] io::Error),
    /// podman ran and failed.
    #[error("`podman {args}` failed: {stderr}")]
    Podman {
        /// Its arguments.
        args: String,
        /// What it said.
        stderr: String,
    },
    /// The image is not in podman's store and cannot be pulled.
    #[error(
        "image {image} is not in podman's local store, and no registry serves localhost/ (or the Pod's \
         imagePullPolicy is Never): build it with hack/image.sh, which tags localhost/database-operator:<version> \
         (the chart's and the manifests' image), or `podman pull` an image from a registry"
    )]
    ImageMissing {
        /// The Pod's image.
        image: String,
    },
    /// The Pod has no container of that name.
    #[error("Pod {pod} has no container {container} (its containers: {available})")]
    NoSuchContainer {
        /// `namespace/name`.
        pod: String,
        /// The container asked for.
        container: String,
        /// The Pod's containers, comma-separated.
        available: String,
    },
    /// Something in the Pod that this stand-in does not do.
    #[error("container {container} of Pod {pod}: {what} is not supported by this stand-in for the kubelet")]
    Unsupported {
        /// `namespace/name`.
        pod: String,
        /// The container.
        container: String,
        /// What is not supported.
        what: String,
    },
    /// runAsNonRoot with runAsUser 0.
    #[error(
        "container {container} of Pod {pod} has runAsNonRoot and runAsUser 0: the kubelet would refuse to start it"
    )]
    RunsAsRoot {
        /// `namespace/name`.
        pod: String,
        /// The container.
        container: String,
    },
    /// No kubeconfig to read the apiserver's address and CA from.
    #[error("cannot load the kubeconfig: set KUBECONFIG (for the local plane: eval \"$(hack/control-plane.sh env)\")")]
    Kubeconfig(#[source] kube_client::config::InferConfigError),
    /// The kubeconfig has no CA, so the container could not verify the apiserver.
    #[error("the kubeconfig names no certificate authority for the apiserver, which the container needs to verify it")]
    NoCertificateAuthority,
    /// The TokenRequest failed.
    #[error("cannot get a token for ServiceAccount {namespace}/{account} (TokenRequest)")]
    Token {
        /// The Pod's namespace.
        namespace: String,
        /// The Pod's ServiceAccount.
        account: String,
        /// The apiserver's answer.
        #[source]
        source: kube_client::Error,
    },
    /// A file or directory of the ServiceAccount files.
    #[error("{path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
}

/// What the [`LABEL`] of a container records.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    namespace: String,
    pod: String,
    uid: String,
    container: String,
    grace_period_seconds: u64,
    ports: BTreeMap<String, u16>,
    dir: PathBuf,
}

/// A Pod's container that this stand-in started under podman (it may have exited since).
#[derive(Debug)]
pub(crate) struct RunningContainer {
    /// podman's name for it: `<namespace>_<pod>_<container>`.
    pub(crate) name: String,
    /// The Pod's namespace.
    pub(crate) namespace: String,
    /// The Pod's name.
    pub(crate) pod: String,
    /// The Pod's uid: a Pod deleted and created again under the same name is another Pod.
    pub(crate) uid: String,
    /// The container's name in the Pod.
    pub(crate) container: String,
    /// The container's named ports.
    pub(crate) ports: BTreeMap<String, u16>,
    /// The Pod's `terminationGracePeriodSeconds`.
    pub(crate) grace_period: Duration,
    /// The directory of its ServiceAccount files.
    dir: PathBuf,
    /// Whether dropping it removes it.
    owned: bool,
}

/// podman with the project's containers.conf (runc, no default ulimits), unless the caller set
/// CONTAINERS_CONF.
pub(crate) fn podman() -> Command {
    let mut podman = Command::new("podman");
    if std::env::var_os("CONTAINERS_CONF").is_none() {
        podman.env("CONTAINERS_CONF", concat!(env!("CARGO_MANIFEST_DIR"), "/hack/image/containers.conf"));
    }
    podman
}

/// The output of `podman args` (exit code and stdout, trimmed), or why podman did not run.
fn podman_status(args: &[&str]) -> Result<(Option<i32>, String, String), Error> {
    let output = podman().args(args).output().map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => Error::PodmanMissing,
        _ => Error::PodmanIo(err),
    })?;
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_string();
    Ok((output.status.code(), text(&output.stdout), text(&output.stderr)))
}

/// Runs `podman args`; its stdout, trimmed.
fn run_podman(args: &[&str]) -> Result<String, Error> {
    match podman_status(args)? {
        (Some(0), stdout, _) => Ok(stdout),
        (_, _, stderr) => Err(Error::Podman { args: args.join(" "), stderr }),
    }
}

/// Runs a podman command that answers yes (exit 0) or no (exit 1), as `podman image exists`.
fn podman_answers_yes(args: &[&str]) -> Result<bool, Error> {
    match podman_status(args)? {
        (Some(0), _, _) => Ok(true),
        (Some(1), _, _) => Ok(false),
        (_, _, stderr) => Err(Error::Podman { args: args.join(" "), stderr }),
    }
}

/// Checks that podman runs.
pub(crate) fn check_podman() -> Result<(), Error> {
    run_podman(&["--version"]).map(drop)
}

/// Where the containers' ServiceAccount files live: `$XDG_RUNTIME_DIR/database-operator-kubelet`,
/// else `<temp dir>/database-operator-kubelet-<uid>`. Private to the user (0700): a container
/// sees its own directory only, through its bind mount.
pub(crate) fn state_dir() -> Result<PathBuf, Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let uid = std::fs::metadata("/proc/self").map_err(io(Path::new("/proc/self")))?.uid();
    let dir = match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(runtime) if !runtime.is_empty() => PathBuf::from(runtime).join("database-operator-kubelet"),
        _ => std::env::temp_dir().join(format!("database-operator-kubelet-{uid}")),
    };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(io(&dir))?;
    let metadata = std::fs::symlink_metadata(&dir).map_err(io(&dir))?;
    if !metadata.is_dir() || metadata.uid() != uid {
        let source = io::Error::new(io::ErrorKind::PermissionDenied, "not a directory of this user's");
        return Err(Error::Io { path: dir, source });
    }
    Ok(dir)
}

impl RunningContainer {
    /// Starts `container` of `pod`, which the plane has admitted and scheduled, detached. A
    /// container of the same name left from before (exited, or of an earlier Pod of that name)
    /// is replaced.
    ///
    /// # Errors
    ///
    /// When podman is missing or fails, the image is not there and cannot be pulled, the Pod
    /// has no such container or asks for what this stand-in does not do, or the token cannot
    /// be had.
    pub(crate) async fn start(client: &Client, pod: &Pod, container: &str) -> Result<Self, Error> {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let full_name = format!("{namespace}/{pod_name}");
        let spec = pod.spec.clone().unwrap_or_default();
        let Some(c) = spec.containers.iter().find(|c| c.name == container) else {
            let available: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
            return Err(Error::NoSuchContainer {
                pod: full_name,
                container: container.into(),
                available: available.join(", "),
            });
        };
        let unsupported = |what: String| Error::Unsupported { pod: full_name.clone(), container: c.name.clone(), what };
        let image = c.image.clone().ok_or_else(|| unsupported("a container without an image".into()))?;
        let pull = match c.image_pull_policy.as_deref() {
            Some("Always") => "always",
            Some("Never") => "never",
            _ => "missing",
        };
        // An image of localhost/ is one that hack/image.sh built: no registry serves it.
        if (pull == "never" || image.starts_with("localhost/")) && !podman_answers_yes(&["image", "exists", &image])? {
            return Err(Error::ImageMissing { image });
        }
        let pull = if image.starts_with("localhost/") { "never" } else { pull };

        let name = format!("{namespace}_{pod_name}_{container}");
        if podman_answers_yes(&["container", "exists", &name])? {
            let stale = Self::list(Some(&namespace))?.into_iter().find(|found| found.name == name);
            run_podman(&["rm", "--force", "--time", "0", &name])?;
            if let Some(stale) = stale {
                let _ = std::fs::remove_dir_all(&stale.dir);
            }
        }

        // The ServiceAccount volume, in a directory that the returned value owns from here on.
        let account = spec.service_account_name.clone().unwrap_or_else(|| "default".into());
        let dir = state_dir()?.join(&name);
        let grace_period = Duration::from_secs(spec.termination_grace_period_seconds.unwrap_or(30).max(0) as u64);
        let ports = c
            .ports
            .iter()
            .flatten()
            .filter_map(|p| Some((p.name.clone()?, u16::try_from(p.container_port).ok()?)))
            .collect();
        let started = Self {
            name,
            namespace: namespace.clone(),
            pod: pod_name.clone(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            container: container.into(),
            ports,
            grace_period,
            dir,
            owned: true,
        };
        // The kubelet's value: the apiserver extends a bound token of 3607 s to a year
        // (--service-account-extend-token-expiration, on by default), so the container keeps
        // working without a kubelet to refresh it. It dies with the Pod all the same.
        let request = TokenRequest {
            spec: TokenRequestSpec {
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(pod_name.clone()),
                    uid: pod.metadata.uid.clone(),
                }),
                expiration_seconds: Some(3607),
                ..Default::default()
            },
            ..Default::default()
        };
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        let token = accounts
            .create_token_request(&account, &PostParams::default(), &request)
            .await
            .map_err(|source| Error::Token { namespace: namespace.clone(), account: account.clone(), source })?
            .status
            .map(|status| status.token)
            .unwrap_or_default();
        let config = kube_client::Config::infer().await.map_err(Error::Kubeconfig)?;
        let ca: String = config.root_cert.iter().flatten().map(|der| pem("CERTIFICATE", der)).collect();
        if ca.is_empty() {
            return Err(Error::NoCertificateAuthority);
        }
        // Readable by the uid the container runs as, as the kubelet's projected volume
        // (defaultMode 0644) is; the directory above is the user's alone.
        let _ = std::fs::remove_dir_all(&started.dir);
        write_files(&started.dir, &[("token", &token), ("ca.crt", &ca), ("namespace", &namespace)])?;

        let record = Record {
            namespace: namespace.clone(),
            pod: pod_name.clone(),
            uid: started.uid.clone(),
            container: container.into(),
            grace_period_seconds: grace_period.as_secs(),
            ports: started.ports.clone(),
            dir: started.dir.clone(),
        };
        let mut args: Vec<String> = vec!["run".into(), "--detach".into(), "--name".into(), started.name.clone()];
        args.push(format!("--label={LABEL}={}", serde_json::to_string(&record).expect("a record serializes")));
        args.push(format!("--pull={pull}"));
        args.extend(["--network=host".into(), format!("--volume={}:{SERVICE_ACCOUNT_DIR}:ro", started.dir.display())]);
        let host = config.cluster_url.host().unwrap_or("127.0.0.1").trim_matches(['[', ']']).to_string();
        args.push(format!("--env=KUBERNETES_SERVICE_HOST={host}"));
        args.push(format!("--env=KUBERNETES_SERVICE_PORT={}", config.cluster_url.port_u16().unwrap_or(443)));
        for var in c.env.iter().flatten() {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    let Some(field) = &from.field_ref else {
                        return Err(unsupported(format!("env {} from a Secret, ConfigMap or resource", var.name)));
                    };
                    match field.field_path.as_str() {
                        "metadata.name" => pod_name.clone(),
                        "metadata.namespace" => namespace.clone(),
                        "metadata.uid" => started.uid.clone(),
                        "spec.serviceAccountName" => account.clone(),
                        "spec.nodeName" => spec.node_name.clone().unwrap_or_default(),
                        other => return Err(unsupported(format!("env {} from fieldRef {other}", var.name))),
                    }
                }
                (None, None) => String::new(),
            };
            args.push(format!("--env={}={value}", var.name));
        }
        if c.env_from.as_ref().is_some_and(|from| !from.is_empty()) {
            return Err(unsupported("envFrom".into()));
        }
        args.extend(
            security_flags(pod, c)
                .map_err(|()| Error::RunsAsRoot { pod: full_name.clone(), container: container.into() })?,
        );
        if let Some(limits) = c.resources.as_ref().and_then(|r| r.limits.as_ref()) {
            if let Some(cpu) = limits.get("cpu") {
                let cores = cpu_cores(cpu).ok_or_else(|| unsupported(format!("the CPU limit {}", cpu.0)))?;
                args.push(format!("--cpus={cores}"));
            }
            if let Some(memory) = limits.get("memory") {
                let bytes =
                    memory_bytes(memory).ok_or_else(|| unsupported(format!("the memory limit {}", memory.0)))?;
                args.push(format!("--memory={bytes}"));
            }
        }
        if let Some(command) = &c.command {
            args.push(format!("--entrypoint={}", serde_json::to_string(command).expect("strings serialize")));
        }
        args.push(image);
        args.extend(c.args.iter().flatten().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_podman(&args)?;
        Ok(started)
    }

    /// The containers this stand-in started (in `namespace`, if given), running or not, as
    /// podman knows them.
    ///
    /// # Errors
    ///
    /// When podman is missing or fails.
    pub(crate) fn list(namespace: Option<&str>) -> Result<Vec<Self>, Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Listed {
            names: Vec<String>,
            #[serde(default)]
            labels: BTreeMap<String, String>,
        }
        let listed = run_podman(&["ps", "--all", "--filter", &format!("label={LABEL}"), "--format", "json"])?;
        let listed: Vec<Listed> = serde_json::from_str(&listed).map_err(|err| Error::Podman {
            args: "ps --format json".into(),
            stderr: format!("unexpected output: {err}"),
        })?;
        Ok(listed
            .into_iter()
            .filter_map(|listed| {
                let record: Record = serde_json::from_str(listed.labels.get(LABEL)?).ok()?;
                Some(Self {
                    name: listed.names.into_iter().next()?,
                    namespace: record.namespace,
                    pod: record.pod,
                    uid: record.uid,
                    container: record.container,
                    ports: record.ports,
                    grace_period: Duration::from_secs(record.grace_period_seconds),
                    dir: record.dir,
                    owned: false,
                })
            })
            .filter(|found| namespace.is_none_or(|namespace| found.namespace == namespace))
            .collect())
    }

    /// Leaves the container running when this value is dropped (for `hack/kubelet.sh start`,
    /// which exits).
    pub(crate) fn detach(mut self) -> Self {
        self.owned = false;
        self
    }

    /// Whether the container runs.
    ///
    /// # Errors
    ///
    /// When podman is missing or fails (the container is gone, say).
    pub(crate) fn is_running(&self) -> Result<bool, Error> {
        Ok(run_podman(&["inspect", "--format", "{{.State.Running}}", &self.name])? == "true")
    }

    /// What the container printed so far (stdout and stderr), or why podman could not say.
    pub(crate) fn logs(&self) -> String {
        match podman_status(&["logs", &self.name]) {
            Ok((_, stdout, stderr)) => format!("{stdout}\n{stderr}"),
            Err(err) => err.to_string(),
        }
    }

    /// Stops the container as the kubelet does (SIGTERM, SIGKILL after the grace period) and
    /// returns its exit code. A container that has exited already just returns its code.
    ///
    /// # Errors
    ///
    /// When podman is missing or fails.
    pub(crate) fn stop(&self) -> Result<i64, Error> {
        run_podman(&["stop", "--time", &self.grace_period.as_secs().to_string(), &self.name])?;
        let code = run_podman(&["inspect", "--format", "{{.State.ExitCode}}", &self.name])?;
        code.parse().map_err(|_| Error::Podman { args: "inspect".into(), stderr: format!("exit code {code:?}") })
    }

    /// Removes the container (killing it if it runs) and its ServiceAccount files.
    ///
    /// # Errors
    ///
    /// When podman is missing or fails, or the files cannot be removed.
    pub(crate) fn remove(mut self) -> Result<(), Error> {
        self.owned = false;
        run_podman(&["rm", "--force", "--time", "0", &self.name])?;
        match std::fs::remove_dir_all(&self.dir) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(Error::Io { path: self.dir.clone(), source: err }),
            _ => Ok(()),
        }
    }
}

impl Drop for RunningContainer {
    fn drop(&mut self) {
        if self.owned {
            let _ = podman().args(["rm", "--force", "--time", "0", &self.name]).output();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Writes `files` (name, content) into a new directory `dir`: the directory 0755, the files
/// 0644, whatever the umask.
fn write_files(dir: &Path, files: &[(&str, &str)]) -> Result<(), Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io(dir))?;
    for (name, content) in files {
        let path = dir.join(name);
        std::fs::write(&path, content).map_err(io(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).map_err(io(&path))?;
    }
    Ok(())
}

/// `der` as a PEM block of `label`.
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = encoded.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap()).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

/// The podman flags for the Pod's and the container's securityContext; `Err` when the kubelet
/// would refuse the container (runAsNonRoot with runAsUser 0).
fn security_flags(pod: &Pod, container: &Container) -> Result<Vec<String>, ()> {
    let pod_context = pod.spec.as_ref().and_then(|s| s.security_context.clone()).unwrap_or_default();
    let context = container.security_context.clone().unwrap_or_default();
    let mut flags = Vec::new();
    let user = context.run_as_user.or(pod_context.run_as_user);
    let group = context.run_as_group.or(pod_context.run_as_group);
    // Without a runAsUser the kubelet would look at the image's USER, which podman applies
    // itself.
    if context.run_as_non_root.or(pod_context.run_as_non_root) == Some(true) && user == Some(0) {
        return Err(());
    }
    match (user, group) {
        (Some(user), Some(group)) => flags.push(format!("--user={user}:{group}")),
        (Some(user), None) => flags.push(format!("--user={user}")),
        _ => {}
    }
    if context.read_only_root_filesystem == Some(true) {
        flags.push("--read-only".into());
    }
    let capabilities = context.capabilities.unwrap_or_default();
    for dropped in capabilities.drop.iter().flatten() {
        flags.push(format!("--cap-drop={dropped}"));
    }
    for added in capabilities.add.iter().flatten() {
        flags.push(format!("--cap-add={added}"));
    }
    if context.allow_privilege_escalation == Some(false) {
        flags.push("--security-opt=no-new-privileges".into());
    }
    let seccomp = context.seccomp_profile.or(pod_context.seccomp_profile).map(|p| p.type_);
    if seccomp.as_deref() == Some("Unconfined") {
        flags.push("--security-opt=seccomp=unconfined".into());
    }
    Ok(flags)
}

/// A CPU quantity ("500m", "2", "0.5") in cores, as podman's --cpus takes it.
fn cpu_cores(quantity: &Quantity) -> Option<f64> {
    match quantity.0.strip_suffix('m') {
        Some(millis) => Some(millis.parse::<f64>().ok()? / 1000.0),
        None => quantity.0.parse().ok(),
    }
}

/// A memory quantity ("128Mi", "1G", "134217728") in bytes, as podman's --memory takes it.
fn memory_bytes(quantity: &Quantity) -> Option<u64> {
    const SUFFIXES: [(&str, u64); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    let text = quantity.0.as_str();
    let (number, unit) =
        SUFFIXES.iter().find_map(|(suffix, unit)| Some((text.strip_suffix(suffix)?, *unit))).unwrap_or((text, 1));
    let number: f64 = number.parse().ok()?;
    Some((number * unit as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_limits_become_bytes_with_binary_and_decimal_suffixes() {
        let bytes = |text: &str| memory_bytes(&Quantity(text.into()));
        assert_eq!(bytes("256Mi"), Some(256 << 20));
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("128M"), Some(128_000_000));
        assert_eq!(bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes("134217728"), Some(134_217_728));
        assert_eq!(bytes("1Pi"), None, "a suffix it does not know is refused, not misread");
    }

    #[test]
    fn cpu_limits_become_cores() {
        let cores = |text: &str| cpu_cores(&Quantity(text.into()));
        assert_eq!(cores("500m"), Some(0.5));
        assert_eq!(cores("2"), Some(2.0));
        assert_eq!(cores("0.25"), Some(0.25));
        assert_eq!(cores("lots"), None);
    }
}
