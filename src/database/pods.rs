//! Why a Database's pod does not run, in the pod's own words.
//!
//! A Deployment says little about a pod that was made but cannot run: a container the kubelet
//! cannot create (a key missing from the credentials Secret), an image it cannot pull, a
//! server that keeps exiting, a pod no node can take. Its conditions turn only at the
//! progress deadline (ten minutes), and then without the cause. So, for a Database with an
//! engine whose Deployment has not been ready for [`POD_GRACE`], the reconcile lists the
//! Database's pods (one request; pods are not cached: their status changes too often to be
//! worth a watch) and reports the first cause found as a blocker (`Degraded`, the kubelet's or
//! the scheduler's reason, and a Warning event), and looks again every [`POD_GRACE`] while the
//! Database is not ready. Not during an upgrade: its own timeout and policy decide, and say.
//!
//! A Database of several instances whose primary runs is looked at the same way for its
//! replicas: a replica the last status showed not ready and that is still not ready has its
//! pods' cause reported as [`Blocker::ReplicaFailing`] (the Database `Degraded`, its `Ready` the
//! primary's), and is looked at again every [`POD_GRACE`]. A replica the nodes cannot place
//! (every instance keeps off the others' nodes) is `Unschedulable`, in the scheduler's words;
//! one whose node stopped reporting is `NodeUnreachable`: the kubelet's last report had its
//! containers ready, and the node lifecycle controller has marked the pod not ready since (the
//! kubelet itself says `ContainersNotReady` of a container that is not).
//!
//! The message names the pod and container and quotes no log but one line: a log line might
//! hold what the server was given. A fetch from a bucket that is refused (the operator's own
//! `fetch` init container, exit code 2: no backup there, a newer major version's dump, a wrong
//! key) is `RestoreRefused`, quoting its own last line, which names the folder and versions. For a container that keeps exiting it says where the log
//! is, unless the end of that log (which the kubelet keeps in the pod's status: the engine's
//! containers fail with `FallbackToLogsOnError`) has the C library's words for a full file
//! system, "No space left on device": then the reason is `VolumeFull` and the message quotes
//! that one line, the engine's, which names a file, not data (postgres's
//! `FATAL:  could not write to file "pg_wal/xlogtemp.23": No space left on device`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};

use super::status::Blocker;
use crate::bucket::EXIT_REFUSED;
use crate::resources::replication::INSTANCE_NAME_LABEL;
use crate::resources::restore::FETCH_CONTAINER;

/// How long a Database's pod may take to run before the operator looks at why not; also how
/// often it looks again while it does not.
pub(crate) const POD_GRACE: Duration = Duration::from_secs(20);

/// Container waiting reasons that do not pass by themselves.
const STUCK: [&str; 7] = [
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "CrashLoopBackOff",
];

/// How the C library's `strerror(ENOSPC)` reads, in every engine's log.
const NO_SPACE: &str = "No space left on device";

/// The first cause, among `pods` (of one Database), that keeps one from running; none when
/// every pod is running or on its way.
pub(crate) fn diagnose(pods: &[Pod]) -> Option<Blocker> {
    pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).find_map(pod_blocker)
}

/// The first cause, among `pods` (of one Database), that keeps a pod of one of the replicas
/// `stuck` (instance names) from running, as a [`Blocker::ReplicaFailing`].
pub(crate) fn diagnose_replicas(pods: &[Pod], stuck: &[&str]) -> Option<Blocker> {
    let of_stuck = |pod: &&Pod| {
        let labels = pod.metadata.labels.as_ref();
        let instance = labels.and_then(|l| l.get(INSTANCE_NAME_LABEL));
        pod.metadata.deletion_timestamp.is_none() && instance.is_some_and(|name| stuck.contains(&name.as_str()))
    };
    let replicas = || pods.iter().filter(of_stuck);
    let found = replicas().find_map(pod_blocker).or_else(|| replicas().find_map(node_lost))?;
    let Blocker::PodFailing { reason, mut message } = found else { return Some(found) };
    if reason == "Unschedulable" {
        message.push_str(
            "; each instance needs a node of its own and spec.instances cannot be lowered: add a node, or create a \
             new Database with fewer instances",
        );
    }
    Some(Blocker::ReplicaFailing { reason, message })
}

