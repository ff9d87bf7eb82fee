//! A stand-in for the kubelet: runs a container of a Pod the control plane has scheduled (on a
//! kwok node, which only pretends to run it) for real, with podman, the way a kubelet would.
//!
//! What is carried over from the Pod, and how:
//! - the image, its entrypoint and the container's `args` (and `command`, if set);
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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Container, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_client::Client;
use kube_client::api::{Api, PostParams};

/// Where the kubelet mounts a Pod's ServiceAccount credentials.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A Pod's container running under podman; removed when dropped.
pub(crate) struct RunningContainer {
    name: String,
    dir: PathBuf,
    /// The container's named ports.
    pub(crate) ports: BTreeMap<String, u16>,
    /// The Pod's `terminationGracePeriodSeconds`.
    pub(crate) grace_period: Duration,
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

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|err| panic!("{command:?}: {err}"));
    assert!(output.status.success(), "{command:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

impl RunningContainer {
    /// Starts `container` of `pod`, which the plane has admitted and scheduled.
    pub(crate) async fn start(client: &Client, pod: &Pod, container: &str) -> Self {
        let name = pod.metadata.name.clone().expect("a Pod has a name");
        let namespace = pod.metadata.namespace.clone().expect("a Pod has a namespace");
        let spec = pod.spec.as_ref().expect("a Pod has a spec");
        let c: &Container = spec.containers.iter().find(|c| c.name == container).expect("the container is in the Pod");
        let dir = std::env::temp_dir().join(format!("database-operator-kubelet-{:08x}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();

        // The ServiceAccount volume.
        let account = spec.service_account_name.as_deref().unwrap_or("default");
        let request = TokenRequest {
            spec: TokenRequestSpec {
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(name.clone()),
                    uid: pod.metadata.uid.clone(),
                }),
                expiration_seconds: Some(3607),
                ..Default::default()
            },
            ..Default::default()
        };
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        let token = accounts
            .create_token_request(account, &PostParams::default(), &request)
            .await
            .unwrap_or_else(|err| panic!("a token for ServiceAccount {namespace}/{account}: {err}"))
            .status
            .expect("a TokenRequest answers a token")
            .token;
        let config = kube_client::Config::infer().await.expect("the plane's kubeconfig");
        let ca: String = config.root_cert.iter().flatten().map(|der| pem("CERTIFICATE", der)).collect();
        assert!(!ca.is_empty(), "the plane's kubeconfig names its CA");
        std::fs::write(dir.join("token"), token).unwrap();
        std::fs::write(dir.join("ca.crt"), ca).unwrap();
        std::fs::write(dir.join("namespace"), &namespace).unwrap();
        // World-readable, as the kubelet's projected volume (defaultMode 0644) is to the uid the
        // container runs as.
        run(Command::new("chmod").args(["-R", "a+rX"]).arg(&dir));

        let mut args: Vec<String> = vec!["run", "--detach", "--name"].into_iter().map(String::from).collect();
        let container_name = format!("{namespace}-{name}-{container}");
        args.push(container_name.clone());
        args.extend(["--network=host".into(), format!("--volume={}:{SERVICE_ACCOUNT_DIR}:ro", dir.display())]);
        args.push("--env=KUBERNETES_SERVICE_HOST=127.0.0.1".into());
        args.push(format!(
            "--env=KUBERNETES_SERVICE_PORT={}",
            config.cluster_url.port_u16().expect("the apiserver's port")
        ));
        for var in c.env.iter().flatten() {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    let field = from.field_ref.as_ref().expect("only fieldRef env vars are supported here");
                    match field.field_path.as_str() {
                        "metadata.name" => name.clone(),
                        "metadata.namespace" => namespace.clone(),
                        "spec.serviceAccountName" => account.to_string(),
                        "spec.nodeName" => spec.node_name.clone().unwrap_or_default(),
                        other => panic!("fieldRef {other} is not supported here"),
                    }
                }
                (None, None) => String::new(),
            };
            args.push(format!("--env={}={value}", var.name));
        }
        args.extend(security_flags(pod, c));
        if let Some(limits) = c.resources.as_ref().and_then(|r| r.limits.as_ref()) {
            if let Some(cpu) = limits.get("cpu") {
                args.push(format!("--cpus={}", cpu_cores(cpu)));
            }
            if let Some(memory) = limits.get("memory") {
                args.push(format!("--memory={}", memory.0.replace("Mi", "m").replace("Gi", "g")));
            }
        }
        if let Some(command) = &c.command {
            args.push(format!("--entrypoint={}", serde_json::to_string(command).unwrap()));
        }
        args.push(c.image.clone().expect("the container names an image"));
        args.extend(c.args.iter().flatten().cloned());
        run(podman().args(&args));

        let ports = c
            .ports
            .iter()
            .flatten()
            .filter_map(|p| Some((p.name.clone()?, u16::try_from(p.container_port).ok()?)))
            .collect();
        let grace_period = Duration::from_secs(spec.termination_grace_period_seconds.unwrap_or(30).try_into().unwrap());
        Self { name: container_name, dir, ports, grace_period }
    }

    /// What the container printed so far (stdout and stderr).
    pub(crate) fn logs(&self) -> String {
        let output = podman().args(["logs", &self.name]).output().expect("podman logs");
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
    }

    /// Stops the container as the kubelet does (SIGTERM, SIGKILL after the grace period) and
    /// returns its exit code.
    pub(crate) fn stop(&self) -> i64 {
        run(podman().args(["stop", "--time", &self.grace_period.as_secs().to_string(), &self.name]));
        run(podman().args(["inspect", "--format", "{{.State.ExitCode}}", &self.name])).parse().unwrap()
    }
}

impl Drop for RunningContainer {
    fn drop(&mut self) {
        let _ = podman().args(["rm", "--force", "--time", "0", &self.name]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `der` as a PEM block of `label`.
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = encoded.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap()).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

/// The podman flags for the Pod's and the container's securityContext.
fn security_flags(pod: &Pod, container: &Container) -> Vec<String> {
    let pod_context = pod.spec.as_ref().and_then(|s| s.security_context.clone()).unwrap_or_default();
    let context = container.security_context.clone().unwrap_or_default();
    let mut flags = Vec::new();
    let user = context.run_as_user.or(pod_context.run_as_user);
    let group = context.run_as_group.or(pod_context.run_as_group);
    if context.run_as_non_root.or(pod_context.run_as_non_root) == Some(true) {
        // The kubelet refuses to start a container that would run as root; without a
        // runAsUser it would look at the image's USER, which podman applies itself.
        assert_ne!(user, Some(0), "runAsNonRoot with runAsUser 0: the kubelet would refuse this container");
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
    flags
}

/// A CPU quantity ("500m", "2") in cores, as podman's --cpus takes it.
fn cpu_cores(quantity: &Quantity) -> f64 {
    match quantity.0.strip_suffix('m') {
        Some(millis) => millis.parse::<f64>().unwrap() / 1000.0,
        None => quantity.0.parse().unwrap(),
    }
}
