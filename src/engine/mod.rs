//! What each database engine's official image needs, in one place per engine: its port, where
//! it keeps its data, the user it runs as, its environment (credentials from the Database's
//! Secret), its probes and its connection URI.
//!
//! The controllers and the objects they build never branch on an engine's name: they ask the
//! [`Engine`] of the Database ([`of`], [`of_database`]). Adding an engine is one file and one
//! line in [`of`] (and its name in [`EngineKind`]).
//!
//! The images run as the non-root user their Dockerfiles create (uid 999 in all four), which
//! the "restricted" Pod Security level requires; `fsGroup` makes the volume theirs.

use k8s_openapi::api::core::v1::{
    Capabilities, EnvVar, EnvVarSource, ExecAction, PodSecurityContext, Probe, SeccompProfile, SecretKeySelector,
    SecurityContext,
};

use crate::api::{Database, EngineKind};

pub(crate) mod fence;
mod mysql;
pub(crate) mod position;
mod postgres;
mod redis;

/// The keys of a credentials Secret. A Secret of your own (`spec.credentials.secretName`)
/// needs `username` and `password`; the generated one has all of them.
pub(crate) mod keys {
    /// The user the application connects as.
    pub(crate) const USERNAME: &str = "username";
    /// Its password.
    pub(crate) const PASSWORD: &str = "password";
    /// The Service's DNS name in the cluster.
    pub(crate) const HOST: &str = "host";
    /// The engine's port.
    pub(crate) const PORT: &str = "port";
    /// The database (schema) the application uses, for SQL engines.
    pub(crate) const DATABASE: &str = "database";
    /// A connection URI in the engine's scheme.
    pub(crate) const URI: &str = "uri";
    /// The password of the engine's administrative account, where it has one
    /// ([`Engine::root_user`](super::Engine::root_user)), which logs in from inside the
    /// database's pod only.
    pub(crate) const ROOT_PASSWORD: &str = "root-password";
}