/// A pod whose node stopped reporting: Ready False though every container was ready at the
/// kubelet's last report (the node lifecycle controller marks the pods of a node it cannot
/// reach not ready, and leaves their container statuses as they were).
fn node_lost(pod: &Pod) -> Option<Blocker> {
    on_lost_node(pod).then(|| {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default();
        Blocker::PodFailing {
            reason: "NodeUnreachable".into(),
            message: format!(
                "pod {name} on node {node} is not ready: its node stopped reporting (its containers were ready at \
                 the kubelet's last report); it serves again when the node is back"
            ),
        }
    })
}

/// Whether `pod`'s node stopped reporting: see [`node_lost`].
pub(crate) fn on_lost_node(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else { return false };
    let Some(ready) = status.conditions.iter().flatten().find(|c| c.type_ == "Ready") else { return false };
    let containers = status.container_statuses.as_deref().unwrap_or_default();
    ready.status != "True" && !containers.is_empty() && containers.iter().all(|c| c.ready)
}

fn pod_blocker(pod: &Pod) -> Option<Blocker> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.as_ref()?;
    let unschedulable = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
    if let Some(condition) = unschedulable {
        return Some(Blocker::PodFailing {
            reason: "Unschedulable".into(),
            message: format!("pod {name} cannot be scheduled: {}", condition.message.as_deref().unwrap_or_default()),
        });
    }
    let init = status.init_container_statuses.iter().flatten().map(|c| (c, true));
    let main = status.container_statuses.iter().flatten().map(|c| (c, false));
    init.chain(main).find_map(|(c, init)| container_blocker(name, c, init))
}

fn container_blocker(pod: &str, container: &ContainerStatus, init: bool) -> Option<Blocker> {
    let state = container.state.as_ref()?;
    // An init container that failed is run again, and while the kubelet backs off its state
    // stays `terminated` (a main container's turns `waiting: CrashLoopBackOff`): it keeps
    // exiting all the same.
    let failed_init = state.terminated.as_ref().filter(|t| init && t.exit_code != 0);
    let waiting = state.waiting.as_ref();
    let reason = match (waiting, failed_init) {
        (Some(waiting), _) => waiting.reason.as_deref().filter(|r| STUCK.contains(r))?,
        (None, Some(_)) => "CrashLoopBackOff",
        (None, None) => return None,
    };
    let name = &container.name;
    let (reason, message) = match reason {
        // The two alternate while the kubelet backs off: one reason, one message.
        "ErrImagePull" | "ImagePullBackOff" => (
            "ImagePullBackOff",
            format!(
                "pod {pod}, container {name}: image {:?} cannot be pulled (is its name right, and can the node reach \
                 its registry? kubectl describe pod {pod} shows the kubelet's attempts)",
                container.image
            ),
        ),
        "CrashLoopBackOff" => {
            let last = failed_init.or_else(|| container.last_state.as_ref()?.terminated.as_ref());
            return Some(keeps_exiting(pod, container, last));
        }
        other => {
            let said = waiting.and_then(|w| w.message.as_deref()).unwrap_or(other);
            (other, format!("pod {pod}, container {name}: {said}"))
        }
    };
    Some(Blocker::PodFailing { reason: reason.into(), message })
}

