//! The official postgres image: port 5432, data in `/var/lib/postgresql/data`, uid 999.
//!
//! PGDATA is a directory inside the mount, not the mount itself: a fresh volume may hold a
//! `lost+found`, and initdb refuses a data directory that is not empty. The image initialises
//! the data directory at the first start with POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB.
//!
//! The application's user is not the superuser. The image's superuser is `postgres`, with a
//! password made at each start in the container and never kept (the images trust
//! connections from inside the container, so it logs in through the socket there, as `kubectl
//! exec ... psql -U postgres` does, and from nowhere else). At the first start the
//! [`INITDB`] script makes the Secret's user a login role that owns the database `app` (in
//! postgres 15 and later that owner may create in its `public` schema), and a restore loads
//! the dump as that role. A data directory initialised before this (its application user the
//! superuser) keeps its roles.
//!
//! A Database of several instances streams: the primary's first start also makes the
//! replication role (with the password of `$REPLICATION_PASSWORD`) and lets it connect for
//! replication; a replica's first start waits for the primary, copies it with
//! `pg_basebackup`, and marks itself a standby; every start of a replica follows the primary
//! at the -rw Service (`primary_conninfo`, its password in a passfile on the volume, never
//! on a command line) and serves reads (hot standby). A replica started as the primary is
//! promoted (a new timeline); a former primary started as a replica copies the primary afresh.

use k8s_openapi::api::core::v1::EnvVar;

use super::{Engine, from_secret, keys, value};

/// The postgres engine.
#[derive(Debug)]
pub(super) struct Postgres;

const DATA_DIR: &str = "/var/lib/postgresql/data";

impl Engine for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn port(&self) -> i32 {
        5432
    }

    fn data_dir(&self) -> &'static str {
        DATA_DIR
    }

    fn env(&self, secret: &str) -> Vec<EnvVar> {
        vec![
            value("POSTGRES_USER", "postgres"),
            value("POSTGRES_DB", "app"),
            value("PGDATA", &format!("{DATA_DIR}/pgdata")),
            from_secret("DATABASE_USER", secret, keys::USERNAME),
            from_secret("DATABASE_PASSWORD", secret, keys::PASSWORD),
        ]
    }

    fn initdb_script(&self) -> Option<&'static str> {
        Some(INITDB)
    }

    // The superuser's password: the image wants one, nobody needs it. A primary whose commits
    // wait for a replica has the replicas to wait for in its environment; the image's first
    // start runs its scripts (the database, the roles, a restore) on a server that has no
    // replica yet, so their sessions commit locally (PGOPTIONS, read by the entrypoint's psql
    // only: a `kubectl exec` shell has the container's environment, not this one).
    //
    // A replica's data started as a primary is a promotion: the standby's mark becomes a
    // recovery's, so the server replays the WAL it has, ends the recovery on a new timeline
    // and accepts writes (with no archive yet: `restore_command` finds nothing).
    fn server_script(&self) -> String {
        "POSTGRES_PASSWORD=$(tr -dc A-Za-z0-9 < /dev/urandom | head -c 32) && export POSTGRES_PASSWORD\n\
         if [ -n \"${SYNCHRONOUS_STANDBY_NAMES:-}\" ]; then export PGOPTIONS='-c synchronous_commit=local'; fi\n\
         promote=\n\
         if [ -f \"$PGDATA/standby.signal\" ]; then\n\
         \x20 rm \"$PGDATA/standby.signal\" && : > \"$PGDATA/recovery.signal\" && promote=1\n\
         \x20 echo 'promoted: ending the recovery of this replica at the end of the WAL it received, on a new timeline' >&2\n\
         fi\n\
         exec docker-entrypoint.sh postgres \
         ${SYNCHRONOUS_STANDBY_NAMES:+-c \"synchronous_standby_names=$SYNCHRONOUS_STANDBY_NAMES\"} \
         ${WAL_KEEP_SIZE:+-c \"wal_keep_size=$WAL_KEEP_SIZE\"} ${promote:+-c restore_command=false}"
            .into()
    }

    fn replica_script(&self, primary: &str) -> Option<String> {
        Some(REPLICA.replace("{primary}", primary).replace("{user}", super::REPLICATION_USER))
    }

    // pg_isready asks the server whether it accepts connections; it needs no password.
    fn probe_command(&self) -> Vec<String> {
        ["pg_isready", "--host=127.0.0.1", "--port=5432"].map(String::from).to_vec()
    }

    fn uri(&self, username: &str, password: &str, host: &str, database: &str) -> String {
        format!("postgresql://{username}:{password}@{host}:5432/{database}")
    }

    fn client_env(&self, secret: &str) -> Vec<EnvVar> {
        vec![from_secret("PGUSER", secret, keys::USERNAME), from_secret("PGPASSWORD", secret, keys::PASSWORD)]
    }

    // On the server's local socket, as the e2e tests' psql; the password is there for a
    // pg_hba that asks for one.
    fn shell_script(&self) -> String {
        r#"PGPASSWORD="$DATABASE_PASSWORD" exec psql --username="$DATABASE_USER" --dbname=app "$@""#.into()
    }

    // The archive's table of contents, read back by pg_restore, checks the dump.
    fn dump_script(&self) -> String {
        "pg_dump --host=\"$DATABASE_HOST\" --port=5432 --format=custom --file=/backup/dump.partial app \
         && pg_restore --list /backup/dump.partial > /dev/null && mv /backup/dump.partial /backup/dump"
            .into()
    }

    // The rows of the archive's data: the lines between each table's `COPY ... FROM stdin;` and
    // its `\.` (COPY's text format escapes a newline in a value, so a row is a line).
    fn dump_count_script(&self) -> String {
        COUNT_DUMP.into()
    }

    // Every ordinary table's own rows (ONLY: a partition's are its own, not its parent's too),
    // as the dump holds them: each table once, its count exact.
    fn count_script(&self) -> String {
        COUNT.into()
    }

    // The image runs the initdb scripts at its first start, with the server listening on its
    // socket only: nothing is served before the restore is done. The objects are the
    // application user's, as if it had made them.
    fn restore_script(&self) -> String {
        "cp /backup/dump /docker-entrypoint-initdb.d/restore.dump && printf '%s\\n' \
         'pg_restore --username=\"$POSTGRES_USER\" --role=\"$DATABASE_USER\" --dbname=\"$POSTGRES_DB\" --no-owner \
         --exit-on-error /docker-entrypoint-initdb.d/restore.dump' > /docker-entrypoint-initdb.d/restore.sh"
            .into()
    }
}

