//! `kubectl database why DATABASE` (or `status`): a Database's state explained, from what the
//! operator and the kubelet already said: its phase and the one reason it is not Ready, each
//! condition, each instance of a Database of several (its role, readiness, timeline and
//! lag), an upgrade or restore under way, its last backup and that backup's
//! verification, each pod that does not run and why (the kubelet's waiting or terminated
//! reason), and the recent Warning events about the Database, its pods and its backups.
//!
//! [`explain`] writes it from objects read once ([`Facts`]), so what it says is tested
//! without a cluster; [`run`] reads them.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube_client::Api;
use kube_client::api::ListParams;

use super::args::WhyArgs;
use super::error::Error;
use super::format::{age, table};
use super::list::of_database;
use super::target::Target;
use crate::api::{Database, DatabaseBackup, InstanceStatus, Phase, Role};
use crate::resources::meta::instance_selector;

/// What `why` reads about one Database.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// The Database.
    pub(crate) database: Database,
    /// Its backups, newest first.
    pub(crate) backups: Vec<DatabaseBackup>,
    /// Its pods.
    pub(crate) pods: Vec<Pod>,
    /// The namespace's events (filtered here).
    pub(crate) events: Vec<Event>,
}

/// The explanation of `facts` at `now`, with at most `events` Warning events.
pub(crate) fn explain(facts: &Facts, now: Timestamp, events: usize) -> String {
    let db = &facts.database;
    let name = db.metadata.name.as_deref().unwrap_or_default();
    let namespace = db.metadata.namespace.as_deref().unwrap_or_default();
    let status = db.status.clone().unwrap_or_default();
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
    let mut out = String::new();
    let phase = status.phase.map_or("Pending (no status yet: is the operator running?)", Phase::as_str);
    out.push_str(&format!("Database {namespace}/{name}: {phase}\n"));
    let engine = db.spec.engine.map_or("none (generic)".to_string(), |e| format!("{e:?}").to_lowercase());
    out.push_str(&format!("  engine {engine}, image {}, size {}\n", db.spec.image, db.spec.size));
    if let Some(endpoint) = &status.endpoint {
        let secret = status.secret_name.as_deref().unwrap_or("-");
        out.push_str(&format!("  endpoint {endpoint}, credentials in Secret {secret}\n"));
    }
    if let (Some(generation), Some(observed)) = (db.metadata.generation, status.observed_generation)
        && observed < generation
    {
        out.push_str(&format!(
            "  the operator has not acted on the latest spec yet (generation {generation}, observed {observed})\n"
        ));
    }

    // The one reason, first: a Degraded condition's, else the Ready condition's.
    let degraded = condition("Degraded").filter(|c| c.status == "True");
    let not_ready = condition("Ready").filter(|c| c.status != "True");
    match degraded.or(not_ready) {
        _ if status.phase == Some(Phase::Ready) => out.push_str("\nIt is Ready.\n"),
        Some(c) => out.push_str(&format!("\nWhy it is not Ready: {}: {}\n", c.reason, c.message)),
        None => out.push_str("\nWhy it is not Ready: the operator has not said yet.\n"),
    }

    if !status.conditions.is_empty() {
        let rows: Vec<[String; 5]> = status
            .conditions
            .iter()
            .map(|c| {
                [
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                    age(c.last_transition_time.0, now),
                    c.message.clone(),
                ]
            })
            .collect();
        out.push_str("\nConditions:\n");
        out.push_str(&indent(&table(["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"], &rows)));
    }

    if !status.instances.is_empty() {
        out.push_str("\nInstances:\n");
        out.push_str(&indent(&instances_table(&status.instances)));
    }

    out.push('\n');
    if let Some(upgrade) = &status.upgrade {
        out.push_str(&format!(
            "Upgrade: from {} to {}: {:?}, since {} ago\n",
            upgrade.from,
            upgrade.to,
            upgrade.state,
            age(upgrade.start_time.0, now)
        ));
    }
    if let Some(restore) = &db.spec.restore_from {
        let state = match &status.restored_from {
            Some(_) => "restored".to_string(),
            None => "not restored yet".to_string(),
        };
        out.push_str(&format!("Restore: from DatabaseBackup {}: {state}\n", restore.backup));
    }
    out.push_str(&backups_line(facts, now));
    out.push_str(&pods_section(&facts.pods));
    out.push_str(&events_section(facts, now, events));
    out
}