/// A container that keeps exiting, `last` its last exit: a fetch the bucket refuses
/// ([`fetch_refusal`]), a full data volume (the C library's words), or else where its log is.
fn keeps_exiting(pod: &str, container: &ContainerStatus, last: Option<&ContainerStateTerminated>) -> Blocker {
    let name = &container.name;
    let exit = last.map_or_else(String::new, |t| {
        format!(" (exit code {}{})", t.exit_code, t.reason.as_deref().map(|r| format!(", {r}")).unwrap_or_default())
    });
    let words = last.and_then(|t| t.message.as_deref());
    if let Some(refusal) = fetch_refusal(container, last.map(|t| t.exit_code), words) {
        return Blocker::PodFailing {
            reason: "RestoreRefused".into(),
            message: format!("pod {pod}, container {name}: the backup in the bucket cannot be restored: {refusal}"),
        };
    }
    let (reason, message) = match words.and_then(|w| w.lines().rev().find(|line| line.contains(NO_SPACE))) {
        Some(line) => (
            "VolumeFull",
            format!(
                "pod {pod}, container {name} keeps exiting{exit}: its data volume is full; its log says {:?}; grow \
                 spec.storage.size (where the storage class can expand) or free space on the volume",
                line.trim().chars().take(240).collect::<String>()
            ),
        ),
        None => (
            "CrashLoopBackOff",
            format!(
                "pod {pod}, container {name} keeps exiting{exit}; its log says why: kubectl logs {pod} -c {name} --previous"
            ),
        ),
    };
    Blocker::PodFailing { reason: reason.into(), message }
}