/// What the operator knows of one engine's official image.
pub(crate) trait Engine: Send + Sync {
    /// The engine's name: `postgres`, `mysql`, ... (also its port's name).
    fn name(&self) -> &'static str;
    /// The port it serves.
    fn port(&self) -> i32;
    /// Where the image keeps its data: the volume is mounted there.
    fn data_dir(&self) -> &'static str;
    /// The non-root uid (and gid) the image's Dockerfile creates for the server.
    fn user_id(&self) -> i64 {
        999
    }
    /// The user the generated credentials name.
    fn username(&self) -> &'static str {
        "app"
    }
    /// The engine's administrative account besides the application's, when the image makes
    /// one (MySQL's `root`): it logs in from inside the database's pod only, with the Secret's
    /// [`keys::ROOT_PASSWORD`], which a Secret of your own then needs too.
    fn root_user(&self) -> Option<&'static str> {
        None
    }
    /// The container's environment, with the credentials read from `secret`.
    fn env(&self, secret: &str) -> Vec<EnvVar>;
    /// A shell script the image's entrypoint runs (sources) at the server's first start, when
    /// the data directory is initialised: the first file of [`INITDB_DIR`], before a
    /// restore's. The Deployment hands it over in an environment variable, and the server's
    /// shell writes it there before the entrypoint starts (postgres makes its application
    /// user with it).
    fn initdb_script(&self) -> Option<&'static str> {
        None
    }
    /// The shell lines that start the server, after the data volume is locked ([`fence`]):
    /// the last `exec`s the image's entrypoint or the server, so that the server is PID 1,
    /// receives SIGTERM and holds the lock.
    fn server_script(&self) -> String;
    /// The shell lines that start a streaming replica of the primary served at `primary` (the
    /// name of the Database's -rw Service), after the data volume is locked: the first start
    /// copies the primary (a base backup) as [`REPLICATION_USER`], whose password is in
    /// [`REPLICATION_PASSWORD_VARIABLE`]; every start then follows the primary and serves
    /// reads. `None`: the engine does not replicate (`spec.instances` is 1).
    fn replica_script(&self, _primary: &str) -> Option<String> {
        None
    }
    /// The command that tells whether the server accepts connections, with the engine's own
    /// tool (readiness and liveness probes run it).
    fn probe_command(&self) -> Vec<String>;
    /// A connection URI in the engine's scheme.
    fn uri(&self, username: &str, password: &str, host: &str, database: &str) -> String;
    /// The environment of the engine's client tools, with the credentials read from `secret`
    /// (the dump and the restore run them).
    fn client_env(&self, secret: &str) -> Vec<EnvVar>;
    /// A shell script, run with `sh -c` in the database container itself (its own
    /// environment: [`Engine::env`]), that opens the engine's command-line client on the
    /// application's database as the application's user, its arguments (`"$@"`) passed on.
    /// The password goes to the client through the environment variable the client reads
    /// (PGPASSWORD, MYSQL_PWD, REDISCLI_AUTH), set from the container's own: never on a
    /// command line. `kubectl database shell` runs it.
    fn shell_script(&self) -> String;
    /// A shell script, run in the engine's own image, that dumps the database served at
    /// `$DATABASE_HOST` into `/backup/dump` with the engine's logical dump tool: written
    /// aside, checked with the engine's own means, then renamed, so that a dump that failed
    /// half-way never looks complete.
    fn dump_script(&self) -> String;
    /// A shell script, run by an init container in the engine's own image before the server
    /// starts, that readies `/backup/dump` for the server to load at its first start (into
    /// `/docker-entrypoint-initdb.d`, the official images' initialisation directory, or the
    /// data directory).
    fn restore_script(&self) -> String;
    /// A shell script, run in the engine's own image right after [`Engine::dump_script`], that
    /// prints the rows (keys without an expiry, for redis) in `/backup/dump`, read from the
    /// dump itself: what a restore of it must hold, which a verification checks.
    fn dump_count_script(&self) -> String;
    /// A shell script, run in the engine's own image with [`Engine::client_env`], that prints
    /// the rows (keys without an expiry) of the database served at `$DATABASE_HOST`, counted
    /// as [`Engine::dump_count_script`] counts them in a dump.
    fn count_script(&self) -> String;
    /// The major version an image tag names ("17" of "17.2-alpine"), when it names one: a
    /// server of another major version cannot read this one's data directory.
    fn major_version(&self, tag: &str) -> Option<String> {
        leading_version(tag, 1)
    }
}

pub(crate) use crate::api::newer_major as newer;

/// The major version of `image` for `engine`, if its tag says it.
pub(crate) fn major(engine: &dyn Engine, image: &str) -> Option<String> {
    engine.major_version(tag(image)?)
}

/// The tag of an image reference: after the last ':' of its last path segment (a registry's
/// port is not a tag); none for a digest or no tag.
pub(crate) fn tag(image: &str) -> Option<&str> {
    if image.contains('@') {
        return None;
    }
    let last_segment = image.rsplit('/').next()?;
    last_segment.split_once(':').map(|(_, tag)| tag)
}

/// The first `parts` dot-separated numbers of a tag ("17.2-alpine" -> "17" for one part,
/// "8.4.3" -> "8.4" for two); none when the tag does not start with that many numbers.
pub(crate) fn leading_version(tag: &str, parts: usize) -> Option<String> {
    let numeric: String = tag.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    let numbers: Vec<&str> = numeric.split('.').filter(|n| !n.is_empty()).take(parts).collect();
    (numbers.len() == parts).then(|| numbers.join("."))
}

/// The [`Engine`] of `kind`.
pub(crate) fn of(kind: EngineKind) -> &'static dyn Engine {
    match kind {
        EngineKind::Postgres => &postgres::Postgres,
        EngineKind::Mysql => &mysql::MYSQL,
        EngineKind::Mariadb => &mysql::MARIADB,
        EngineKind::Redis => &redis::Redis,
    }
}

/// The engine of `db`, if it has one.
pub(crate) fn of_database(db: &Database) -> Option<&'static dyn Engine> {
    db.spec.engine.map(of)
}

