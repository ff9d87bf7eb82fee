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

    // The superuser's password: the image wants one, nobody needs it.
    fn server_script(&self) -> String {
        "POSTGRES_PASSWORD=$(tr -dc A-Za-z0-9 < /dev/urandom | head -c 32) && export POSTGRES_PASSWORD\n\
         exec docker-entrypoint.sh postgres"
            .into()
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

/// Counts the rows of `/backup/dump`'s tables.
const COUNT_DUMP: &str = r"pg_restore --data-only --file=- /backup/dump | awk '/^COPY .* FROM stdin;$/ { rows = 1; next } /^\\\.$/ { rows = 0; next } rows { n++ } END { print n + 0 }'";

/// Counts the rows of the tables of database `app` at `$DATABASE_HOST`.
const COUNT: &str = r#"psql --host="$DATABASE_HOST" --port=5432 --dbname=app --no-psqlrc --tuples-only --no-align --set=ON_ERROR_STOP=1 --command="SELECT coalesce(sum((xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM ONLY %I.%I', n.nspname, c.relname), false, true, '')))[1]::text::bigint), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'""#;

/// The first start's script (sourced by the image's entrypoint, with the temporary server on
/// the socket): the application's user, a login role that owns the database. The SQL goes
/// through psql's standard input, so the password is on no command line, and with its quotes
/// doubled; a failing statement is not written to the server's log with its text.
const INITDB: &str = r#"if [ "$DATABASE_USER" != "$POSTGRES_USER" ]; then
  doubled() { printf '%s' "$1" | sed "s/$2/$2$2/g"; }
  psql -v ON_ERROR_STOP=1 --username="$POSTGRES_USER" --dbname="$POSTGRES_DB" --no-password --no-psqlrc --quiet <<SQL
SET log_min_error_statement = panic;
CREATE ROLE "$(doubled "$DATABASE_USER" '"')" LOGIN PASSWORD '$(doubled "$DATABASE_PASSWORD" "'")';
ALTER DATABASE "$(doubled "$POSTGRES_DB" '"')" OWNER TO "$(doubled "$DATABASE_USER" '"')";
SQL
fi"#;

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::INITDB;

    /// The script's SQL, as psql would receive it, for the given user and password (psql
    /// replaced by `cat`).
    fn sql(user: &str, password: &str) -> String {
        let script = format!("psql() {{ cat; }}\n{INITDB}");
        let output = Command::new("sh")
            .args(["-c", &script])
            .env("POSTGRES_USER", "postgres")
            .env("POSTGRES_DB", "app")
            .env("DATABASE_USER", user)
            .env("DATABASE_PASSWORD", password)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
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
}
