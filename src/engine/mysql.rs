//! The MySQL family: the official mysql and mariadb images, one engine each, sharing what they
//! share (port 3306, data in `/var/lib/mysql`, uid 999, a dump to `.sql`, a restore from the
//! initialisation directory) and differing in names: their environment's prefix, their probe,
//! their dump tool and their URI scheme.
//!
//! The first start creates the application user and database (`<PREFIX>_USER`,
//! `<PREFIX>_PASSWORD`, `<PREFIX>_DATABASE`) and `root`, whose password is the Secret's
//! `root-password` (`<PREFIX>_ROOT_PASSWORD`) and who logs in from inside the pod only
//! (`<PREFIX>_ROOT_HOST=localhost`): no root over the network, and no random root password,
//! which the official images print to the pod's log. mariadb's also creates the `healthcheck`
//! user its own `healthcheck.sh` connects as.

use k8s_openapi::api::core::v1::EnvVar;

use super::{Engine, from_secret, keys, value};

/// One engine of the MySQL family.
#[derive(Debug)]
pub(super) struct MysqlFamily {
    /// `mysql` or `mariadb`: the engine's name, its port's name and its URI scheme.
    name: &'static str,
    /// The prefix of the image's environment: `MYSQL` or `MARIADB`.
    env_prefix: &'static str,
    /// The command that tells whether the server accepts connections.
    probe: &'static [&'static str],
    /// The logical dump tool: `mysqldump` or `mariadb-dump`.
    dump_tool: &'static str,
    /// The command-line client: `mysql` or `mariadb`.
    client: &'static str,
}

/// The official mysql image. `mysqladmin ping` exits 0 whenever the server answers, even
/// "access denied": it tells whether the server is up without a password on the command line.
pub(super) const MYSQL: MysqlFamily = MysqlFamily {
    name: "mysql",
    env_prefix: "MYSQL",
    probe: &["mysqladmin", "ping", "--host=127.0.0.1", "--port=3306", "--silent"],
    dump_tool: "mysqldump",
    client: "mysql",
};

/// The official mariadb image, whose healthcheck checks that the server accepts connections
/// and that InnoDB has initialised.
pub(super) const MARIADB: MysqlFamily = MysqlFamily {
    name: "mariadb",
    env_prefix: "MARIADB",
    probe: &["healthcheck.sh", "--connect", "--innodb_initialized"],
    dump_tool: "mariadb-dump",
    client: "mariadb",
};

impl Engine for MysqlFamily {
    fn name(&self) -> &'static str {
        self.name
    }

    fn port(&self) -> i32 {
        3306
    }

    fn data_dir(&self) -> &'static str {
        "/var/lib/mysql"
    }

    fn env(&self, secret: &str) -> Vec<EnvVar> {
        let prefix = self.env_prefix;
        vec![
            from_secret(&format!("{prefix}_USER"), secret, keys::USERNAME),
            from_secret(&format!("{prefix}_PASSWORD"), secret, keys::PASSWORD),
            value(&format!("{prefix}_DATABASE"), "app"),
            from_secret(&format!("{prefix}_ROOT_PASSWORD"), secret, keys::ROOT_PASSWORD),
            value(&format!("{prefix}_ROOT_HOST"), "localhost"),
        ]
    }

    fn root_user(&self) -> Option<&'static str> {
        Some("root")
    }

    // The entrypoint of every image of the family prepends its own server (mysqld, mariadbd)
    // to arguments that start with a flag; the port is the default one, said again.
    fn server_script(&self) -> String {
        "exec docker-entrypoint.sh --port=3306".into()
    }

    fn probe_command(&self) -> Vec<String> {
        self.probe.iter().map(|s| s.to_string()).collect()
    }

    // A new major version is two numbers: 8.0 to 8.4, 10.11 to 11.4.
    fn major_version(&self, tag: &str) -> Option<String> {
        super::leading_version(tag, 2)
    }

    fn uri(&self, username: &str, password: &str, host: &str, database: &str) -> String {
        format!("{}://{username}:{password}@{host}:3306/{database}", self.name)
    }

    // The client tools read the password from MYSQL_PWD, never from their command line.
    fn client_env(&self, secret: &str) -> Vec<EnvVar> {
        vec![from_secret("DATABASE_USER", secret, keys::USERNAME), from_secret("MYSQL_PWD", secret, keys::PASSWORD)]
    }

    fn shell_script(&self) -> String {
        let prefix = self.env_prefix;
        format!(r#"MYSQL_PWD="${prefix}_PASSWORD" exec {} --user="${prefix}_USER" app "$@""#, self.client)
    }

    // With the schema's routines, events and triggers; the tool's closing line ("-- Dump
    // completed") checks that the dump ran to its end.
    fn dump_script(&self) -> String {
        format!(
            "{} --host=\"$DATABASE_HOST\" --port=3306 --user=\"$DATABASE_USER\" --single-transaction \
             --no-tablespaces --routines --events --triggers app > /backup/dump.partial \
             && tail -n 1 /backup/dump.partial | grep -q '^-- Dump completed' && mv /backup/dump.partial /backup/dump",
            self.dump_tool
        )
    }

    // The rows of the dump's INSERT statements (several rows each): the parenthesised tuples
    // after VALUES once every quoted string, where a parenthesis is data, is taken out (the
    // dump tool escapes a quote in a string with a backslash).
    fn dump_count_script(&self) -> String {
        COUNT_DUMP.into()
    }

    // Every base table's COUNT(*), summed in one query that a first query writes.
    fn count_script(&self) -> String {
        let client = format!(
            "{} --host=\"$DATABASE_HOST\" --port=3306 --user=\"$DATABASE_USER\" --batch --skip-column-names app",
            self.client
        );
        format!("query=$({client} --execute=\"{COUNT_QUERY}\") && {client} --execute=\"$query\"")
    }

    // The image runs the initdb .sql files at its first start, into <PREFIX>_DATABASE.
    fn restore_script(&self) -> String {
        "cp /backup/dump /docker-entrypoint-initdb.d/restore.sql".into()
    }
}