/// A replica's start (see the module's documentation). The passfile's password needs no
/// escaping: a generated password is letters and digits.
const REPLICA: &str = r#"primary='{primary}'
pgpass=/var/lib/postgresql/data/replication.pgpass
umask 077
printf '%s:5432:*:{user}:%s\n' "$primary" "$REPLICATION_PASSWORD" > "$pgpass"
# Also when the file was there: the kubelet gives every file of the volume group bits at each
# mount (fsGroup), and libpq ignores a passfile others may read.
chmod 0600 "$pgpass"
export PGPASSFILE="$pgpass"
# A volume without the standby's mark is empty, half copied, or a former primary's: what a
# former primary wrote after the last record its replicas received is on no other instance,
# so it is copied afresh, as a new replica is.
if [ ! -f "$PGDATA/standby.signal" ]; then
  if [ -s "$PGDATA/PG_VERSION" ]; then
    echo "this volume holds a former primary's data, which the new primary's history does not continue: copying the primary afresh" >&2
  fi
  until pg_isready --quiet --host="$primary" --port=5432 --timeout=5; do
    echo "waiting for the primary at $primary to copy it" >&2
    sleep 2
  done
  rm -rf "$PGDATA"
  pg_basebackup --host="$primary" --port=5432 --username={user} --no-password --pgdata="$PGDATA" --wal-method=stream --checkpoint=fast
  touch "$PGDATA/standby.signal"
  echo "copied the primary: starting as its replica" >&2
fi
# The volume's fsGroup gives the directory group bits at every mount; postgres wants 0700.
chmod 0700 "$PGDATA"
exec postgres -c hot_standby=on -c primary_conninfo="host=$primary port=5432 user={user} passfile=$pgpass application_name=$HOSTNAME""#;

