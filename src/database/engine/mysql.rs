//! The official mysql image: port 3306, data in `/var/lib/mysql`, uid 999.
//!
//! The first start creates the application user and database (MYSQL_USER, MYSQL_PASSWORD,
//! MYSQL_DATABASE) and a random root password nobody needs (MYSQL_RANDOM_ROOT_PASSWORD): the
//! Secret holds only what the application uses.

use k8s_openapi::api::core::v1::EnvVar;

use super::{Engine, from_secret, keys, value};

/// The mysql engine.
#[derive(Debug)]
pub(super) struct Mysql;

impl Engine for Mysql {
    fn name(&self) -> &'static str {
        "mysql"
    }

    fn port(&self) -> i32 {
        3306
    }

    fn data_dir(&self) -> &'static str {
        "/var/lib/mysql"
    }

    fn env(&self, secret: &str) -> Vec<EnvVar> {
        vec![
            from_secret("MYSQL_USER", secret, keys::USERNAME),
            from_secret("MYSQL_PASSWORD", secret, keys::PASSWORD),
            value("MYSQL_DATABASE", "app"),
            value("MYSQL_RANDOM_ROOT_PASSWORD", "yes"),
        ]
    }

    // `mysqladmin ping` exits 0 whenever the server answers, even "access denied": it tells
    // whether the server is up without a password on the command line.
    fn probe_command(&self) -> Vec<String> {
        ["mysqladmin", "ping", "--host=127.0.0.1", "--port=3306", "--silent"].map(String::from).to_vec()
    }

    /// MySQL and MariaDB number majors with two parts: 8.0 and 8.4, 10.11 and 11.4.
    fn major_version(&self, tag: &str) -> Option<String> {
        super::leading_version(tag, 2)
    }

    fn uri(&self, username: &str, password: &str, host: &str, database: &str) -> String {
        format!("mysql://{username}:{password}@{host}:3306/{database}")
    }

    fn client_env(&self, secret: &str) -> Vec<EnvVar> {
        vec![from_secret("DATABASE_USER", secret, keys::USERNAME), from_secret("MYSQL_PWD", secret, keys::PASSWORD)]
    }

    fn dump_script(&self) -> String {
        "mysqldump --host=\"$DATABASE_HOST\" --port=3306 --user=\"$DATABASE_USER\" --single-transaction \
         --no-tablespaces app > /backup/dump.partial && mv /backup/dump.partial /backup/dump"
            .into()
    }

    // The image runs the initdb .sql files at its first start, into MYSQL_DATABASE.
    fn restore_script(&self) -> String {
        "cp /backup/dump /docker-entrypoint-initdb.d/restore.sql".into()
    }
}