/// Counts the rows of the INSERT statements of `/backup/dump`: from a line that starts one to
/// the line that ends it with `;`, the tuples' opening parentheses outside quoted strings (the
/// dump tools write a statement on one line, mysqldump, or a row a line, MariaDB 11's).
const COUNT_DUMP: &str = r#"awk '/^INSERT INTO / { ins = 1 } ins { line = $0; gsub(/\047([^\047\\]|\\.)*\047/, "", line); n += gsub(/\(/, "", line); if (line ~ /;[[:space:]]*$/) ins = 0 } END { print n + 0 }' /backup/dump"#;

/// The query that writes the query summing every base table's rows (CHAR(96) is the backquote
/// that quotes a name, doubled inside one).
const COUNT_QUERY: &str = "SET SESSION group_concat_max_len = 1048576; SELECT CONCAT('SELECT 0', \
    COALESCE(GROUP_CONCAT(CONCAT(' + (SELECT COUNT(*) FROM ', CHAR(96), REPLACE(table_name, CHAR(96), \
    CONCAT(CHAR(96), CHAR(96))), CHAR(96), ')') SEPARATOR ''), '')) FROM information_schema.tables \
    WHERE table_schema = 'app' AND table_type = 'BASE TABLE'";

#[cfg(test)]
mod tests {
    use super::COUNT_DUMP;

    /// The rows [`COUNT_DUMP`] counts in `dump`, with the host's awk.
    fn counted(dump: &str) -> String {
        let file = std::env::temp_dir().join(format!("count-dump-{}.sql", std::process::id()));
        std::fs::write(&file, dump).unwrap();
        let script = COUNT_DUMP.replace("/backup/dump", file.to_str().unwrap());
        let output = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
        std::fs::remove_file(&file).unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn a_dump_s_rows_are_counted_in_either_tool_s_layout_whatever_their_strings_hold() {
        // mysqldump: a statement on one line; MariaDB 11's dump: a row a line.
        let one_line = "INSERT INTO `t` VALUES (1,'a(b'),(2,'it\\'s ),( x;'),(3,NULL);\n";
        let a_row_a_line =
            "LOCK TABLES `u` WRITE;\nINSERT INTO `u` VALUES\n(4,'\\\\'),\n(5,'x;'),\n(6,'(');\nUNLOCK TABLES;\n";
        assert_eq!(counted(one_line), "3");
        assert_eq!(counted(a_row_a_line), "3");
        assert_eq!(counted(&format!("{one_line}-- (a comment)\n(7)\n{a_row_a_line}")), "6", "nothing outside INSERTs");
        assert_eq!(counted("-- an empty database\n"), "0");
    }
}