/// Counts the rows of `/backup/dump`'s tables.
const COUNT_DUMP: &str = r"pg_restore --data-only --file=- /backup/dump | awk '/^COPY .* FROM stdin;$/ { rows = 1; next } /^\\\.$/ { rows = 0; next } rows { n++ } END { print n + 0 }'";

/// Counts the rows of the tables of database `app` at `$DATABASE_HOST`.
const COUNT: &str = r#"psql --host="$DATABASE_HOST" --port=5432 --dbname=app --no-psqlrc --tuples-only --no-align --set=ON_ERROR_STOP=1 --command="SELECT coalesce(sum((xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM ONLY %I.%I', n.nspname, c.relname), false, true, '')))[1]::text::bigint), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'""#;

/// The first start's script (sourced by the image's entrypoint, with the temporary server on
/// the socket): the application's user, a login role that owns the database. The SQL goes
/// through psql's standard input, so the password is on no command line, and with its quotes
/// doubled; a failing statement is not written to the server's log with its text.
const INITDB: &str = r#"doubled() { printf '%s' "$1" | sed "s/$2/$2$2/g"; }
if [ "$DATABASE_USER" != "$POSTGRES_USER" ]; then
  psql -v ON_ERROR_STOP=1 --username="$POSTGRES_USER" --dbname="$POSTGRES_DB" --no-password --no-psqlrc --quiet <<SQL
SET log_min_error_statement = panic;
CREATE ROLE "$(doubled "$DATABASE_USER" '"')" LOGIN PASSWORD '$(doubled "$DATABASE_PASSWORD" "'")';
ALTER DATABASE "$(doubled "$POSTGRES_DB" '"')" OWNER TO "$(doubled "$DATABASE_USER" '"')";
SQL
fi
if [ -n "${REPLICATION_PASSWORD:-}" ]; then
  psql -v ON_ERROR_STOP=1 --username="$POSTGRES_USER" --dbname="$POSTGRES_DB" --no-password --no-psqlrc --quiet <<SQL
SET log_min_error_statement = panic;
CREATE ROLE streaming_replica REPLICATION LOGIN PASSWORD '$(doubled "$REPLICATION_PASSWORD" "'")';
SQL
  echo 'host replication streaming_replica all scram-sha-256' >> "$PGDATA/pg_hba.conf"
