//! `kubectl database backups DATABASE`: its DatabaseBackups, newest first, with where each is
//! kept and what its verification found; `-o json|yaml` prints the objects as a List.

use k8s_openapi::jiff::Timestamp;
use kube_client::Api;
use kube_client::api::ListParams;

use super::args::{BackupsArgs, Output};
use super::error::Error;
use super::format::{NOTHING, age, bytes, table};
use super::target::Target;
use crate::api::DatabaseBackup;

/// The columns of the table.
const HEADERS: [&str; 9] = ["NAME", "PHASE", "COMPLETED", "WHERE", "SIZE", "COUNT", "VERIFIED", "RESTORE", "AGE"];

/// The backups of `database` among `backups`, newest first (by creation; the name breaks a
/// tie, later first, as the time in a scheduled name does).
pub(crate) fn of_database(backups: Vec<DatabaseBackup>, database: &str) -> Vec<DatabaseBackup> {
    let mut mine: Vec<DatabaseBackup> = backups.into_iter().filter(|b| b.spec.database == database).collect();
    mine.sort_by(|a, b| {
        let key = |b: &DatabaseBackup| (b.metadata.creation_timestamp.clone().map(|t| t.0), b.metadata.name.clone());
        key(b).cmp(&key(a))
    });
    mine
}

/// One row of the table for `backup`, ages counted to `now`.
pub(crate) fn row(backup: &DatabaseBackup, now: Timestamp) -> [String; 9] {
    let status = backup.status.clone().unwrap_or_default();
    let or_nothing = |value: Option<String>| value.unwrap_or_else(|| NOTHING.to_string());
    let verified = status.verified.clone().unwrap_or_default();
    let verification = match (verified.result, backup.spec.verify == Some(true)) {
        (Some(result), _) => result.to_string(),
        // Asked for and not over: a verification is under way or to come.
        (None, true) => "Pending".to_string(),
        (None, false) => NOTHING.to_string(),
    };
    [
        backup.metadata.name.clone().unwrap_or_default(),
        or_nothing(status.phase.map(|p| p.to_string())),
        or_nothing(status.completion_time.map(|t| age(t.0, now) + " ago")),
        or_nothing(status.location.clone().or(status.claim_name.map(|claim| format!("claim/{claim}")))),
        or_nothing(status.size.map(bytes)),
        or_nothing(status.count.map(|c| c.to_string())),
        verification,
        or_nothing(verified.restore_seconds.map(|s| format!("{s}s"))),
        or_nothing(backup.metadata.creation_timestamp.as_ref().map(|t| age(t.0, now))),
    ]
}

/// The table of `backups` (already sorted), or a line saying there are none.
pub(crate) fn render(backups: &[DatabaseBackup], database: &str, namespace: &str, now: Timestamp) -> String {
    if backups.is_empty() {
        return format!("No DatabaseBackups of Database {database} in namespace {namespace}.\n");
    }
    let rows: Vec<[String; 9]> = backups.iter().map(|b| row(b, now)).collect();
    table(HEADERS, &rows)
}

/// `backups` as a kubectl List object, in `output`'s format.
pub(crate) fn as_list(backups: &[DatabaseBackup], output: Output) -> String {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": backups});
    match output {
        Output::Yaml => serde_saphyr::to_string(&list).unwrap_or_default(),
        _ => serde_json::to_string_pretty(&list).unwrap_or_default() + "\n",
    }
}

/// Lists and prints.
pub(crate) async fn run(target: &Target, args: BackupsArgs) -> Result<(), Error> {
    let ns = &target.namespace;
    let api: Api<DatabaseBackup> = Api::namespaced(target.client.clone(), ns);
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api(format!("listing the DatabaseBackups of namespace {ns}"), e))?;
    let backups = of_database(listed.items, &args.database);
    match args.output {
        Output::Table => print!("{}", render(&backups, &args.database, ns, Timestamp::now())),
        output => print!("{}", as_list(&backups, output)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BackupPhase, BackupStatus, Verification, VerificationResult};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn backup(name: &str, database: &str, created: i64, status: BackupStatus) -> DatabaseBackup {
        let mut backup = crate::api::backup(name, database);
        backup.metadata.creation_timestamp = Some(Time(at(created)));
        backup.status = Some(status);
        backup
    }

    fn listed() -> Vec<DatabaseBackup> {
        let in_claim = BackupStatus {
            phase: Some(BackupPhase::Completed),
            claim_name: Some("orders-1".into()),
            count: Some(1000),
            completion_time: Some(Time(at(1_000))),
            verified: Some(Verification {
                result: Some(VerificationResult::Passed),
                restore_seconds: Some(14),
                ..Default::default()
            }),
            ..Default::default()
        };
        let in_bucket = BackupStatus {
            phase: Some(BackupPhase::Running),
            location: Some("s3://backups/shop/orders-2/".into()),
            size: Some(3 * 1024 * 1024),
            ..Default::default()
        };
        let mut verifying = backup("orders-2", "orders", 2_000, in_bucket);
        verifying.spec.verify = Some(true);
        vec![
            backup("orders-1", "orders", 900, in_claim),
            backup("users-1", "users", 950, BackupStatus::default()),
            verifying,
        ]
    }

    #[test]
    fn only_the_database_s_backups_are_listed_newest_first() {
        let names: Vec<String> =
            of_database(listed(), "orders").into_iter().map(|b| b.metadata.name.unwrap()).collect();
        assert_eq!(names, ["orders-2", "orders-1"]);
    }

    #[test]
    fn the_table_says_where_each_backup_is_and_what_its_verification_found() {
        let backups = of_database(listed(), "orders");
        assert_eq!(
            render(&backups, "orders", "shop", at(3_000)),
            "\
NAME       PHASE       COMPLETED   WHERE                         SIZE     COUNT   VERIFIED   RESTORE   AGE
orders-2   Running     -           s3://backups/shop/orders-2/   3.0MiB   -       Pending    -         16m
orders-1   Completed   33m ago     claim/orders-1                -        1000    Passed     14s       35m
"
        );
        assert_eq!(render(&[], "orders", "shop", at(0)), "No DatabaseBackups of Database orders in namespace shop.\n");
    }

    #[test]
    fn json_and_yaml_print_the_objects_as_a_list() {
        let backups = of_database(listed(), "orders");
        let json: serde_json::Value = serde_json::from_str(&as_list(&backups, Output::Json)).unwrap();
        assert_eq!(json["kind"], "List");
        assert_eq!(json["items"][1]["status"]["verified"]["restoreSeconds"], 14);
        let yaml = as_list(&backups, Output::Yaml);
        assert!(yaml.contains("kind: List") && yaml.contains("restoreSeconds: 14"), "{yaml}");
    }
}
