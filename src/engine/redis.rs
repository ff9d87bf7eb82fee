//! The official redis image: port 6379, data in `/data`, uid 999.
//!
//! Redis reads no password from its environment, and a password among its arguments would be
//! on its command line, which every process on the node can read (`/proc/<pid>/cmdline`). So
//! the container runs a shell that feeds the server `requirepass` on its standard input
//! (`redis-server ... -`, the server's "configuration from stdin"), quoted as redis's
//! configuration format quotes; the shell then is the server (`exec`), so SIGTERM reaches it.
//! The image's entrypoint runs any command that is not a redis flag as it is. Append-only
//! persistence keeps every write across a restart.
//!
//! A restore copies the dump in as the base of an append-only directory with its manifest
//! (Redis 7's multi-part append-only file): with append-only on, the server loads its
//! append-only directory and nothing else, so a `dump.rdb` beside it would be ignored and the
//! restored server would start empty.

use k8s_openapi::api::core::v1::EnvVar;

use super::{Engine, from_secret, keys};

/// The redis engine.
#[derive(Debug)]
pub(super) struct Redis;

impl Engine for Redis {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn port(&self) -> i32 {
        6379
    }

    fn data_dir(&self) -> &'static str {
        "/data"
    }

    /// Redis has users only since 6 and one by default: `default`.
    fn username(&self) -> &'static str {
        "default"
    }

    fn env(&self, secret: &str) -> Vec<EnvVar> {
        vec![from_secret("REDIS_PASSWORD", secret, keys::PASSWORD)]
    }

    fn server_script(&self) -> String {
        SERVER.into()
    }

    // redis-cli exits 0 on an error reply too: the probe looks for the PONG. The password
    // comes from the environment (REDISCLI_AUTH), never from the probe's definition or the
    // probe's command line.
    fn probe_command(&self) -> Vec<String> {
        ["sh", "-c", r#"REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli ping | grep -q PONG"#].map(String::from).to_vec()
    }

    fn uri(&self, username: &str, password: &str, host: &str, _database: &str) -> String {
        format!("redis://{username}:{password}@{host}:6379/0")
    }

    // redis-cli reads its password from REDISCLI_AUTH: never on a command line.
    fn client_env(&self, secret: &str) -> Vec<EnvVar> {
        vec![from_secret("REDISCLI_AUTH", secret, keys::PASSWORD)]
    }

    fn shell_script(&self) -> String {
        r#"REDISCLI_AUTH="$REDIS_PASSWORD" exec redis-cli "$@""#.into()
    }

    // An RDB file starts with its magic, REDIS.
    fn dump_script(&self) -> String {
        "redis-cli -h \"$DATABASE_HOST\" -p 6379 --rdb /backup/dump.partial \
         && head -c 5 /backup/dump.partial | grep -q REDIS && mv /backup/dump.partial /backup/dump"
            .into()
    }

    // The dump's own check counts its keys and, apart, those with an expiry; a key with one may
    // be gone by the time a restore is counted, so only the others are counted.
    fn dump_count_script(&self) -> String {
        r"redis-check-rdb /backup/dump | awk '/\[info\] [0-9]+ keys read/ { keys = $2 } /\[info\] [0-9]+ expires/ { volatile = $2 } END { print keys - volatile }'".into()
    }

    // INFO's keyspace section: `db0:keys=N,expires=M,...` for each database that has keys;
    // nothing printed without the section's title (an error, a refused password).
    fn count_script(&self) -> String {
        r#"redis-cli -h "$DATABASE_HOST" -p 6379 info keyspace | awk -F '[:=,]' '/^# Keyspace/ { seen = 1 } /^db[0-9]+:/ { n += $3 - $5 } END { if (seen) print n + 0 }'"#.into()
    }

    // The dump becomes the base file of the append-only directory, readied aside and renamed:
    // a restore cut short leaves no directory the server would load as complete.
    fn restore_script(&self) -> String {
        RESTORE.into()
    }
}

/// The server's shell: files of its own only (umask, as the official image's entrypoint),
/// protected mode off as there (the password protects it), the password on standard input.
const SERVER: &str = r#"umask 0077
exec redis-server --protected-mode no --appendonly yes --dir /data - <<EOF
requirepass "$(printf '%s' "$REDIS_PASSWORD" | sed 's/[\\"]/\\&/g')"
EOF"#;

/// The restore: `/backup/dump` as the base of `/data/appendonlydir`, unless the volume has one.
const RESTORE: &str = "[ -e /data/appendonlydir ] || {      rm -rf /data/appendonlydir.partial && mkdir /data/appendonlydir.partial      && cp /backup/dump /data/appendonlydir.partial/appendonly.aof.1.base.rdb      && echo 'file appendonly.aof.1.base.rdb seq 1 type b' > /data/appendonlydir.partial/appendonly.aof.manifest      && mv /data/appendonlydir.partial /data/appendonlydir; }";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_an_argument_of_the_server() {
        let script = Redis.server_script();
        assert!(!script.contains("$(REDIS_PASSWORD)"), "no substitution into the command line");
        assert!(script.contains("exec redis-server") && script.contains("requirepass") && script.contains(" - <<EOF"));
    }

    /// The server's shell, run by `sh` with a password that needs quoting: what it feeds the
    /// server is one configuration line that reads back as the password.
    #[test]
    fn the_configuration_line_quotes_any_password() {
        let fake_server = SERVER.replace("exec redis-server --protected-mode no --appendonly yes --dir /data -", "cat");
        let password = r#"a "quoted" \ pass word"#;
        let output = std::process::Command::new("sh")
            .args(["-c", &fake_server])
            .env("REDIS_PASSWORD", password)
            .output()
            .expect("sh runs");
        let line = String::from_utf8(output.stdout).unwrap();
        assert_eq!(line, concat!(r#"requirepass "a \"quoted\" \\ pass word""#, "\n"));
    }
}
