//! The credentials of a Database with an engine: a Secret `<name>-credentials`, generated once,
//! or one of the user's own (`spec.credentials.secretName`).
//!
//! - **Generated once.** The operator creates the Secret (a create, never an apply) with a
//!   random password of 32 letters and digits (about 190 bits) from the operating system's
//!   secure generator, and never writes it again: a password the database was initialised with
//!   must not change under it. The Database owns it, so it goes with the Database, unless its
//!   data is retained (`reclaimPolicy: Retain`): then the Secret has no owner, as the claim,
//!   and a new Database of the same name takes both back and logs in to its data.
//! - **Never held, never shown.** The operator's cache keeps a Secret's metadata only (its
//!   view has no data); the password is in memory only while the Secret is being created. It
//!   never appears in logs, events, status or metrics: the status names the Secret, and the
//!   pod reads the password through `secretKeyRef`.
//! - Keys: `username`, `password`, `host` (the Service's name in the cluster), `port`,
//!   `database` (SQL engines), `uri` (the engine's scheme), and for MySQL and MariaDB
//!   `root-password` (root logs in from inside the database's pod only). A Secret of your own
//!   needs `username` and `password`, and `root-password` for MySQL and MariaDB.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use rand::TryRngCore;
use rand::distr::{Alphanumeric, Distribution};

use super::meta::child_of;
use crate::api::Database;
use crate::engine::{Engine, keys};

/// The length of a generated password.
const PASSWORD_LENGTH: usize = 32;

/// The name of the Secret that holds `db`'s credentials.
pub(crate) fn secret_name(db: &Database) -> String {
    db.spec
        .credentials
        .as_ref()
        .and_then(|c| c.secret_name.clone())
        .unwrap_or_else(|| format!("{}-credentials", db.metadata.name.as_deref().unwrap_or_default()))
}

/// Whether the operator generates `db`'s Secret (it names none of its own).
pub(crate) fn generated(db: &Database) -> bool {
    db.spec.credentials.as_ref().is_none_or(|c| c.secret_name.is_none())
}

/// The Service's name in the cluster: `<name>.<namespace>.svc`.
pub(crate) fn host(db: &Database) -> String {
    format!(
        "{}.{}.svc",
        db.metadata.name.as_deref().unwrap_or_default(),
        db.metadata.namespace.as_deref().unwrap_or("default")
    )
}

/// Where clients connect: `host:port`.
pub(crate) fn endpoint(db: &Database, engine: &dyn Engine) -> String {
    format!("{}:{}", host(db), engine.port())
}

/// A new Secret for `db`, with a fresh password.
///
/// # Errors
///
/// When the operating system's random generator fails (it never should).
pub(crate) fn new_secret(db: &Database, engine: &dyn Engine) -> Result<Secret, rand::rand_core::OsError> {
    let password = password()?;
    let username = engine.username();
    let host = host(db);
    let database = "app";
    let data = [
        (keys::USERNAME, username.to_string()),
        (keys::PASSWORD, password.clone()),
        (keys::HOST, host.clone()),
        (keys::PORT, engine.port().to_string()),
        (keys::DATABASE, database.to_string()),
        (keys::URI, engine.uri(username, &password, &host, database)),
    ];
    let root = match engine.root_user() {
        Some(_) => Some((keys::ROOT_PASSWORD, self::password()?)),
        None => None,
    };
    let mut metadata = child_of(db, secret_name(db));
    if super::claim::retained(db) {
        metadata.owner_references = Some(Vec::new());
    }
    Ok(Secret {
        metadata,
        type_: Some("Opaque".into()),
        string_data: Some(data.into_iter().chain(root).map(|(k, v)| (k.to_string(), v)).collect::<BTreeMap<_, _>>()),
        ..Default::default()
    })
}

/// A password of letters and digits from the operating system's secure generator.
pub(crate) fn password() -> Result<String, rand::rand_core::OsError> {
    let mut rng = rand::rngs::OsRng;
    // A failure of the OS generator is checked once here; the sampling below cannot fail then.
    rng.try_next_u32()?;
    Ok(Alphanumeric.sample_iter(rng.unwrap_err()).take(PASSWORD_LENGTH).map(char::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Credentials, DatabaseSpec, EngineKind, Size};
    use crate::engine::of;

    fn database() -> Database {
        let mut db =
            Database::new("orders", DatabaseSpec::new(Size::Small, "postgres:17").with_engine(EngineKind::Postgres));
        db.metadata.namespace = Some("shop".into());
        db.metadata.uid = Some("uid-1".into());
        db
    }

    #[test]
    fn a_generated_secret_has_every_key_and_a_password_of_32_letters_and_digits() {
        let secret = new_secret(&database(), of(EngineKind::Postgres)).unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("orders-credentials"));
        let data = secret.string_data.unwrap();
        let password = &data["password"];
        assert_eq!(password.len(), 32);
        assert!(password.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(data["host"], "orders.shop.svc");
        assert_eq!(data["port"], "5432");
        assert_eq!(data["uri"], format!("postgresql://app:{password}@orders.shop.svc:5432/app"));
        assert_eq!(secret.metadata.owner_references.unwrap()[0].uid, "uid-1");
    }

    #[test]
    fn the_mysql_family_s_secret_also_has_a_root_password_of_its_own() {
        for kind in [EngineKind::Mysql, EngineKind::Mariadb] {
            let data = new_secret(&database(), of(kind)).unwrap().string_data.unwrap();
            let root = &data["root-password"];
            assert_eq!(root.len(), 32);
            assert_ne!(root, &data["password"]);
        }
        let postgres = new_secret(&database(), of(EngineKind::Postgres)).unwrap().string_data.unwrap();
        assert!(!postgres.contains_key("root-password"));
    }

    #[test]
    fn two_passwords_differ() {
        assert_ne!(password().unwrap(), password().unwrap());
    }

    #[test]
    fn a_secret_of_ones_own_is_named_and_not_generated() {
        let mut db = database();
        assert!(generated(&db));
        db.spec.credentials = Some(Box::new(Credentials { secret_name: Some("mine".into()) }));
        assert_eq!(secret_name(&db), "mine");
        assert!(!generated(&db));
    }
}
