//! The official mariadb image: port 3306, data in `/var/lib/mysql`, uid 999.
//!
//! The first start creates the application user and database (MARIADB_USER, MARIADB_PASSWORD,
//! MARIADB_DATABASE), a random root password (MARIADB_RANDOM_ROOT_PASSWORD), and the
//! `healthcheck` user that the image's own `healthcheck.sh` connects as.

use k8s_openapi::api::core::v1::EnvVar;

use super::{Engine, from_secret, keys, value};

/// The mariadb engine.
#[derive(Debug)]
pub(super) struct Mariadb;

impl Engine for Mariadb {
    fn name(&self) -> &'static str {
        "mariadb"
    }

    fn port(&self) -> i32 {
        3306
    }

    fn data_dir(&self) -> &'static str {
        "/var/lib/mysql"
    }

    fn env(&self, secret: &str) -> Vec<EnvVar> {
        vec![
            from_secret("MARIADB_USER", secret, keys::USERNAME),
            from_secret("MARIADB_PASSWORD", secret, keys::PASSWORD),
            value("MARIADB_DATABASE", "app"),
            value("MARIADB_RANDOM_ROOT_PASSWORD", "yes"),
        ]
    }

    // The image's healthcheck: the server accepts connections and InnoDB has initialised.
    fn probe_command(&self) -> Vec<String> {
        ["healthcheck.sh", "--connect", "--innodb_initialized"].map(String::from).to_vec()
    }

    /// MySQL and MariaDB number majors with two parts: 8.0 and 8.4, 10.11 and 11.4.
    fn major_version(&self, tag: &str) -> Option<String> {
        super::leading_version(tag, 2)
    }

    fn uri(&self, username: &str, password: &str, host: &str, database: &str) -> String {
        format!("mariadb://{username}:{password}@{host}:3306/{database}")
    }

    fn client_env(&self, secret: &str) -> Vec<EnvVar> {
        vec![from_secret("DATABASE_USER", secret, keys::USERNAME), from_secret("MYSQL_PWD", secret, keys::PASSWORD)]
    }

    fn dump_script(&self) -> String {
        "mariadb-dump --host=\"$DATABASE_HOST\" --port=3306 --user=\"$DATABASE_USER\" --single-transaction \
         --no-tablespaces app > /backup/dump.partial && mv /backup/dump.partial /backup/dump"
            .into()
    }

    // The image runs the initdb .sql files at its first start, into MARIADB_DATABASE.
    fn restore_script(&self) -> String {
        "cp /backup/dump /docker-entrypoint-initdb.d/restore.sql".into()
    }
}