/// `name` from the `key` of Secret `secret`.
pub(crate) fn from_secret(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector { name: secret.into(), key: key.into(), optional: None }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `name` set to `value`.
pub(crate) fn value(name: &str, value: &str) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() }
}

/// The role replicas stream the primary's WAL as (postgres: a `REPLICATION` login role the
/// primary's first start makes, allowed by its pg_hba from any address with its password).
pub(crate) const REPLICATION_USER: &str = "streaming_replica";
/// The variable that carries the replication role's password into every instance of a
/// Database of several (from the Secret `<name>-replication`).
pub(crate) const REPLICATION_PASSWORD_VARIABLE: &str = "REPLICATION_PASSWORD";

/// The variable that, set on a primary, names the replicas a commit waits for (postgres's
/// `synchronous_standby_names`; `spec.replication.synchronous`).
pub(crate) const SYNCHRONOUS_STANDBYS_VARIABLE: &str = "SYNCHRONOUS_STANDBY_NAMES";
/// Its value: any one replica.
pub(crate) const ANY_ONE_REPLICA: &str = "ANY 1 (*)";

/// The variable that, set on a primary, says how much WAL it keeps for replicas that are
/// away (postgres's `wal_keep_size`): a replica that reconnects after a failover, or after its
/// node's restart, asks the new primary for WAL from where it stopped, and without it the
/// primary may have recycled it already ("requested WAL segment ... has already been
/// removed"), and the replica never follows again.
pub(crate) const WAL_KEEP_VARIABLE: &str = "WAL_KEEP_SIZE";
/// Its value: a quarter of the smallest volume (small, 1Gi).
pub(crate) const WAL_KEPT: &str = "256MB";

/// Where the init container puts what the server loads at its first start.
pub(crate) const INITDB_DIR: &str = "/docker-entrypoint-initdb.d";
/// The variable that carries [`Engine::initdb_script`] into the database container.
pub(crate) const INITDB_SCRIPT_VARIABLE: &str = "DATABASE_INITDB_SCRIPT";

/// The lines the database container's shell runs once it holds the data volume's lock
/// ([`fence`]): the engine's [`Engine::initdb_script`] written as the first file of
/// [`INITDB_DIR`] (an `emptyDir` of the pod), if it has one, then its server script.
pub(crate) fn server_script(engine: &dyn Engine) -> String {
    match engine.initdb_script() {
        Some(_) => format!(
            "printf '%s\\n' \"${INITDB_SCRIPT_VARIABLE}\" > {INITDB_DIR}/00-operator.sh\n{}",
            engine.server_script()
        ),
        None => engine.server_script(),
    }
}
/// Where a backup's claim is mounted, in the dump Job and the restore init container.
pub(crate) const BACKUP_DIR: &str = "/backup";

/// The restricted security context of a pod running an engine's image: its non-root uid,
/// `fsGroup` for the volumes, seccomp RuntimeDefault.
pub(crate) fn pod_security(engine: &dyn Engine) -> PodSecurityContext {
    let uid = engine.user_id();
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(uid),
        run_as_group: Some(uid),
        fs_group: Some(uid),
        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
        ..Default::default()
    }
}

/// The restricted security context of a container: no capabilities, no privilege escalation.
pub(crate) fn container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
        run_as_non_root: Some(true),
        ..Default::default()
    }
}

/// The termination message policy of the containers that run an engine's image: when one
/// fails, the kubelet keeps the end of its log (80 lines, 2 KiB at most) in the pod's status.
pub(crate) const LAST_WORDS: &str = "FallbackToLogsOnError";

/// The readiness probe: every 10 s, unready after three failures.
pub(crate) fn readiness_probe(engine: &dyn Engine) -> Probe {
    Probe {
        exec: Some(ExecAction { command: Some(engine.probe_command()) }),
        period_seconds: Some(10),
        timeout_seconds: Some(5),
        failure_threshold: Some(3),
        ..Default::default()
    }
}

