//! `kubectl database switchover DATABASE [--to INSTANCE]`: makes a replica the primary of a
//! Database of several instances, a planned change (an upgrade of a node, a move).
//!
//! The verb names the new primary in the Database's annotation `example.com/primary`, the
//! record the operator keeps the roles by (one merge patch, the `--resource-version` of the
//! Database read, so a failover decided meanwhile is not overwritten); the operator does the
//! rest: the old primary shuts down, handing its replicas the last of its WAL, and only then
//! does the new one start as the primary. With `--wait` it returns once the new primary is
//! Ready and the Database's `status.currentPrimary`.
//!
//! Without `--to` the replica chosen is the ready one least behind, as the status last said.
//! A Database of one instance, an instance that is no replica or is not ready, are refused
//! before anything is written.

use std::time::Duration;

use kube_client::api::{Api, Patch, PatchParams};

use super::args::SwitchoverArgs;
use super::error::Error;
use super::target::{Look, Target, wait};
use crate::api::{Database, InstanceStatus, PRIMARY_ANNOTATION, Role};

/// The replica of `db` to promote: `to`, or the ready replica least behind.
///
/// # Errors
///
/// [`Error::Refused`], saying why, when there is none to promote.
pub(crate) fn choose(db: &Database, to: Option<&str>) -> Result<String, Error> {
    let name = db.metadata.name.as_deref().unwrap_or_default();
    let instances = db.status.as_ref().map_or(&[][..], |s| &s.instances[..]);
    if instances.len() < 2 {
        return Err(Error::Refused(format!("Database {name} has one instance: there is no replica to switch over to")));
    }
    let replica = |i: &&InstanceStatus| i.role == Some(Role::Replica);
    let chosen = match to {
        Some(to) => instances.iter().find(|i| i.name == to).ok_or_else(|| {
            let names: Vec<&str> = instances.iter().map(|i| i.name.as_str()).collect();
            Error::Refused(format!("Database {name} has no instance {to}: its instances are {}", names.join(", ")))
        })?,
        None => instances
            .iter()
            .filter(replica)
            .filter(|i| i.ready)
            .min_by_key(|i| i.lag_bytes.unwrap_or(i64::MAX))
            .ok_or_else(|| {
                Error::Refused(format!(
                    "Database {name} has no ready replica to switch over to (kubectl database why {name})"
                ))
            })?,
    };
    if !replica(&chosen) {
        return Err(Error::Refused(format!("{} is the primary of Database {name} already", chosen.name)));
    }
    if !chosen.ready {
        return Err(Error::Refused(format!(
            "replica {} of Database {name} is not ready: a switchover to it would leave the Database without a primary \
             until it is (kubectl database why {name})",
            chosen.name
        )));
    }
    Ok(chosen.name.clone())
}

/// Runs the verb.
///
/// # Errors
///
/// The read or the patch failed, the switchover was refused, or `--wait` timed out.
pub(crate) async fn run(target: &Target, args: SwitchoverArgs) -> Result<(), Error> {
    let SwitchoverArgs { database, to, wait: wait_for_it, timeout } = args;
    let databases: Api<Database> = Api::namespaced(target.client.clone(), &target.namespace);
    let db = databases.get_opt(&database).await.map_err(|e| Error::api(format!("getting Database {database}"), e))?;
    let db = db.ok_or_else(|| Error::NotFound {
        kind: "Database",
        name: database.clone(),
        namespace: target.namespace.clone(),
    })?;
    let chosen = choose(&db, to.as_deref())?;
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": db.metadata.resource_version, "annotations": { PRIMARY_ANNOTATION: chosen } }
    });
    databases
        .patch(&database, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::api(format!("naming {chosen} the primary of Database {database}"), e))?;
    println!("database.example.com/{database}: switching over to {chosen}");
    if wait_for_it {
        let line = wait_until_primary(&databases, &database, &chosen, timeout).await?;
        println!("{line}");
    }
    Ok(())
}

async fn wait_until_primary(
    databases: &Api<Database>,
    database: &str,
    chosen: &str,
    timeout: Duration,
) -> Result<String, Error> {
    let hint = format!("kubectl database why {database}");
    wait(&format!("{chosen} to be the primary of Database {database}"), &hint, timeout, || async {
        let db = databases.get(database).await.map_err(|e| Error::api(format!("getting Database {database}"), e))?;
        let status = db.status.unwrap_or_default();
        let ready = status.instances.iter().any(|i| i.name == chosen && i.role == Some(Role::Primary) && i.ready);
        Ok(if ready && status.current_primary.as_deref() == Some(chosen) {
            Look::Done(format!("database.example.com/{database}: {chosen} is the primary"))
        } else {
            let now = status.current_primary.unwrap_or_else(|| "none".into());
            Look::Waiting(format!("waiting: the primary is {now}"))
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DatabaseSpec, DatabaseStatus, Size};

    fn database() -> Database {
        let mut db = Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17"));
        let instance = |name: &str, role, ready, lag| InstanceStatus {
            name: name.into(),
            role: Some(role),
            ready,
            lag_bytes: lag,
            ..Default::default()
        };
        db.status = Some(DatabaseStatus {
            instances: vec![
                instance("orders", Role::Primary, true, None),
                instance("orders-instance-2", Role::Replica, true, Some(4096)),
                instance("orders-instance-3", Role::Replica, true, Some(0)),
                instance("orders-instance-4", Role::Replica, false, Some(0)),
            ],
            ..Default::default()
        });
        db
    }

    #[test]
    fn the_replica_switched_to_is_the_one_named_or_the_ready_one_least_behind() {
        let db = database();
        assert_eq!(choose(&db, None).unwrap(), "orders-instance-3");
        assert_eq!(choose(&db, Some("orders-instance-2")).unwrap(), "orders-instance-2");
        let refused = |to| choose(&db, to).unwrap_err().to_string();
        assert!(refused(Some("orders")).contains("is the primary of Database orders already"));
        assert!(refused(Some("orders-instance-4")).contains("is not ready"));
        assert!(
            refused(Some("orders-instance-9")).contains("has no instance orders-instance-9: its instances are orders,")
        );
        let single = Database::new("one", DatabaseSpec::new(Size::Small, "postgres:17"));
        assert!(choose(&single, None).unwrap_err().to_string().contains("has one instance"));
    }
}
