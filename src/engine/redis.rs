//! The official redis image: port 6379, data in `/data`, uid 999.
//!
//! Redis reads no password from its environment: the server gets `--requirepass` with the
//! password that Kubernetes substitutes from REDIS_PASSWORD (`$(REDIS_PASSWORD)`; the Pod spec
//! holds only the reference), and append-only persistence so that the data survives a
//! restart. The image's entrypoint runs `redis-server` with arguments that start with `--`.

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

    fn args(&self) -> Option<Vec<String>> {
        Some(["--requirepass", "$(REDIS_PASSWORD)", "--appendonly", "yes", "--dir", "/data"].map(String::from).to_vec())
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

    fn dump_script(&self) -> String {
        "redis-cli -h \"$DATABASE_HOST\" -p 6379 --rdb /backup/dump.partial && mv /backup/dump.partial /backup/dump"
            .into()
    }

    // Redis loads dump.rdb from its directory at start when it has no append-only file yet.
    fn restore_script(&self) -> String {
        "[ -e /data/appendonlydir ] || cp /backup/dump /data/dump.rdb".into()
    }
}