/// The startup probe: the same command, patient for an hour, every 10 s. Until it succeeds the
/// liveness probe does not run, so that a long first start (initialising the data directory,
/// loading a restore, a crash recovery, an upgrade's migration) is never killed half-way: a
/// partly loaded restore restarted on its existing data directory would skip the load and look
/// complete.
pub(crate) fn startup_probe(engine: &dyn Engine) -> Probe {
    Probe {
        exec: Some(ExecAction { command: Some(engine.probe_command()) }),
        period_seconds: Some(10),
        timeout_seconds: Some(5),
        failure_threshold: Some(360),
        ..Default::default()
    }
}

/// The liveness probe: the same command, once the startup probe succeeded; restarted after two
/// minutes of failures.
pub(crate) fn liveness_probe(engine: &dyn Engine) -> Probe {
    Probe {
        exec: Some(ExecAction { command: Some(engine.probe_command()) }),
        period_seconds: Some(20),
        timeout_seconds: Some(5),
        failure_threshold: Some(6),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_names_its_port_after_itself_within_the_15_characters_of_a_port_name() {
        for kind in EngineKind::ALL {
            let engine = of(kind);
            assert_eq!(serde_json::to_value(kind).unwrap(), engine.name());
            assert!(engine.name().len() <= 15 && engine.port() > 0);
        }
    }

    #[test]
    fn every_engine_s_shell_hands_the_client_the_container_s_own_password_through_the_environment() {
        let client_reads = ["PGPASSWORD", "MYSQL_PWD", "REDISCLI_AUTH"];
        for kind in EngineKind::ALL {
            let engine = of(kind);
            let script = engine.shell_script();
            let from_secret: Vec<String> = engine
                .env("orders-credentials")
                .into_iter()
                .filter(|v| v.value_from.as_ref().and_then(|f| f.secret_key_ref.as_ref()).is_some())
                .map(|v| v.name)
                .collect();
            // `NAME="$SECRET_VAR" exec client ... "$@"`: a variable of the client's, set from
            // one the container has from its Secret, and the caller's arguments last.
            let (assignment, rest) = script.split_once(' ').unwrap();
            let (variable, value) = assignment.split_once('=').unwrap();
            assert!(client_reads.contains(&variable), "{kind:?}: {script}");
            let source = value.trim_matches('"').trim_start_matches('$');
            assert!(from_secret.iter().any(|name| name == source), "{kind:?}: {source} is not from the Secret");
            assert!(rest.starts_with("exec ") && rest.ends_with(r#""$@""#), "{kind:?}: {script}");
        }
    }

    #[test]
    fn every_engine_reads_its_password_from_the_secret_and_never_holds_it() {
        for kind in EngineKind::ALL {
            let env = of(kind).env("orders-credentials");
            let password = env
                .iter()
                .filter_map(|v| v.value_from.as_ref()?.secret_key_ref.as_ref())
                .find(|reference| reference.key == keys::PASSWORD);
            assert_eq!(password.map(|r| r.name.as_str()), Some("orders-credentials"), "{kind:?}");
            // Every literal value is a setting, never a credential.
            for var in env.iter().filter(|v| v.value.is_some()) {
                assert!(
                    [
                        "POSTGRES_USER",
                        "POSTGRES_DB",
                        "PGDATA",
                        "MYSQL_DATABASE",
                        "MYSQL_ROOT_HOST",
                        "MARIADB_DATABASE",
                        "MARIADB_ROOT_HOST"
                    ]
                    .contains(&var.name.as_str()),
                    "{kind:?}: {var:?}"
                );
            }
        }
    }

    #[test]
    fn uris_are_in_each_engines_scheme() {
        let uri = |kind| of(kind).uri(of(kind).username(), "s3cret", "orders.shop.svc", "app");
        assert_eq!(uri(EngineKind::Postgres), "postgresql://app:s3cret@orders.shop.svc:5432/app");
        assert_eq!(uri(EngineKind::Mysql), "mysql://app:s3cret@orders.shop.svc:3306/app");
        assert_eq!(uri(EngineKind::Mariadb), "mariadb://app:s3cret@orders.shop.svc:3306/app");
        assert_eq!(uri(EngineKind::Redis), "redis://default:s3cret@orders.shop.svc:6379/0");
    }
}