/// Each instance's name, role, readiness, timeline and lag (`-` where the operator could not
/// ask it).
fn instances_table(instances: &[InstanceStatus]) -> String {
    let known = |value: Option<i64>, unit: &str| value.map_or("-".to_string(), |v| format!("{v}{unit}"));
    let rows: Vec<[String; 5]> = instances
        .iter()
        .map(|i| {
            let role = i.role.map_or("-", Role::label).to_string();
            let lag = if i.role == Some(Role::Replica) { known(i.lag_bytes, " bytes") } else { String::new() };
            [i.name.clone(), role, i.ready.to_string(), known(i.timeline, ""), lag]
        })
        .collect();
    table(["NAME", "ROLE", "READY", "TIMELINE", "LAG"], &rows)
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

/// The schedule, the number of backups, and the last one with its verification.
fn backups_line(facts: &Facts, now: Timestamp) -> String {
    let schedule = facts.database.spec.backup.as_ref().map_or_else(String::new, |b| {
        format!(" (on schedule {:?}, keeping {})", b.schedule, b.keep.unwrap_or(crate::api::DEFAULT_KEEP))
    });
    let Some(last) = facts.backups.first() else {
        return format!("Backups: none{schedule}\n");
    };
    let status = last.status.clone().unwrap_or_default();
    let phase = status.phase.map_or("Pending".to_string(), |p| p.to_string());
    let when =
        last.metadata.creation_timestamp.as_ref().map_or_else(String::new, |t| format!(", {} ago", age(t.0, now)));
    let verified = match status.verified {
        Some(v) if v.result.is_some() => {
            let seconds = v.restore_seconds.map(|s| format!(", restored in {s}s")).unwrap_or_default();
            let message = v.message.map(|m| format!(": {m}")).unwrap_or_default();
            format!("; verification {}{seconds}{message}", v.result.map(|r| r.to_string()).unwrap_or_default())
        }
        _ if last.spec.verify == Some(true) => "; verification pending".to_string(),
        _ => "; not verified".to_string(),
    };
    let message = match (status.phase, &status.message) {
        (Some(crate::api::BackupPhase::Failed), Some(m)) => format!(": {m}"),
        _ => String::new(),
    };
    format!(
        "Backups: {}{schedule}; the last: {} {phase}{when}{message}{verified}\n",
        facts.backups.len(),
        last.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Each pod, and for one that does not run, why.
fn pods_section(pods: &[Pod]) -> String {
    if pods.is_empty() {
        return "Pods: none\n".to_string();
    }
    let mut out = String::from("Pods:\n");
    for pod in pods {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let status = pod.status.clone().unwrap_or_default();
        let phase = status.phase.clone().unwrap_or_else(|| "Unknown".into());
        let deleting = if pod.metadata.deletion_timestamp.is_some() { " (terminating)" } else { "" };
        out.push_str(&format!("  {name}: {phase}{deleting}\n"));
        let unscheduled = status.conditions.iter().flatten().find(|c| c.type_ == "PodScheduled" && c.status == "False");
        if let Some(c) = unscheduled {
            let said = c.message.as_deref().or(c.reason.as_deref()).unwrap_or_default();
            out.push_str(&format!("    not scheduled: {said}\n"));
        }
        let containers =
            status.init_container_statuses.iter().flatten().chain(status.container_statuses.iter().flatten());
        for line in containers.filter_map(container_line) {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}

/// What a container that is not running and ready is doing instead; none for one that is.
fn container_line(container: &ContainerStatus) -> Option<String> {
    let name = &container.name;
    let state = container.state.clone().unwrap_or_default();
    let restarts = if container.restart_count > 0 {
        format!(" (restarted {} times)", container.restart_count)
    } else {
        String::new()
    };
    let last_exit = container.last_state.as_ref().and_then(|s| s.terminated.as_ref()).map_or_else(String::new, |t| {
        format!(
            "; last exit code {}{}",
            t.exit_code,
            t.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        )
    });
    if let Some(waiting) = state.waiting {
        let reason = waiting.reason.unwrap_or_else(|| "waiting".into());
        let message = waiting.message.map(|m| format!(": {m}")).unwrap_or_default();
        return Some(format!("container {name} waiting: {reason}{message}{restarts}{last_exit}"));
    }
    if let Some(terminated) = state.terminated {
        // An init container that completed did its work.
        if terminated.exit_code == 0 {
            return None;
        }
        let reason = terminated.reason.unwrap_or_else(|| "Error".into());
        return Some(format!("container {name} terminated: {reason} (exit code {}){restarts}", terminated.exit_code));
    }
    (!container.ready)
        .then(|| format!("container {name} running, not ready (its readiness probe fails){restarts}{last_exit}"))
}

/// The recent Warning events about the Database, its Deployment, its pods and its backups.
fn events_section(facts: &Facts, now: Timestamp, limit: usize) -> String {
    let name = facts.database.metadata.name.as_deref().unwrap_or_default();
    let pods: Vec<&str> = facts.pods.iter().filter_map(|p| p.metadata.name.as_deref()).collect();
    let backups: Vec<&str> = facts.backups.iter().filter_map(|b| b.metadata.name.as_deref()).collect();
    let about = |event: &&Event| {
        let Some(regarding) = &event.regarding else { return false };
        let (kind, object) =
            (regarding.kind.as_deref().unwrap_or_default(), regarding.name.as_deref().unwrap_or_default());
        match kind {
            "Database" | "Deployment" => object == name,
            "Pod" => pods.contains(&object),
            "DatabaseBackup" => backups.contains(&object),
            _ => false,
        }
    };
    let mut warnings: Vec<&Event> =
        facts.events.iter().filter(|e| e.type_.as_deref() == Some("Warning")).filter(about).collect();
    warnings.sort_by_key(|e| std::cmp::Reverse(last_seen(e)));
    if warnings.is_empty() {
        return "Recent Warning events: none\n".to_string();
    }
    let rows: Vec<[String; 4]> = warnings
        .iter()
        .take(limit)
        .map(|e| {
            let regarding = e.regarding.clone().unwrap_or_default();
            let count = e.series.as_ref().map(|s| s.count).or(e.deprecated_count).filter(|c| *c > 1);
            let note = e.note.clone().unwrap_or_default();
            [
                last_seen(e).map_or_else(|| "-".to_string(), |t| age(t, now) + " ago"),
                format!("{}/{}", regarding.kind.unwrap_or_default(), regarding.name.unwrap_or_default()),
                e.reason.clone().unwrap_or_default(),
                count.map_or(note.clone(), |c| format!("{note} (x{c})")),
            ]
        })
        .collect();
    format!("Recent Warning events:\n{}", indent(&table(["LAST SEEN", "OBJECT", "REASON", "MESSAGE"], &rows)))
}

/// When an event was last seen: its series' last observation, its time, or its creation.
fn last_seen(event: &Event) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or(event.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or(event.event_time.as_ref().map(|t| t.0))
        .or(event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Reads the facts and prints the explanation.
pub(crate) async fn run(target: &Target, args: WhyArgs) -> Result<(), Error> {
    let ns = &target.namespace;
    let name = &args.database;
    let client = &target.client;
    let database = Api::<Database>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| Error::api(format!("getting Database {ns}/{name}"), e))?
        .ok_or_else(|| Error::NotFound { kind: "Database", name: name.clone(), namespace: ns.clone() })?;
    let backups = Api::<DatabaseBackup>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api(format!("listing the DatabaseBackups of namespace {ns}"), e))?;
    let selector: Vec<String> = instance_selector(&database).iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&selector.join(",")))
        .await
        .map_err(|e| Error::api(format!("listing the pods of Database {ns}/{name}"), e))?;
    let events = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api(format!("listing the events of namespace {ns}"), e))?;
    let facts = Facts { database, backups: of_database(backups.items, name), pods: pods.items, events: events.items };
    print!("{}", explain(&facts, Timestamp::now(), args.events));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BackupPhase, BackupStatus, DatabaseSpec, EngineKind, Size, Verification, VerificationResult};
    use serde_json::json;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn time(seconds: i64) -> String {
        at(seconds).to_string()
    }

    /// A postgres Database `orders` whose image cannot be pulled, as the operator reports it.
    fn pulling() -> Facts {
        let mut database: Database = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Database",
            "metadata": {"name": "orders", "namespace": "shop", "generation": 1},
            "spec": {"size": "small", "image": "postgres:17-not-built-here", "engine": "postgres"},
            "status": {"phase": "Degraded", "observedGeneration": 1, "endpoint": "orders.shop.svc:5432",
                "secretName": "orders-credentials", "conditions": [
                {"type": "Ready", "status": "False", "reason": "DeploymentNotReady", "message": "waiting",
                 "lastTransitionTime": time(900)},
                {"type": "Degraded", "status": "True", "reason": "ImagePullBackOff",
                 "message": "pod orders-1, container database: image \"postgres:17-not-built-here\" cannot be pulled",
                 "lastTransitionTime": time(940)}]}
        }))
        .unwrap();
        database.spec.engine = Some(EngineKind::Postgres);
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "orders-1"}, "status": {"phase": "Pending",
            "containerStatuses": [{"name": "database", "image": "postgres:17-not-built-here", "imageID": "",
                "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff",
                "message": "Back-off pulling image \"postgres:17-not-built-here\""}}}]}}))
        .unwrap();
        let event = |name: &str, kind: &str, type_: &str, reason: &str, seen: i64| -> Event {
            serde_json::from_value(json!({"metadata": {"name": format!("e-{reason}")}, "eventTime": format!("{}", at(seen)),
                "regarding": {"kind": kind, "name": name}, "type": type_, "reason": reason, "note": format!("{reason} said")}))
            .unwrap()
        };
        Facts {
            database,
            backups: Vec::new(),
            pods: vec![pod],
            events: vec![
                event("orders-1", "Pod", "Warning", "Failed", 950),
                event("orders", "Database", "Warning", "ImagePullBackOff", 960),
                event("orders", "Database", "Normal", "Created", 890),
                event("users", "Database", "Warning", "Other", 970),
            ],
        }
    }

    #[test]
    fn a_database_whose_image_cannot_be_pulled_is_explained_by_the_operator_s_reason_and_the_kubelet_s() {
        let said = explain(&pulling(), at(1000), 10);
        assert!(
            said.starts_with("Database shop/orders: Degraded\n  engine postgres, image postgres:17-not-built-here"),
            "{said}"
        );
        assert!(
            said.contains("\nWhy it is not Ready: ImagePullBackOff: pod orders-1, container database: image"),
            "{said}"
        );
        assert!(said.contains("  Degraded   True     ImagePullBackOff     60s     pod orders-1"), "{said}");
        assert!(
            said.contains("  orders-1: Pending\n    container database waiting: ImagePullBackOff: Back-off pulling"),
            "{said}"
        );
        assert!(said.contains("Backups: none\n"), "{said}");
        // Warnings about it and its pod, newest first; not a Normal one, not another Database's.
        let events = said.split("Recent Warning events:\n").nth(1).unwrap();
        let lines: Vec<&str> = events.lines().collect();
        assert_eq!(lines.len(), 3, "{events}");
        assert!(lines[1].contains("Database/orders") && lines[1].contains("ImagePullBackOff"), "{events}");
        assert!(lines[2].contains("Pod/orders-1") && lines[2].contains("50s ago"), "{events}");
        assert!(!said.contains("users") && !said.contains("Created said"), "{said}");
        assert_eq!(
            explain(&pulling(), at(1000), 1).split("Recent Warning events:\n").nth(1).unwrap().lines().count(),
            2
        );
    }

    #[test]
    fn a_ready_database_says_so_with_its_last_backup_and_verification() {
        let mut facts = pulling();
        let status = facts.database.status.as_mut().unwrap();
        status.phase = Some(Phase::Ready);
        status.conditions.clear();
        facts.pods.clear();
        facts.events.clear();
        let mut backup = crate::api::backup("orders-20250101020000", "orders");
        backup.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(400)));
        backup.status = Some(BackupStatus {
            phase: Some(BackupPhase::Completed),
            verified: Some(Verification {
                result: Some(VerificationResult::Passed),
                restore_seconds: Some(14),
                message: Some("restored, and holds the 1000 rows".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        facts.backups = vec![backup];
        let said = explain(&facts, at(1000), 10);
        assert!(said.contains("\nIt is Ready.\n"), "{said}");
        assert!(
            said.contains(
                "Backups: 1; the last: orders-20250101020000 Completed, 10m ago; verification Passed, restored in 14s: \
                 restored, and holds the 1000 rows\n"
            ),
            "{said}"
        );
        assert!(said.contains("Pods: none\nRecent Warning events: none\n"), "{said}");
    }

    #[test]
    fn the_instances_of_a_database_of_several_say_their_role_timeline_and_lag() {
        let mut facts = pulling();
        let status = facts.database.status.as_mut().unwrap();
        let instance = |name: &str, role, ready, timeline, lag_bytes| InstanceStatus {
            name: name.into(),
            role: Some(role),
            ready,
            timeline,
            lag_bytes,
        };
        status.instances = vec![
            instance("orders", Role::Primary, true, Some(1), None),
            instance("orders-instance-2", Role::Replica, true, Some(1), Some(303_600)),
            instance("orders-instance-3", Role::Replica, false, None, None),
        ];
        let said = explain(&facts, at(1000), 10);
        let table = said.split("Instances:\n").nth(1).unwrap();
        let lines: Vec<&str> = table.lines().take(4).map(str::trim_end).collect();
        assert_eq!(
            lines,
            [
                "  NAME                ROLE      READY   TIMELINE   LAG",
                "  orders              primary   true    1",
                "  orders-instance-2   replica   true    1          303600 bytes",
                "  orders-instance-3   replica   false   -          -",
            ],
            "{said}"
        );
        assert!(!explain(&pulling(), at(1000), 10).contains("Instances:"), "a Database of one has no table");
    }

    #[test]
    fn a_container_that_keeps_exiting_says_its_exit_and_a_generic_database_says_it_has_no_engine() {
        let crashing: ContainerStatus = serde_json::from_value(json!({"name": "database", "image": "i", "imageID": "",
            "ready": false, "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}))
        .unwrap();
        assert_eq!(
            container_line(&crashing).unwrap(),
            "container database waiting: CrashLoopBackOff (restarted 4 times); last exit code 1 (Error)"
        );
        let facts = Facts {
            database: Database::new("web", DatabaseSpec::new(Size::Small, "nginx")),
            backups: Vec::new(),
            pods: Vec::new(),
            events: Vec::new(),
        };
        let said = explain(&facts, at(0), 10);
        assert!(said.contains("engine none (generic), image nginx, size small"), "{said}");
        assert!(said.contains("no status yet: is the operator running?"), "{said}");
    }
}