/// The refusal of a fetch from a bucket, in its own words: the operator's own binary (the
/// `fetch` init container) exits with [`EXIT_REFUSED`] when trying again cannot help (no backup
/// there, another engine's dump, a newer major version's, a dump that does not match its
/// manifest, a wrong key) and says why in its last line (`error: ...`), which names the bucket's
/// folder and versions, never a key or data.
fn fetch_refusal<'a>(container: &ContainerStatus, exit: Option<i32>, words: Option<&'a str>) -> Option<&'a str> {
    if container.name != FETCH_CONTAINER || exit != Some(i32::from(EXIT_REFUSED)) {
        return None;
    }
    let line = words?.lines().rev().find_map(|line| line.trim().strip_prefix("error: "))?;
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "orders-1"}, "status": status})).unwrap()
    }

    fn said(blocker: Option<Blocker>) -> (String, String) {
        let blocker = blocker.expect("a cause");
        (blocker.reason().to_string(), blocker.message())
    }

    /// An init container that failed with `exit`, as the kubelet shows it while it backs off
    /// (seen on the real node, Kubernetes v1.37: `terminated`, never `waiting`), its log's end
    /// `words`.
    fn init_failed(name: &str, exit: i32, words: &str) -> Pod {
        let terminated = json!({"terminated": {"exitCode": exit, "reason": "Error", "message": words}});
        pod(json!({"initContainerStatuses": [{"name": name, "image": "database-operator:0.1.0", "imageID": "",
            "ready": false, "restartCount": 3, "state": terminated, "lastState": terminated}]}))
    }

    const REFUSED: &str = "error: s3://backups/shop/nightly/ holds a dump of postgres:17 (major version 17), and this \
                           Database runs major version 15: an older server cannot load a newer one's dump\n";

    #[test]
    fn a_fetch_the_bucket_refuses_is_told_in_its_own_words_and_any_other_exit_is_not_quoted() {
        let (reason, message) = said(diagnose(&[init_failed("fetch", 2, REFUSED)]));
        assert_eq!(reason, "RestoreRefused");
        assert!(
            message.starts_with("pod orders-1, container fetch: the backup in the bucket cannot be restored: s3://"),
            "{message}"
        );
        assert!(message.contains("major version 17") && message.contains("major version 15"), "{message}");
        // A server away (exit code 1) may pass: it is not quoted, and not a refusal.
        let (reason, message) = said(diagnose(&[init_failed("fetch", 1, REFUSED)]));
        assert_eq!(reason, "CrashLoopBackOff");
        assert!(!message.contains("major version"), "{message}");
        // Exit code 2 from the engine's own restore script is no refusal of ours.
        assert_eq!(said(diagnose(&[init_failed("restore", 2, REFUSED)])).0, "CrashLoopBackOff");
    }

    #[test]
    fn an_init_container_that_keeps_failing_is_told_though_its_state_is_terminated_not_waiting() {
        let (reason, message) = said(diagnose(&[init_failed("restore", 1, "pg_restore: error: ...\n")]));
        assert_eq!(reason, "CrashLoopBackOff");
        assert!(message.starts_with("pod orders-1, container restore keeps exiting (exit code 1, Error)"), "{message}");
        assert!(!message.contains("pg_restore"), "no log line is quoted: {message}");
        // Done (exit code 0), it is no cause; nor is a main container that has just exited
        // (it turns `waiting: CrashLoopBackOff` while backed off).
        assert_eq!(diagnose(&[init_failed("restore", 0, "")]), None);
        let exited = pod(json!({"containerStatuses": [{"name": "database", "image": "postgres:17", "imageID": "",
            "ready": false, "restartCount": 1, "state": {"terminated": {"exitCode": 1}}}]}));
        assert_eq!(diagnose(&[exited]), None);
    }

    #[test]
    fn a_key_missing_from_the_secret_is_told_in_the_kubelets_words() {
        let missing = pod(json!({"containerStatuses": [{"name": "database", "image": "mariadb:11.8", "imageID": "",
            "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CreateContainerConfigError",
            "message": "couldn't find key root-password in Secret shop/mine"}}}]}));
        assert_eq!(
            said(diagnose(&[missing])),
            (
                "CreateContainerConfigError".into(),
                "pod orders-1, container database: couldn't find key root-password in Secret shop/mine".into()
            )
        );
    }

    #[test]
    fn a_pull_that_backs_off_says_one_thing_whichever_state_it_is_in() {
        let pulling = |reason| {
            pod(json!({"containerStatuses": [{"name": "database", "image": "postgres:99", "imageID": "",
                "ready": false, "restartCount": 0, "state": {"waiting": {"reason": reason, "message": reason}}}]}))
        };
        let first = said(diagnose(&[pulling("ErrImagePull")]));
        assert_eq!(first, said(diagnose(&[pulling("ImagePullBackOff")])));
        assert_eq!(first.0, "ImagePullBackOff");
        assert!(first.1.contains("\"postgres:99\" cannot be pulled"), "{}", first.1);
    }

    #[test]
    fn a_server_that_keeps_exiting_names_its_exit_code_and_where_its_log_is() {
        let crashing = pod(json!({"initContainerStatuses": [{"name": "restore", "image": "postgres:17",
            "imageID": "", "ready": false, "restartCount": 4,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}));
        let (reason, message) = said(diagnose(&[crashing]));
        assert_eq!(reason, "CrashLoopBackOff");
        assert_eq!(
            message,
            "pod orders-1, container restore keeps exiting (exit code 1, Error); its log says why: kubectl logs \
             orders-1 -c restore --previous"
        );
    }

    #[test]
    fn a_server_that_exits_on_a_full_volume_says_so_in_the_engines_one_line() {
        let full = |message: &str| {
            pod(json!({"containerStatuses": [{"name": "database", "image": "postgres:17", "imageID": "",
                "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}}}]}))
        };
        let log = "2026-12-04 07:54:30.143 UTC [23] LOG:  redo done at 0/2FFFB98\n\
                   2026-12-04 07:54:30.149 UTC [23] FATAL:  could not write to file \"pg_wal/xlogtemp.23\": No space left on device\n\
                   2026-12-04 07:54:30.154 UTC [1] LOG:  database system is shut down\n";
        let (reason, message) = said(diagnose(&[full(log)]));
        assert_eq!(reason, "VolumeFull");
        assert!(
            message.starts_with("pod orders-1, container database keeps exiting (exit code 1, Error): its data volume is full; its log says \"2026-12-04 07:54:30.149 UTC [23] FATAL:  could not write to file \\\"pg_wal/xlogtemp.23\\\": No space left on device\"; grow spec.storage.size"),
            "{message}"
        );
        assert!(!message.contains("redo done") && !message.contains("shut down"), "one line only: {message}");
        // Any other last words are not quoted.
        let (reason, message) = said(diagnose(&[full("FATAL:  password authentication failed for user \"s3cret\"")]));
        assert_eq!(reason, "CrashLoopBackOff");
        assert!(!message.contains("s3cret"), "{message}");
    }

    #[test]
    fn a_pod_no_node_takes_is_told_in_the_schedulers_words() {
        let pending = pod(json!({"conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/1 nodes are available: 1 Insufficient cpu."}]}));
        assert_eq!(
            said(diagnose(&[pending])),
            (
                "Unschedulable".into(),
                "pod orders-1 cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu.".into()
            )
        );
    }

    #[test]
    fn a_pod_on_its_way_or_leaving_is_no_cause() {
        let creating = pod(json!({"containerStatuses": [{"name": "database", "image": "postgres:17", "imageID": "",
            "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}));
        assert!(diagnose(&[creating]).is_none());
        let mut leaving = pod(json!({"containerStatuses": [{"name": "database", "image": "postgres:17",
            "imageID": "", "ready": false, "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}));
        leaving.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert!(diagnose(&[leaving]).is_none());
    }

    #[test]
    fn a_replica_no_node_takes_is_told_as_a_replicas_and_only_a_stuck_replicas_pods_are_read() {
        let unplaceable = |instance: &str| {
            let mut pending = pod(json!({"conditions": [{"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."}]}));
            pending.metadata.name = Some(format!("{instance}-5d9f"));
            pending.metadata.labels = Some([(INSTANCE_NAME_LABEL.to_string(), instance.to_string())].into());
            pending
        };
        let pods = [unplaceable("orders-instance-3"), unplaceable("orders-instance-4")];
        let blocker = diagnose_replicas(&pods, &["orders-instance-4"]).expect("a cause");
        assert!(matches!(blocker, Blocker::ReplicaFailing { .. }), "{blocker:?}");
        let (reason, message) = said(Some(blocker));
        assert_eq!(reason, "Unschedulable");
        assert!(
            message.starts_with(
                "pod orders-instance-4-5d9f cannot be scheduled: 0/3 nodes are available: 3 node(s) didn't match pod \
                 anti-affinity rules.; each instance needs a node of its own and spec.instances cannot be lowered: \
                 add a node, or create a new Database with fewer instances; the primary serves meanwhile"
            ),
            "{message}"
        );
        assert!(diagnose_replicas(&pods, &[]).is_none(), "a replica not known stuck is not read");
    }

    #[test]
    fn a_replica_whose_node_stopped_reporting_is_told_and_one_still_starting_is_not() {
        let replica = |pod_ready: &str, reason: Option<&str>, container_ready: bool| {
            let mut pod = pod(json!({
                "conditions": [{"type": "Ready", "status": pod_ready, "reason": reason}],
                "containerStatuses": [{"name": "database", "image": "postgres:17", "imageID": "",
                    "ready": container_ready, "restartCount": 0, "state": {"running": {}}}]}));
            pod.metadata.name = Some("orders-instance-2-7c4b".into());
            pod.metadata.labels = Some([(INSTANCE_NAME_LABEL.to_string(), "orders-instance-2".to_string())].into());
            pod.spec = Some(serde_json::from_value(json!({"containers": [], "nodeName": "node-2"})).unwrap());
            pod
        };
        let stuck = ["orders-instance-2"];
        let (reason, message) = said(diagnose_replicas(&[replica("False", None, true)], &stuck));
        assert_eq!(reason, "NodeUnreachable");
        assert!(
            message.starts_with("pod orders-instance-2-7c4b on node node-2 is not ready: its node stopped reporting")
        );
        assert!(message.ends_with("; the primary serves meanwhile"), "{message}");
        // The kubelet's own not ready (a replica still copying its primary), and a ready pod.
        assert!(diagnose_replicas(&[replica("False", Some("ContainersNotReady"), false)], &stuck).is_none());
        assert!(diagnose_replicas(&[replica("True", None, true)], &stuck).is_none());
        assert!(diagnose(&[replica("False", None, true)]).is_none(), "not the primary's: its own status tells");
    }
}