fi"#;

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::INITDB;

    /// Runs [`INITDB`] as the image's entrypoint does (sourced by bash under `set -Eeuo
    /// pipefail`: an unset variable is an error), with psql printing the SQL it is given.
    fn initdb(env: &[(&str, &str)]) -> String {
        let script = format!("set -Eeuo pipefail\npsql() {{ cat; }}\n{INITDB}");
        let output = Command::new("bash").args(["-c", &script]).envs(env.iter().copied()).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    /// The script's SQL for the given application user and password, on a Database of one.
    fn sql(user: &str, password: &str) -> String {
        initdb(&[
            ("POSTGRES_USER", "postgres"),
            ("POSTGRES_DB", "app"),
            ("DATABASE_USER", user),
            ("DATABASE_PASSWORD", password),
        ])
    }

    #[test]
    fn the_application_user_owns_the_database_with_its_quotes_doubled() {
        let sql = sql("app", "it's \"a\" $pass/word");
        assert!(sql.contains("CREATE ROLE \"app\" LOGIN PASSWORD 'it''s \"a\" $pass/word';"), "{sql}");
        assert!(sql.contains("ALTER DATABASE \"app\" OWNER TO \"app\";"), "{sql}");
        assert!(sql.starts_with("SET log_min_error_statement = panic;"), "{sql}");
        let quoted = self::sql("we\"ird", "x");
        assert!(quoted.contains("CREATE ROLE \"we\"\"ird\" LOGIN"), "{quoted}");
    }

    #[test]
    fn a_secret_naming_the_superuser_makes_no_role() {
        assert_eq!(sql("postgres", "x"), "");
    }

    #[test]
    fn a_primary_of_several_instances_makes_the_replication_role_and_lets_it_replicate() {
        let dir = std::env::temp_dir().join(format!("initdb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir_text = dir.to_str().unwrap();
        let sql = initdb(&[
            ("POSTGRES_USER", "postgres"),
            ("POSTGRES_DB", "app"),
            ("DATABASE_USER", "postgres"),
            ("REPLICATION_PASSWORD", "it's"),
            ("PGDATA", dir_text),
        ]);
        let hba = std::fs::read_to_string(dir.join("pg_hba.conf")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(sql.contains("CREATE ROLE streaming_replica REPLICATION LOGIN PASSWORD 'it''s';"), "{sql}");
        assert_eq!(hba, "host replication streaming_replica all scram-sha-256\n");
    }

    /// The arguments the server script gives the image's entrypoint, with `env` set.
    fn server_arguments(env: &[(&str, &str)]) -> Vec<String> {
        use crate::engine::Engine;
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("entrypoint-{}-{call}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let entrypoint = dir.join("docker-entrypoint.sh");
        std::fs::write(&entrypoint, "#!/bin/sh\necho \"PGOPTIONS=$PGOPTIONS\"\nfor a; do echo \"$a\"; done\n").unwrap();
        Command::new("chmod").arg("+x").arg(&entrypoint).status().unwrap();
        let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap());
        let output = Command::new("sh")
            .args(["-c", &super::Postgres.server_script()])
            .env("PATH", path)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().lines().map(String::from).collect()
    }

    #[test]
    fn a_replica_started_as_the_primary_ends_its_recovery_on_a_new_timeline() {
        let data = std::env::temp_dir().join(format!("pgdata-promoted-{}", std::process::id()));
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("standby.signal"), "").unwrap();
        let pgdata = data.display().to_string();
        let arguments = server_arguments(&[("PGDATA", pgdata.as_str())]);
        assert_eq!(arguments, ["PGOPTIONS=", "postgres", "-c", "restore_command=false"]);
        assert!(!data.join("standby.signal").exists() && data.join("recovery.signal").exists());
        // Started again (a primary now), it is a primary's start.
        std::fs::remove_file(data.join("recovery.signal")).unwrap();
        let kept = server_arguments(&[("PGDATA", pgdata.as_str()), ("WAL_KEEP_SIZE", "256MB")]);
        assert_eq!(kept, ["PGOPTIONS=", "postgres", "-c", "wal_keep_size=256MB"]);
        std::fs::remove_dir_all(&data).unwrap();
    }

    #[test]
    fn a_synchronous_primary_passes_the_replicas_to_wait_for_to_postgres_as_one_setting() {
        assert_eq!(server_arguments(&[]), ["PGOPTIONS=", "postgres"]);
        // The image's first-start scripts commit locally: no replica exists yet to wait for.
        assert_eq!(
            server_arguments(&[("SYNCHRONOUS_STANDBY_NAMES", "ANY 1 (*)")]),
            ["PGOPTIONS=-c synchronous_commit=local", "postgres", "-c", "synchronous_standby_names=ANY 1 (*)"]
        );
    }

    #[test]
    fn a_replica_copies_its_primary_once_and_follows_it_without_a_password_on_a_command_line() {
        use crate::engine::Engine;
        let script = super::Postgres.replica_script("orders-rw").unwrap();
        assert!(script.starts_with("primary='orders-rw'"), "{script}");
        assert!(
            script.contains("pg_basebackup --host=\"$primary\" --port=5432 --username=streaming_replica --no-password")
        );
        assert!(script.contains("user=streaming_replica passfile=$pgpass"), "{script}");
        // The password is written by printf, a shell builtin: on no process's command line.
        assert_eq!(script.matches("$REPLICATION_PASSWORD").count(), 1, "{script}");
        assert!(script.contains(r#"printf '%s:5432:*:streaming_replica:%s\n' "$primary" "$REPLICATION_PASSWORD""#));
        assert!(script.lines().last().unwrap().starts_with("exec postgres "), "{script}");
        // Regression: a passfile the kubelet's fsGroup made group-readable at a remount was
        // ignored by libpq, and the replica stopped following its primary.
        assert!(script.contains("chmod 0600 \"$pgpass\""), "{script}");
    }
}
