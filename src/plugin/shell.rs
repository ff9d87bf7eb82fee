//! `kubectl database shell DATABASE [-- ARGS]`: the engine's client in the database container
//! of a running pod of the Database, through `kubectl exec`, logged in with the password the
//! container has from the Database's Secret.
//!
//! The command is `kubectl exec -i [-t] -n NS POD -c database -- sh -c SCRIPT sh ARGS`, where
//! SCRIPT is the engine's [`Engine::shell_script`]: it sets the client's password variable
//! from the container's own environment inside the container, so the password is in no
//! command line, here or there, and the printed command holds none. A terminal gets `-t`;
//! standard input that is a pipe or a file is passed on as it is (a script of SQL).

use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;

use k8s_openapi::api::core::v1::Pod;
use kube_client::Api;
use kube_client::api::ListParams;

use super::args::ShellArgs;
use super::error::Error;
use super::format::shell_quoted;
use super::target::Target;
use crate::api::Database;
use crate::engine::{self, Engine};
use crate::resources::meta::instance_selector;
use crate::resources::workload::CONTAINER_NAME;

/// The pod to open the client in: a running one that is not being deleted, a ready one first;
/// none when no pod runs.
pub(crate) fn pick_pod(pods: &[Pod]) -> Option<&Pod> {
    let running = |pod: &&Pod| {
        pod.metadata.deletion_timestamp.is_none()
            && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    };
    let ready = |pod: &&Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    pods.iter().filter(running).find(ready).or_else(|| pods.iter().find(running))
}

/// kubectl's arguments (after `kubectl`) that open `engine`'s client in `pod`, the caller's
/// `client_args` passed to it; `-t` when `terminal`.
pub(crate) fn exec_args(
    target_flags: &[OsString],
    namespace: &str,
    pod: &str,
    engine: &dyn Engine,
    terminal: bool,
    client_args: &[String],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = target_flags.to_vec();
    args.extend(
        ["exec", if terminal { "-it" } else { "-i" }, "-n", namespace, pod, "-c", CONTAINER_NAME].map(OsString::from),
    );
    args.extend(["--", "sh", "-c"].map(OsString::from));
    args.push(engine.shell_script().into());
    // `sh -c SCRIPT NAME ARGS...`: NAME is $0, the arguments are "$@".
    args.push("sh".into());
    args.extend(client_args.iter().map(OsString::from));
    args
}

/// `args` as a command line to read or paste: `kubectl` and each word quoted as a shell needs.
pub(crate) fn printable(args: &[OsString]) -> String {
    std::iter::once("kubectl".to_string())
        .chain(args.iter().map(|a| shell_quoted(&a.to_string_lossy())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Finds the pod, prints the command on stderr and runs it; the client's exit code.
pub(crate) async fn run(target: &Target, args: ShellArgs) -> Result<ExitCode, Error> {
    let ns = &target.namespace;
    let name = &args.database;
    let db = Api::<Database>::namespaced(target.client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| Error::api(format!("getting Database {ns}/{name}"), e))?
        .ok_or_else(|| Error::NotFound { kind: "Database", name: name.clone(), namespace: ns.clone() })?;
    let engine = engine::of_database(&db).ok_or_else(|| {
        Error::Refused(format!("Database {name} has no spec.engine: there is no client to open in a generic Database"))
    })?;
    let selector: Vec<String> = instance_selector(&db).iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods = Api::<Pod>::namespaced(target.client.clone(), ns)
        .list(&ListParams::default().labels(&selector.join(",")))
        .await
        .map_err(|e| Error::api(format!("listing the pods of Database {ns}/{name}"), e))?;
    let pod = pick_pod(&pods.items).and_then(|p| p.metadata.name.clone()).ok_or_else(|| {
        Error::Refused(format!(
            "no pod of Database {name} is running: kubectl database why {name} -n {ns} explains why"
        ))
    })?;
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let kubectl = exec_args(&target.kubectl_flags, ns, &pod, engine, terminal, &args.client_args);
    eprintln!("{}", printable(&kubectl));
    let status = tokio::process::Command::new("kubectl").args(&kubectl).status().await.map_err(Error::Kubectl)?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::EngineKind;
    use serde_json::json;

    fn pod(name: &str, phase: &str, ready: bool) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name}, "status": {"phase": phase,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
        .unwrap()
    }

    #[test]
    fn the_client_opens_in_a_running_pod_a_ready_one_first() {
        let pods = [pod("old", "Pending", false), pod("starting", "Running", false), pod("ready", "Running", true)];
        assert_eq!(pick_pod(&pods).and_then(|p| p.metadata.name.as_deref()), Some("ready"));
        assert_eq!(pick_pod(&pods[..2]).and_then(|p| p.metadata.name.as_deref()), Some("starting"));
        assert!(pick_pod(&pods[..1]).is_none());
    }

    #[test]
    fn the_exec_command_names_the_password_s_variable_and_never_a_password() {
        let flags = [OsString::from("--context"), OsString::from("dev")];
        let args = exec_args(
            &flags,
            "shop",
            "orders-1",
            engine::of(EngineKind::Postgres),
            false,
            &["-c".into(), "select 1".into()],
        );
        assert_eq!(
            printable(&args),
            r#"kubectl --context dev exec -i -n shop orders-1 -c database -- sh -c 'PGPASSWORD="$DATABASE_PASSWORD" exec psql --username="$DATABASE_USER" --dbname=app "$@"' sh -c 'select 1'"#
        );
        for kind in EngineKind::ALL {
            let args = exec_args(&[], "shop", "p", engine::of(kind), true, &[]);
            assert_eq!(args[1], "-it");
            assert_eq!(args.last().unwrap(), "sh", "{kind:?}: no arguments, none passed");
        }
    }
}
