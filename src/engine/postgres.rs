//! The official postgres image: port 5432, data in `/var/lib/postgresql/data`, uid 999.
//!
//! PGDATA is a directory inside the mount, not the mount itself: a fresh volume may hold a
//! `lost+found`, and initdb refuses a data directory that is not empty. The image initialises
//! the data directory at the first start with POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB.

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
            from_secret("POSTGRES_USER", secret, keys::USERNAME),
            from_secret("POSTGRES_PASSWORD", secret, keys::PASSWORD),
            value("POSTGRES_DB", "app"),
            value("PGDATA", &format!("{DATA_DIR}/pgdata")),
        ]
    }

    fn server_script(&self) -> String {
        "exec docker-entrypoint.sh postgres".into()
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

    // The archive's table of contents, read back by pg_restore, checks the dump.
    fn dump_script(&self) -> String {
        "pg_dump --host=\"$DATABASE_HOST\" --port=5432 --format=custom --file=/backup/dump.partial app \
         && pg_restore --list /backup/dump.partial > /dev/null && mv /backup/dump.partial /backup/dump"
            .into()
    }

    // The image runs the initdb scripts at its first start, with the server listening on its
    // socket only: nothing is served before the restore is done.
    fn restore_script(&self) -> String {
        "cp /backup/dump /docker-entrypoint-initdb.d/restore.dump && printf '%s\\n' \
         'pg_restore --username=\"$POSTGRES_USER\" --dbname=\"$POSTGRES_DB\" --no-owner /docker-entrypoint-initdb.d/restore.dump' \
         > /docker-entrypoint-initdb.d/restore.sh"
            .into()
    }
}
